/**
 * A task's life, in one place: its states, the moves between them, and the rules that choose a
 * move. Every adapter write that moves a task's state builds its condition from {@link TASK_MOVES}
 * (`shared/adapters/task-state-conditions.ts`), so "which state may become which" is said once.
 * Writes that move no state (ingest deleting its own pending chunks, a chunk spilled into its
 * member tasks) check the item as they read it instead.
 *
 * ```text
 *   pending ──start/claim──▶ in-flight ──delivered/answered──▶ completed
 *      │                    │  ▲   │  └─failed─────────────────▶ failed
 *      │                    │  └───┘ reclaim (message: an older lease holder, or its hold ended)
 *      │                    └──busy, no-answer, released──▶ retry-wait ──start/claim──▶ in-flight
 *      ├──────── cancel (job cancelled, opted out, suppressed) ────────────────────────────────────▶ cancelled
 *      └──────── expire (the job's end passed: waiting, or a message its dead holder left) ─▶ expired
 * ```
 *
 * A call in flight when its job ends is not expired: it finishes and settles as usual, except that
 * a retry due at or after the job's end is not scheduled (the attempt ends `expired` instead).
 *
 * A message's outcome may arrive after its task was released (retry-wait) by the same holder, so
 * a message end is allowed from `retry-wait` as well; a call ends only from `in-flight`, on the
 * attempt it started.
 */
import type { TaskOutcome } from '#shared/campaign/ports.ts';
import type { TaskState } from './model.ts';

/** The reason a task of a cancelled job ends with (the sweep, a call's settle, a message's outcome). */
export const JOB_CANCELLED_REASON = 'job cancelled';
/** The reason of a task of a job that failed after some of its list was read (never tried). */
export const JOB_FAILED_REASON = 'job failed before its list was read to the end: this task was never tried';
/** The same, for a message released after an attempt whose answer was lost (no resend was answered). */
export const JOB_CANCELLED_MAYBE_SENT_REASON =
  'job cancelled after an attempt whose answer was lost: it may have been delivered';
/** The reason of a task whose recipient unfollowed the channel after the list was uploaded. */
export const OPTED_OUT_REASON = 'the recipient opted out (unfollowed the channel)';
/** The same, for a task whose attempt may have reached LINE before the opt-out (a resend was not tried). */
export const OPTED_OUT_MAYBE_SENT_REASON =
  'the recipient opted out (unfollowed the channel) after an attempt whose answer was lost: it may have been delivered';

/** The reason of a task that had not ended when its job reached its end (`endAt`). */
export const JOB_ENDED_REASON = 'job ended (its endAt passed) before this task was done';
/** The same, for a message its broker held in flight and never wrote back (it may have been delivered). */
export const JOB_ENDED_IN_FLIGHT_REASON =
  'job ended (its endAt passed) while this message was in flight with a broker that stopped: it may have been delivered';
/** The same, for a message released after an attempt whose answer was lost. */
export const JOB_ENDED_MAYBE_SENT_REASON =
  'job ended (its endAt passed) after an attempt whose answer was lost: it may have been delivered';
/** The reason of a call whose retry would have been due at or after its job's end. */
export const RETRY_AFTER_END_REASON = "job ends before this task's next attempt would be due";

/** A move of a task: the states it may be in before, the state it is in after. */
export interface TaskMove {
  readonly from: readonly TaskState[];
  readonly to: readonly TaskState[];
}

/** States a task waits in: listed in the `outstanding` index, ready at `readyAt`. */
export const WAITING_STATES: readonly TaskState[] = ['pending', 'retry-wait'];
/** States a task never leaves. */
export const FINAL_TASK_STATES: readonly TaskState[] = ['completed', 'failed', 'cancelled', 'expired'];
/** States a task still has work in (the sweeps' reach: cancel and expire). */
export const OPEN_TASK_STATES: readonly TaskState[] = ['pending', 'retry-wait', 'in-flight'];

/** Every move a task may make; adapters build their write conditions from these. */
export const TASK_MOVES = {
  /** A call starts (attempt + 1), a message is claimed (attempt 1 the first time, else the same). */
  start: { from: WAITING_STATES, to: ['in-flight'] },
  /** A message left in flight by an older lease holder, or past its hold, is claimed again. */
  reclaim: { from: ['in-flight'], to: ['in-flight'] },
  /** A call's attempt ends: done, failed, cancelled, or back to wait for a retry. */
  settleCall: { from: ['in-flight'], to: [...FINAL_TASK_STATES, 'retry-wait'] },
  /**
   * A message's claim is given back by its holder (the same attempt waits again). A message
   * claimed on a claim page is still waiting (`pending` or `retry-wait`) until its outcome.
   */
  releaseMessage: { from: ['in-flight', ...WAITING_STATES], to: ['retry-wait'] },
  /** A message ends: delivered, failed, skipped (opted out), or its job cancelled. */
  endMessage: { from: ['in-flight', ...WAITING_STATES], to: FINAL_TASK_STATES },
  /** The cancel sweep ends a waiting task. */
  cancelWaiting: { from: WAITING_STATES, to: ['cancelled'] },
  /** A waiting task whose recipient is on the client's suppression list, found at its start or claim. */
  suppress: { from: WAITING_STATES, to: ['cancelled'] },
  /** A waiting task whose recipient's contact limit is reached until after its job's end. */
  cap: { from: WAITING_STATES, to: ['cancelled'] },
  /** The cancel sweep ends a task in flight, as it read it (a newer write wins). */
  cancelInFlight: { from: ['in-flight'], to: ['cancelled'] },
  /** The expire sweep ends a waiting task of a job past its end. */
  expire: { from: WAITING_STATES, to: ['expired'] },
  /**
   * The expire sweep ends a message in flight whose claim's hold has passed (its broker is gone,
   * and no claim of an ended job is allowed), as it read it. A call in flight is never expired.
   */
  expireInFlight: { from: ['in-flight'], to: ['expired'] },
} as const satisfies Record<string, TaskMove>;

export const isFinal = (state: TaskState): boolean => FINAL_TASK_STATES.includes(state);
export const isWaiting = (state: TaskState): boolean => WAITING_STATES.includes(state);

/** What the claim rule needs of a message task as the index shows it. */
export interface ClaimView {
  readonly state?: unknown;
  readonly claimToken?: unknown;
  readonly readyAt?: unknown;
}

/**
 * May a lease holder with fencing `token` claim this message task at `now`? A waiting task, yes;
 * one in flight only if an older holder claimed it (its sends may or may not have reached LINE)
 * or its hold has ended.
 */
export function mayClaimMessage(task: ClaimView, token: number, now: number): boolean {
  if (task.state === 'pending' || task.state === 'retry-wait') return true;
  return task.state === 'in-flight' && (isLeftByOlderHolder(task, token) || Number(task.readyAt) <= now);
}

/** Is this task in flight under a claim older than `token` (a holder that lost the lease)? */
export function isLeftByOlderHolder(task: ClaimView, token: number): boolean {
  return task.state === 'in-flight' && Number(task.claimToken ?? 0) < token;
}

/** A reclaimed task, or one released after a request that may have reached LINE, may have been sent. */
export function mayHaveBeenSent(task: { readonly state?: unknown; readonly maybeSent?: unknown }): boolean {
  return task.state === 'in-flight' || task.maybeSent === true;
}

/** What a call's settlement says of the attempt: its next state and the call's result. */
export interface CallSettlementView {
  readonly state: TaskState;
  readonly lastResult: string;
}

/**
 * A call's settlement once its job is found cancelled as it is written: a retry ends `cancelled`
 * instead (the cancel sweep may already have passed the task's shard, and a retry written after it
 * would wait for ever); an end is written as it is.
 */
export function callSettlementOfCancelledJob<S extends CallSettlementView>(
  settlement: S,
): S | { readonly state: 'cancelled'; readonly lastResult: string; readonly reason: string } {
  if (settlement.state !== 'retry-wait') return settlement;
  return { state: 'cancelled', lastResult: settlement.lastResult, reason: JOB_CANCELLED_REASON };
}

/** How a sweep ends the tasks it reaches: a cancelled job's, or a job's past its end. */
export type SweepEnd = 'cancelled' | 'expired';

/** The move a sweep that ends tasks as `end` makes for a task it read in `state` (waiting or in flight). */
export function sweepMove(end: SweepEnd, state: TaskState): TaskMove {
  const inFlight = state === 'in-flight';
  if (end === 'cancelled') return inFlight ? TASK_MOVES.cancelInFlight : TASK_MOVES.cancelWaiting;
  return inFlight ? TASK_MOVES.expireInFlight : TASK_MOVES.expire;
}

/** Where a message's outcome takes its task: back to wait (same attempt), or to its end. */
export type MessageOutcomeMove =
  | { readonly move: typeof TASK_MOVES.releaseMessage; readonly state: 'retry-wait' }
  | MessageEndMove;

/** A message's outcome that ends its task. */
export interface MessageEndMove {
  readonly move: typeof TASK_MOVES.endMessage;
  readonly state: 'completed' | 'failed' | 'cancelled' | 'expired';
  /** Why it ended (none for a delivery: an earlier reason is cleared). */
  readonly reason?: string;
}

/** What a released message's move depends on: whether its job was cancelled, or ends before it could wait again. */
export interface ReleasedJob {
  readonly cancelled: boolean;
  /** True when the job has ended by the time the task would be ready again (see `jobHasEnded`). */
  readonly endedBeforeReady: boolean;
}

/**
 * The move a message's outcome makes: delivered → completed; failed → failed with its reason;
 * skipped (opted out) → cancelled, saying whether it may have been delivered; released → waits
 * again with the same attempt, unless its job was cancelled meanwhile (→ cancelled: the sweep may
 * have passed already, and a task waiting after it would wait for ever) or has ended by the time
 * the task would be ready again (→ expired, for the same reason: nothing of it may start then).
 * Either end says when an attempt's answer was lost (`maybeSent`): it may have been delivered.
 */
export function messageOutcomeMove(
  outcome: Pick<TaskOutcome, 'kind' | 'reason' | 'lastResult' | 'maybeSent'>,
  job: ReleasedJob,
): MessageOutcomeMove {
  const endMessage = TASK_MOVES.endMessage;
  switch (outcome.kind) {
    case 'delivered':
      return { move: endMessage, state: 'completed' };
    case 'failed':
      return { move: endMessage, state: 'failed', reason: outcome.reason ?? outcome.lastResult };
    case 'skipped':
      return {
        move: endMessage,
        state: 'cancelled',
        reason: outcome.reason ?? (outcome.maybeSent ? OPTED_OUT_MAYBE_SENT_REASON : OPTED_OUT_REASON),
      };
    case 'released':
      if (job.cancelled)
        return {
          move: endMessage,
          state: 'cancelled',
          reason: outcome.maybeSent ? JOB_CANCELLED_MAYBE_SENT_REASON : JOB_CANCELLED_REASON,
        };
      if (job.endedBeforeReady)
        return {
          move: endMessage,
          state: 'expired',
          reason: outcome.maybeSent ? JOB_ENDED_MAYBE_SENT_REASON : JOB_ENDED_REASON,
        };
      return { move: TASK_MOVES.releaseMessage, state: 'retry-wait' };
  }
}
