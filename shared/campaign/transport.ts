/**
 * The seam between the message pipeline and a channel (issue 38): what the pipeline needs of LINE,
 * SES or the next channel, and nothing more. The pipeline claims tasks, groups them into units,
 * paces, retries, records and reports; a transport says which tasks may share one request, renders
 * and prepares a unit's request once, sends it, and tells what the answer means:
 *
 * - done (`delivered`, `already-delivered`), or done per recipient (`per-recipient`: a bulk request
 *   whose 200 carries each destination's own status);
 * - in doubt (`retryable` with `maybeDelivered`): resent under the same key when the channel is
 *   {@link MessageTransport.idempotent} (LINE's retry key), otherwise never resent blindly — the
 *   task is given back `in-doubt` until the channel's own event says it was sent (SES);
 * - retry after T (`rate-limited`, or `retryable` when the request never left);
 * - final with a reason (`rejected`);
 * - the channel's quota used up (`quota-used-up`: the run stops and its jobs pause) or the sending
 *   account held (`held`: every job of the channel waits, visible to operators).
 *
 * LINE (`line-transport.ts`) is the first adapter; SES (`shared/adapters/ses-transport.ts`) the second.
 */

import type { RejectedRequest, RetryableFailure } from '#shared/request-failures.ts';
import { CampaignError } from './errors.ts';
import type { SendUnit } from './send-queue.ts';

/** A channel's limits: what its lanes may carry per second and per request. */
export interface TransportLimits {
  /** Most recipients in one request (LINE multicast 500, SES bulk 50); 1 when every request has one. */
  readonly recipientsPerRequest: number;
  /**
   * The lanes a request may take, each paced on its own at these units per second (LINE: push
   * 2,000 and multicast 200 requests; SES: one lane of recipients at the account's sending rate).
   */
  readonly lanes: Readonly<Record<string, number>>;
  /** True when a lane's rate counts recipients rather than requests (SES's `MaxSendRate`). */
  readonly countsRecipients: boolean;
}

/** A unit's request, rendered and serialised once: a resend is the same request. */
export interface PreparedRequest<R = unknown> {
  /** The lane it is paced in (a key of {@link TransportLimits.lanes}). */
  readonly lane: string;
  readonly request: R;
  /**
   * What the channel's pre-send check looks at (LINE's validation endpoint: the rendered messages
   * and the endpoint), when the channel has one.
   */
  readonly checkable?: unknown;
}

/** A unit that cannot be rendered or prepared: its tasks fail unsent with this reason. */
export class UnpreparableError extends CampaignError {
  readonly reason: string;
  constructor(reason: string, options?: ErrorOptions) {
    super(reason, options);
    this.reason = reason;
  }
}

/** One destination's own result inside a request that answered for each (SES SendBulkEmail). */
export type EntryOutcome =
  | { readonly kind: 'delivered'; readonly messageId: string | undefined }
  /**
   * Final for this recipient; `lastResult` is the channel's status word, `reason` the operator's.
   * `unreachable`: the channel cannot reach the recipient at all, not this content; `opted-out`
   * when that is the recipient's own word (an SMS STOP), which may stand for every channel.
   */
  | {
      readonly kind: 'rejected';
      readonly lastResult: string;
      readonly reason: string;
      readonly unreachable?: true | 'opted-out';
    }
  /** Not sent because of the rate: sent again after a short wait. */
  | { readonly kind: 'throttled'; readonly lastResult: string }
  /** Not sent: the channel's quota is used up (the run stops, its jobs pause). */
  | { readonly kind: 'quota-used-up'; readonly reason: string }
  /** Not sent: the sending account is paused or suspended (every job of the channel waits). */
  | { readonly kind: 'held'; readonly reason: string }
  /** Not sent, for a reason that may pass (SES's TRANSIENT_FAILURE): sent again later. */
  | { readonly kind: 'transient'; readonly lastResult: string; readonly reason: string };

/** What a request's answer means, whatever the channel. */
export type TransportOutcome =
  /** The channel accepted the whole request. */
  | { readonly kind: 'delivered'; readonly requestId: string | undefined }
  /** An earlier request with this key was accepted (LINE's 409). */
  | {
      readonly kind: 'already-delivered';
      readonly acceptedRequestId: string;
      readonly requestId: string | undefined;
    }
  /** Accepted as a whole, with one outcome per task of the unit, in the unit's order. */
  | {
      readonly kind: 'per-recipient';
      readonly requestId: string | undefined;
      readonly entries: readonly EntryOutcome[];
    }
  /** Too many requests: nothing was sent; the lane backs off (`retryAfterMs` when the channel said). */
  | {
      readonly kind: 'rate-limited';
      readonly retryAfterMs: number | undefined;
      readonly message: string;
      readonly requestId: string | undefined;
    }
  /** The channel's quota is used up; waiting seconds will not fix it. Nothing was sent. */
  | {
      readonly kind: 'quota-used-up';
      readonly quota: 'monthly' | 'daily';
      readonly message: string;
      readonly requestId: string | undefined;
    }
  /** The sending account is paused or suspended: nothing was sent, nothing of the channel should be. */
  | { readonly kind: 'held'; readonly reason: string; readonly requestId: string | undefined }
  /** 5xx, a timeout, a lost connection: sent or not is unknown unless `maybeDelivered` is false. */
  | RetryableFailure
  /**
   * Final: retrying will not change it. `recipientRefused`: the channel refused the one recipient
   * of the request as unreachable there (LINE's 400 on a push's `to`), not the request's content.
   */
  | (RejectedRequest & { readonly recipientRefused?: boolean });

/**
 * A channel's transport. `T` is the job's content as its tasks carry it (LINE messages, an email
 * template); `R` the prepared request.
 */
export interface MessageTransport<T extends object = object, R = unknown> {
  /** The job channel it sends (`line`, `email`). */
  readonly channel: string;
  readonly limits: TransportLimits;
  /**
   * A resend of an unanswered request cannot deliver twice (the channel keeps an idempotency key).
   * When false, an ambiguous answer is never resent blindly (see the module comment).
   */
  readonly idempotent: boolean;
  /**
   * Waits until the channel's own limit beyond the pipeline's lane lets this request go (SES: the
   * process-wide share of the account's rate). Called after the pacer, just before the request is
   * recorded and made.
   */
  ready?(prepared: PreparedRequest<R>): Promise<void>;
  /**
   * For a channel that is not idempotent: an attempt left in doubt whose event did not come within
   * the wait is sent once more (the client chose at-least-once), instead of ending `in-doubt`.
   */
  readonly resendsInDoubt?: boolean;
  /**
   * What a task accepted by the channel is recorded as (`lastResult`): LINE's acceptance is its
   * delivery (`delivered`); SES's is not (`accepted`, its events say the rest).
   */
  readonly acceptedAs: string;
  /**
   * Tasks with the same group (of one job and attempt) may share one request: the content is the
   * same for all of them. Undefined: the task is sent alone (its content differs per recipient).
   */
  groupOf(template: T): string | undefined;
  /** The unit's request; throws {@link UnpreparableError} with the reason its tasks fail. */
  prepare(unit: SendUnit<T>): PreparedRequest<R>;
  send(prepared: PreparedRequest<R>): Promise<TransportOutcome>;
}
