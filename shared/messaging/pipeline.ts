/**
 * The message pipeline of a `message` job: producer → bounded queue → senders → reporter.
 *
 * Input: a {@link TaskSource} of claimed tasks, the Messaging API `send`, a {@link ReportSink}.
 * Output: every claimed task reported exactly once (delivered, failed, skipped or released), and
 * the totals.
 *
 * 1. The producer claims pages of tasks into a bounded queue. It never holds more than
 *    `queueCapacity` tasks not yet taken by a sender: it asks for no more than the room left, and
 *    waits for room (so memory stays flat whatever the size of the job).
 * 2. Tasks whose template has no placeholders are grouped (same job, attempt and message) into
 *    multicast batches of up to 500; others are pushed one by one.
 * 3. Senders pace every HTTP request through one token bucket at the channel's rate, back the
 *    whole pool off on a 429 (Retry-After when given), and retry 5xx, timeouts and dropped
 *    responses with the same prepared request (same bytes, same retry key) while the key is
 *    inside LINE's 24 h window. 2xx and 409 are delivered, other 4xx failed.
 * 4. The reporter writes outcomes in batches (every N outcomes or T ms), one write at a time, and
 *    flushes what is left before the pipeline resolves. Senders wait when it falls behind.
 *
 * Stopping: when `signal` aborts, the producer stops at once and no new request starts; requests
 * in flight finish and are reported; queued tasks are reported `released` (claim them again with
 * the same attempt). A 429 for the monthly quota stops the pipeline the same way.
 */
import { attemptKey, uuidV5 } from '#shared/ids.ts';
import {
  backoffDelay,
  type PreparedSend,
  prepareMulticast,
  preparePush,
  type SendOutcome,
} from '#shared/line/messaging-client.ts';
import { retryKeyStillSafe } from '#shared/line/retry-key.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import { systemTimers } from '#shared/pacing/clock.ts';
import { TokenBucket } from '#shared/pacing/token-bucket.ts';
import type {
  BatchLedger,
  ClaimedTask,
  JobProgress,
  ReportSink,
  SendObservation,
  SendPort,
  TaskOutcome,
  TaskSource,
} from './ports.ts';
import { compileTemplate, MissingVariableError } from './template.ts';

/** LINE's most recipients of one multicast. */
export const MAX_MULTICAST_RECIPIENTS = 500;

export interface PipelineRate {
  /** HTTP requests per second for push + multicast together (LINE: 2,000 per channel); Infinity for none. */
  readonly perSecond: number;
  /**
   * Requests that may go back to back after a lull. Default 1 % of a second's worth (20 at
   * 2,000/s): timers fire a millisecond or so late, and without a little burst every late wake
   * would lose its share of the rate. LINE's own bucket holds a full second's worth.
   */
  readonly burst?: number;
}

export interface MessagePipelineOptions {
  readonly source: TaskSource;
  readonly send: SendPort;
  readonly report: ReportSink;
  readonly rate: PipelineRate;
  /** Senders, i.e. most requests in flight. Default 128. */
  readonly concurrency?: number;
  /** Most claimed tasks not yet taken by a sender. Default 2,000 (at least 1). */
  readonly queueCapacity?: number;
  /**
   * Most tasks in requests at once (a multicast holds up to 500), which bounds memory with
   * multicasts as `queueCapacity` does before the senders. Default 10,000; at least `concurrency`.
   */
  readonly maxTasksInFlight?: number;
  /** Largest page asked of the source. Default 500. */
  readonly pageSize?: number;
  /** Group tasks of a template without placeholders into multicasts. Default true. */
  readonly multicast?: boolean;
  /**
   * Where a multicast's members and key are recorded before its first request, so that after a
   * crash the same batch is resent with the same key (see {@link ClaimedTask}`.batch`). Without
   * it, a crash between a multicast's acceptance and its outcomes' write may regroup the tasks
   * under new keys and deliver to them again.
   */
  readonly batches?: BatchLedger;
  readonly clock: Clock;
  /** Default Node's timers. */
  readonly timers?: Timers;
  /** Pause / stop: see the module comment. */
  readonly signal?: AbortSignal;
  readonly log?: Logger;
  /** Write outcomes once this many wait. Default 100. */
  readonly reportBatchSize?: number;
  /** …or once the oldest has waited this long. Default 250 ms. */
  readonly reportIntervalMs?: number;
  /** Tries per outcome batch before the pipeline gives up with a {@link ReportWriteError}. Default 8. */
  readonly reportWriteAttempts?: number;
  /** Called with the counts written since the last call, at most once per interval and at the end. */
  readonly onProgress?: (progress: readonly JobProgress[]) => void | Promise<void>;
  /** Default 1,000 ms. */
  readonly progressIntervalMs?: number;
  /** Retries of a 5xx / timeout / dropped response before the task is released. Default 10. */
  readonly maxRetries?: number;
  /** First retry waits up to this (full jitter, doubling). Default 200 ms. */
  readonly retryBaseMs?: number;
  /** First pool-wide wait after a 429 without Retry-After (doubling per episode, to 30 s). Default 250 ms. */
  readonly rateLimitBackoffMs?: number;
  /** Called after every HTTP request. */
  readonly observe?: (observation: SendObservation) => void;
  /** For retry jitter. Default Math.random. */
  readonly random?: () => number;
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
  /** `drained`: the source ran dry; `aborted`: the signal; `monthly-quota`: LINE's monthly limit. */
  readonly stoppedBy: 'drained' | 'aborted' | 'monthly-quota';
}

/** The report sink kept failing: these outcomes could not be written. */
export class ReportWriteError extends Error {
  override name = 'ReportWriteError';
  readonly unwritten: readonly TaskOutcome[];
  constructor(cause: unknown, unwritten: readonly TaskOutcome[]) {
    super(`could not write ${unwritten.length} task outcomes: ${(cause as Error)?.message ?? cause}`, {
      cause,
    });
    this.unwritten = unwritten;
  }
}

/** The broker's `nextPage` failed: the pipeline stopped (its held tasks were released). */
export class TaskSourceError extends Error {
  override name = 'TaskSourceError';
}

/** One request's worth of tasks: a push (one task) or a multicast (up to 500). */
interface SendUnit {
  readonly endpoint: 'push' | 'multicast';
  /** Sorted by task id for a multicast, so the same batch always serialises to the same bytes. */
  readonly tasks: readonly ClaimedTask[];
  readonly retryKey: string;
  /** A multicast resumed from an earlier claim: already in the ledger. */
  readonly recorded: boolean;
  /** The earliest first start of its tasks' attempts: the retry key's window counts from it. */
  readonly startedAt: number;
}

/** A waitable flag: `wait()` resolves at the next `notify()`. */
function makeSignal(): { wait(): Promise<void>; notify(): void } {
  let resolve!: () => void;
  let promise = new Promise<void>((r) => {
    resolve = r;
  });
  return {
    wait: () => promise,
    notify() {
      resolve();
      promise = new Promise<void>((r) => {
        resolve = r;
      });
    },
  };
}

/**
 * Runs the pipeline until the source runs dry or `signal` aborts, and resolves with the totals
 * once every claimed task has been written to `report`. Rejects with {@link ReportWriteError}
 * when outcomes could not be written, or {@link TaskSourceError} when claiming failed.
 */
export async function runMessagePipeline(options: MessagePipelineOptions): Promise<PipelineTotals> {
  const { source, send, report, clock, log } = options;
  const timers = options.timers ?? systemTimers;
  const concurrency = positiveInt(options.concurrency ?? 128, 'concurrency');
  const maxInFlight = Math.max(concurrency, options.maxTasksInFlight ?? 10_000);
  const capacity = positiveInt(options.queueCapacity ?? 2000, 'queueCapacity');
  const pageSize = positiveInt(options.pageSize ?? 500, 'pageSize');
  const multicastOn = options.multicast ?? true;
  const batchLimit = Math.min(MAX_MULTICAST_RECIPIENTS, capacity);
  const maxRetries = options.maxRetries ?? 10;
  const retryBaseMs = options.retryBaseMs ?? 200;
  const random = options.random ?? Math.random;

  const totals = {
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
  let stoppedBy: PipelineTotals['stoppedBy'] = 'drained';
  let stopping = false;
  let fatal: Error | undefined;
  const sleepers = new Set<() => void>();

  // The bounded queue: sealed units in FIFO order, and open multicast batches still filling.
  let queue: (SendUnit | undefined)[] = [];
  let head = 0;
  const openBatches = new Map<string, ClaimedTask[]>();
  const groups: MulticastGroups = { messageIds: new Map(), templateKeys: new WeakMap() };
  let inFlight = 0;
  const inFlightFreed = makeSignal();
  let ahead = 0;
  let producerDone = false;
  const unitReady = makeSignal();
  const roomFreed = makeSignal();

  const pacer = makePacer(options.rate, clock, timers, options.rateLimitBackoffMs ?? 250);
  const reporter = makeReporter({
    report,
    clock,
    timers,
    batchSize: positiveInt(options.reportBatchSize ?? 100, 'reportBatchSize'),
    intervalMs: options.reportIntervalMs ?? 250,
    writeAttempts: options.reportWriteAttempts ?? 8,
    onProgress: options.onProgress,
    progressIntervalMs: options.progressIntervalMs ?? 1000,
    log,
    onFatal: (error) => stop('aborted', error),
  });

  function stop(reason: PipelineTotals['stoppedBy'], error?: Error): void {
    if (error && !fatal) fatal = error;
    if (stopping) return;
    stopping = true;
    stoppedBy = reason;
    pacer.abort();
    for (const wake of [...sleepers]) wake();
    unitReady.notify();
    roomFreed.notify();
    inFlightFreed.notify();
  }
  const onAbort = () => stop('aborted');
  if (options.signal?.aborted) stop('aborted');
  else options.signal?.addEventListener('abort', onAbort, { once: true });

  function settle(outcome: TaskOutcome): void {
    totals[outcome.kind]++;
    reporter.add(outcome);
  }

  function settleUnit(
    unit: SendUnit,
    outcome: Omit<TaskOutcome, 'at' | 'jobId' | 'taskId' | 'attempt' | 'retryKey'>,
  ): void {
    const at = clock.now();
    for (const task of unit.tasks) {
      settle({
        jobId: task.jobId,
        taskId: task.taskId,
        attempt: task.attempt,
        retryKey: unit.retryKey,
        ...outcome,
        at,
      });
    }
  }

  function enqueue(unit: SendUnit): void {
    queue.push(unit);
  }

  function seal(key: string): void {
    const tasks = openBatches.get(key);
    if (!tasks) return;
    openBatches.delete(key);
    // A batch of one goes as a push with the task's own key: nothing to record.
    enqueue(tasks.length === 1 ? pushUnit(tasks[0]!) : multicastUnit(tasks));
  }

  function sealAll(): void {
    for (const key of [...openBatches.keys()]) seal(key);
    unitReady.notify();
  }

  function take(): SendUnit | undefined {
    if (head >= queue.length) return undefined;
    const unit = queue[head]!;
    // Drop the reference at once: a consumed multicast slot would otherwise keep 500 tasks alive.
    queue[head++] = undefined;
    if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
    ahead -= unit.tasks.length;
    roomFreed.notify();
    return unit;
  }

  async function produce(): Promise<void> {
    try {
      while (!stopping) {
        while (ahead >= capacity && !stopping) {
          // Full: open batches must go, or the senders would starve while the producer waits.
          if (openBatches.size > 0) sealAll();
          await roomFreed.wait();
        }
        if (stopping) break;
        const limit = Math.min(pageSize, capacity - ahead);
        let page: readonly ClaimedTask[];
        try {
          page = await source.nextPage(limit);
        } catch (error) {
          log?.error('claiming message tasks failed', { error });
          stop(
            'aborted',
            new TaskSourceError(`nextPage failed: ${(error as Error)?.message}`, { cause: error }),
          );
          break;
        }
        totals.claimed += page.length;
        const resumed = new Map<string, ClaimedTask[]>();
        for (const task of page) {
          if (task.optedOut) {
            settle({
              ...identity(task),
              kind: 'skipped',
              lastResult: 'opted-out',
              ...(task.maybeSent ? { maybeSent: true } : {}),
              at: clock.now(),
            });
            continue;
          }
          ahead++;
          if (task.batch !== undefined) {
            // Resent as the batch it was recorded in: same key, same members, same bytes.
            const members = resumed.get(task.batch.retryKey);
            if (members) members.push(task);
            else resumed.set(task.batch.retryKey, [task]);
            continue;
          }
          const key = multicastOn ? batchKey(task, groups) : undefined;
          if (key === undefined) {
            enqueue(pushUnit(task));
            continue;
          }
          const batch = openBatches.get(key);
          if (batch) batch.push(task);
          else openBatches.set(key, [task]);
          if ((batch?.length ?? 1) >= batchLimit) seal(key);
        }
        for (const [key, members] of resumed) enqueue(multicastUnit(members, key));
        totals.maxAhead = Math.max(totals.maxAhead, ahead);
        // A short page: the source is running dry, so waiting for fuller batches gains nothing.
        if (page.length < limit) sealAll();
        else unitReady.notify();
        if (page.length === 0) break;
      }
    } finally {
      producerDone = true;
      sealAll();
    }
  }

  async function nextUnit(): Promise<SendUnit | undefined> {
    for (;;) {
      if (stopping) return undefined;
      const next = queue[head];
      if (next && inFlight > 0 && inFlight + next.tasks.length > maxInFlight) {
        await inFlightFreed.wait();
        continue;
      }
      const unit = take();
      if (unit) {
        inFlight += unit.tasks.length;
        return unit;
      }
      if (producerDone) return undefined;
      await unitReady.wait();
    }
  }

  async function sendLoop(): Promise<void> {
    for (;;) {
      await reporter.room();
      const unit = await nextUnit();
      if (!unit) return;
      try {
        await sendUnit(unit);
      } finally {
        inFlight -= unit.tasks.length;
        inFlightFreed.notify();
      }
    }
  }

  async function sendUnit(unit: SendUnit): Promise<void> {
    const first = unit.tasks[0]!;
    let prepared: PreparedSend;
    try {
      const messages = compileTemplate(first.template).render(first.variables);
      const opts =
        first.template.notificationDisabled === undefined
          ? {}
          : { notificationDisabled: first.template.notificationDisabled };
      prepared =
        unit.endpoint === 'push'
          ? preparePush(first.recipient, messages, unit.retryKey, opts)
          : prepareMulticast(
              unit.tasks.map((t) => t.recipient),
              messages,
              unit.retryKey,
              opts,
            );
    } catch (error) {
      const reason =
        error instanceof MissingVariableError
          ? `missing-variable: ${error.variable}`
          : `bad-message: ${(error as Error).message}`;
      return settleUnit(unit, { kind: 'failed', lastResult: 'not-sent', reason });
    }

    if (unit.endpoint === 'multicast' && !unit.recorded && options.batches) {
      if (stopping) return settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent: false });
      try {
        await options.batches.record({
          jobId: unit.tasks[0]!.jobId,
          attempt: unit.tasks[0]!.attempt,
          retryKey: unit.retryKey,
          taskIds: unit.tasks.map((t) => t.taskId),
        });
      } catch (error) {
        log?.warn('recording a multicast batch failed; its tasks are released unsent', { error });
        return settleUnit(unit, {
          kind: 'released',
          lastResult: 'batch-not-recorded',
          reason: (error as Error)?.message,
          maybeSent: false,
        });
      }
    }
    let maybeSent = false;
    let retries = 0;
    let sends = 0;
    for (;;) {
      if (!retryKeyStillSafe(unit.startedAt, clock.now())) {
        // An earlier request may have been accepted; past LINE's memory of the key, a resend (or a
        // new attempt) could deliver twice. Settling as failed keeps "at most once".
        return settleUnit(unit, {
          kind: 'failed',
          lastResult: 'retry-window-passed',
          reason: 'the retry key is too old to resend safely; the message may or may not have been delivered',
        });
      }
      if (!(await pacer.acquire()) || stopping) {
        return settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent });
      }
      const startedAt = clock.now();
      if (sends > 0) totals.resends++;
      sends++;
      totals.requests++;
      if (prepared.endpoint === 'multicast') totals.multicastRequests++;
      const outcome: SendOutcome = await send(prepared);
      options.observe?.({
        endpoint: prepared.endpoint,
        recipients: unit.tasks.length,
        outcome: outcome.kind,
        latencyMs: clock.now() - startedAt,
      });
      switch (outcome.kind) {
        case 'delivered':
          pacer.succeeded();
          return settleUnit(unit, {
            kind: 'delivered',
            lastResult: 'delivered',
            requestId: outcome.requestId,
          });
        case 'already-delivered':
          pacer.succeeded();
          return settleUnit(unit, {
            kind: 'delivered',
            lastResult: 'already-delivered',
            requestId: outcome.acceptedRequestId,
          });
        case 'rejected':
          return settleUnit(unit, {
            kind: 'failed',
            lastResult: `http-${outcome.status}`,
            reason: rejectionReason(outcome),
            requestId: outcome.requestId,
          });
        case 'rate-limited':
          totals.rateLimited++;
          if (outcome.reason === 'monthly-quota') {
            if (!stopping) log?.error('LINE monthly message quota used up: message pipeline stopped');
            stop('monthly-quota');
            return settleUnit(unit, { kind: 'released', lastResult: 'monthly-quota', maybeSent });
          }
          pacer.backOff(outcome.retryAfterMs, random);
          continue;
        case 'retryable': {
          maybeSent ||= outcome.maybeDelivered;
          if (stopping) return settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent });
          if (retries >= maxRetries) {
            log?.warn('message send still failing, task released', { reason: outcome.message });
            return settleUnit(unit, {
              kind: 'released',
              lastResult: outcome.reason,
              reason: outcome.message,
              maybeSent,
              retryAfterMs: 60_000,
            });
          }
          const wait = backoffDelay(retries, { baseMs: retryBaseMs, random });
          retries++;
          if (!(await sleep(wait))) {
            return settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent });
          }
          continue;
        }
      }
    }
  }

  /** Sleeps `ms`; false when the pipeline stopped meanwhile (stopping wakes it at once). */
  function sleep(ms: number): Promise<boolean> {
    if (stopping) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = () => {
        timers.clearTimeout(handle);
        sleepers.delete(wake);
        resolve(!stopping);
      };
      const handle = timers.setTimeout(wake, ms);
      sleepers.add(wake);
    });
  }

  function identity(task: ClaimedTask) {
    return {
      jobId: task.jobId,
      taskId: task.taskId,
      attempt: task.attempt,
      retryKey: attemptKey(task.jobId, task.taskId, task.attempt),
    };
  }

  try {
    const producer = produce();
    const senders = Array.from({ length: concurrency }, () => sendLoop());
    await producer;
    await Promise.all(senders);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  // Whatever is still queued was claimed and never sent: give it back.
  sealAll();
  for (let unit = take(); unit; unit = take()) {
    settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent: false });
  }
  await reporter.close();
  if (fatal) throw fatal;
  return { ...totals, stoppedBy };
}

function pushUnit(task: ClaimedTask): SendUnit {
  return {
    endpoint: 'push',
    recorded: false,
    tasks: [task],
    retryKey: attemptKey(task.jobId, task.taskId, task.attempt),
    startedAt: task.attemptStartedAt,
  };
}

/**
 * A multicast's retry key derives from its job, attempt and sorted task ids: the same batch always
 * has the same key, and its resends are byte-identical.
 */
export function multicastRetryKey(jobId: string, attempt: number, taskIds: readonly string[]): string {
  return uuidV5(`multicast:${jobId}:${attempt}:${[...taskIds].sort().join(',')}`);
}

function multicastUnit(tasks: readonly ClaimedTask[], recordedKey?: string): SendUnit {
  const sorted = [...tasks].sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
  const first = sorted[0]!;
  return {
    endpoint: 'multicast',
    recorded: recordedKey !== undefined,
    tasks: sorted,
    retryKey:
      recordedKey ??
      multicastRetryKey(
        first.jobId,
        first.attempt,
        sorted.map((t) => t.taskId),
      ),
    startedAt: Math.min(...sorted.map((t) => t.attemptStartedAt)),
  };
}

/** The multicast groups of one run: each distinct message (by content) gets a small number. */
interface MulticastGroups {
  readonly messageIds: Map<string, number>;
  readonly templateKeys: WeakMap<object, number | null>;
}

/** The multicast group of a task, or undefined when its message differs per recipient. */
function batchKey(task: ClaimedTask, { messageIds, templateKeys }: MulticastGroups): string | undefined {
  let key = templateKeys.get(task.template);
  if (key === undefined) {
    let compiled: ReturnType<typeof compileTemplate> | undefined;
    try {
      compiled = compileTemplate(task.template);
    } catch {
      compiled = undefined; // sent alone, where the error becomes the task's reason
    }
    if (compiled && compiled.variables.length === 0) {
      const content = JSON.stringify([task.template.messages, task.template.notificationDisabled ?? null]);
      key = messageIds.get(content) ?? messageIds.size;
      messageIds.set(content, key);
    } else key = null;
    templateKeys.set(task.template, key);
  }
  return key === null ? undefined : `${task.jobId} ${task.attempt} ${key}`;
}

function rejectionReason(outcome: Extract<SendOutcome, { kind: 'rejected' }>): string {
  const details = outcome.details
    .map((d) => [d.property, d.message].filter(Boolean).join(': '))
    .filter(Boolean)
    .join('; ');
  return `HTTP ${outcome.status}: ${outcome.message}${details ? ` (${details})` : ''}`;
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be an integer ≥ 1, got ${value}`);
  return value;
}

interface Pacer {
  /** Waits for a token (and for any 429 back-off to end); false when the pipeline stopped. */
  acquire(): Promise<boolean>;
  /** A 429: nobody sends until the wait is over. */
  backOff(retryAfterMs: number | undefined, random: () => number): void;
  succeeded(): void;
  abort(): void;
}

/**
 * One token bucket for all senders, with a FIFO of waiters and a single timer, so the pool as a
 * whole keeps the channel's rate and a 429 holds everyone back, not just the sender that got it.
 */
function makePacer(rate: PipelineRate, clock: Clock, timers: Timers, backOffBaseMs: number): Pacer {
  const bucket = Number.isFinite(rate.perSecond)
    ? new TokenBucket({
        ratePerSecond: rate.perSecond,
        burst: rate.burst ?? Math.max(1, Math.round(rate.perSecond / 100)),
      })
    : undefined;
  const waiters: Array<(ok: boolean) => void> = [];
  let pausedUntil = 0;
  let level = 0;
  let timer: TimerHandle | undefined;
  let aborted = false;

  const ready = (now: number) => now >= pausedUntil && (bucket ? bucket.tryTake(now) : true);

  function schedule(): void {
    if (timer !== undefined || waiters.length === 0 || aborted) return;
    const now = clock.now();
    const wait = Math.max(pausedUntil - now, bucket ? bucket.msUntilNextToken(now) : 0, 1);
    timer = timers.setTimeout(pump, wait);
  }

  function pump(): void {
    timer = undefined;
    const now = clock.now();
    while (waiters.length > 0 && ready(now)) waiters.shift()!(true);
    schedule();
  }

  return {
    acquire() {
      if (aborted) return Promise.resolve(false);
      if (waiters.length === 0 && ready(clock.now())) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        waiters.push(resolve);
        schedule();
      });
    },
    backOff(retryAfterMs, random) {
      const now = clock.now();
      // 429s of requests sent before the back-off began are the same episode: no escalation.
      if (now >= pausedUntil) level++;
      const ceiling = Math.min(30_000, backOffBaseMs * 2 ** Math.min(level - 1, 10));
      const wait = retryAfterMs ?? Math.ceil(ceiling / 2 + (random() * ceiling) / 2);
      if (now + wait > pausedUntil) {
        pausedUntil = now + wait;
        if (timer !== undefined) timers.clearTimeout(timer);
        timer = undefined;
        schedule();
      }
    },
    succeeded() {
      level = 0;
    },
    abort() {
      aborted = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      timer = undefined;
      for (const resolve of waiters.splice(0)) resolve(false);
    },
  };
}

interface Reporter {
  add(outcome: TaskOutcome): void;
  /** Resolves while fewer than a few batches wait to be written. */
  room(): Promise<void>;
  /** Writes everything left, then the last progress. */
  close(): Promise<void>;
}

function makeReporter(options: {
  report: ReportSink;
  clock: Clock;
  timers: Timers;
  batchSize: number;
  intervalMs: number;
  writeAttempts: number;
  onProgress: MessagePipelineOptions['onProgress'];
  progressIntervalMs: number;
  log: Logger | undefined;
  onFatal: (error: Error) => void;
}): Reporter {
  const { report, clock, timers, batchSize, intervalMs } = options;
  const limit = batchSize * 4;
  let buffer: TaskOutcome[] = [];
  let writing: Promise<void> | undefined;
  let timer: TimerHandle | undefined;
  let failed: ReportWriteError | undefined;
  const drained = makeSignal();
  const progress = new Map<
    string,
    { delivered: number; failed: number; skipped: number; released: number }
  >();
  let lastProgressAt = clock.now();
  let closing = false;

  function kick(): void {
    if (writing || failed || closing) return;
    if (buffer.length >= batchSize) {
      writing = writeLoop(false);
    } else if (buffer.length > 0 && timer === undefined) {
      timer = timers.setTimeout(() => {
        timer = undefined;
        if (!writing && !failed) writing = writeLoop(true);
      }, intervalMs);
    }
  }

  async function writeLoop(all: boolean): Promise<void> {
    try {
      while (!failed && (buffer.length >= batchSize || (all && buffer.length > 0))) {
        // splice, not slice: a multicast settles 500 at once, and copying the rest per batch churns.
        const batch = buffer.splice(0, batchSize);
        await writeBatch(batch);
        drained.notify();
      }
      await maybeProgress(false);
    } finally {
      writing = undefined;
      drained.notify();
      if (!failed) kick();
    }
  }

  async function writeBatch(batch: TaskOutcome[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await report.write(batch);
        break;
      } catch (error) {
        if (attempt + 1 >= options.writeAttempts) {
          failed = new ReportWriteError(error, [...batch, ...buffer]);
          buffer = [];
          options.log?.error('writing message outcomes failed', {
            error,
            unwritten: failed.unwritten.length,
          });
          options.onFatal(failed);
          return;
        }
        options.log?.warn('writing message outcomes failed, retrying', { error });
        await new Promise<void>((r) =>
          timers.setTimeout(r, backoffDelay(attempt, { baseMs: 100, capMs: 5000 })),
        );
      }
    }
    for (const o of batch) {
      const counts = progress.get(o.jobId) ?? { delivered: 0, failed: 0, skipped: 0, released: 0 };
      counts[o.kind]++;
      progress.set(o.jobId, counts);
    }
  }

  async function maybeProgress(force: boolean): Promise<void> {
    if (!options.onProgress || progress.size === 0) return;
    const now = clock.now();
    if (!force && now - lastProgressAt < options.progressIntervalMs) return;
    lastProgressAt = now;
    const snapshot = [...progress].map(([jobId, c]) => ({ jobId, ...c }));
    progress.clear();
    try {
      await options.onProgress(snapshot);
    } catch (error) {
      // Progress is a courtesy to the job's counters; the outcomes themselves are written.
      options.log?.warn('progress update failed', { error });
    }
  }

  return {
    add(outcome) {
      if (failed) {
        (failed.unwritten as TaskOutcome[]).push(outcome);
        return;
      }
      buffer.push(outcome);
      kick();
    },
    async room() {
      while (buffer.length >= limit && !failed) await drained.wait();
    },
    async close() {
      closing = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      timer = undefined;
      while (!failed && (writing || buffer.length > 0)) {
        writing ??= writeLoop(true);
        await writing;
      }
      if (!failed) await maybeProgress(true);
    },
  };
}
