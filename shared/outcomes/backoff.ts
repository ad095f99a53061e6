/**
 * When a failed outcome delivery is tried again: exponential from 10 s, doubling, capped at an
 * hour, with up to 20 % jitter (so a receiver coming back is not hit by every client's backlog in
 * the same second), for about a day: 33 attempts, whose un-jittered delays cover 24 h (jittered,
 * 19.5 to 24.4 h). Then it goes to the dead-letter queue. The queue's `maxReceiveCount` is {@link MAX_DELIVERY_ATTEMPTS}, so SQS moves
 * it there by itself (the delay is how long the worker hides the message: its visibility timeout).
 */

/** How long failed deliveries are retried. */
export const DELIVERY_RETRY_WINDOW_SECONDS = 24 * 3600;
const FIRST_DELAY_SECONDS = 10;
const MAX_DELAY_SECONDS = 3600;

/** The delay after failed attempt `attempt` (1-based), before jitter. */
export function baseDelaySeconds(attempt: number): number {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be >= 1, got ${attempt}`);
  return Math.min(MAX_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2 ** Math.min(attempt - 1, 30));
}

/**
 * The delay after failed attempt `attempt`, jittered down by up to 20 % (`random` in [0, 1)); whole
 * seconds, as SQS's visibility timeout takes.
 */
export function retryDelaySeconds(attempt: number, random: number): number {
  const base = baseDelaySeconds(attempt);
  return Math.max(1, Math.round(base * (1 - 0.2 * random)));
}

/** Attempts (the first one included) whose un-jittered delays first add up to 24 h. */
function attemptsFor(windowSeconds: number): number {
  let total = 0;
  let attempt = 0;
  while (total < windowSeconds) {
    attempt++;
    total += baseDelaySeconds(attempt);
  }
  return attempt + 1;
}

/**
 * Receives before SQS moves a delivery to the DLQ: the first attempt and one after each delay of
 * the schedule until the window is covered (jitter only shortens delays, so the last attempt comes
 * at most 24 h after the first, never later by the schedule).
 */
export const MAX_DELIVERY_ATTEMPTS = attemptsFor(DELIVERY_RETRY_WINDOW_SECONDS);
