/**
 * The message pipeline of a `line` or `email` job: producer → bounded queue → senders → reporter.
 *
 * Input: a {@link TaskSource} of claimed tasks, the channel's {@link MessageTransport} (LINE's
 * Messaging API `send` is shorthand for its {@link LineTransport}), a {@link ReportSink}.
 * Output: every claimed task reported exactly once (delivered, failed, skipped or released), and
 * the totals.
 *
 * 1. The producer claims pages of tasks into a bounded queue. It never holds more than
 *    `queueCapacity` tasks not yet taken by a sender: it asks for no more than the room left, and
 *    waits for room (so memory stays flat whatever the size of the job).
 * 2. Tasks whose template has no placeholders are grouped (same job, attempt and message) into
 *    multicast batches of up to 500; others are pushed one by one.
 * 3. Senders pace every HTTP request through its endpoint's token bucket (push and multicast
 *    each at LINE's rate for that endpoint), back the endpoint's senders off on a 429
 *    (Retry-After when given), and retry 5xx, timeouts and dropped
 *    responses with the same prepared request (same bytes, same retry key) while the key is
 *    inside LINE's 24 h window. 2xx and 409 are delivered, other 4xx failed.
 * 4. The reporter writes outcomes in batches (every N outcomes or T ms), one write at a time, and
 *    flushes what is left before the pipeline resolves. Senders wait when it falls behind.
 *
 * Stopping: when `signal` aborts, the producer stops at once and no new request starts; requests
 * in flight finish and are reported; queued tasks are reported `released` (claim them again with
 * the same attempt). A unit whose answer was lost is finished under its retry key first, for at
 * most `finishWithinMs` (`unit-sender.ts`), so a cancelled job reports what LINE delivered. A 429 for the monthly quota stops the pipeline the same way, unless
 * `monthlyLimit` is `fail-tasks` (the client allows partial delivery): then each task LINE refuses
 * for the monthly limit ends `failed` with the reason, and the pipeline goes on.
 *
 * The parts: `send-queue.ts` (units and the bounded queue), `unit-sender.ts` (one unit until it
 * settles), `send-pacer.ts` (the pool's rate and 429 back-off), `outcome-reporter.ts` (batched
 * writes and progress); this module is the producer, the sender pool and the stop.
 */

import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { systemTimers } from '#shared/pacing/clock.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { CampaignError } from './errors.ts';
import { type LineCheckable, LineTransport, MAX_MULTICAST_RECIPIENTS } from './line-transport.ts';
import type { MessageCheck } from './message-check.ts';
import { OutcomeReporter } from './outcome-reporter.ts';
import type { PipelineSettings } from './pipeline-settings.ts';
import type { ClaimedTask, SendPort, TaskOutcome } from './ports.ts';
import { laneRates, SendPacer } from './send-pacer.ts';
import { SendQueue, type SendUnit } from './send-queue.ts';
import { Signal } from './signal.ts';
import type { MessageTemplate } from './template.ts';
import type { MessageTransport } from './transport.ts';
import {
  type ChannelStop,
  type ContentCheck,
  type SendingRun,
  type UnitOutcome,
  UnitSender,
} from './unit-sender.ts';

export { MAX_MULTICAST_RECIPIENTS };

/**
 * Where the pipeline sends: a channel's `transport`, or LINE's `send` (its {@link LineTransport}).
 * One of the two.
 */
export interface MessagePipelineOptions<T extends object = MessageTemplate> extends PipelineSettings<T> {
  readonly transport?: MessageTransport<T>;
  readonly send?: SendPort;
}

export interface PipelineTotals {
  readonly claimed: number;
  readonly delivered: number;
  readonly failed: number;
  readonly skipped: number;
  readonly released: number;
  /** HTTP requests made, retries and 429s included. */
  readonly requests: number;
  readonly multicastRequests: number;
  /** Requests that were resends of a request already made (5xx, timeout, dropped, 429). */
  readonly resends: number;
  readonly rateLimited: number;
  /** The most claimed tasks ever held ahead of the senders (never above `queueCapacity`). */
  readonly maxAhead: number;
  /**
   * `drained`: the source ran dry; `aborted`: the signal; `monthly-quota`: LINE's monthly limit;
   * `daily-quota`: the channel's daily quota (SES); `held`: the sending account is paused.
   */
  readonly stoppedBy: 'drained' | 'aborted' | ChannelStop;
  /** The channel's words for a `daily-quota` or `held` stop. */
  readonly stopDetail?: string;
}

/** The broker's `nextPage` failed: the pipeline stopped (its held tasks were released). */
export class TaskSourceError extends CampaignError {}

/**
 * Runs the pipeline until the source runs dry or `signal` aborts, and resolves with the totals
 * once every claimed task has been written to `report`. Rejects with `ReportWriteError`
 * when outcomes could not be written, or {@link TaskSourceError} when claiming failed.
 */
export function runMessagePipeline<T extends object = MessageTemplate>(
  options: MessagePipelineOptions<T>,
): Promise<PipelineTotals> {
  return new PipelineRun<T>(options).run();
}

type Totals = { -readonly [K in keyof Omit<PipelineTotals, 'stoppedBy' | 'stopDetail'>]: number };

/** The transport of the options: theirs, or LINE's over `send` at `rate`'s lanes. */
function transportOf<T extends object>(options: MessagePipelineOptions<T>): MessageTransport<T> {
  if (options.transport) return options.transport;
  if (options.send === undefined) throw new TypeError('the pipeline needs a transport or a send');
  const lanes = laneRates(options.rate ?? { perSecond: Number.POSITIVE_INFINITY });
  // `send` is LINE's: its tasks carry LINE messages.
  return new LineTransport(options.send, {
    pushPerSecond: lanes.push,
    multicastPerSecond: lanes.multicast,
  }) as unknown as MessageTransport<T>;
}

/** LINE's message check as the senders ask it (the checkable is LINE's endpoint and messages). */
function contentCheck(check: MessageCheck | undefined): ContentCheck | undefined {
  if (check === undefined) return undefined;
  return (jobId, checkable) => {
    const { endpoint, messages } = checkable as LineCheckable;
    return check.refusal(jobId, endpoint, messages);
  };
}

class PipelineRun<T extends object> implements SendingRun<T> {
  readonly totals: Totals = {
    claimed: 0,
    delivered: 0,
    failed: 0,
    skipped: 0,
    released: 0,
    requests: 0,
    multicastRequests: 0,
    resends: 0,
    rateLimited: 0,
    maxAhead: 0,
  };
  stopping = false;
  readonly #options: MessagePipelineOptions<T>;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #concurrency: number;
  readonly #maxInFlight: number;
  readonly #pageSize: number;
  readonly #queue: SendQueue<T>;
  readonly #pacer: SendPacer;
  readonly #reporter: OutcomeReporter;
  readonly #sender: UnitSender<T>;
  #stoppedBy: PipelineTotals['stoppedBy'] = 'drained';
  #stopDetail: string | undefined;
  #fatal: Error | undefined;
  readonly #sleepers = new Set<() => void>();
  /** Tasks in requests now. */
  #inFlight = 0;
  readonly #inFlightFreed = new Signal();
  #producerDone = false;

  constructor(options: MessagePipelineOptions<T>) {
    this.#options = options;
    const transport = transportOf(options);
    this.#clock = options.clock;
    this.#timers = options.timers ?? systemTimers;
    this.#concurrency = positiveInt(options.concurrency ?? 128, 'concurrency');
    this.#maxInFlight = Math.max(this.#concurrency, options.maxTasksInFlight ?? 10_000);
    const capacity = positiveInt(options.queueCapacity ?? 2000, 'queueCapacity');
    this.#pageSize = positiveInt(options.pageSize ?? options.source.pageSize ?? 500, 'pageSize');
    this.#queue = new SendQueue<T>({
      capacity,
      batchLimit: Math.min(transport.limits.recipientsPerRequest, capacity),
      multicast: options.multicast ?? true,
      groupOf: (template) => transport.groupOf(template),
    });
    this.#pacer = new SendPacer(
      {
        lanes: transport.limits.lanes,
        burst: options.rate?.burst,
        unitsPerRequest: transport.limits.countsRecipients ? transport.limits.recipientsPerRequest : 1,
      },
      this.#clock,
      this.#timers,
      options.rateLimitBackoffMs ?? 250,
    );
    this.#reporter = new OutcomeReporter({
      report: options.report,
      clock: this.#clock,
      timers: this.#timers,
      batchSize: positiveInt(options.reportBatchSize ?? 100, 'reportBatchSize'),
      intervalMs: options.reportIntervalMs ?? 250,
      writeAttempts: options.reportWriteAttempts ?? 8,
      onProgress: options.onProgress,
      progressIntervalMs: options.progressIntervalMs ?? 1000,
      log: options.log,
      onFatal: (error) => this.stop('aborted', error),
    });
    this.#sender = new UnitSender<T>(this, {
      transport,
      clock: this.#clock,
      timers: this.#timers,
      pacer: this.#pacer,
      batches: options.batches,
      log: options.log,
      observe: options.observe,
      maxRetries: options.maxRetries ?? 10,
      retryBaseMs: options.retryBaseMs ?? 200,
      random: options.random ?? Math.random,
      monthlyLimit: options.monthlyLimit ?? 'stop',
      finishWithinMs: options.finishWithinMs ?? 10_000,
      check: contentCheck(options.check),
      inDoubtWaitMs: options.inDoubtWaitMs ?? 600_000,
    });
  }

  async run(): Promise<PipelineTotals> {
    const { signal } = this.#options;
    const onAbort = () => this.stop('aborted');
    if (signal?.aborted) this.stop('aborted');
    else signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const producer = this.#produce();
      const senders = Array.from({ length: this.#concurrency }, () => this.#sendLoop());
      await producer;
      await Promise.all(senders);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    // Whatever is still queued was claimed and never sent: give it back.
    this.#queue.sealAll();
    for (let unit = this.#queue.take(); unit; unit = this.#queue.take()) {
      this.settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent: false });
    }
    await this.#reporter.close();
    if (this.#fatal) throw this.#fatal;
    return {
      ...this.totals,
      stoppedBy: this.#stoppedBy,
      ...(this.#stopDetail === undefined ? {} : { stopDetail: this.#stopDetail }),
    };
  }

  stop(reason: PipelineTotals['stoppedBy'], detail?: string | Error): void {
    if (detail instanceof Error && !this.#fatal) this.#fatal = detail;
    if (this.stopping) return;
    this.stopping = true;
    this.#stoppedBy = reason;
    if (typeof detail === 'string') this.#stopDetail = detail;
    this.#pacer.abort();
    for (const wake of [...this.#sleepers]) wake();
    this.#queue.unitReady.notify();
    this.#queue.roomFreed.notify();
    this.#inFlightFreed.notify();
  }

  sleep(ms: number): Promise<boolean> {
    if (this.stopping) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = () => {
        this.#timers.clearTimeout(handle);
        this.#sleepers.delete(wake);
        resolve(!this.stopping);
      };
      const handle = this.#timers.setTimeout(wake, ms);
      this.#sleepers.add(wake);
    });
  }

  settleUnit(unit: SendUnit<T>, outcome: UnitOutcome, tasks: readonly ClaimedTask<T>[] = unit.tasks): void {
    const at = this.#clock.now();
    for (const task of tasks) {
      this.#settle({
        jobId: task.jobId,
        taskId: task.taskId,
        attempt: task.attempt,
        retryKey: unit.retryKey,
        ...fallingBack(task, outcome),
        at,
      });
    }
  }

  #settle(outcome: TaskOutcome): void {
    this.totals[outcome.kind]++;
    this.#reporter.add(outcome);
  }

  /** The producer: claims pages into the queue while there is room, until the source runs dry. */
  async #produce(): Promise<void> {
    const queue = this.#queue;
    try {
      while (!this.stopping) {
        await this.#roomInQueue();
        if (this.stopping) break;
        const limit = Math.min(this.#pageSize, queue.capacity - queue.ahead);
        const page = await this.#claim(limit);
        if (page === undefined) break;
        this.#accept(page);
        this.totals.maxAhead = Math.max(this.totals.maxAhead, queue.ahead);
        // A batch still filling is sealed once the senders would otherwise wait for it (`#starving`)
        // or the source runs dry: sealing it at every short page sent a part-full request a page.
        queue.unitReady.notify();
        if (page.length === 0) break;
      }
    } finally {
      this.#producerDone = true;
      queue.sealAll();
    }
  }

  /**
   * Waits until a worthwhile page fits: a whole page, or half the queue when that is less. Claiming
   * whenever one task had gone made a page of one per send once the queue was full (a claim's reads
   * cost the same for one task as for a page: 3 index reads a message at 665/s on DynamoDB Local);
   * half the queue still ahead of the senders covers a claim's round trips.
   */
  async #roomInQueue(): Promise<void> {
    const queue = this.#queue;
    const wanted = Math.min(this.#pageSize, Math.ceil(queue.capacity / 2));
    while (queue.capacity - queue.ahead < wanted && !this.stopping) {
      // Waiting with nothing sealed: open batches must go, or the senders would starve.
      if (queue.hasOpenBatches && queue.peek() === undefined) queue.sealAll();
      await queue.roomFreed.wait();
    }
  }

  /** A page from the source; undefined (and the pipeline stopped) when claiming failed. */
  async #claim(limit: number): Promise<readonly ClaimedTask<T>[] | undefined> {
    try {
      return await this.#options.source.nextPage(limit);
    } catch (error) {
      this.#options.log?.error('claiming message tasks failed', { error });
      this.stop(
        'aborted',
        new TaskSourceError(`nextPage failed: ${(error as Error)?.message}`, { cause: error }),
      );
      return undefined;
    }
  }

  /**
   * A claimed page into the queue: opted-out recipients skipped (or, when their job falls back, moved
   * to its next channel), recorded multicasts resumed whole.
   */
  #accept(page: readonly ClaimedTask<T>[]): void {
    this.totals.claimed += page.length;
    const resumed = new Map<string, ClaimedTask<T>[]>();
    for (const task of page) {
      if (task.fallsBack !== undefined) {
        const { fallsBack } = task;
        this.#settle({
          ...identity(task),
          kind: 'released',
          lastResult: fallsBack.tried[0]!.reason,
          moveTo: fallsBack,
          at: this.#clock.now(),
        });
      } else if (task.optedOut || task.suppressed !== undefined) {
        this.#settle({
          ...identity(task),
          kind: 'skipped',
          lastResult: task.optedOut ? 'opted-out' : 'suppressed',
          ...(task.optedOut || task.suppressed === undefined ? {} : { reason: task.suppressed }),
          ...(task.maybeSent ? { maybeSent: true } : {}),
          at: this.#clock.now(),
        });
      } else if (task.batch !== undefined) {
        // Resent as the batch it was recorded in: same key, same members, same bytes.
        const members = resumed.get(task.batch.retryKey);
        if (members) members.push(task);
        else resumed.set(task.batch.retryKey, [task]);
      } else this.#queue.add(task);
    }
    for (const [key, members] of resumed) this.#queue.addRecorded(key, members);
  }

  /** One sender: takes units and sends them, while the reporter keeps up. */
  async #sendLoop(): Promise<void> {
    for (;;) {
      await this.#reporter.room();
      const unit = await this.#nextUnit();
      if (!unit) return;
      try {
        await this.#sender.send(unit);
      } finally {
        this.#inFlight -= unit.tasks.length;
        this.#inFlightFreed.notify();
        if (this.#starving) this.#queue.sealAll();
      }
    }
  }

  /** The next unit to send, once it fits under the most tasks in requests at once. */
  async #nextUnit(): Promise<SendUnit<T> | undefined> {
    for (;;) {
      if (this.stopping) return undefined;
      const next = this.#queue.peek();
      if (next && this.#inFlight > 0 && this.#inFlight + next.tasks.length > this.#maxInFlight) {
        await this.#inFlightFreed.wait();
        continue;
      }
      const unit = this.#queue.take();
      if (unit) {
        this.#inFlight += unit.tasks.length;
        return unit;
      }
      if (this.#producerDone) return undefined;
      if (this.#starving) {
        this.#queue.sealAll();
        continue;
      }
      await this.#queue.unitReady.wait();
    }
  }

  /**
   * Nothing sealed to send and no request out, while a batch is still filling: the senders would
   * wait for the producer's next page. Its tasks go now, as a part-full request.
   */
  get #starving(): boolean {
    return this.#inFlight === 0 && this.#queue.hasOpenBatches && this.#queue.peek() === undefined;
  }
}

/**
 * A final refusal of the recipient as unreachable on this channel, of a task whose job falls back:
 * the task moves to its next channel instead of failing (this attempt's request was refused, so its
 * slot of the contact limits stays taken: the next channel counts no other). Else `outcome` as is.
 */
function fallingBack(task: ClaimedTask<object>, outcome: UnitOutcome): UnitOutcome {
  if (outcome.kind !== 'failed' || !outcome.unreachable || task.onward === undefined) return outcome;
  // An earlier request of this attempt may have reached the person: never a second channel too.
  if (task.maybeSent || task.resentInDoubt) return outcome;
  // A STOP is the person's word for every channel unless the client keeps it to SMS.
  if (outcome.unreachable === 'opted-out' && !task.optOutMovesOn) return outcome;
  const { from, skipped, channel, recipient } = task.onward;
  return {
    kind: 'released',
    lastResult: outcome.lastResult,
    ...(outcome.requestId === undefined ? {} : { requestId: outcome.requestId }),
    moveTo: {
      channel,
      recipient,
      from: task.recipient,
      tried: [{ channel: from, reason: outcome.lastResult }, ...skipped],
      attempts: task.attempt,
    },
  };
}

function identity(task: ClaimedTask<object>) {
  return {
    jobId: task.jobId,
    taskId: task.taskId,
    attempt: task.attempt,
    retryKey: attemptKey(task.jobId, task.taskId, task.attempt),
  };
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be an integer ≥ 1, got ${value}`);
  return value;
}
