/** The settings of a message pipeline run (`pipeline.ts`): its ports, limits, timings and their defaults. */
import type { Logger } from '#shared/log.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import type { MessageCheck } from './message-check.ts';
import type {
  BatchLedger,
  ClaimedTask,
  JobProgress,
  ReportSink,
  SendObservation,
  TaskSource,
} from './ports.ts';
import type { PipelineRate } from './send-pacer.ts';

/** Where the pipeline reads, reports, and how fast and how many at once it sends. */
export interface PipelineSettings<T extends object> {
  readonly source: TaskSource<T>;
  readonly report: ReportSink;
  /**
   * LINE's lanes when sending through `send` (push `perSecond`, multicast `multicastPerSecond`),
   * and the burst of every lane. With a `transport`, its limits give the lanes' rates.
   */
  readonly rate?: PipelineRate;
  /** Senders, i.e. most requests in flight. Default 128. */
  readonly concurrency?: number;
  /** Most claimed tasks not yet taken by a sender. Default 2,000 (at least 1). */
  readonly queueCapacity?: number;
  /**
   * Most tasks in requests at once (a multicast holds up to 500), which bounds memory with
   * multicasts as `queueCapacity` does before the senders. Default 10,000; at least `concurrency`.
   */
  readonly maxTasksInFlight?: number;
  /** Largest page asked of the source. Default: the source's own `pageSize`, else 500. */
  readonly pageSize?: number;
  /** Group tasks whose content is the same for all into one request (a multicast, a bulk send). Default true. */
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
  /** Pause / stop: see `pipeline.ts`'s module comment. */
  readonly signal?: AbortSignal;
  readonly log?: Logger;
  /** Write outcomes once this many wait. Default 100. */
  readonly reportBatchSize?: number;
  /** …or once the oldest has waited this long. Default 250 ms. */
  readonly reportIntervalMs?: number;
  /** Tries per outcome batch before the pipeline gives up with a `ReportWriteError`. Default 8. */
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
  /**
   * LINE's check of each job's message before its first send (`message-check.ts`): a job LINE
   * refuses has its tasks failed unsent with the reason. None: messages are sent unchecked.
   */
  readonly check?: MessageCheck;
  /**
   * A channel without idempotency keys (SES): how long an attempt that may have been sent waits for
   * the channel's event before it ends `in-doubt`. Default 10 minutes.
   */
  readonly inDoubtWaitMs?: number;
  /** For retry jitter. Default Math.random. */
  readonly random?: () => number;
  /**
   * What LINE's monthly-limit 429 does: `stop` the pipeline, releasing its tasks (default), or
   * `fail-tasks`: the refused unit's tasks end `failed` with the reason and sending goes on.
   */
  readonly monthlyLimit?: 'stop' | 'fail-tasks';
  /**
   * After a stop, how long a unit whose answer was lost keeps resending its request under its key
   * (LINE's 409 then says it was delivered) before it is released as maybe sent. Default 10 s: well
   * inside the 120 s Fargate gives a task after SIGTERM.
   */
  readonly finishWithinMs?: number;
}
