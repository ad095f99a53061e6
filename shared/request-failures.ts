/**
 * The two failures of a send request that every channel shares, whatever its client (LINE's
 * Messaging API in `shared/line/messaging-client.ts`, the message seam's transports in
 * `shared/campaign/transport.ts`): in doubt, or final.
 */

/** Which property of the request was wrong, and why (LINE's error `details`). */
export interface RequestErrorDetail {
  readonly message?: string;
  readonly property?: string;
}

/**
 * 5xx, a timeout or a network failure: the request may or may not have been delivered, unless
 * `maybeDelivered` is false (the connection was never made, so the request never left).
 */
export interface RetryableFailure {
  readonly kind: 'retryable';
  readonly reason: 'server-error' | 'timeout' | 'network';
  readonly maybeDelivered: boolean;
  readonly status: number | undefined;
  readonly message: string;
  readonly requestId: string | undefined;
}

/** Final: retrying will not change it. */
export interface RejectedRequest {
  readonly kind: 'rejected';
  readonly status: number;
  readonly message: string;
  readonly details: readonly RequestErrorDetail[];
  readonly requestId: string | undefined;
}
