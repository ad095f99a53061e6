/**
 * A call's end, recorded on its task: the rule (completed; busy / no-answer retried after the
 * job's delay while attempts remain; failed with a reason otherwise) and the call-status use case
 * behind `POST /providers/{provider}/calls/status`. The broker's reconciliation settles through
 * the same rule, so a task ends the same way whichever path saw the call end first.
 */

import { type ClientSettings, type Job, jobHasEnded, type Task } from '#shared/jobs/model.ts';
import { retryReadyAt } from '#shared/jobs/recipient-timing.ts';
import { nextRetry, type RetrySettings } from '#shared/jobs/retry-policy.ts';
import { JOB_CANCELLED_REASON, RETRY_AFTER_END_REASON } from '#shared/jobs/task-lifecycle.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { entryReason, kindOf, type SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';
import type { CallSnapshot, CallStatusEvent, FinalCallStatus } from '#shared/telephony/port.ts';
import { isFinal } from '#shared/telephony/port.ts';
import { readSignedCallStatusEvent } from '#shared/telephony/status-event.ts';
import { BrokerError } from './errors.ts';
import type { BrokerNotifier, BrokerTaskStore, LeaseEndpointReader, Settlement, TaskRef } from './ports.ts';

/**
 * How a final call status leaves a task that made `attempts` attempts of `job`: completed; busy,
 * no-answer, voicemail or failed retried as the job's retry policy says (`shared/jobs/retry-policy.ts`),
 * else ended. A job cancelled meanwhile retries nothing: the cancel sweep has passed (or will pass)
 * its waiting tasks, so a retry written now would wait for ever. Nor does a job whose end
 * (`endAt`) comes at or before the retry would be due: the attempt ends `expired` instead, since
 * the retry could never start.
 */
export function settlementFor(
  status: FinalCallStatus,
  detail: { readonly reason?: string; readonly attempts: number; readonly now: number },
  job: RetrySettings & Pick<Job, 'endAt'> & { readonly status?: Job['status'] },
): Settlement {
  if (status === 'completed') return { state: 'completed', lastResult: 'completed' };
  const retry = nextRetry(status, detail.attempts, job);
  // A failed call that would not be retried ends failed, whatever became of its job.
  if (job.status === 'cancelled' && (retry || status !== 'failed')) {
    return { state: 'cancelled', lastResult: status, reason: JOB_CANCELLED_REASON };
  }
  const readyAt = retry ? detail.now + retry.delayMs : undefined;
  if (readyAt !== undefined && jobHasEnded(job, readyAt)) {
    return { state: 'expired', lastResult: status, reason: RETRY_AFTER_END_REASON };
  }
  if (readyAt !== undefined) return { state: 'retry-wait', lastResult: status, readyAt };
  if (status === 'failed') {
    return { state: 'failed', lastResult: 'failed', reason: detail.reason ?? 'call failed' };
  }
  return { state: 'failed', lastResult: status, reason: `${status} on all ${detail.attempts} attempts` };
}

/**
 * A retry moved to its recipient's next opening (`retryReadyAt`): the later of its retry delay and
 * the opening of the recipient's hours outside restricted periods, for a job read in its
 * recipients' zones. An opening at or after the job's end leaves no attempt to make: `expired`.
 * Any other settlement, or no client settings, is returned as it is.
 */
export function retimedRetry(
  settlement: Settlement,
  input: { readonly client: ClientSettings | undefined; readonly job: Job; readonly task: Task },
): Settlement {
  if (settlement.state !== 'retry-wait' || input.client === undefined) return settlement;
  const readyAt = retryReadyAt(input.client, input.job, input.task, settlement.readyAt);
  if (readyAt === settlement.readyAt) return settlement;
  if (jobHasEnded(input.job, readyAt)) {
    return { state: 'expired', lastResult: settlement.lastResult, reason: RETRY_AFTER_END_REASON };
  }
  return { ...settlement, readyAt, notBefore: settlement.readyAt };
}

/**
 * Settles `task`'s in-flight `attempt` from a final snapshot of its call. True when this settled
 * it; false when it had already moved on (another path settled it first).
 */
export async function settleFromSnapshot(
  tasks: BrokerTaskStore,
  input: { task: Task; job: Job; attempt: number; snapshot: CallSnapshot; now: number },
): Promise<boolean> {
  const { task, attempt, snapshot, now } = input;
  if (!isFinal(snapshot.status)) throw new RangeError(`not a final status: ${snapshot.status}`);
  const detail = {
    attempts: attempt,
    now,
    ...(snapshot.reason === undefined ? {} : { reason: snapshot.reason }),
  };
  let settlement = settlementFor(snapshot.status, detail, input.job);
  if (settlement.state === 'retry-wait') {
    // The job the caller holds may predate a cancel (the broker keeps it from the start): a
    // retry is only written for a job that is, as of now, not cancelled.
    const job = (await tasks.getJob(task.clientId, task.jobId)) ?? input.job;
    settlement = settlementFor(snapshot.status, detail, job);
    // Read in its recipient's zone: the retry waits for that zone's opening, not only its delay.
    if (settlement.state === 'retry-wait' && job.timeZoneBy === 'recipient') {
      settlement = retimedRetry(settlement, { client: await tasks.getClient(task.clientId), job, task });
    }
  }
  return tasks.settle({ task, attempt, settlement, callId: snapshot.callId, now });
}

/** The callback's idempotency key is not the attempt its URL names: it is not this task's call. */
export class CallbackMismatchError extends BrokerError {}

/** Where a callback belongs: the attempt named in the callback URL Switchboard gave the provider. */
export interface AttemptRef extends TaskRef {
  readonly attempt: number;
}

/** The callback URL of one attempt: the status route with the attempt named in its query. */
export function callbackUrlFor(base: string, ref: AttemptRef): string {
  const url = new URL(base);
  url.searchParams.set('job', ref.jobId);
  url.searchParams.set('task', ref.taskId);
  url.searchParams.set('attempt', String(ref.attempt));
  return url.toString();
}

/** Reads the attempt a callback URL's query names; throws {@link CallbackMismatchError} if it names none. */
export function attemptRefFromQuery(query: Readonly<Record<string, string | undefined>>): AttemptRef {
  const jobId = query.job;
  const taskId = query.task;
  const attempt = Number(query.attempt);
  if (!jobId || !taskId || !Number.isInteger(attempt) || attempt < 1) {
    throw new CallbackMismatchError('callback URL names no task attempt (job, task, attempt)');
  }
  return { jobId, taskId, attempt };
}

export interface CallStatusRequest {
  readonly signature: string | undefined;
  readonly rawBody: string | Uint8Array;
  /**
   * From the callback URL's query (unsigned: checked against the signed idempotency key). A
   * function is called only once the signature is verified, so a forged callback is a 401 whatever
   * its URL says, never a 400 that tells the sender which part it got wrong.
   */
  readonly ref: AttemptRef | (() => AttemptRef);
}

/**
 * - `settled`: this callback ended the attempt (the task is completed, retry-wait or failed).
 * - `already-settled`: a final status was recorded before (duplicate, or reconciliation won).
 * - `progress`: a non-final status (ringing, answered); the call id is recorded.
 * - `stale`: about an attempt the task has moved past; nothing changes.
 * - `unknown-task`: no such task; nothing changes.
 */
export type CallStatusOutcome = 'settled' | 'already-settled' | 'progress' | 'stale' | 'unknown-task';

export interface RecordCallStatusDeps {
  readonly tasks: BrokerTaskStore;
  readonly leases: LeaseEndpointReader;
  readonly notifier: BrokerNotifier;
  readonly clock: Clock;
  /**
   * The callback secret(s), several during a rotation; or where to read them at each callback
   * (the call-status function: `CachedCallbackSecrets`, so a rotation needs no deploy).
   */
  readonly secrets: string | readonly string[] | (() => Promise<readonly string[]>);
  /** Where a call outcome that asks to opt out puts the recipient (source `call-outcome`). */
  readonly suppressions?: SuppressionWriter;
  /** Told once per attempt settled here by its final status (the answer-rate metric); must not throw. */
  readonly onCallEnded?: (ended: { readonly clientId: string; readonly status: FinalCallStatus }) => void;
}

/**
 * The call-status use case. Input: a signed callback and the attempt its URL names. Steps: verify
 * the signature on the raw body (401 on failure) and parse it (400); check its idempotency key is
 * that attempt's key (400); record the status on the task durably — a final status settles the
 * in-flight attempt once, anything later or older changes nothing (`mergeStatus`' rule: a final
 * state never regresses); then nudge the broker holding the client's lease so it frees the
 * call's slot at once. The nudge is best effort: reconciliation covers a lost one.
 */
export function makeRecordCallStatus(deps: RecordCallStatusDeps) {
  const recordEvent = makeRecordCallEvent(deps);
  return async (request: CallStatusRequest): Promise<CallStatusOutcome> => {
    const event = readSignedCallStatusEvent({
      header: request.signature,
      rawBody: request.rawBody,
      secrets: typeof deps.secrets === 'function' ? await deps.secrets() : deps.secrets,
      clock: deps.clock,
    });
    const ref = typeof request.ref === 'function' ? request.ref() : request.ref;
    if (event.idempotencyKey !== attemptKey(ref.jobId, ref.taskId, ref.attempt)) {
      throw new CallbackMismatchError('the callback is not the call of the attempt its URL names');
    }
    return recordEvent(ref, event);
  };
}

export type RecordCallEventDeps = Omit<RecordCallStatusDeps, 'secrets'>;

/**
 * Records one status event of the call of attempt `ref`, whoever reported it (a signed callback, a
 * Connect contact event): a final status settles the in-flight attempt once, anything later or
 * older changes nothing; then the broker holding the client's lease is nudged.
 */
export function makeRecordCallEvent(deps: RecordCallEventDeps) {
  return async (
    ref: AttemptRef & { readonly clientId?: string },
    event: CallStatusEvent,
  ): Promise<CallStatusOutcome> => {
    const task = await deps.tasks.getTask(ref);
    // A callback signed with one client's credentials never touches another client's task.
    if (!task || (ref.clientId !== undefined && task.clientId !== ref.clientId)) return 'unknown-task';
    // Whatever the attempt's state: the person's wish holds even on a duplicate or late event.
    if (event.optOut && deps.suppressions)
      await deps.suppressions.add(task.clientId, [callOutcomeEntry(task.recipient, deps.clock.now())]);
    if (task.attempts !== ref.attempt || task.state !== 'in-flight') {
      if (task.attempts === ref.attempt && isFinal(event.status)) {
        await nudge(deps, task, event.callId);
        return 'already-settled';
      }
      return 'stale';
    }
    if (!isFinal(event.status)) {
      if (task.callId === undefined) {
        await deps.tasks.recordCallId(ref, ref.attempt, event.callId, deps.clock.now());
      }
      return 'progress';
    }
    const job = await deps.tasks.getJob(task.clientId, task.jobId);
    if (!job) return 'unknown-task';
    const now = deps.clock.now();
    const settled = await settleFromSnapshot(deps.tasks, {
      task,
      job,
      attempt: ref.attempt,
      snapshot: event,
      now,
    });
    if (settled) deps.onCallEnded?.({ clientId: task.clientId, status: event.status as FinalCallStatus });
    await nudge(deps, task, event.callId);
    return settled ? 'settled' : 'already-settled';
  };
}

async function nudge(deps: RecordCallEventDeps, task: Task, callId: string): Promise<void> {
  try {
    const endpoint = await deps.leases.endpointOf(task.clientId, deps.clock.now());
    if (endpoint) await deps.notifier.callEnded(endpoint, { jobId: task.jobId, taskId: task.taskId, callId });
  } catch {
    // Best effort: the broker's reconciliation frees the slot without the nudge.
  }
}

/** The suppression entry of a call outcome that asked to opt out. */
export function callOutcomeEntry(recipient: string, now: number): SuppressionEntry {
  return {
    recipient,
    kind: kindOf(recipient),
    source: 'call-outcome',
    reason: entryReason(undefined, 'call-outcome'),
    addedAt: now,
  };
}
