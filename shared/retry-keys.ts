/**
 * Every retry and idempotency key Switchboard derives, in one place. A key makes the far side
 * accept a request at most once: LINE's `X-Line-Retry-Key` (a push or multicast), the telephony
 * provider's idempotency key (a call). The same job, task and attempt always give the same key, so
 * a resend after a crash, a lost answer or a takeover is recognised (LINE answers 409); a new
 * attempt gets a new one. LINE remembers a key for 24 hours; the same key after that is a new
 * request and delivers again, so a key must not be retried once it is close to that age.
 */
import { ulidToUuid, uuidV5 } from '#shared/ids.ts';

/**
 * The retry / idempotency key of one attempt of a job's task: the same job, task and attempt
 * always give the same key (so a resend after a crash is recognised by LINE or the telephony
 * provider), and a new attempt gets a new one.
 */
export function attemptKey(jobId: string, taskId: string, attempt: number): string {
  if (!Number.isInteger(attempt) || attempt < 1)
    throw new RangeError(`attempt must be an integer ≥ 1, got ${attempt}`);
  return uuidV5(`task-attempt:${jobId}:${taskId}:${attempt}`);
}

/**
 * The multicast key an outcome was settled under, if it was one: an outcome carries the retry key
 * of the request that settled it, which is the attempt's own key for a push and the batch's for a
 * multicast.
 */
export function multicastKeyOf(outcome: {
  readonly jobId: string;
  readonly taskId: string;
  readonly attempt: number;
  readonly retryKey?: string;
}): string | undefined {
  return outcome.retryKey && outcome.retryKey !== attemptKey(outcome.jobId, outcome.taskId, outcome.attempt)
    ? outcome.retryKey
    : undefined;
}

/**
 * A multicast's retry key derives from its job, attempt and sorted task ids: the same batch always
 * has the same key, and its resends are byte-identical.
 */
export function multicastRetryKey(jobId: string, attempt: number, taskIds: readonly string[]): string {
  return uuidV5(`multicast:${jobId}:${attempt}:${[...taskIds].sort().join(',')}`);
}

/**
 * A chunk's retry key (`shared/jobs/chunks.ts`): one per chunk and attempt, whoever sends it. A
 * holder that crashed after sending leaves its claim page; the heir sends the same chunk again
 * under the same key (a member opted out since is left out: LINE refuses the key, not the body)
 * and LINE answers 409.
 */
export function chunkRetryKey(jobId: string, chunkTaskId: string, attempt: number): string {
  if (!Number.isInteger(attempt) || attempt < 1)
    throw new RangeError(`attempt must be an integer ≥ 1, got ${attempt}`);
  return uuidV5(`chunk:${jobId}:${chunkTaskId}:${attempt}`);
}

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
