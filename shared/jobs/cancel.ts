/**
 * The cancel sweep: after a job moves to `cancelled`, every task of it that has not started
 * (`pending`, `retry-wait`) ends `cancelled` ("job cancelled"), so no task is left waiting for
 * ever. A task in flight is left to finish: the broker settles it, and since its job is no
 * longer running it is not tried again (`shared/broker/settle.ts`).
 *
 * Input: a {@link CancelSweepMessage} (shard, cursor). Output: what the run ended.
 * Main course:
 * 1. do nothing unless the job is `cancelled` (a stray message never ends a live job's tasks);
 * 2. page through the shard's waiting tasks from the cursor, ending each page's tasks with one
 *    conditional write per task and the count in the same transaction (a page done twice — a
 *    redelivered message, a crash — ends and counts nothing twice);
 * 3. shard by shard, until all {@link TASK_SHARDS} are done; when the run's time runs low, send
 *    a continuation with the next shard and cursor on the ingest queue and stop, so a job of a
 *    million tasks is swept over as many Lambda runs as it takes.
 */
import { TASK_SHARDS } from '#shared/resources.ts';
import type { CancelSweepMessage, Clock, IngestQueue, JobStore, TaskCanceller } from './ports.ts';

/** The reason a task of a cancelled job ends with (the broker's settle writes the same). */
export const JOB_CANCELLED_REASON = 'job cancelled';

export type CancelSweepOutcome =
  | { readonly kind: 'swept'; readonly jobId: string; readonly cancelled: number }
  | {
      readonly kind: 'continued';
      readonly jobId: string;
      readonly cancelled: number;
      readonly next: CancelSweepMessage;
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

export class MalformedCancelSweepError extends Error {
  override name = 'MalformedCancelSweepError';
}

/** Reads a queue message known to be a cancel sweep; throws {@link MalformedCancelSweepError}. */
export function parseCancelSweep(value: Record<string, unknown>): CancelSweepMessage {
  const { clientId, jobId, shard, cursor } = value;
  if (
    typeof clientId !== 'string' ||
    typeof jobId !== 'string' ||
    !Number.isInteger(shard) ||
    (shard as number) < 0 ||
    (shard as number) >= TASK_SHARDS ||
    (cursor !== undefined && typeof cursor !== 'string')
  ) {
    throw new MalformedCancelSweepError('cancel sweep without clientId, jobId or a valid shard');
  }
  return {
    kind: 'cancel-sweep',
    clientId,
    jobId,
    shard: shard as number,
    ...(cursor === undefined ? {} : { cursor }),
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
      let shard = message.shard;
      let cursor = message.cursor;
      let cancelled = 0;
      for (let pages = 0; shard < TASK_SHARDS; pages++) {
        if (pages >= maxPages || ctx.remainingMs() < marginMs) {
          const next: CancelSweepMessage = {
            kind: 'cancel-sweep',
            clientId,
            jobId,
            shard,
            ...(cursor === undefined ? {} : { cursor }),
          };
          await deps.queue.send(next);
          return { kind: 'continued', jobId, cancelled, next };
        }
        const page = await deps.tasks.waitingPage(jobId, shard, cursor);
        if (page.tasks.length > 0) {
          cancelled += await deps.tasks.cancelWaiting(
            clientId,
            jobId,
            page.tasks,
            JOB_CANCELLED_REASON,
            deps.clock.now(),
          );
        }
        if (page.next === undefined) {
          shard++;
          cursor = undefined;
        } else cursor = page.next;
      }
      return { kind: 'swept', jobId, cancelled };
    },
  };
}

export type CancelSweep = ReturnType<typeof makeCancelSweep>;
