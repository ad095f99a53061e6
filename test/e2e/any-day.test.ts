/**
 * Any day is testable (issue 35 #8): a local stack started at another date and time runs every
 * clock from it — the jobs API, the job manager, the broker processes and the provider stand-ins.
 * Started a few seconds before midnight on New Year's Day in Tokyo (a Japanese public holiday), a
 * job restricted by Japan's holidays says it waits for the holiday until midnight, no call starts
 * before then (counted on the far side, on the same clock), and the job completes after it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDemoJob } from '#local/demo-job.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { eventually } from '../support/wait.ts';

/** 2027-01-01 is 元日, a public holiday in Japan; it ends at midnight in Tokyo. */
const HOLIDAY_ENDS = Date.parse('2027-01-02T00:00:00+09:00');

let stack: LocalStack;
let dir: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  dir = mkdtempSync(path.join(tmpdir(), 'any-day-'));
  stack = await startLocalStack({
    stage: 'e2eanyday',
    port: 0,
    fleet: true,
    startAt: HOLIDAY_ENDS - 60_000,
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

describe('a local stack started on another day', () => {
  it('waits out a Japanese public holiday on every clock, then calls', async () => {
    const clientId = 'new-year';
    const csvPath = path.join(dir, 'list.csv');
    writeFileSync(
      csvPath,
      ['電話番号', ...Array.from({ length: 6 }, (_, i) => `090-5300-${1000 + i}`)].join('\n'),
    );
    expect(stack.clock.now()).toBeLessThan(HOLIDAY_ENDS);
    const rings = () => stack.telephony.rings().filter((r) => r.clientId === clientId);
    const job = runDemoJob(stack, () => {}, {
      csvPath,
      clientId,
      maxConcurrentCalls: 2,
      callsPerSecond: 2,
      timeZone: 'Asia/Tokyo',
      timeoutMs: 200_000,
      jobOptions: { holidays: { country: 'JP' } },
    });
    try {
      // While the holiday lasts (on the stack's clock), the job says so and until when.
      const waiting = await eventually(async () => {
        // The client and its job are created by the demo job's run: not there at first.
        const jobs = (await stack.operator('GET', `/clients/${clientId}/jobs`)).json<{
          jobs?: { waiting?: { reason: string; until?: string; message: string } }[];
        }>().jobs;
        return jobs?.[0]?.waiting;
      }, 'the job');
      // A machine slow enough to reach midnight first has nothing to check here; the far side's
      // count below holds whatever the load.
      if (stack.clock.now() < HOLIDAY_ENDS - 1_000) {
        expect(waiting).toMatchObject({
          reason: 'restricted-period',
          until: new Date(HOLIDAY_ENDS).toISOString(),
        });
      }
      const view = await job;
      expect(view.status).toBe('completed');
      // Each recipient rung (some more than once: a busy or unanswered call is retried).
      expect(new Set(rings().map((r) => r.taskId)).size).toBe(6);
      // Every call started once the holiday was over, on the far side's clock (the same one).
      expect(rings().filter((r) => r.startedAt < HOLIDAY_ENDS)).toEqual([]);
    } finally {
      await job.catch(() => {});
    }
  }, 240_000);
});
