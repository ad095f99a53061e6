/**
 * Time as a port. Pacing, leases and task protection read the time and arm timers only through
 * these two interfaces, so tests drive them with a simulated clock and never sleep.
 */

/** Milliseconds since the epoch, like `Date.now()`. */
export interface Clock {
  now(): number;
}

/** An opaque timer handle, whatever the {@link Timers} implementation returns. */
export type TimerHandle = unknown;

/** One-shot timers; a callback may fire late, never early. */
export interface Timers {
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** The longest delay Node's `setTimeout` honours; a longer one would fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Node's timers. Delays beyond {@link MAX_TIMER_MS} are clamped: every caller re-checks the
 * clock when woken, so an early wake only means one more wait.
 */
export const systemTimers: Timers = {
  setTimeout: (callback, ms) => setTimeout(callback, Math.min(Math.max(0, ms), MAX_TIMER_MS)),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
