/**
 * Retry keys (`X-Line-Retry-Key`): a UUID that makes LINE accept a push or multicast at most once.
 * LINE remembers a key for 24 hours; the same key after that is a new request and delivers again,
 * so a key must not be retried once it is close to that age.
 */
import { ulidToUuid } from '#shared/ids.ts';

/** How long LINE remembers a retry key. */
export const RETRY_KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;

/** Margin kept before the lifetime ends, for clock skew between us and LINE and for slow requests. */
export const RETRY_KEY_SAFETY_MARGIN_MS = 60 * 60 * 1000;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when `value` has the 8-4-4-4-12 hexadecimal form LINE expects of a retry key. */
export function isRetryKey(value: string): boolean {
  return UUID_RE.test(value);
}

/**
 * The retry key of a send caused by a webhook event: the event's ULID `webhookEventId` as a UUID
 * (the same 128 bits). A redelivered event carries the same ID, so it gets the same key and LINE
 * answers 409 instead of delivering twice. Throws `InvalidUlidError` for an ID that is not a ULID.
 */
export function webhookRetryKey(webhookEventId: string): string {
  return ulidToUuid(webhookEventId);
}

/**
 * True while a retry key first used at `firstAttemptAt` (ms since epoch) can still be retried
 * without risk of a second delivery: until 24 h minus the safety margin have passed. When the time of
 * first use was not recorded, pass a time known to be no later (e.g. the webhook event's
 * `timestamp`): the answer is then more cautious, never less.
 */
export function retryKeyStillSafe(
  firstAttemptAt: number,
  now: number,
  marginMs: number = RETRY_KEY_SAFETY_MARGIN_MS,
): boolean {
  return now - firstAttemptAt < RETRY_KEY_LIFETIME_MS - marginMs;
}
