/**
 * The pipeline's pacing on simulated time: the clock and timers are fakes, so a "second" here is
 * simulated and the assertions count requests per simulated window, never real durations.
 */
import { describe, expect, it } from 'vitest';
import { runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { PreparedSend, SendOutcome } from '#shared/line/messaging-client.ts';
import type { TimerHandle, Timers } from '#shared/pacing/clock.ts';
import { makeTasks, memorySink, memorySource, PERSONAL, SAME_FOR_ALL } from './support.ts';

interface FakeTimer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

/** Simulated time: timers fire in order, the clock jumping to each; real I/O is never involved. */
function simulatedTime(start = Date.parse('2026-11-20T09:00:00Z')) {
  let now = start;
  let seq = 0;
  const pending: FakeTimer[] = [];
  const timers: Timers = {
    setTimeout(fn, ms) {
      const timer = { at: now + Math.max(0, ms), seq: seq++, fn };
      pending.push(timer);
      return timer;
    },
    clearTimeout(handle: TimerHandle) {
      const i = pending.indexOf(handle as FakeTimer);
      if (i >= 0) pending.splice(i, 1);
    },
  };
  const settle = () => new Promise<void>((r) => setImmediate(r));
  return {
    clock: { now: () => now },
    timers,
    /** Runs timers until `promise` settles. */
    async run<T>(promise: Promise<T>): Promise<T> {
      let done = false;
      promise.then(
        () => {
          done = true;
        },
        () => {
          done = true;
        },
      );
      while (!done) {
        await settle();
        if (done) break;
        pending.sort((a, b) => a.at - b.at || a.seq - b.seq);
        const next = pending.shift();
        if (!next) continue;
        now = Math.max(now, next.at);
        next.fn();
      }
      return promise;
    },
  };
}

/** The most of `starts` (sorted) inside any window of 1,000 ms. */
function mostInAnySecond(starts: readonly number[]): number {
  let most = 0;
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (starts[j]! < starts[i]! - 999) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

const delivered: SendOutcome = { kind: 'delivered', status: 200, requestId: 'r', sentMessages: [] };

describe('runMessagePipeline pacing (simulated time)', () => {
  it('never starts more requests in any second than the channel allows', async () => {
    const time = simulatedTime();
    const starts: number[] = [];
    const send = async (_: PreparedSend) => {
      starts.push(time.clock.now());
      return delivered;
    };
    const sink = memorySink();
    const totals = await time.run(
      runMessagePipeline({
        source: memorySource(makeTasks(1000, PERSONAL, { attemptStartedAt: time.clock.now() })),
        send,
        report: sink,
        rate: { perSecond: 100, burst: 1 },
        concurrency: 32,
        clock: time.clock,
        timers: time.timers,
      }),
    );
    expect(totals.delivered).toBe(1000);
    expect(sink.outcomes).toHaveLength(1000);
    let most = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while (starts[j]! < starts[i]! - 999) j++;
      most = Math.max(most, i - j + 1);
    }
    expect(most).toBe(100);
    // …and keeps up: 1,000 requests at 100/s take ten simulated seconds, not more.
    expect(starts.at(-1)! - starts[0]!).toBeLessThanOrEqual(10_000);
  });

  it('holds the whole pool back for Retry-After after a 429', async () => {
    const time = simulatedTime();
    const starts: number[] = [];
    let limitedAt = 0;
    const send = async (_: PreparedSend): Promise<SendOutcome> => {
      starts.push(time.clock.now());
      if (starts.length === 50) {
        limitedAt = time.clock.now();
        return {
          kind: 'rate-limited',
          reason: 'rate',
          retryAfterMs: 3000,
          message: 'The API rate limit has been exceeded. Try again later.',
          requestId: 'r',
        };
      }
      return delivered;
    };
    const totals = await time.run(
      runMessagePipeline({
        source: memorySource(makeTasks(200, PERSONAL, { attemptStartedAt: time.clock.now() })),
        send,
        report: memorySink(),
        rate: { perSecond: 100 },
        concurrency: 16,
        clock: time.clock,
        timers: time.timers,
      }),
    );
    expect(totals).toMatchObject({ delivered: 200, rateLimited: 1, requests: 201 });
    const after = starts.slice(50);
    expect(after.every((t) => t >= limitedAt + 3000)).toBe(true);
  });

  it('paces push and multicast each at its own rate: multicasts never above theirs, on their own buckets', async () => {
    const time = simulatedTime();
    const starts: Record<string, number[]> = { push: [], multicast: [] };
    const send = async (prepared: PreparedSend) => {
      starts[prepared.endpoint]!.push(time.clock.now());
      return delivered;
    };
    const at = time.clock.now();
    // Interleaved pages: 1,000 personal messages (pushes) and 25,000 of one text (50 multicasts of 500).
    const pushes = makeTasks(1000, PERSONAL, { attemptStartedAt: at });
    const multicasts = makeTasks(25_000, SAME_FOR_ALL, { attemptStartedAt: at, from: 1000 });
    const tasks = [];
    for (let i = 0; i < 50; i++)
      tasks.push(...multicasts.slice(i * 500, (i + 1) * 500), ...pushes.slice(i * 20, (i + 1) * 20));
    const totals = await time.run(
      runMessagePipeline({
        source: memorySource(tasks),
        send,
        report: memorySink(),
        rate: { perSecond: 100, multicastPerSecond: 5, burst: 1 },
        concurrency: 32,
        clock: time.clock,
        timers: time.timers,
      }),
    );
    expect(totals.delivered).toBe(26_000);
    // At least 50 multicasts (a batch sealed early, when the queue fills, holds fewer than 500).
    expect(starts.multicast!.length).toBeGreaterThanOrEqual(50);
    expect(mostInAnySecond(starts.multicast!)).toBe(5);
    expect(mostInAnySecond(starts.push!)).toBeLessThanOrEqual(100);
    // n multicasts at 5/s take (n - 1) / 5 simulated seconds at least.
    const n = starts.multicast!.length;
    expect(starts.multicast!.at(-1)! - starts.multicast![0]!).toBeGreaterThanOrEqual(
      ((n - 1) / 5) * 1000 - 1,
    );
  });

  it('a 429 on multicast holds back multicasts only', async () => {
    const time = simulatedTime();
    const starts: { endpoint: string; at: number }[] = [];
    let limitedAt: number | undefined;
    const send = async (prepared: PreparedSend): Promise<SendOutcome> => {
      starts.push({ endpoint: prepared.endpoint, at: time.clock.now() });
      if (prepared.endpoint === 'multicast' && limitedAt === undefined) {
        limitedAt = time.clock.now();
        return {
          kind: 'rate-limited',
          reason: 'rate',
          retryAfterMs: 5000,
          message: 'limited',
          requestId: 'r',
        };
      }
      return delivered;
    };
    const at = time.clock.now();
    const tasks = [
      ...makeTasks(1000, SAME_FOR_ALL, { attemptStartedAt: at }),
      ...makeTasks(200, PERSONAL, { attemptStartedAt: at, from: 1000 }),
    ];
    const totals = await time.run(
      runMessagePipeline({
        source: memorySource(tasks),
        send,
        report: memorySink(),
        rate: { perSecond: 100, multicastPerSecond: 10 },
        concurrency: 16,
        clock: time.clock,
        timers: time.timers,
      }),
    );
    expect(totals).toMatchObject({ delivered: 1200, rateLimited: 1 });
    const later = starts.filter((s) => s.at > limitedAt!);
    expect(later.filter((s) => s.endpoint === 'multicast').every((s) => s.at >= limitedAt! + 5000)).toBe(
      true,
    );
    // Pushes went on during the multicast back-off.
    expect(later.some((s) => s.endpoint === 'push' && s.at < limitedAt! + 5000)).toBe(true);
  });

  it('gives up on a retry key once LINE may have forgotten it, even mid-retry', async () => {
    const time = simulatedTime();
    const startedAt = time.clock.now() - 23 * 60 * 60 * 1000 + 1000; // 1 s left in the safe window
    let calls = 0;
    const send = async (_: PreparedSend): Promise<SendOutcome> => {
      calls++;
      return {
        kind: 'retryable',
        reason: 'server-error',
        maybeDelivered: true,
        status: 500,
        message: 'HTTP 500',
        requestId: 'r',
      };
    };
    const sink = memorySink();
    await time.run(
      runMessagePipeline({
        source: memorySource(makeTasks(1, PERSONAL, { attemptStartedAt: startedAt })),
        send,
        report: sink,
        rate: { perSecond: 100 },
        clock: time.clock,
        timers: time.timers,
        retryBaseMs: 400,
        random: () => 0.99,
      }),
    );
    expect(calls).toBeGreaterThan(1);
    expect(sink.outcomes).toHaveLength(1);
    expect(sink.outcomes[0]).toMatchObject({ kind: 'failed', lastResult: 'retry-window-passed' });
  });
});
