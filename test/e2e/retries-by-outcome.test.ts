/**
 * Retries by outcome (issue 14 #5) on a local stack with real broker processes, counted on the far
 * side (the telephony sandbox's rings, each with its attempt and idempotency key):
 * - a client's `jobDefaults.retries`, inherited by a job that gives none: busy is retried up to its
 *   `maxAttempts` with its schedule's waits between the calls, no-answer is not retried (its max is
 *   1), voicemail and failed are retried as their entries say (failed is not retried by default),
 *   each attempt under its own idempotency key; the report shows each task's attempts;
 * - a retry due while the calling hours are closed does not start until they open again;
 * - in a job read in its recipients' zones, a retry due while its recipient's hours are closed (in the
 *   recipient's zone, 9 hours from the client's) does not start until they open there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobWithList, demoClientSettings } from '#local/demo-job.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import type { RingRecord, ScriptedCall } from '#local/telephony-sandbox/far-side.ts';
import type { RetryPolicy } from '#shared/jobs/retry-policy.ts';
import { until } from '../support/wait.ts';

let stack: LocalStack;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  stack = await startLocalStack({
    stage: 'e2eretries',
    port: 0,
    fleet: true,
    // Ring 0.2-1 s, talk at most a few tenths of a second of wall time.
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
});

/** `090-53xx-yyyy` as the list writes it, and as the far side sees it (E.164). */
const written = (block: number, n: number) => `090-${block}-${1000 + n}`;
const e164 = (block: number, n: number) => `+8190${block}${1000 + n}`;

interface JobView {
  readonly status: string;
  readonly retries?: RetryPolicy;
  readonly counts: Readonly<Record<string, number>>;
}

async function putClient(clientId: string, over: Readonly<Record<string, unknown>>): Promise<void> {
  const put = await stack.operator('PUT', `/clients/${clientId}`, {
    json: { ...demoClientSettings({ clientId, maxConcurrentCalls: 3, callsPerSecond: 3 }), ...over },
  });
  expect(put.status, put.body).toBe(200);
}

/** Creates a call job of `numbers` through the operator API and its presigned URL; its id. */
function createJob(clientId: string, numbers: readonly string[], options: Readonly<Record<string, unknown>>) {
  const csv = `電話番号,氏名\n${numbers.map((n, i) => `${n},顧客 ${i + 1}`).join('\n')}\n`;
  return createJobWithList(
    stack,
    clientId,
    { name: `${clientId}.csv`, channel: 'call', ...options },
    new TextEncoder().encode(csv),
  );
}

async function jobView(clientId: string, jobId: string): Promise<JobView> {
  return (await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}`)).json<JobView>();
}

async function jobEnded(clientId: string, jobId: string): Promise<JobView> {
  let view: JobView | undefined;
  await until(
    async () => {
      view = await jobView(clientId, jobId);
      return ['completed', 'failed', 'cancelled'].includes(view.status);
    },
    `job ${jobId} to end`,
    { timeoutMs: 200_000, everyMs: 500 },
  );
  return view!;
}

/** The report's task rows by recipient (E.164, without the formula guard). */
async function reportByRecipient(clientId: string, jobId: string) {
  const report = await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}/report`);
  expect(report.status).toBe(200);
  const [header, ...lines] = report.body
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)
    .filter(Boolean);
  const columns = header!.split(',');
  const rows = new Map<string, Record<string, string>>();
  for (const line of lines) {
    // No cell of these rows holds a comma or a quote.
    const cells = line.split(',');
    const row = Object.fromEntries(columns.map((c, i) => [c, cells[i] ?? '']));
    if (row.recipient) rows.set(row.recipient.replace(/^'/, ''), row);
  }
  return rows;
}

/** A number's rings, in the order they were placed. */
function ringsTo(clientId: string, to: string): RingRecord[] {
  return stack.telephony
    .rings()
    .filter((r) => r.clientId === clientId && r.to === to)
    .sort((a, b) => a.startedAt - b.startedAt);
}

/** Wall ms from the end of each ring to the start of the next one. */
function waitsBetween(rings: readonly RingRecord[]): number[] {
  return rings.slice(1).map((r, i) => r.startedAt - rings[i]!.endedAt!);
}

describe('retries by outcome on the fleet', () => {
  it("a job without retries of its own follows the client's jobDefaults.retries, outcome by outcome", async () => {
    const clientId = 'retries-a';
    const block = 5301;
    const scripted: Record<string, ScriptedCall> = {
      busy: { outcome: 'busy' },
      noAnswer: { outcome: 'no-answer' },
      machine: { outcome: 'machine', durationSeconds: 2 },
      failed: { outcome: 'failed', reason: 'unreachable' },
      answered: { outcome: 'answered', durationSeconds: 2 },
    };
    const numbers = Object.keys(scripted).map((_, i) => e164(block, i));
    for (const [i, call] of Object.values(scripted).entries()) stack.telephony.setOverride(numbers[i]!, call);
    const [busy, noAnswer, machine, failed, answered] = numbers as [string, string, string, string, string];
    const retries: RetryPolicy = {
      busy: { maxAttempts: 3, delay: { kind: 'list', seconds: [2, 5] } },
      'no-answer': { maxAttempts: 1 },
      voicemail: { maxAttempts: 2, delay: { kind: 'linear', seconds: 1, stepSeconds: 1 } },
      failed: { maxAttempts: 2, delay: { kind: 'exponential', seconds: 1, factor: 2 } },
    };
    try {
      await putClient(clientId, { jobDefaults: { maxAttempts: 1, retries } });
      const jobId = await createJob(
        clientId,
        numbers.map((_, i) => written(block, i)),
        {},
      );
      // The job took the client's policy (and its maxAttempts of 1, which the policy overrides).
      expect((await jobView(clientId, jobId)).retries).toEqual(retries);
      const view = await jobEnded(clientId, jobId);
      expect(view.status).toBe('completed');
      expect(view.counts).toMatchObject({ tasks: 5, completed: 1, failed: 4, outstanding: 0 });

      // The far side: each number rang as often as its outcome allows, each attempt once.
      expect(ringsTo(clientId, busy).map((r) => r.attempt)).toEqual([1, 2, 3]);
      expect(ringsTo(clientId, noAnswer).map((r) => r.attempt)).toEqual([1]);
      expect(ringsTo(clientId, machine).map((r) => r.attempt)).toEqual([1, 2]);
      expect(ringsTo(clientId, failed).map((r) => r.attempt)).toEqual([1, 2]);
      expect(ringsTo(clientId, answered).map((r) => r.attempt)).toEqual([1]);
      const all = stack.telephony.rings().filter((r) => r.clientId === clientId);
      expect(new Set(all.map((r) => r.idempotencyKey)).size).toBe(all.length);
      expect(stack.telephony.stats(clientId).repeatedRings).toEqual([]);

      // Each retry waited at least its schedule's wait after the call before it ended (the wait
      // counts from when the call's end was recorded, a little after the far side ended it). The
      // job's own retryDelaySeconds (the built-in 30 minutes) would never have let them ring.
      const atLeast = (waits: number[], seconds: number[]) => {
        expect(waits).toHaveLength(seconds.length);
        for (const [i, w] of waits.entries()) expect(w).toBeGreaterThanOrEqual(seconds[i]! * 1000);
      };
      atLeast(waitsBetween(ringsTo(clientId, busy)), [2, 5]);
      atLeast(waitsBetween(ringsTo(clientId, machine)), [1]);
      atLeast(waitsBetween(ringsTo(clientId, failed)), [1]);

      // The report: every task's attempts, last result and reason.
      const report = await reportByRecipient(clientId, jobId);
      const row = (to: string) => {
        const r = report.get(to);
        return (
          r && { outcome: r.outcome, attempts: r.attempts, last_result: r.last_result, reason: r.reason }
        );
      };
      expect(row(busy)).toEqual({
        outcome: 'failed',
        attempts: '3',
        last_result: 'busy',
        reason: 'busy on all 3 attempts',
      });
      expect(row(noAnswer)).toEqual({
        outcome: 'failed',
        attempts: '1',
        last_result: 'no-answer',
        reason: 'no-answer on all 1 attempts',
      });
      expect(row(machine)).toEqual({
        outcome: 'failed',
        attempts: '2',
        last_result: 'voicemail',
        reason: 'voicemail on all 2 attempts',
      });
      expect(row(failed)).toEqual({
        outcome: 'failed',
        attempts: '2',
        last_result: 'failed',
        reason: 'unreachable',
      });
      expect(row(answered)).toMatchObject({ outcome: 'completed', attempts: '1' });
    } finally {
      for (const n of numbers) stack.telephony.setOverride(n, undefined);
    }
  });

  it('a retry due while the calling hours are closed waits for them to open again', async () => {
    const clientId = 'retries-b';
    const block = 5302;
    const [busy, answered] = [e164(block, 0), e164(block, 1)];
    stack.telephony.setOverride(busy, { outcome: 'busy' });
    stack.telephony.setOverride(answered, { outcome: 'answered', durationSeconds: 2 });
    // Closed for one minute of the UTC clock, [closeAt, openAt), every day: the next whole minute
    // at least 25 s away. One window a day, from openAt to closeAt the next day (it crosses midnight).
    const minute = 60_000;
    const closeAt = Math.ceil((Date.now() + 25_000) / minute) * minute;
    const openAt = closeAt + minute;
    const hhmm = (t: number) => new Date(t).toISOString().slice(11, 16);
    const weekly = Object.fromEntries(
      ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [
        d,
        [{ start: hhmm(openAt), end: hhmm(closeAt) }],
      ]),
    );
    // The retry falls due 30 s into the closed minute, give or take the first call's few seconds.
    const delaySeconds = Math.round((closeAt + 30_000 - Date.now()) / 1000);
    // A start decided just before the hours closed may reach the provider a moment later.
    const startLatencyMs = 1_500;
    try {
      await putClient(clientId, { timeZone: 'UTC', callingHours: weekly });
      const jobId = await createJob(clientId, [written(block, 0), written(block, 1)], {
        retries: { busy: { maxAttempts: 2, delay: { kind: 'fixed', seconds: delaySeconds } } },
      });
      const view = await jobEnded(clientId, jobId);
      expect(view.status).toBe('completed');

      const [first, retry] = ringsTo(clientId, busy);
      expect(first?.attempt).toBe(1);
      // The drill's premise: the first call ended before the hours closed, and its retry fell due
      // inside the closed minute.
      expect(first!.endedAt!).toBeLessThan(closeAt);
      const dueAround = first!.endedAt! + delaySeconds * 1000;
      expect(dueAround).toBeGreaterThanOrEqual(closeAt);
      expect(dueAround).toBeLessThan(openAt);
      // The retry rang once the hours opened again, not when it fell due.
      expect(retry?.attempt).toBe(2);
      expect(retry!.startedAt).toBeGreaterThanOrEqual(openAt);
      // Nothing of the client rang while closed.
      const inside = stack.telephony
        .rings()
        .filter(
          (r) => r.clientId === clientId && r.startedAt > closeAt + startLatencyMs && r.startedAt < openAt,
        );
      expect(inside).toEqual([]);
      const report = await reportByRecipient(clientId, jobId);
      expect(report.get(busy)).toMatchObject({
        outcome: 'failed',
        attempts: '2',
        reason: 'busy on all 2 attempts',
      });
    } finally {
      stack.telephony.setOverride(busy, undefined);
      stack.telephony.setOverride(answered, undefined);
    }
  }, 240_000);

  it("a retry of a job read in its recipients' zones waits for its recipient's hours, not the client's", async () => {
    const clientId = 'retries-c';
    const block = 5303;
    const [busy, answered] = [e164(block, 0), e164(block, 1)];
    stack.telephony.setOverride(busy, { outcome: 'busy' });
    stack.telephony.setOverride(answered, { outcome: 'answered', durationSeconds: 2 });
    // Closed for one minute of Tokyo's clock (the recipients' zone, UTC+9) every day; the client's
    // zone is UTC, where that minute is nine hours away.
    const minute = 60_000;
    const closeAt = Math.ceil((Date.now() + 25_000) / minute) * minute;
    const openAt = closeAt + minute;
    const tokyoHhmm = (t: number) => new Date(t + 9 * 3600_000).toISOString().slice(11, 16);
    const weekly = Object.fromEntries(
      ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [
        d,
        [{ start: tokyoHhmm(openAt), end: tokyoHhmm(closeAt) }],
      ]),
    );
    const delaySeconds = Math.round((closeAt + 30_000 - Date.now()) / 1000);
    const startLatencyMs = 1_500;
    try {
      await putClient(clientId, { timeZone: 'UTC' });
      const csv = `電話番号,氏名,タイムゾーン\n${written(block, 0)},顧客 1,Asia/Tokyo\n${written(block, 1)},顧客 2,Asia/Tokyo\n`;
      const jobId = await createJobWithList(
        stack,
        clientId,
        {
          name: `${clientId}.csv`,
          channel: 'call',
          timeZoneBy: 'recipient',
          callingHours: weekly,
          retries: { busy: { maxAttempts: 2, delay: { kind: 'fixed', seconds: delaySeconds } } },
        },
        new TextEncoder().encode(csv),
      );
      const view = await jobEnded(clientId, jobId);
      expect(view.status).toBe('completed');
      const [first, retry] = ringsTo(clientId, busy);
      expect(first?.attempt).toBe(1);
      const dueAround = first!.endedAt! + delaySeconds * 1000;
      expect(dueAround).toBeGreaterThanOrEqual(closeAt);
      expect(dueAround).toBeLessThan(openAt);
      // Rang once the recipient's hours opened again, not when it fell due.
      expect(retry?.attempt).toBe(2);
      expect(retry!.startedAt).toBeGreaterThanOrEqual(openAt);
      const inside = stack.telephony
        .rings()
        .filter(
          (r) => r.clientId === clientId && r.startedAt > closeAt + startLatencyMs && r.startedAt < openAt,
        );
      expect(inside).toEqual([]);
    } finally {
      stack.telephony.setOverride(busy, undefined);
      stack.telephony.setOverride(answered, undefined);
    }
  }, 240_000);
});
