/**
 * The cancel sweep: after a job moves to `cancelled`, every task of it ends, none is left waiting
 * for ever. A task that has not started (`pending`, `retry-wait`) ends `cancelled` ("job
 * cancelled") at once. A call in flight is left to finish: the broker settles it, and since its
 * job is no longer running it is not tried again (`shared/broker/settle.ts`); if no end is
 * recorded by {@link CALL_END_GRACE_MS} after its longest possible duration, its broker died and
 * its status callbacks were lost (a live broker reconciles it with the provider well before), and
 * the sweep ends it `cancelled` with {@link CALL_NEVER_ENDED_REASON}. A message in flight
 * is left to the broker that claimed it while its claim's hold lasts (a live broker always writes
 * it back, `cancelled` once the job is); once the hold has passed, its broker is dead (nobody
 * reclaims a task of a job that is not running), and the sweep ends it `cancelled` itself.
 *
 * Input: a {@link CancelSweepMessage} (shard, cursor). Output: what the run ended.
 * Main course:
 * 1. do nothing unless the job is `cancelled` (a stray message never ends a live job's tasks);
 * 2. page through the shard's tasks that are waiting or are messages in flight, from the cursor,
 *    ending each page's waiting tasks and its messages whose hold has passed with one conditional
 *    write per task and the count in the same transaction (a page done twice — a redelivered
 *    message, a crash — ends and counts nothing twice; a broker's write since the page was read
 *    wins); the latest hold end of those still held is remembered;
 * 3. shard by shard, until all {@link TASK_SHARDS} are done; when the run's time runs low, send
 *    a continuation with the next shard, cursor and latest hold end on the ingest queue and stop,
 *    so a job of a million tasks is swept over as many Lambda runs as it takes;
 * 4. after the last shard, if some message was still held, queue the sweep again from shard 0,
 *    delayed until that hold has passed ({@link recheckDelaySeconds}): what its broker has not
 *    written back by then ends in the re-check. A pass that finds none held ends the sweep.
 */

import type { Clock } from '#shared/pacing/clock.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { DEFAULT_MAX_CALL_SECONDS } from './model.ts';
import type { CancelSweepMessage, IngestQueue, JobStore, SweptTask, TaskCanceller } from './ports.ts';
import { JOB_CANCELLED_REASON } from './task-lifecycle.ts';

/** A call in flight with no end recorded this long after its longest duration is ended by the sweep. */
export const CALL_END_GRACE_MS = 5 * 60_000;

/** The reason of a cancelled job's call that never reported its end. */
export const CALL_NEVER_ENDED_REASON =
  'job cancelled; the call in flight never reported its end and its broker is gone (it may have rung)';

/** The longest delay SQS takes on a message (15 minutes, also the broker's default hold). */
export const MAX_RECHECK_DELAY_SECONDS = 900;

export type CancelSweepOutcome =
  | { readonly kind: 'swept'; readonly jobId: string; readonly cancelled: number }
  | {
      readonly kind: 'continued';
      readonly jobId: string;
      readonly cancelled: number;
      readonly next: CancelSweepMessage;
    }
  /** Every shard done, but messages are still held by their broker: a re-check is queued. */
  | {
      readonly kind: 'recheck';
      readonly jobId: string;
      readonly cancelled: number;
      readonly heldUntil: number;
      readonly delaySeconds: number;
    }
  | { readonly kind: 'ignored'; readonly jobId: string; readonly reason: string };

export interface CancelSweepDeps {
  readonly jobs: Pick<JobStore, 'get'>;
  readonly tasks: TaskCanceller;
  readonly queue: IngestQueue;
  readonly clock: Clock;
  /** Time kept in hand when a run stops to continue (a page's writes must fit). Default 20 s. */
  readonly marginMs?: number;
  /** Most pages per run (tests force continuations with it). Default: no limit but time. */
  readonly maxPagesPerRun?: number;
}

/** The first message of a job's sweep. */
export function cancelSweepStart(clientId: string, jobId: string): CancelSweepMessage {
  return { kind: 'cancel-sweep', clientId, jobId, shard: 0 };
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

export class MalformedCancelSweepError extends Error {
  override name = 'MalformedCancelSweepError';
}

/** Reads a queue message known to be a cancel sweep; throws {@link MalformedCancelSweepError}. */
export function parseCancelSweep(value: Record<string, unknown>): CancelSweepMessage {
  const { clientId, jobId, shard, cursor, heldUntil } = value;
  if (
    typeof clientId !== 'string' ||
    typeof jobId !== 'string' ||
    !Number.isInteger(shard) ||
    (shard as number) < 0 ||
    (shard as number) >= TASK_SHARDS ||
    (cursor !== undefined && typeof cursor !== 'string') ||
    (heldUntil !== undefined && (!Number.isSafeInteger(heldUntil) || (heldUntil as number) < 0))
  ) {
    throw new MalformedCancelSweepError(
      'cancel sweep without clientId, jobId, a valid shard, cursor or heldUntil',
    );
  }
  return {
    kind: 'cancel-sweep',
    clientId,
    jobId,
    shard: shard as number,
    ...(cursor === undefined ? {} : { cursor }),
    ...(heldUntil === undefined ? {} : { heldUntil: heldUntil as number }),
  };
}

/** Builds the cancel sweep; `handle` runs one message. */
export function makeCancelSweep(deps: CancelSweepDeps) {
  const marginMs = deps.marginMs ?? 20_000;
  const maxPages = deps.maxPagesPerRun ?? Number.POSITIVE_INFINITY;

  return {
    /** Runs one sweep message; throws only when the message should be retried. */
    async handle(message: CancelSweepMessage, ctx: { remainingMs(): number }): Promise<CancelSweepOutcome> {
      const { clientId, jobId } = message;
      const job = await deps.jobs.get(clientId, jobId);
      if (job?.status !== 'cancelled') {
        return { kind: 'ignored', jobId, reason: `the job is ${job?.status ?? 'gone'}, not cancelled` };
      }
      const maxCallSeconds = job.maxCallDurationSeconds ?? DEFAULT_MAX_CALL_SECONDS;
      let shard = message.shard;
      let cursor = message.cursor;
      let heldUntil = message.heldUntil;
      let cancelled = 0;
      for (let pages = 0; shard < TASK_SHARDS; pages++) {
        if (pages >= maxPages || ctx.remainingMs() < marginMs) {
          const next: CancelSweepMessage = {
            kind: 'cancel-sweep',
            clientId,
            jobId,
            shard,
            ...(cursor === undefined ? {} : { cursor }),
            ...(heldUntil === undefined ? {} : { heldUntil }),
          };
          await deps.queue.send(next);
          return { kind: 'continued', jobId, cancelled, next };
        }
        const page = await deps.tasks.sweepPage(jobId, shard, cursor);
        const now = deps.clock.now();
        const ending: SweptTask[] = [];
        const callsNeverEnded: SweptTask[] = [];
        for (const t of page.tasks) {
          if (t.state !== 'in-flight') ending.push(t);
          else {
            const until = inFlightUntil(t, maxCallSeconds);
            if (until > now) heldUntil = Math.max(heldUntil ?? 0, until);
            else if (t.channel === 'message') ending.push(t);
            else callsNeverEnded.push(t);
          }
        }
        if (ending.length > 0) {
          cancelled += await deps.tasks.cancelTasks(clientId, jobId, ending, JOB_CANCELLED_REASON, now);
        }
        if (callsNeverEnded.length > 0) {
          cancelled += await deps.tasks.cancelTasks(
            clientId,
            jobId,
            callsNeverEnded,
            CALL_NEVER_ENDED_REASON,
            now,
          );
        }
        if (page.next === undefined) {
          shard++;
          cursor = undefined;
        } else cursor = page.next;
      }
      if (heldUntil === undefined) return { kind: 'swept', jobId, cancelled };
      // Some broker held messages or calls: whatever it has not written back once the hold (or the
      // call's longest duration) passed, its broker is gone. The re-check is a new pass (from shard 0) that forgets this pass's holds.
      const delaySeconds = recheckDelaySeconds(heldUntil, deps.clock.now());
      await deps.queue.send(cancelSweepStart(clientId, jobId), { delaySeconds });
      return { kind: 'recheck', jobId, cancelled, heldUntil, delaySeconds };
    },
  };
}

export type CancelSweep = ReturnType<typeof makeCancelSweep>;
