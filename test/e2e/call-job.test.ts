/**
 * Drill (a), through the very path `npm start` takes: a client's call list is uploaded through the
 * operator API and its presigned URL, validated, started by the job manager, and called by the
 * broker fleet through the telephony sandbox. Invariants 1-3 are checked on the far side's records.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDemoJob } from '#local/demo-job.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';

let stack: LocalStack;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  stack = await startLocalStack({
    stage: 'e2ecall',
    port: 0,
    fleet: true,
    telephonyTimeScale: 60,
    maxBrokers: 2,
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

describe('a call job on the local fleet', () => {
  it('calls every good row once, within the limit and the line rate, and completes', async () => {
    const lines: string[] = [];
    const view = await runDemoJob(stack, (l) => lines.push(l), {
      clientId: 'drill-a',
      maxConcurrentCalls: 4,
      callsPerSecond: 2,
      timeoutMs: 200_000,
    });
    expect(view.status).toBe('completed');
    expect(view.counts).toMatchObject({ rows: 63, rejected: 2, skipped: 1, tasks: 60 });
    expect(view.counts.completed + view.counts.failed).toBe(60);

    const stats = stack.telephony.stats('drill-a');
    // Invariant 3, measured by the provider: never over the limit, never over the line's rate.
    expect(stats.maxInFlight).toBeLessThanOrEqual(4);
    expect(stats.maxStartsPerSecond).toBeLessThanOrEqual(2);
    // Invariant 1: no recipient rang twice for the same attempt.
    expect(stats.repeatedRings).toEqual([]);
    // Every task got at least one ring; retries (busy / no answer) only up to maxAttempts (2).
    const perRecipient = stats.ringsPerRecipient;
    expect(Object.keys(perRecipient).length).toBe(60);
    expect(lines.some((l) => l.includes('report'))).toBe(true);
  });
});
