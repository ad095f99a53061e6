/**
 * A fallback after the send: a task of a fallback job whose message its channel accepted, and whose
 * channel later said it never reached the person (an email's permanent bounce), is opened again on
 * the next channel it has an identifier for — the same task, the same job, the same contact-limit
 * slot (its next attempt is no first contact, so it takes no second slot).
 *
 * The event comes after the task ended (`completed`, or `failed` in doubt: the bounce proves the
 * email left and did not arrive), so the move un-ends it: back in the outstanding index, and its job's
 * count of that end taken back, in one transaction that also keeps the job manager from completing
 * the job under it (`docs/fallback.md`, "After the send"). Input: the event's attempt, read as the
 * channel's events function reads it. Output: what happened, or a {@link ReopenLater} to be retried
 * (the task has not ended yet, or its end is not counted yet).
 *
 * Pure: no AWS SDK. Adapter: `shared/adapters/dynamo-task-reopen.ts`.
 */
import type { Clock } from '#shared/pacing/clock.ts';
import { queueSpec } from '#shared/resources.ts';
import { ownEntrySource, type SuppressionSource } from '#shared/suppressions/model.ts';
import type { DeliveryAttempt } from './delivery-state.ts';
import { JobError } from './errors.ts';
import { type NextChannel, nextChannel, triedOnLeaving } from './fallback.ts';
import {
  channelsOf,
  type Job,
  jobHasEnded,
  type MessageChannel,
  type Task,
  type TriedChannel,
  taskChannelOf,
} from './model.ts';
import { isFinal } from './task-lifecycle.ts';

/**
 * The task ends a move after the send takes back: the send was accepted, or may have been; or the
 * task was ended for the very entry the event put its address on the list with (a send in doubt,
 * claimed again after the bounce, ends `cancelled` for it).
 */
export type ReopenedEnd = 'completed' | 'failed' | 'cancelled';

/** An attempt its channel's event proved did not reach the person, and why. */
export interface UnreachedAttempt extends DeliveryAttempt {
  readonly channel: MessageChannel;
  /** What happened to it, in a word (`bounced`): the task's last result until its next attempt. */
  readonly result: string;
  /** Why, in the channel's words (`Permanent/General: smtp; 550 5.1.1 …`). */
  readonly reason?: string;
  /** The source the event put the address on the suppression list with (`bounce`). */
  readonly entrySource: SuppressionSource;
}

/** The move a reopen writes: the task as read (its end and attempts) and where it goes. */
export interface Reopening {
  readonly clientId: string;
  readonly jobId: string;
  readonly taskId: string;
  /** The identifier it leaves: the write holds only while the task still has it. */
  readonly from: string;
  readonly endedAs: ReopenedEnd;
  /**
   * Its attempts as read, kept: the next channel's claim is then no first contact and takes no
   * second contact-limit slot (a message task's attempt stays 1 across its channels, as after a move
   * at the send).
   */
  readonly attempts: number;
  /** The unreached attempt's result, the task's last result while it waits. */
  readonly lastResult: string;
  readonly next: NextChannel;
  readonly tried: readonly TriedChannel[];
  /** When it may be claimed again (the event's handling). */
  readonly readyAt: number;
}

/**
 * - `reopen`: move the task on;
 * - `keep`: nothing to move (why: not a fallback job, moved on already, no next channel, the job over …);
 * - `later`: the task has not ended on that attempt yet; the event is to be handled again.
 */
export type ReopenDecision =
  | { readonly reopen: Reopening }
  | { readonly keep: string }
  | { readonly later: string };

/**
 * How long a job whose tasks may still be opened again stays running once nothing of it is open: a
 * hard bounce that came before its task's end was written or counted is given back by the
 * `ses-events` queue and handled again, for up to its visibility timeout × its receives; the job
 * manager does not complete the job under it meanwhile. A bounce later than that (an asynchronous
 * one, hours after) finds the job completed and moves nothing.
 */
export const BOUNCE_GRACE_MS = (() => {
  const queue = queueSpec('ses-events');
  return queue.visibilityTimeoutSeconds * queue.maxReceiveCount * 1000;
})();

/** Whether a task of `job` may be opened again after it ended: it falls back from email to a channel after it. */
export function reopensAfterSend(job: Pick<Job, 'channel' | 'fallback'>): boolean {
  if (job.fallback === undefined) return false;
  const channels = channelsOf(job);
  const email = channels.indexOf('email');
  return email >= 0 && email < channels.length - 1;
}

/** Longest reason kept in a task's `tried` (the channel's own reason can run to 500 characters). */
const MAX_TRIED_REASON = 200;

/** The `tried` reason of an unreached attempt: `bounced: Permanent/General: …`. */
export function unreachedReason(unreached: Pick<UnreachedAttempt, 'result' | 'reason'>): string {
  const { result, reason } = unreached;
  return reason ? `${result}: ${reason}`.slice(0, MAX_TRIED_REASON) : result;
}

/** What an unreached attempt does to the task it was of, as read with its job (`now`: the event's handling). */
export function reopening(
  job: Job | undefined,
  task: Task | undefined,
  unreached: UnreachedAttempt,
  now: number,
): ReopenDecision {
  if (job === undefined || task === undefined || task.clientId !== unreached.clientId)
    return { keep: 'no such task' };
  if (job.fallback === undefined) return { keep: 'the job does not fall back' };
  if (taskChannelOf(task, job) !== unreached.channel) return { keep: 'the task has moved on already' };
  if (task.attempts > unreached.attempt) return { keep: `the task is on attempt ${task.attempts}` };
  const endedForTheEntry =
    task.state === 'cancelled' && ownEntrySource(task.reason) === unreached.entrySource;
  if ((task.state === 'cancelled' && !endedForTheEntry) || task.state === 'expired')
    return { keep: `the task ended ${task.state}` };
  // Not ended yet; or claimed on a claim page, where it shows the attempt before until its outcome.
  if (!isFinal(task.state)) return { later: 'the task has not ended yet' };
  if (task.attempts !== unreached.attempt) return { keep: `the task ended on attempt ${task.attempts}` };
  const next = nextChannel(job, task);
  if (next === undefined) return { keep: 'no next channel' };
  if (job.status !== 'running' && job.status !== 'paused') return { keep: `the job is ${job.status}` };
  if (jobHasEnded(job, now)) return { keep: 'the job has reached its end' };
  return {
    reopen: {
      clientId: task.clientId,
      jobId: task.jobId,
      taskId: task.taskId,
      from: task.recipient,
      endedAs: task.state as ReopenedEnd,
      attempts: task.attempts,
      lastResult: unreached.result,
      next,
      tried: triedOnLeaving(next, unreachedReason(unreached)),
      readyAt: now,
    },
  };
}

/**
 * - `reopened`: the task waits on its next channel;
 * - `changed`: the task or its job changed since it was read (another copy of the event moved it,
 *   the job was completed or cancelled): nothing written;
 * - `uncounted`: its end is on a claim page not closed yet (not counted in the job yet): try later.
 */
export type ReopenWrite = 'reopened' | 'changed' | 'uncounted';

export interface ReopenStore {
  /** The attempt's task, read consistently; undefined when there is none. */
  task(attempt: DeliveryAttempt): Promise<Task | undefined>;
  /** A job, read consistently; undefined when there is none. */
  job(clientId: string, jobId: string): Promise<Job | undefined>;
  /**
   * Writes the move in one transaction, while the task is still as read (its end, attempts and
   * identifier), its job running or paused and its end counted: the task waits on its next channel,
   * the job's count of its end goes down by one and its `reopened` up by one.
   */
  reopen(move: Reopening): Promise<ReopenWrite>;
}

/** The event is to be handled again later: the task's end is not written, or not counted, yet. */
export class ReopenLater extends JobError {}

export type ReopenResult =
  | { readonly outcome: 'reopened'; readonly to: MessageChannel }
  | { readonly outcome: 'kept'; readonly why: string };

/**
 * The use case: an unreached attempt in, the move out. Throws {@link ReopenLater} when the task's end
 * is not written or counted yet (the event's queue gives it back later) and whatever the store
 * throws; every step may run again (a written move is `changed` the second time).
 */
export function makeReopenUnreached(store: ReopenStore, clock: Clock) {
  return async (unreached: UnreachedAttempt): Promise<ReopenResult> => {
    const task = await store.task(unreached);
    // Only a fallback job's task holds its identifiers on other channels: no other needs its job read.
    if (task?.reach === undefined) return { outcome: 'kept', why: 'not a task of a fallback job' };
    const job = await store.job(task.clientId, task.jobId);
    const decision = reopening(job, task, unreached, clock.now());
    if ('keep' in decision) return { outcome: 'kept', why: decision.keep };
    if ('later' in decision) throw new ReopenLater(decision.later);
    const written = await store.reopen(decision.reopen);
    if (written === 'uncounted') throw new ReopenLater('the task ended on a claim page not closed yet');
    if (written === 'changed') return { outcome: 'kept', why: 'the task or its job changed meanwhile' };
    return { outcome: 'reopened', to: decision.reopen.next.channel };
  };
}
