/**
 * The re-time sweep (issue 14 #4): after a client's calling hours, zone, restricted periods or
 * holidays change, the waiting tasks of its jobs read in their recipients' zones are moved *earlier*
 * to their recipient's opening under the new settings, when that comes before the `readyAt` they
 * were stamped or deferred with under the old ones. Without it a widened window would not reach
 * them: a task deferred to 09:00 stays invisible to the brokers' "ready by now" index read until
 * 09:00 even once the hours open at 07:00. A narrowing needs no sweep: the broker checks each
 * start against the current hours and defers a closed task (`shared/adapters/dynamo-task-deferral.ts`).
 *
 * Never earlier than the task's `notBefore` (a retry's delay end, a contact limit's window end; the
 * job's start for a first attempt), never earlier than now. Each move is conditional on the task
 * still waiting with the `readyAt` and attempts read, so a page done twice, or a task started,
 * settled or deferred meanwhile, changes nothing more.
 *
 * Input: a {@link RetimeSweepMessage} (client, job, shard, cursor). Output: how many it moved.
 * Main course: 1. leave alone a job that is not a call job read in its recipients' zones, or that
 * has ended; 2. page through each shard's waiting tasks, moving those whose opening is now
 * earlier; 3. when the run's time runs low, queue a continuation and stop.
 */
import type { Clock } from '#shared/pacing/clock.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { JobError } from './errors.ts';
import { type ClientSettings, type Job, jobHasEnded, type Task } from './model.ts';
import type { ClientStore, IngestQueue, JobStore } from './ports.ts';
import { earliestStart, taskZone } from './restrictions.ts';

/** A step of a job's re-time sweep: `shard` from `cursor` on, then the shards after it. */
export interface RetimeSweepMessage {
  readonly kind: 'retime-sweep';
  readonly clientId: string;
  readonly jobId: string;
  readonly shard: number;
  readonly cursor?: string;
}

/** A waiting task as the sweep reads it. */
export type RetimedTask = Pick<
  Task,
  'clientId' | 'jobId' | 'taskId' | 'state' | 'readyAt' | 'attempts' | 'timeZone' | 'notBefore'
>;

/** The tasks table as the re-time sweep sees it (adapter: `shared/adapters/dynamo-retime.ts`). */
export interface TaskRetimer {
  /** One page of `shard`'s waiting tasks (`pending`, `retry-wait`) from `cursor` on. */
  retimePage(
    clientId: string,
    jobId: string,
    shard: number,
    cursor: string | undefined,
  ): Promise<{ readonly tasks: readonly RetimedTask[]; readonly next?: string }>;
  /** Moves a task earlier to `readyAt` if it is still waiting as read; true when moved. */
  advance(task: RetimedTask, readyAt: number, now: number): Promise<boolean>;
}

/** The settings whose change may move a recipient's opening (what a re-time depends on). */
export function contactTimeSettings(client: ClientSettings | undefined): string {
  if (!client) return '';
  const { timeZone, callingHours, restrictedPeriods, holidays } = client;
  return JSON.stringify({ timeZone, callingHours, restrictedPeriods, holidays });
}

/** True when a job's waiting tasks carry recipient openings a settings change can make stale. */
export function jobNeedsRetime(job: Job, now: number): boolean {
  return (
    job.channel === 'call' &&
    job.timeZoneBy === 'recipient' &&
    ['scheduled', 'running', 'paused'].includes(job.status) &&
    !jobHasEnded(job, now)
  );
}

/**
 * Where `task` belongs under `client`'s current settings, when that is earlier than its `readyAt`:
 * its zone's first opening outside restricted periods from the later of now and its `notBefore`
 * (the job's start when absent). Undefined when it stays where it is.
 */
export function retimedReadyAt(
  client: ClientSettings,
  job: Job,
  task: Pick<Task, 'readyAt' | 'timeZone' | 'notBefore'>,
  now: number,
): number | undefined {
  const from = Math.max(now, task.notBefore ?? job.startAt);
  if (from >= task.readyAt) return undefined;
  const opens = earliestStart(client, job, from, taskZone(client, job, task));
  return opens !== undefined && opens < task.readyAt ? opens : undefined;
}

/** The first message of a job's re-time sweep. */
export function retimeSweepStart(clientId: string, jobId: string): RetimeSweepMessage {
  return { kind: 'retime-sweep', clientId, jobId, shard: 0 };
}

export class MalformedRetimeSweepError extends JobError {}

/** Reads a queue message whose `kind` is `retime-sweep`; throws {@link MalformedRetimeSweepError}. */
export function parseRetimeSweep(value: Record<string, unknown>): RetimeSweepMessage {
  const { kind, clientId, jobId, shard, cursor } = value;
  if (
    kind !== 'retime-sweep' ||
    typeof clientId !== 'string' ||
    typeof jobId !== 'string' ||
    !Number.isInteger(shard) ||
    (shard as number) < 0 ||
    (shard as number) >= TASK_SHARDS ||
    (cursor !== undefined && typeof cursor !== 'string')
  ) {
    throw new MalformedRetimeSweepError('re-time sweep without its clientId, jobId, a valid shard or cursor');
  }
  return { kind, clientId, jobId, shard: shard as number, ...(cursor === undefined ? {} : { cursor }) };
}

export type RetimeSweepOutcome =
  | { readonly kind: 'retimed'; readonly jobId: string; readonly moved: number }
  | {
      readonly kind: 'continued';
      readonly jobId: string;
      readonly moved: number;
      readonly next: RetimeSweepMessage;
    }
  | { readonly kind: 'ignored'; readonly jobId: string; readonly reason: string };

export interface RetimeSweepDeps {
  readonly jobs: Pick<JobStore, 'get'>;
  readonly clients: Pick<ClientStore, 'get'>;
  readonly tasks: TaskRetimer;
  readonly queue: IngestQueue;
  readonly clock: Clock;
  /** Time kept in hand when a run stops to continue. Default 20 s. */
  readonly marginMs?: number;
  /** Most pages per run (tests force continuations with it). Default: no limit but time. */
  readonly maxPagesPerRun?: number;
}

/** The re-time sweep around its ports; {@link handle} runs one queue message. */
export class RetimeSweep {
  readonly #deps: RetimeSweepDeps;

  constructor(deps: RetimeSweepDeps) {
    this.#deps = deps;
  }

  /** Runs one message; throws only when it should be retried. */
  async handle(message: RetimeSweepMessage, ctx: { remainingMs(): number }): Promise<RetimeSweepOutcome> {
    const { clientId, jobId } = message;
    const { jobs, clients, tasks, queue, clock } = this.#deps;
    const [job, client] = await Promise.all([jobs.get(clientId, jobId), clients.get(clientId)]);
    if (!job || !client) return { kind: 'ignored', jobId, reason: 'the job or its client is gone' };
    if (!jobNeedsRetime(job, clock.now()))
      return { kind: 'ignored', jobId, reason: 'not a call job read in its recipients’ zones, still open' };
    const margin = this.#deps.marginMs ?? 20_000;
    const maxPages = this.#deps.maxPagesPerRun ?? Number.POSITIVE_INFINITY;
    let { shard, cursor } = message;
    let moved = 0;
    for (let pages = 0; shard < TASK_SHARDS; pages++) {
      if (pages >= maxPages || ctx.remainingMs() < margin) {
        const next: RetimeSweepMessage = {
          kind: 'retime-sweep',
          clientId,
          jobId,
          shard,
          ...(cursor === undefined ? {} : { cursor }),
        };
        await queue.send(next);
        return { kind: 'continued', jobId, moved, next };
      }
      const page = await tasks.retimePage(clientId, jobId, shard, cursor);
      const now = clock.now();
      for (const task of page.tasks) {
        const readyAt = retimedReadyAt(client, job, task, now);
        if (readyAt !== undefined && (await tasks.advance(task, readyAt, now))) moved++;
      }
      if (page.next === undefined) {
        shard++;
        cursor = undefined;
      } else cursor = page.next;
    }
    return { kind: 'retimed', jobId, moved };
  }
}
