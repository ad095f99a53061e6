/** A claimed task (or chunk) as the message pipeline's tasks: what the claim hands the pipeline. */
import type { ChannelMove, ClaimedTask } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { AWAITING_RESEND_EVENT } from '#shared/campaign/unit-sender.ts';
import { membersInState } from '#shared/jobs/chunks.ts';
import { type NextChannel, nextChannel, triedOnLeaving } from '#shared/jobs/fallback.ts';
import type { Job, Task } from '#shared/jobs/model.ts';
import { mayHaveBeenSent } from '#shared/jobs/task-lifecycle.ts';
import { type Claimed, type ClaimRecord, variablesOf } from './dynamo-claim-record.ts';
import { type ClaimedChunks, chunkMemberTasks, sentAsPushes } from './dynamo-message-chunks.ts';

/**
 * What the claim read beside it: the recipients who opted out, and those suppressed with their
 * reasons; of these, those suppressed on their own channel alone (`channelOnly`: a fallback job's
 * task moves on from them, as from an opt-out).
 */
export interface Screened {
  readonly optedOut: ReadonlySet<string>;
  readonly suppressed: ReadonlyMap<string, string>;
  readonly channelOnly?: ReadonlySet<string>;
  /** An SMS STOP reaches SMS alone for this client: a text refused for one may move on. */
  readonly stopChannelOnly?: boolean;
}

/**
 * A fallback job's task its channel cannot reach (opted out, or suppressed there alone) and that
 * was never possibly sent on it: where it moves. Undefined otherwise (it ends as any task would).
 */
function fallsBack(next: NextChannel | undefined, c: Claimed, screened: Screened): ChannelMove | undefined {
  if (next === undefined || mayHaveBeenSent(c.task)) return undefined;
  const { recipient } = c.task;
  const reason = screened.optedOut.has(recipient)
    ? 'opted-out'
    : screened.channelOnly?.has(recipient)
      ? screened.suppressed.get(recipient)
      : undefined;
  if (reason === undefined) return undefined;
  // Nothing was sent on the channel left: the attempts stay what they were (0: no slot taken yet).
  const { channel, recipient: there } = next;
  return {
    channel,
    recipient: there,
    from: recipient,
    tried: triedOnLeaving(next, reason),
    attempts: c.task.attempts,
  };
}

/** Whether a fallback job's task moves on at its claim (its channel cannot reach the person, it was never possibly sent). */
export function movesOn(job: Job, task: ClaimRecord, screened: Screened): boolean {
  if (task.chunk) return false;
  const next = nextChannel(job, task.item as Pick<Task, 'via' | 'reach'>);
  return fallsBack(next, { task } as Claimed, screened) !== undefined;
}

/**
 * One claimed task as the pipeline's task; a claimed chunk as its tasks, one a member in its state,
 * under the chunk's retry key (the chunk's claim noted in `chunks`, for its outcome to be written whole).
 */
export function pipelineTasksOf(
  job: Job,
  c: Claimed,
  template: MessageTemplate,
  screened: Screened,
  chunks: ClaimedChunks,
): ClaimedTask[] {
  const { optedOut, suppressed } = screened;
  const { chunk, recipient, taskId } = c.task;
  if (chunk) {
    const members = membersInState(chunk);
    chunks.claimed(job.jobId, chunk, c.attempt, members, { pushes: sentAsPushes(template) });
    return chunkMemberTasks(chunk, members, {
      jobId: job.jobId,
      attempt: c.attempt,
      startedAt: c.startedAt,
      template,
      maybeSent: mayHaveBeenSent(c.task),
      optedOut,
      suppressed,
      ...(job.endAt === undefined ? {} : { sendBy: job.endAt }),
    });
  }
  const next = nextChannel(job, c.task.item as Pick<Task, 'via' | 'reach'>);
  const move = fallsBack(next, c, screened);
  return [
    {
      jobId: job.jobId,
      taskId,
      recipient,
      variables: variablesOf(c.task.item),
      template,
      attempt: c.attempt,
      attemptStartedAt: c.startedAt,
      ...(move ? { fallsBack: move } : next ? { onward: next } : {}),
      ...(next && screened.stopChannelOnly ? { optOutMovesOn: true } : {}),
      ...(optedOut.has(recipient) ? { optedOut: true } : {}),
      ...(suppressed.has(recipient) ? { suppressed: suppressed.get(recipient)! } : {}),
      ...(mayHaveBeenSent(c.task) ? { maybeSent: true } : {}),
      // The channel's own event said this attempt went out (SES's SEND: `lambdas/email-events`).
      ...(c.task.sentAttempt >= c.attempt ? { sentConfirmed: true } : {}),
      ...(c.task.lastResult === AWAITING_RESEND_EVENT ? { resentInDoubt: true } : {}),
      ...(c.batchKey ? { batch: { retryKey: c.batchKey } } : {}),
      ...(job.endAt === undefined ? {} : { sendBy: job.endAt }),
    },
  ];
}
