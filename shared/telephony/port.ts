/**
 * The telephony port the broker depends on: place a call with an idempotency key, read a call,
 * and merge the call's status events safely whatever order they arrive in. The contract behind
 * it is `docs/telephony-provider.md`; `http-provider.ts` implements it over HTTP,
 * `shared/adapters/connect-telephony.ts` over Amazon Connect.
 */

import { TelephonyError } from './errors.ts';
import type { TelephonySettings } from './settings.ts';

/** What a task asks the provider to do. */
export interface CallRequest {
  /** The recipient, E.164 (`+819012345678`). */
  readonly to: string;
  /** Caller id, E.164; the account's default when absent. */
  readonly from?: string;
  readonly clientId: string;
  readonly jobId: string;
  readonly taskId: string;
  readonly attempt: number;
  /** Seconds the phone may ring before the call is `no-answer`; the provider's default when absent. */
  readonly ringTimeoutSeconds?: number;
  /** Where the provider POSTs this call's signed status callbacks. */
  readonly callbackUrl: string;
  /** When the attempt started (epoch ms): a provider without idempotency keys looks for its call from then. */
  readonly startedAt?: number;
  /** The provider hangs up an answered call after this many seconds. */
  readonly maxDurationSeconds: number;
  readonly variables: Readonly<Record<string, string>>;
}

/** Statuses a callback reports, in the order a call can go through them. */
export const REPORTED_CALL_STATUSES = [
  'ringing',
  'answered',
  'completed',
  'busy',
  'no-answer',
  'failed',
  'voicemail',
] as const;
export type ReportedCallStatus = (typeof REPORTED_CALL_STATUSES)[number];
/** Every status a call can have: `queued` until the provider reports anything. */
export const CALL_STATUSES = ['queued', ...REPORTED_CALL_STATUSES] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];
/**
 * Statuses after which nothing more happens to a call. `voicemail`: an answering machine, not a
 * person, answered (providers with answering-machine detection report it).
 */
export type FinalCallStatus = 'completed' | 'busy' | 'no-answer' | 'failed' | 'voicemail';

/** What is known of a call at one moment, from a callback or from `getCall`. */
export interface CallSnapshot {
  readonly callId: string;
  readonly idempotencyKey: string;
  readonly status: CallStatus;
  /** When the provider saw this status (ISO 8601). */
  readonly at: string;
  /** The provider's order of events for this call: 0 for `queued`, then 1, 2, 3… */
  readonly sequence: number;
  /** Talk time, on `completed`. */
  readonly durationSeconds?: number;
  /** Why, on `failed` (and on `completed` cut at the maximum duration). */
  readonly reason?: string;
  /**
   * The person asked not to be called again (a key press or an answer the provider's flow reports):
   * the recipient goes on the client's suppression list, source `call-outcome`.
   */
  readonly optOut?: boolean;
}

/** The body of one status callback. */
export interface CallStatusEvent extends CallSnapshot {
  readonly status: ReportedCallStatus;
}

/**
 * The result of one `initiate`:
 * - `accepted`: the provider has the call (`duplicate`: it already had it under this key).
 * - `retryable`: 5xx, timeout, reset — the call may or may not exist. Retry with the SAME key
 *   and request, and count the call as in flight until the retry settles it.
 * - `rate-limited`: 429; nothing was placed. Wait `retryAfterMs`, then retry with the same key.
 * - `rejected`: a final 4xx (bad request, key reused with another body); do not retry.
 */
export type InitiateOutcome =
  | {
      readonly kind: 'accepted';
      readonly callId: string;
      readonly duplicate: boolean;
      /** How long the provider holds the call before dialling (Twilio queues above the account's CPS). */
      readonly queuedMs?: number;
    }
  | { readonly kind: 'retryable'; readonly reason: string }
  | { readonly kind: 'rate-limited'; readonly retryAfterMs: number }
  | { readonly kind: 'rejected'; readonly status: number; readonly code: string; readonly message: string };

/** What the broker knows of an `initiate`'s history. */
export interface InitiateContext {
  /**
   * True when a request for this attempt may have reached the provider before (a retry after an
   * ambiguous answer, a call adopted after a crash). A provider with idempotency keys ignores it;
   * one without (Twilio) looks for the call before placing it.
   */
  readonly maybePlaced: boolean;
}

/** The provider as the broker sees it. */
export interface TelephonyProvider {
  /** Places a call, at most once per `idempotencyKey` (a UUID, e.g. `attemptKey(...)`). */
  initiate(request: CallRequest, idempotencyKey: string, context?: InitiateContext): Promise<InitiateOutcome>;
  /**
   * The call's current state, or `undefined` when the provider does not know it. Throws
   * {@link TelephonyUnavailableError} when the provider cannot answer now.
   */
  getCall(callId: string): Promise<CallSnapshot | undefined>;
  /**
   * True when the provider's status events name only its call id (Amazon Connect): the broker
   * links each placed call to its attempt (`CallLinkStore`) so the events find their task.
   */
  readonly linksCalls?: boolean;
  /**
   * Ends a call still ringing or talking (Amazon Connect: `StopContact`), for providers that do not
   * end a call at its `maxDurationSeconds` themselves; the call's final status follows as usual.
   * False when the provider no longer has the call in progress.
   */
  hangUp?(callId: string): Promise<boolean>;
}

/** The provider of each client's calls, from the client's `telephony` settings. */
export interface TelephonyProviders {
  forClient(clientId: string, settings: TelephonySettings | undefined): TelephonyProvider;
}

/** Every client's calls through one provider (tests, benchmarks). */
export function oneProvider(provider: TelephonyProvider): TelephonyProviders {
  return { forClient: () => provider };
}

/** The provider could not answer now (5xx, 429, timeout, reset); try again later. */
export class TelephonyUnavailableError extends TelephonyError {}

/** The provider refused a request for good (a 4xx other than 404, 409 and 429). */
export class TelephonyRequestError extends TelephonyError {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const FINAL: ReadonlySet<CallStatus> = new Set<CallStatus>([
  'completed',
  'busy',
  'no-answer',
  'failed',
  'voicemail',
]);

/** True when nothing more will happen to a call in this status. */
export function isFinal(status: CallStatus): status is FinalCallStatus {
  return FINAL.has(status);
}

/**
 * How far along a call is: queued 0, ringing 1, answered 2, any final status 3. A store can keep
 * it next to the status to merge with a conditional write instead of a read.
 */
export function statusRank(status: CallStatus): number {
  switch (status) {
    case 'queued':
      return 0;
    case 'ringing':
      return 1;
    case 'answered':
      return 2;
    default:
      return 3;
  }
}

/**
 * True when `incoming` should replace `current`: nothing replaces a final state (the broker may
 * already have acted on it, so a second, conflicting final from a misbehaving provider is
 * ignored); otherwise a further-along status wins, and within the same status a later sequence.
 */
export function supersedes(current: CallSnapshot | undefined, incoming: CallSnapshot): boolean {
  if (current === undefined) return true;
  if (isFinal(current.status)) return false;
  const rankNow = statusRank(current.status);
  const rankNew = statusRank(incoming.status);
  if (rankNew !== rankNow) return rankNew > rankNow;
  return incoming.sequence > current.sequence;
}

/**
 * Merges a status event into what is known of a call, so duplicated, late and reordered
 * callbacks end in the same state as in-order delivery: `ringing` after `answered` is ignored,
 * `completed` after `failed` is ignored. Returns `current` itself when `incoming` changes nothing.
 */
export function mergeStatus(current: CallSnapshot | undefined, incoming: CallSnapshot): CallSnapshot {
  return supersedes(current, incoming) ? incoming : current!;
}
