/**
 * When a recipient may be called (issue 14 #3 and #4), on a local stack with real broker processes,
 * counted on the far side (the telephony sandbox's rings):
 * - a restricted period reached mid-job: no call started inside it, the job says it waits for the
 *   period until its end, and calls resume once it is over until the job completes (the period is
 *   a job option in the client's zone, Asia/Tokyo, to the second, a few seconds ahead);
 * - recipient-local time: the job's hours read in each recipient's zone call the recipients whose
 *   zone is inside them and none of the others.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDemoJob } from '#local/demo-job.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { until } from '../support/wait.ts';

let stack: LocalStack;
let dir: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  dir = mkdtempSync(path.join(tmpdir(), 'restricted-periods-'));
  stack = await startLocalStack({
    stage: 'e2eperiods',
    port: 0,
    fleet: true,
    telephonyTimeScale: 10,
    maxBrokers: 1,
    jobManagerIntervalMs: 1_000,
    brokerEnv: {
      LEASE_MS: '3000',
      BROKER_IDLE_WAIT_MS: '300',
      BROKER_RECHECK_MS: '500',
      DEFAULT_MAX_CALL_SECONDS: '4',
      RECONCILE_MARGIN_MS: '1000',
    },
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Tokyo's wall clock at `instant`, to the second (`2026-11-20T09:00:05`). */
const tokyo = (instant: number) => new Date(instant + 9 * 3600_000).toISOString().slice(0, 19);

describe('contact time on the fleet', () => {
  it('no call starts inside a period reached mid-job; the job says why and until when; calls resume after it', async () => {
    const clientId = 'periods-a';
    const rows = 80;
    const lines = [
      '電話番号,氏名',
      ...Array.from({ length: rows }, (_, i) => `090-5100-${1000 + i},顧客 ${i}`),
    ];
    const csvPath = path.join(dir, 'list.csv');
    writeFileSync(csvPath, `${lines.join('\n')}\n`);
    // Whole seconds, so the local date-times name the very instants.
    const periodStart = Math.ceil((Date.now() + 20_000) / 1000) * 1000;
    const periodEnd = periodStart + 12_000;
    // A start decided before the period may reach the provider a moment later (its fenced
    // transaction, then the provider's request): at most this much later.
    const startLatencyMs = 1_500;
    const rings = () => stack.telephony.rings().filter((r) => r.clientId === clientId);
    const job = runDemoJob(stack, () => {}, {
      csvPath,
      clientId,
      maxConcurrentCalls: 3,
      callsPerSecond: 2,
      timeZone: 'Asia/Tokyo',
      timeoutMs: 200_000,
      jobOptions: {
        restrictedPeriods: [{ start: tokyo(periodStart), end: tokyo(periodEnd), name: 'drill blackout' }],
      },
    });
    try {
      await until(() => rings().length > 0, 'the first calls');
      expect(Date.now()).toBeLessThan(periodStart);

      // Inside the period, the job's view says it waits for it, and until when.
      await until(() => Date.now() >= periodStart + 1_000, 'the period', { timeoutMs: 30_000 });
      const jobs = (await stack.operator('GET', `/clients/${clientId}/jobs`)).json<{
        jobs: { jobId: string; waiting?: { reason: string; until?: string; message: string } }[];
      }>().jobs;
      expect(jobs[0]?.waiting).toMatchObject({
        reason: 'restricted-period',
        until: new Date(periodEnd).toISOString(),
        message: expect.stringContaining('drill blackout'),
      });

      const view = await job;
      expect(view.status).toBe('completed');
      expect(view.counts.completed + view.counts.failed).toBe(rows);

      // The far side: calls before the period and after it, none started inside it.
      const all = rings();
      const inside = all.filter((r) => r.startedAt > periodStart + startLatencyMs && r.startedAt < periodEnd);
      expect(inside.map((r) => r.taskId)).toEqual([]);
      expect(all.filter((r) => r.startedAt < periodStart).length).toBeGreaterThan(0);
      expect(all.filter((r) => r.startedAt >= periodEnd).length).toBeGreaterThan(0);
      const stats = stack.telephony.stats(clientId);
      expect(stats.repeatedRings).toEqual([]);
      expect(stats.inFlight).toBe(0);
      expect(stats.maxInFlight).toBeLessThanOrEqual(3);
    } finally {
      await job.catch(() => {});
    }
  }, 240_000);

  it("recipient-local time: only recipients inside the job's hours in their own zone are called", async () => {
    const clientId = 'periods-b';
    // A 3-hour window around now in UTC: open for a UTC recipient, closed for Tokyo (9 hours ahead).
    const hour = new Date().getUTCHours();
    const hh = (h: number) => `${String((h + 24) % 24).padStart(2, '0')}:00`;
    const window = [{ start: hh(hour - 1), end: hh(hour + 2) }];
    const weekly = Object.fromEntries(
      ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, window]),
    );
    const rows = [
      ...Array.from({ length: 12 }, (_, i) => `090-5200-${1000 + i},UTC ${i},UTC`),
      ...Array.from({ length: 6 }, (_, i) => `090-5200-${2000 + i},東京 ${i},Asia/Tokyo`),
      // No zone in the row: a +81 number is in Tokyo.
      ...Array.from({ length: 4 }, (_, i) => `090-5200-${3000 + i},番号から ${i},`),
    ];
    const csvPath = path.join(dir, 'zones.csv');
    writeFileSync(csvPath, `電話番号,氏名,タイムゾーン\n${rows.join('\n')}\n`);
    const rings = () => stack.telephony.rings().filter((r) => r.clientId === clientId);
    const job = runDemoJob(stack, () => {}, {
      csvPath,
      clientId,
      maxConcurrentCalls: 3,
      callsPerSecond: 3,
      timeZone: 'UTC',
      timeoutMs: 200_000,
      jobOptions: { timeZoneBy: 'recipient', callingHours: weekly, maxAttempts: 1 },
    });
    try {
      const utc = new Set(Array.from({ length: 12 }, (_, i) => `+81905200${1000 + i}`));
      await until(() => new Set(rings().map((r) => r.to)).size >= 12, 'the UTC recipients', {
        timeoutMs: 120_000,
      });
      // Every UTC recipient rang; no one in Tokyo did.
      expect(new Set(rings().map((r) => r.to))).toEqual(utc);
      const { jobs } = (await stack.operator('GET', `/clients/${clientId}/jobs`)).json<{
        jobs: { jobId: string; status: string; counts: { outstanding: number } }[];
      }>();
      const [view] = jobs;
      expect(view?.status).toBe('running');
      await until(
        async () =>
          (await stack.operator('GET', `/clients/${clientId}/jobs/${view!.jobId}`)).json<{
            counts: { outstanding: number };
          }>().counts.outstanding === 10,
        'the UTC calls to end',
      );
      // The Tokyo recipients wait for their morning: cancelled here rather than waited for.
      expect((await stack.operator('POST', `/clients/${clientId}/jobs/${view!.jobId}/cancel`)).status).toBe(
        200,
      );
      const ended = await job;
      expect(ended.status).toBe('cancelled');
      expect(new Set(rings().map((r) => r.to))).toEqual(utc);
      expect(stack.telephony.stats(clientId).repeatedRings).toEqual([]);
    } finally {
      await job.catch(() => {});
    }
  }, 240_000);
});
