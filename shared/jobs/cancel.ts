/**
 * The job sweeps: after a job moves to `cancelled` (the cancel sweep), or reaches its end
 * (`endAt`: the expire sweep, queued by the job manager), every task of it that has not started
 * ends, so none is left waiting for ever. One machinery, two endings ({@link SWEEPS}).
 *
 * Cancel: a task that has not started (`pending`, `retry-wait`) ends `cancelled` ("job
 * cancelled") at once. A call in flight is left to finish: the broker settles it, and since its
 * job is no longer running it is not tried again (`shared/broker/settle.ts`); if no end is
 * recorded by {@link CALL_END_GRACE_MS} after its longest possible duration, its broker died and
 * its status callbacks were lost (a live broker reconciles it with the provider well before), and
 * the sweep ends it `cancelled` with {@link CALL_NEVER_ENDED_REASON}. A message in flight
 * is left to the broker that claimed it while its claim's hold lasts (a live broker always writes
 * it back, `cancelled` once the job is); once the hold has passed, its broker is dead (nobody
 * reclaims a task of a job that is not running), and the sweep ends it `cancelled` itself.
 *
 * Expire: the same, ending tasks `expired` with {@link JOB_ENDED_REASON}, on a job that has
 * reached its end (`jobHasEnded`) whatever its status but `cancelled`. A call in flight is never
 * expired: the job is still running, so it finishes and settles as usual (a broker that takes the
 * client over adopts and reconciles it), and a retry due at or after the end is not written. A
 * message in flight is left to its broker while its hold lasts (a live one writes a release back
 * as `expired`), then expired (nobody may claim a task of an ended job).
 *
 * Input: a {@link JobSweepMessage} (kind, shard, cursor). Output: what the run ended.
 * Main course:
 * 1. do nothing unless the job is one the sweep's kind ends (a stray message never ends a live
 *    job's tasks);
 * 2. page through the shard's tasks that are waiting or in flight, from the cursor, ending each
 *    page's waiting tasks and its messages whose hold has passed with one conditional write per
 *    task and the count in the same transaction (a page done twice — a redelivered message, a
 *    crash — ends and counts nothing twice; a broker's write since the page was read wins); the
 *    latest hold end of those still held is remembered;
 * 3. shard by shard, until all {@link TASK_SHARDS} are done; when the run's time runs low, send
 *    a continuation with the next shard, cursor and latest hold end on the ingest queue and stop,
 *    so a job of a million tasks is swept over as many Lambda runs as it takes;
 * 4. after the last shard, if some message was still held, queue the sweep again from shard 0,
 *    delayed until that hold has passed ({@link recheckDelaySeconds}): what its broker has not
 *    written back by then ends in the re-check. A pass that finds none held ends the sweep.
 */

import type { Clock } from '#shared/pacing/clock.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { JobError } from './errors.ts';
import { DEFAULT_MAX_CALL_SECONDS, type Job, jobHasEnded } from './model.ts';
import type {
  CancelSweepMessage,
  ExpireSweepMessage,
  IngestQueue,
  JobStore,
  JobSweepMessage,
  SweepEnding,
  SweptTask,
  TaskCanceller,
} from './ports.ts';
import { archiveReportStart } from './report-archive.ts';
import {
  JOB_CANCELLED_REASON,
  JOB_ENDED_IN_FLIGHT_REASON,
  JOB_ENDED_REASON,
  JOB_FAILED_REASON,
} from './task-lifecycle.ts';

/** A call in flight with no end recorded this long after its longest duration is ended by the sweep. */
export const CALL_END_GRACE_MS = 5 * 60_000;

/** The reason of a cancelled job's call that never reported its end. */
export const CALL_NEVER_ENDED_REASON =
  'job cancelled; the call in flight never reported its end and its broker is gone (it may have rung)';

/** The longest delay SQS takes on a message (15 minutes, also the broker's default hold). */
export const MAX_RECHECK_DELAY_SECONDS = 900;

/** What a sweep run did; `ended` counts the tasks it ended (cancelled or expired). */
export type JobSweepOutcome =
  | { readonly kind: 'swept'; readonly jobId: string; readonly ended: number }
  | {
      readonly kind: 'continued';
      readonly jobId: string;
      readonly ended: number;
      readonly next: JobSweepMessage;
    }
  /** Every shard done, but messages are still held by their broker: a re-check is queued. */
  | {
      readonly kind: 'recheck';
      readonly jobId: string;
      readonly ended: number;
      readonly heldUntil: number;
      readonly delaySeconds: number;
    }
  | { readonly kind: 'ignored'; readonly jobId: string; readonly reason: string };

export interface JobSweepDeps {
  readonly jobs: Pick<JobStore, 'get'>;
  readonly tasks: TaskCanceller;
  readonly queue: IngestQueue;
  readonly clock: Clock;
  /** Time kept in hand when a run stops to continue (a page's writes must fit). Default 20 s. */
  readonly marginMs?: number;
  /** Most pages per run (tests force continuations with it). Default: no limit but time. */
  readonly maxPagesPerRun?: number;
}

/** The first message of a cancelled job's sweep. */
export function cancelSweepStart(clientId: string, jobId: string): CancelSweepMessage {
  return { kind: 'cancel-sweep', clientId, jobId, shard: 0 };
}

/** The first message of the sweep of a job past its end. */
export function expireSweepStart(clientId: string, jobId: string): ExpireSweepMessage {
  return { kind: 'expire-sweep', clientId, jobId, shard: 0 };
}

/** What a sweep of one kind ends, and when it acts. */
interface SweepRules {
  /** Why the sweep leaves the job's tasks alone at `now`; undefined when it ends them. */
  ignore(job: Job | undefined, now: number): string | undefined;
  /** A task that has not started. */
  readonly waiting: SweepEnding;
  /** A message in flight whose claim's hold has passed (its broker is gone). */
  readonly heldMessage: SweepEnding;
  /** A call in flight that never reported its end; absent: calls in flight are left to their broker. */
  readonly callNeverEnded?: SweepEnding;
}

/** The two sweeps: the cancel sweep and the expire sweep (see the module comment). */
const SWEEPS: Readonly<Record<JobSweepMessage['kind'], SweepRules>> = {
  'cancel-sweep': {
    // A failed job is swept as a cancelled one (`rulesFor`): the tasks its ingest wrote before the
    // failure would otherwise wait, in the index and without a TTL, for ever.
    ignore: (job) =>
      job?.status === 'cancelled' || job?.status === 'failed'
        ? undefined
        : `the job is ${job?.status ?? 'gone'}, not cancelled`,
    waiting: { state: 'cancelled', reason: JOB_CANCELLED_REASON },
    heldMessage: { state: 'cancelled', reason: JOB_CANCELLED_REASON },
    callNeverEnded: { state: 'cancelled', reason: CALL_NEVER_ENDED_REASON },
  },
  'expire-sweep': {
    ignore: (job, now) => {
      if (!job) return 'the job is gone';
      if (job.status === 'cancelled') return 'the job is cancelled: the cancel sweep ends its tasks';
      if (!jobHasEnded(job, now)) return 'the job has not reached its end';
      return undefined;
    },
    waiting: { state: 'expired', reason: JOB_ENDED_REASON },
    heldMessage: { state: 'expired', reason: JOB_ENDED_IN_FLIGHT_REASON },
  },
};

/** The rules of a sweep of `kind` for `job`: a failed job's tasks end with the failure's reason. */
function rulesFor(kind: JobSweepMessage['kind'], job: Job | undefined): SweepRules {
  const rules = SWEEPS[kind];
  if (kind !== 'cancel-sweep' || job?.status !== 'failed') return rules;
  const ending: SweepEnding = { state: 'cancelled', reason: JOB_FAILED_REASON };
  return { ...rules, waiting: ending, heldMessage: ending, callNeverEnded: ending };
}

/** The first message of a sweep of `kind`. */
function sweepStart(kind: JobSweepMessage['kind'], clientId: string, jobId: string): JobSweepMessage {
  return kind === 'cancel-sweep' ? cancelSweepStart(clientId, jobId) : expireSweepStart(clientId, jobId);
}

/**
 * Seconds to wait before re-checking messages held until `heldUntil`: until the hold has passed,
 * plus a second (SQS counts whole seconds), at most {@link MAX_RECHECK_DELAY_SECONDS} (a longer
 * hold is re-checked again then).
 */
export function recheckDelaySeconds(heldUntil: number, now: number): number {
  const wait = Math.ceil(Math.max(0, heldUntil - now) / 1000) + 1;
  return Math.min(MAX_RECHECK_DELAY_SECONDS, wait);
}

/**
 * When the sweep may end a task in flight, rather than leave it to its broker: a message once its
 * claim's hold has passed; a call once its longest duration and {@link CALL_END_GRACE_MS} have.
 */
function inFlightUntil(task: SweptTask, maxCallSeconds: number): number {
  if (task.channel === 'message') return task.readyAt;
  return (task.startedAt ?? task.readyAt) + maxCallSeconds * 1000 + CALL_END_GRACE_MS;
}

export class MalformedCancelSweepError extends JobError {}

/** True when a queue message's `kind` is a sweep's. */
export function isJobSweepKind(kind: unknown): kind is JobSweepMessage['kind'] {
  return kind === 'cancel-sweep' || kind === 'expire-sweep';
}

/** Reads a queue message known to be a sweep (cancel, expire); throws {@link MalformedCancelSweepError}. */
export function parseCancelSweep(value: Record<string, unknown>): JobSweepMessage {
  const { kind, clientId, jobId, shard, cursor, heldUntil } = value;
  if (
    !isJobSweepKind(kind) ||
    typeof clientId !== 'string' ||
    typeof jobId !== 'string' ||
    !Number.isInteger(shard) ||
    (shard as number) < 0 ||
    (shard as number) >= TASK_SHARDS ||
    (cursor !== undefined && typeof cursor !== 'string') ||
    (heldUntil !== undefined && (!Number.isSafeInteger(heldUntil) || (heldUntil as number) < 0))
  ) {
    throw new MalformedCancelSweepError(
      'sweep without its kind, clientId, jobId, a valid shard, cursor or heldUntil',
    );
  }
  return {
    kind,
    clientId,
    jobId,
    shard: shard as number,
    ...(cursor === undefined ? {} : { cursor }),
    ...(heldUntil === undefined ? {} : { heldUntil: heldUntil as number }),
  };
}

/** The tasks of a page a sweep ends, by how it ends them. */
interface PageEnds {
  readonly waiting: SweptTask[];
  readonly heldMessages: SweptTask[];
  readonly callsNeverEnded: SweptTask[];
}

/** The sweeps around their ports; {@link handle} runs one queue message. */
export class JobSweep {
  readonly #deps: JobSweepDeps;
  readonly #marginMs: number;
  readonly #maxPages: number;

  constructor(deps: JobSweepDeps) {
    this.#deps = deps;
    this.#marginMs = deps.marginMs ?? 20_000;
    this.#maxPages = deps.maxPagesPerRun ?? Number.POSITIVE_INFINITY;
  }

  /** Runs one sweep message; throws only when the message should be retried. */
  async handle(message: JobSweepMessage, ctx: { remainingMs(): number }): Promise<JobSweepOutcome> {
    const { kind, clientId, jobId } = message;
    const job = await this.#deps.jobs.get(clientId, jobId);
    const rules = rulesFor(kind, job);
    const ignored = rules.ignore(job, this.#deps.clock.now());
    if (ignored !== undefined || !job)
      return { kind: 'ignored', jobId, reason: ignored ?? 'the job is gone' };
    const maxCallSeconds = job.maxCallDurationSeconds ?? DEFAULT_MAX_CALL_SECONDS;
    let { shard, cursor, heldUntil } = message;
    let ended = 0;
    for (let pages = 0; shard < TASK_SHARDS; pages++) {
      if (pages >= this.#maxPages || ctx.remainingMs() < this.#marginMs) {
        const next: JobSweepMessage = {
          kind,
          clientId,
          jobId,
          shard,
          ...(cursor === undefined ? {} : { cursor }),
          ...(heldUntil === undefined ? {} : { heldUntil }),
        };
        await this.#deps.queue.send(next);
        return { kind: 'continued', jobId, ended, next };
      }
      const page = await this.#deps.tasks.sweepPage(jobId, shard, cursor, clientId);
      const now = this.#deps.clock.now();
      const ends: PageEnds = { waiting: [], heldMessages: [], callsNeverEnded: [] };
      for (const t of page.tasks) {
        if (t.state !== 'in-flight') {
          ends.waiting.push(t);
          continue;
        }
        // The expire sweep leaves a call in flight to its broker: it settles, retrying nothing
        // at or after the job's end.
        if (t.channel === 'call' && !rules.callNeverEnded) continue;
        const until = inFlightUntil(t, maxCallSeconds);
        if (until > now) heldUntil = Math.max(heldUntil ?? 0, until);
        else if (t.channel === 'message') ends.heldMessages.push(t);
        else ends.callsNeverEnded.push(t);
      }
      ended += await this.#end(rules, clientId, jobId, ends, now);
      if (page.next === undefined) {
        shard++;
        cursor = undefined;
      } else cursor = page.next;
    }
    if (heldUntil === undefined) {
      // Nothing is held: a page a stopped broker did not close counts what it ended now.
      await this.#deps.tasks.settleClaimPages?.(clientId, jobId);
      // A cancelled (or failed) job has ended for good: its report is archived before its tasks expire.
      if (kind === 'cancel-sweep') await this.#deps.queue.send(archiveReportStart(clientId, jobId));
      return { kind: 'swept', jobId, ended };
    }
    // Some broker held messages or calls: whatever it has not written back once the hold (or the
    // call's longest duration) passed, its broker is gone. The re-check is a new pass (from shard 0) that forgets this pass's holds.
    const delaySeconds = recheckDelaySeconds(heldUntil, this.#deps.clock.now());
    await this.#deps.queue.send(sweepStart(kind, clientId, jobId), { delaySeconds });
    return { kind: 'recheck', jobId, ended, heldUntil, delaySeconds };
  }

  /** Ends a page's tasks, each group with its reason; returns how many ended. */
  async #end(
    rules: SweepRules,
    clientId: string,
    jobId: string,
    ends: PageEnds,
    now: number,
  ): Promise<number> {
    const groups: [readonly SweptTask[], SweepEnding | undefined][] = [
      [ends.waiting, rules.waiting],
      [ends.heldMessages, rules.heldMessage],
      [ends.callsNeverEnded, rules.callNeverEnded],
    ];
    let ended = 0;
    for (const [tasks, ending] of groups) {
      if (tasks.length > 0 && ending)
        ended += await this.#deps.tasks.endTasks(clientId, jobId, tasks, ending, now);
    }
    return ended;
  }
}

/** Builds the sweeps (cancel and expire); `handle` runs one message. */
