import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { type HttpSend, PooledHttpSend } from '#shared/campaign/http-send.ts';
import { type MessagePipelineOptions, runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { BatchLedger, ClaimedTask, JobProgress } from '#shared/campaign/ports.ts';
import { UNFINISHED_REASON } from '#shared/campaign/unit-sender.ts';
import { newUlid } from '#shared/ids.ts';
import { MessagingApiClient, type PreparedSend, type SendOutcome } from '#shared/line/messaging-client.ts';
import { systemClock, systemTimers, type Timers } from '#shared/pacing/clock.ts';
import { attemptKey, multicastRetryKey, RETRY_KEY_LIFETIME_MS } from '#shared/retry-keys.ts';
import { CHANNEL, makeTasks, memorySink, memorySource, PERSONAL, SAME_FOR_ALL, userId } from './support.ts';

let sandbox: LineSandbox;
let http: HttpSend;
let send: (prepared: PreparedSend) => Promise<SendOutcome>;

beforeAll(async () => {
  sandbox = await startLineSandbox({ channels: [CHANNEL] });
  sandbox.setRateLimit(Number.POSITIVE_INFINITY);
  http = new PooledHttpSend({
    channelAccessToken: CHANNEL.accessToken,
    baseUrl: sandbox.url,
    clock: systemClock,
    timeoutMs: 2000,
  });
  send = http.send;
});
afterEach(() => {
  sandbox.faults.clear();
  sandbox.setRateLimit(Number.POSITIVE_INFINITY);
  sandbox.resetRecords();
});
afterAll(async () => {
  http.close();
  await sandbox.stop();
});

function run(tasks: readonly ClaimedTask[], overrides: Partial<MessagePipelineOptions> = {}) {
  const source = memorySource(tasks);
  const sink = memorySink();
  const result = runMessagePipeline({
    source,
    send,
    report: sink,
    rate: { perSecond: Number.POSITIVE_INFINITY },
    concurrency: 16,
    queueCapacity: 1000,
    clock: systemClock,
    retryBaseMs: 5,
    rateLimitBackoffMs: 20,
    ...overrides,
  });
  return { source, sink, result };
}

/** Deliveries the sandbox recorded, per recipient. */
function deliveredTo(): Map<string, number> {
  return new Map(sandbox.counters().perRecipient);
}

describe('runMessagePipeline: every task settled exactly once', () => {
  it('delivers personalised messages, skips opted-out recipients, fails bad ones with a reason', async () => {
    const tasks = makeTasks(300, PERSONAL).map((t, i): ClaimedTask => {
      if (i % 50 === 7) return { ...t, optedOut: true };
      if (i % 50 === 8) return { ...t, variables: { name: 'No order number' } };
      if (i % 50 === 9)
        return {
          ...t,
          template: { messages: [{ type: 'text', text: '{{name}}' }] },
          variables: { name: '' },
        };
      if (i === 10) return { ...t, template: { messages: [] } };
      return t;
    });
    // The Messaging API client (fetch) as the send port: it means the same by every outcome.
    const client = new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: sandbox.url });
    const { sink, result } = run(tasks, { send: client.send });
    const totals = await result;

    expect(totals).toMatchObject({
      claimed: 300,
      delivered: 281,
      skipped: 6,
      failed: 13,
      released: 0,
      stoppedBy: 'drained',
    });
    const counts = sink.countsByTask();
    expect(counts.size).toBe(300);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);

    const byTask = new Map(sink.outcomes.map((o) => [o.taskId, o]));
    expect(byTask.get('T0000007')).toMatchObject({ kind: 'skipped', lastResult: 'opted-out' });
    expect(byTask.get('T0000008')).toMatchObject({ kind: 'failed', reason: 'missing-variable: order' });
    expect(byTask.get('T0000009')).toMatchObject({ kind: 'failed', lastResult: 'http-400' });
    expect(byTask.get('T0000009')?.reason).toContain('May not be empty');
    expect(byTask.get('T0000010')).toMatchObject({ kind: 'failed', lastResult: 'not-sent' });
    expect(byTask.get('T0000010')?.reason).toMatch(/^bad-message: a template has 1 to 5 messages/);

    // Opted-out and unfillable tasks never reach LINE; everyone else gets their own text once.
    const received = sandbox.deliveriesTo(userId(0));
    expect(received).toHaveLength(1);
    expect(received[0]!.messages).toEqual([
      { type: 'text', text: 'Hello Customer 0, your order #1000 ships today.' },
    ]);
    expect(received[0]!.retryKey).toBe(attemptKey(tasks[0]!.jobId, 'T0000000', 1));
    expect(sandbox.deliveriesTo(userId(7))).toHaveLength(0);
    expect(sandbox.deliveriesTo(userId(8))).toHaveLength(0);
    expect(sandbox.counters().deliveries).toBe(281);
  });

  it('with 5% dropped responses, 5% 500s and a 429 burst, each recipient gets the message once', async () => {
    sandbox.faults.setProbabilities({ dropAfterDeliver: 0.05, status500: 0.05 });
    sandbox.faults.burst429(40);
    const tasks = makeTasks(2000, PERSONAL);
    const { sink, result } = run(tasks, { concurrency: 32 });
    const totals = await result;

    expect(totals).toMatchObject({ delivered: 2000, failed: 0, released: 0 });
    expect(totals.rateLimited).toBeGreaterThanOrEqual(40);
    expect(totals.resends).toBeGreaterThan(100);
    const perRecipient = deliveredTo();
    expect(perRecipient.size).toBe(2000);
    expect([...perRecipient.values()].every((n) => n === 1)).toBe(true);
    expect(sandbox.duplicates()).toEqual([]);
    // A dropped response was resent with the same key and answered 409: still reported delivered.
    const log = sandbox.log();
    expect(log.some((e) => e.status === 'dropped')).toBe(true);
    expect(log.some((e) => e.status === 409)).toBe(true);
    expect(sink.outcomes.filter((o) => o.lastResult === 'already-delivered').length).toBeGreaterThan(0);
    // Every request for a task carried that task's attempt key, first send and resends alike.
    const keys = new Set(tasks.map((t) => attemptKey(t.jobId, t.taskId, t.attempt)));
    expect(log.every((e) => e.retryKey !== undefined && keys.has(e.retryKey))).toBe(true);
    expect([...sink.countsByTask().values()].every((n) => n === 1)).toBe(true);
  });

  it('a resumed attempt (a crash after LINE accepted it) is answered 409 and counted delivered, not sent again', async () => {
    const tasks = makeTasks(20, PERSONAL);
    await run(tasks.slice(0, 10)).result;
    sandbox.resetRecords();
    const { sink, result } = run(tasks);
    expect(await result).toMatchObject({ delivered: 20 });
    expect(sandbox.counters().deliveries).toBe(10);
    expect(sink.outcomes.filter((o) => o.lastResult === 'already-delivered')).toHaveLength(10);
  });

  it('an opted-out recipient is never sent to, and an attempt in doubt says it may have been delivered', async () => {
    const tasks = makeTasks(4, PERSONAL).map(
      (t, i): ClaimedTask => (i < 2 ? { ...t, optedOut: true, ...(i === 1 ? { maybeSent: true } : {}) } : t),
    );
    const { sink, result } = run(tasks);
    expect(await result).toMatchObject({ delivered: 2, skipped: 2 });
    const byTask = new Map(sink.outcomes.map((o) => [o.taskId, o]));
    expect(byTask.get('T0000000')).toMatchObject({ kind: 'skipped', lastResult: 'opted-out' });
    expect(byTask.get('T0000000')?.maybeSent).toBeUndefined();
    expect(byTask.get('T0000001')).toMatchObject({
      kind: 'skipped',
      lastResult: 'opted-out',
      maybeSent: true,
    });
    expect(sandbox.deliveriesTo(userId(0))).toHaveLength(0);
    expect(sandbox.deliveriesTo(userId(1))).toHaveLength(0);
  });

  it('does not resend an attempt whose retry key LINE may have forgotten', async () => {
    const old = Date.now() - RETRY_KEY_LIFETIME_MS + 30 * 60 * 1000;
    const { sink, result } = run(makeTasks(3, PERSONAL, { attemptStartedAt: old }));
    expect(await result).toMatchObject({ failed: 3, requests: 0 });
    expect(sink.outcomes.every((o) => o.lastResult === 'retry-window-passed')).toBe(true);
    expect(sandbox.counters().requests).toBe(0);
  });
});

describe('runMessagePipeline: multicast', () => {
  it('sends a message without variables by multicast, ~500 recipients a request', async () => {
    const tasks = makeTasks(5000, SAME_FOR_ALL);
    const { sink, result } = run(tasks, { queueCapacity: 2000 });
    const totals = await result;

    expect(totals).toMatchObject({ delivered: 5000, requests: 10, multicastRequests: 10 });
    const perRecipient = deliveredTo();
    expect(perRecipient.size).toBe(5000);
    expect([...perRecipient.values()].every((n) => n === 1)).toBe(true);
    expect(sandbox.deliveries().every((d) => d.endpoint === 'multicast' && d.to.length === 500)).toBe(true);
    expect(sink.countsByTask().size).toBe(5000);
  });

  it('retries a failed multicast as the same batch: same recipients, same key, same bytes', async () => {
    const sent: PreparedSend[] = [];
    const recording = (p: PreparedSend) => {
      sent.push(p);
      return send(p);
    };
    sandbox.faults.enqueue({ kind: 'status500' }, { kind: 'dropAfterDeliver' });
    const tasks = makeTasks(500, SAME_FOR_ALL);
    const { sink, result } = run(tasks, { send: recording });
    expect(await result).toMatchObject({ delivered: 500, requests: 3 });

    const key = multicastRetryKey(
      tasks[0]!.jobId,
      1,
      tasks.map((t) => t.taskId),
    );
    expect(sent.map((p) => p.retryKey)).toEqual([key, key, key]);
    expect(new Set(sent.map((p) => p.body)).size).toBe(1);
    expect(sandbox.log().map((e) => e.status)).toEqual([500, 'dropped', 409]);
    expect(sandbox.deliveries()).toHaveLength(1);
    expect([...deliveredTo().values()].every((n) => n === 1)).toBe(true);
    expect(sink.outcomes.every((o) => o.retryKey === key && o.lastResult === 'already-delivered')).toBe(true);
  });

  it('keeps at most maxTasksInFlight recipients in requests at once', async () => {
    let inFlight = 0;
    let most = 0;
    // Each request is held until the pool has had the most in requests at once, so the bound is
    // reached whatever the speed of the machine (and the test times out if it never is).
    let reachedBound: () => void = () => {};
    const boundReached = new Promise<void>((resolve) => {
      reachedBound = resolve;
    });
    const counting = async (p: PreparedSend) => {
      inFlight += (JSON.parse(p.body) as { to: string[] }).to.length;
      most = Math.max(most, inFlight);
      if (most >= 1000) reachedBound();
      await boundReached;
      const outcome = await send(p);
      inFlight -= (JSON.parse(p.body) as { to: string[] }).to.length;
      return outcome;
    };
    const { result } = run(makeTasks(5000, SAME_FOR_ALL), {
      send: counting,
      concurrency: 8,
      queueCapacity: 2000,
      maxTasksInFlight: 1000,
    });
    expect(await result).toMatchObject({ delivered: 5000, multicastRequests: 10 });
    expect(most).toBe(1000);
  });

  it('after a crash, a recorded multicast is resent as the same batch even when claimed in another order', async () => {
    const ledger = new Map<string, string>();
    const batches: BatchLedger = {
      async record(batch) {
        for (const id of batch.taskIds) ledger.set(id, batch.retryKey);
      },
    };
    const tasks = makeTasks(1000, SAME_FOR_ALL);
    // The first broker: LINE accepts both multicasts, then the broker dies before its outcomes
    // are written (this sink is thrown away).
    await run(tasks, { batches }).result;
    expect(ledger.size).toBe(1000);
    expect(new Set(ledger.values()).size).toBe(2);

    // The next broker claims the same tasks (still in flight, same attempt) in another order;
    // each carries the batch it was recorded in.
    const reordered = [...tasks.filter((_, i) => i % 2 === 1), ...tasks.filter((_, i) => i % 2 === 0)];
    const resumed = reordered.map((t) => ({ ...t, batch: { retryKey: ledger.get(t.taskId)! } }));
    const { sink, result } = run(resumed, { batches, pageSize: 1000 });
    expect(await result).toMatchObject({ delivered: 1000, multicastRequests: 2 });
    expect(sandbox.log().map((e) => e.status)).toEqual([200, 200, 409, 409]);
    expect(sandbox.deliveries()).toHaveLength(2);
    expect([...deliveredTo().values()].every((n) => n === 1)).toBe(true);
    expect(sink.outcomes.every((o) => o.lastResult === 'already-delivered')).toBe(true);
  });

  it('releases a multicast unsent when its batch cannot be recorded', async () => {
    const batches: BatchLedger = {
      record: async () => {
        throw new Error('TransactionCanceledException (test)');
      },
    };
    const { sink, result } = run(makeTasks(600, SAME_FOR_ALL), { batches });
    // 600 tasks: one batch of 500 (refused by the ledger) and one of 100 (likewise).
    expect(await result).toMatchObject({ released: 600, requests: 0 });
    expect(sink.outcomes.every((o) => o.lastResult === 'batch-not-recorded' && o.maybeSent === false)).toBe(
      true,
    );
    expect(sandbox.counters().requests).toBe(0);
  });

  it('keeps jobs, attempts and messages apart, and pushes personalised messages', async () => {
    const secondJob = newUlid();
    const tasks = [
      ...makeTasks(30, SAME_FOR_ALL),
      ...makeTasks(30, SAME_FOR_ALL, { jobId: secondJob, from: 30 }),
      ...makeTasks(30, SAME_FOR_ALL, { jobId: secondJob, from: 60, attempt: 2 }),
      ...makeTasks(5, PERSONAL, { from: 90 }),
    ];
    const { result } = run(tasks);
    expect(await result).toMatchObject({ delivered: 95, multicastRequests: 3, requests: 8 });
    expect(sandbox.deliveries().filter((d) => d.endpoint === 'push')).toHaveLength(5);
  });
});

describe('runMessagePipeline: back-pressure, stopping, reporting', () => {
  it('never claims more than the queue holds while the senders are stuck', async () => {
    const gates: Array<() => void> = [];
    const stuck = (p: PreparedSend) => new Promise<void>((r) => gates.push(r)).then(() => send(p));
    const tasks = makeTasks(1000, PERSONAL);
    const { source, sink, result } = run(tasks, {
      send: stuck,
      concurrency: 4,
      queueCapacity: 10,
      pageSize: 4,
    });
    while (gates.length < 4) await new Promise((r) => setTimeout(r, 5));
    // The source is in memory and every sender is stuck: the producer could claim more only in
    // promise jobs, and those have all run by the next turn of the event loop.
    await new Promise((r) => setImmediate(r));
    // 4 in the senders' hands, at most 10 in the queue: nothing more was claimed. The producer
    // waits for a whole page of room (4), so the queue holds 7 to 10 and every page is whole.
    expect(source.claimed).toBeGreaterThanOrEqual(4 + 7);
    expect(source.claimed).toBeLessThanOrEqual(14);
    expect(source.limits.every((l) => l === 4)).toBe(true);

    // Release the senders for good: the rest goes through the same small queue.
    const release = setInterval(() => {
      for (const g of gates.splice(0)) g();
    }, 1);
    const totals = await result.finally(() => clearInterval(release));
    expect(totals).toMatchObject({ delivered: 1000 });
    expect(totals.maxAhead).toBeLessThanOrEqual(10);
    expect(sink.countsByTask().size).toBe(1000);
    // Never a page of one per send once the queue was full: every page asked for was whole.
    expect(source.limits.length).toBeLessThanOrEqual(Math.ceil(1000 / 4) + 1);
    expect(source.limits.every((l) => l === 4)).toBe(true);
  });

  it('on abort: no new request starts, requests in flight are reported, queued tasks are released', async () => {
    const controller = new AbortController();
    let requestsAtAbort = -1;
    const tasks = makeTasks(1500, PERSONAL);
    const { source, sink, result } = run(tasks, {
      signal: controller.signal,
      concurrency: 8,
      queueCapacity: 200,
      observe: () => {
        if (sandbox.log().length >= 300 && requestsAtAbort < 0) {
          requestsAtAbort = sandbox.log().length;
          controller.abort();
        }
      },
    });
    const totals = await result;
    expect(totals.stoppedBy).toBe('aborted');
    // Only the requests already in flight (at most one per sender) came after the abort.
    expect(sandbox.counters().requests - requestsAtAbort).toBeLessThanOrEqual(8);
    expect(source.remaining()).toBeGreaterThan(900);

    const counts = sink.countsByTask();
    expect(counts.size).toBe(source.claimed);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(totals.delivered).toBe(sandbox.counters().deliveries);
    expect(totals.released).toBe(source.claimed - totals.delivered);
    expect(sink.outcomes.filter((o) => o.kind === 'released').every((o) => o.lastResult === 'stopped')).toBe(
      true,
    );

    // Resuming with the released tasks (same attempt) and the unclaimed rest delivers everyone once.
    const released = new Set(sink.outcomes.filter((o) => o.kind === 'released').map((o) => o.taskId));
    const rest = tasks.filter((t) => released.has(t.taskId) || tasks.indexOf(t) >= source.claimed);
    expect(await run(rest).result).toMatchObject({ delivered: 1500 - totals.delivered });
    expect([...deliveredTo().values()].every((n) => n === 1)).toBe(true);
    expect(deliveredTo().size).toBe(1500);
  });

  describe("a stop while a request's answer is lost (issue 35 #10)", () => {
    /**
     * Timers that abort the run as soon as a sender goes to sleep before a resend (the only wait
     * of `retryBaseMs / 2` with `random` at 0.5): the stop comes while the resend is waiting.
     */
    function abortWhenResendWaits(controller: AbortController, backoffMs: number): Timers {
      return {
        setTimeout: (callback, ms) => {
          if (ms === backoffMs) queueMicrotask(() => controller.abort());
          return systemTimers.setTimeout(callback, ms);
        },
        clearTimeout: systemTimers.clearTimeout,
      };
    }

    it.each([
      ['push', makeTasks(1, PERSONAL)],
      ['multicast', makeTasks(3, SAME_FOR_ALL)],
    ] as const)(
      "finishes the %s under its key: LINE's 409 makes it delivered, sent once",
      async (endpoint, tasks) => {
        sandbox.faults.enqueue({ kind: 'dropAfterDeliver' });
        const controller = new AbortController();
        const { sink, result } = run(tasks, {
          signal: controller.signal,
          retryBaseMs: 20_000,
          random: () => 0.5,
          timers: abortWhenResendWaits(controller, 10_000),
        });
        expect(await result).toMatchObject({ stoppedBy: 'aborted', delivered: tasks.length, requests: 2 });
        expect(sandbox.log().map((e) => [e.path.split('/').at(-1), e.status])).toEqual([
          [endpoint, 'dropped'],
          [endpoint, 409],
        ]);
        expect(
          sink.outcomes.every((o) => o.kind === 'delivered' && o.lastResult === 'already-delivered'),
        ).toBe(true);
        expect([...deliveredTo().values()]).toEqual(tasks.map(() => 1));
      },
    );

    it('LINE answering no resend within finishWithinMs: released, maybe sent, saying why', async () => {
      sandbox.faults.setProbabilities({ dropAfterDeliver: 1 });
      const controller = new AbortController();
      const { sink, result } = run(makeTasks(1, PERSONAL), {
        signal: controller.signal,
        retryBaseMs: 20_000,
        random: () => 0.5,
        timers: abortWhenResendWaits(controller, 10_000),
        finishWithinMs: 1_000,
      });
      // The first request, one finishing resend; the next would wait 10 s, past the 1 s given.
      expect(await result).toMatchObject({ released: 1, delivered: 0, requests: 2 });
      expect(sink.outcomes[0]).toMatchObject({
        kind: 'released',
        lastResult: 'stopped',
        maybeSent: true,
        reason: UNFINISHED_REASON,
      });
      expect(sandbox.deliveries()).toHaveLength(1);
    });

    it('a task claimed maybe sent and stopped before its first request here is given back as maybe sent, unsent', async () => {
      const controller = new AbortController();
      controller.abort();
      const { sink, result } = run([{ ...makeTasks(1, PERSONAL)[0]!, maybeSent: true }], {
        signal: controller.signal,
      });
      expect(await result).toMatchObject({ requests: 0 });
      expect(sink.outcomes).toEqual(
        sink.outcomes.map(() => expect.objectContaining({ kind: 'released', maybeSent: true })),
      );
    });
  });

  it('a monthly quota 429 stops the pipeline and releases the tasks unsent', async () => {
    sandbox.faults.enqueue({ kind: 'status429', monthly: true });
    const { sink, result } = run(makeTasks(100, PERSONAL), { concurrency: 1 });
    const totals = await result;
    expect(totals).toMatchObject({ stoppedBy: 'monthly-quota', delivered: 0, requests: 1 });
    expect(sink.outcomes).toHaveLength(totals.claimed);
    expect(sink.outcomes.every((o) => o.kind === 'released')).toBe(true);
    expect(sink.outcomes[0]).toMatchObject({ lastResult: 'monthly-quota', maybeSent: false });
  });

  it('writes outcomes in batches, retries a failed write, and reports progress per job', async () => {
    const sink = memorySink({ failFirst: 2 });
    const progress: JobProgress[] = [];
    const secondJob = newUlid();
    const tasks = [...makeTasks(250, PERSONAL), ...makeTasks(10, PERSONAL, { jobId: secondJob, from: 250 })];
    const totals = await runMessagePipeline({
      source: memorySource(tasks),
      send,
      report: sink,
      rate: { perSecond: Number.POSITIVE_INFINITY },
      clock: systemClock,
      reportBatchSize: 25,
      onProgress: (p) => {
        progress.push(...p);
      },
    });
    expect(totals.delivered).toBe(260);
    expect(sink.outcomes).toHaveLength(260);
    expect(Math.max(...sink.writes)).toBeLessThanOrEqual(25);
    const sum = (jobId: string) =>
      progress.filter((p) => p.jobId === jobId).reduce((n, p) => n + p.delivered, 0);
    expect(sum(tasks[0]!.jobId)).toBe(250);
    expect(sum(secondJob)).toBe(10);
  });
});
