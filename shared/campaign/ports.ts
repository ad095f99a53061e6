/**
 * What the message pipeline needs from the broker that hosts it, as ports: a source of claimed
 * tasks (claimed under the client's lease by the broker's adapter), a channel's transport
 * (`transport.ts`; LINE's Messaging API send is {@link SendPort}), and a sink for outcomes (the
 * adapter writes them to the task table in batches).
 */

import type { NextChannel } from '#shared/jobs/fallback.ts';
import type { MessageChannel, TriedChannel } from '#shared/jobs/model.ts';
import type {
  MessageVerdict,
  OutgoingMessage,
  PreparedSend,
  SendOutcome,
} from '#shared/line/messaging-client.ts';
import type { MessageTemplate } from './template.ts';
import type { TransportOutcome } from './transport.ts';

/**
 * A message task (of a `line` or `email` job) the broker has claimed for this pipeline (it is
 * `in-flight` in the store). `T` is the job's content: LINE messages, or an email template.
 */
export interface ClaimedTask<T extends object = MessageTemplate> {
  readonly jobId: string;
  readonly taskId: string;
  /** The LINE user id or the email address to send to. */
  readonly recipient: string;
  readonly variables: Readonly<Record<string, string>>;
  /**
   * The job's message. Tasks of one job should share one template object: it is compiled once
   * per object, and tasks with equal templates can share a multicast.
   */
  readonly template: T;
  /**
   * The attempt this claim sends (1 = the first). Its retry key is
   * `attemptKey(jobId, taskId, attempt)`; a task given back as `released` must be claimed again
   * with the SAME attempt, so LINE answers 409 if the earlier send went through.
   */
  readonly attempt: number;
  /** When this attempt was first started (ms since epoch); a resumed attempt keeps its first time. */
  readonly attemptStartedAt: number;
  /** The recipient opted out (unfollowed): nothing is sent, the task is reported `skipped`. */
  readonly optedOut?: boolean;
  /** The recipient is on the client's suppression list: nothing is sent, the task ends `cancelled` with this reason. */
  readonly suppressed?: string;
  /**
   * This channel cannot reach the task's person (opted out, or suppressed on this channel alone) and
   * its job falls back: nothing is sent, the task moves to the next channel (`released` with it).
   */
  readonly fallsBack?: ChannelMove;
  /**
   * A fallback job's task: the channel it goes to should this one refuse its recipient as
   * unreachable when sent (LINE's 400 on the user id, an SMS opt-out), and what it skips on the way.
   */
  readonly onward?: NextChannel;
  /** The client keeps an SMS STOP to SMS alone (`suppressionScope`): a refusal for it may move on too. */
  readonly optOutMovesOn?: boolean;
  /**
   * This attempt may already have reached LINE (an earlier holder had it in flight, or it was
   * released after an unanswered request). Resending it is safe (same retry key: 409 if it went
   * through); skipping it for an opt-out means its delivery is unknown, and the report says so.
   */
  readonly maybeSent?: boolean;
  /**
   * The channel's own event said this attempt went out (SES's SEND event, recorded on the task by
   * `lambdas/email-events`): a task in doubt is settled by it, never sent again.
   */
  readonly sentConfirmed?: boolean;
  /**
   * This attempt was already sent once more after its first send went unanswered and no event came
   * (a channel that resends in doubt, `MessageTransport.resendsInDoubt`): it is never sent again.
   */
  readonly resentInDoubt?: boolean;
  /**
   * The multicast this attempt was recorded in by {@link BatchLedger.record} (a resumed claim).
   * The source must return every still-unsettled member of a recorded batch in the same page:
   * they are resent together, under the recorded key.
   */
  readonly batch?: { readonly retryKey: string };
  /**
   * The job's end (epoch ms): no first request of this attempt starts at or after it (the task is
   * released unsent, lastResult `job-ended`; its store ends it `expired`). A request already made
   * may still be resent: the attempt was in flight.
   */
  readonly sendBy?: number;
}

/**
 * A fallback job's task moving on: the channel it goes to and its identifier there, the channels it
 * leaves (the one it was on, then any it has no identifier for) with why, and the attempts it has
 * made so far (written as is: a move that sent nothing starts no attempt, and takes no slot).
 */
export interface ChannelMove {
  readonly channel: MessageChannel;
  readonly recipient: string;
  /** The identifier it leaves: the move is written only while the task still has it (not moved yet). */
  readonly from: string;
  readonly tried: readonly TriedChannel[];
  readonly attempts: number;
}

/** A multicast about to be sent: its key and members (all of one job and attempt). */
export interface MulticastBatch {
  readonly jobId: string;
  readonly attempt: number;
  readonly retryKey: string;
  /** Sorted. */
  readonly taskIds: readonly string[];
}

/** Records multicasts before their first request (the adapter marks each member task with the key). */
export interface BatchLedger {
  record(batch: MulticastBatch): Promise<void>;
}

/** Pages of claimable tasks. */
export interface TaskSource<T extends object = MessageTemplate> {
  /**
   * Claims up to `limit` tasks and returns them (fewer, or none, when there are fewer to claim).
   * An empty page means there is nothing to claim now: the pipeline finishes what it holds and
   * resolves.
   */
  nextPage(limit: number): Promise<readonly ClaimedTask<T>[]>;
  /**
   * The page the source claims most cheaply (e.g. a whole number of its claim transactions); the
   * pipeline asks for it unless told otherwise.
   */
  readonly pageSize?: number;
}

/**
 * What became of a claimed task:
 * - `delivered`: LINE accepted it (`lastResult` `delivered`, or `already-delivered` for a 409);
 * - `failed`: final, with a `reason` (a 4xx, a template variable missing, the retry key's window
 *   passed);
 * - `skipped`: the recipient opted out, nothing (more) was sent; `maybeSent` when an earlier
 *   request of the attempt may have reached LINE before the opt-out;
 * - `released`: not settled (the pipeline stopped, the monthly quota is used up, or retries ran
 *   out). Give the task back for a later claim with the same attempt; `maybeSent` says an earlier
 *   request may have reached LINE, which is why the attempt (and so the retry key) must not change.
 *   With `moveTo`, the task waits again on the next channel of its job instead.
 */
export interface TaskOutcome {
  readonly jobId: string;
  readonly taskId: string;
  readonly attempt: number;
  readonly kind: 'delivered' | 'failed' | 'skipped' | 'released';
  readonly lastResult: string;
  readonly reason?: string;
  readonly maybeSent?: boolean;
  /** For `released` after exhausted retries: wait at least this long before claiming it again. */
  readonly retryAfterMs?: number;
  /** For `released`: the task falls back to this channel (its attempts then written as the move's `attempts`). */
  readonly moveTo?: ChannelMove;
  /**
   * For `failed`: the channel refused the recipient as unreachable there (the task may fall back);
   * `opted-out` when by the recipient's own opt-out (an SMS STOP).
   */
  readonly unreachable?: true | 'opted-out';
  /** The retry key of the request that settled it (the task's, or its multicast batch's). */
  readonly retryKey?: string;
  readonly requestId?: string;
  readonly at: number;
}

/** Where outcomes are written, in batches (BatchWriteItem / TransactWriteItems in the adapter). */
export interface ReportSink {
  /** Writes the outcomes; a throw makes the pipeline write the same outcomes again. */
  write(outcomes: readonly TaskOutcome[]): Promise<void>;
}

/**
 * Sends (or resends, byte for byte) a prepared request: `MessagingClient.send`. A channel's send
 * may also carry {@link ValidatePort} (`validate`): the same channel's validation endpoints, so
 * whoever hands out a channel's send hands out its check with it.
 */
export type SendPort = ((prepared: PreparedSend) => Promise<SendOutcome>) & {
  readonly validate?: ValidatePort;
};

/**
 * Asks LINE whether it would take these messages in a push or a multicast, sending nothing
 * (`POST /v2/bot/message/validate/push` or `/multicast`). Never throws: a failure is `unknown`.
 */
export type ValidatePort = (
  endpoint: 'push' | 'multicast',
  messages: readonly OutgoingMessage[],
) => Promise<MessageVerdict>;

/** Counts written by the reporter since the previous progress call, per job. */
export interface JobProgress {
  readonly jobId: string;
  readonly delivered: number;
  readonly failed: number;
  readonly skipped: number;
  readonly released: number;
}

/** One HTTP request the pipeline made (for metrics and benchmarks). */
export interface SendObservation {
  /** The job the request's tasks belong to (a unit is always of one job). */
  readonly jobId?: string;
  /** The lane of the request (LINE: `push`, `multicast`; SES: `email`). */
  readonly endpoint: string;
  /** Recipients of the request (for `delivered`: those the channel accepted). */
  readonly recipients: number;
  readonly outcome: Exclude<TransportOutcome['kind'], 'per-recipient'>;
  readonly latencyMs: number;
}
