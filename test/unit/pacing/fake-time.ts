/**
 * A simulated clock and timers for pacing, lease and protection tests: time moves only when the
 * test advances it, timers fire in order, and promise callbacks run between timers.
 */
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';

interface Pending {
  id: number;
  at: number;
  callback: () => void;
}

export class FakeTime implements Clock, Timers {
  #now: number;
  #nextId = 1;
  #pending: Pending[] = [];

  constructor(start = Date.parse('2025-01-06T00:00:00Z')) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer = { id: this.#nextId++, at: this.#now + Math.max(0, ms), callback };
    this.#pending.push(timer);
    return timer.id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#pending = this.#pending.filter((t) => t.id !== handle);
  }

  /** Timers armed and not yet fired. */
  get pendingTimers(): number {
    return this.#pending.length;
  }

  /** Lets every queued promise callback run. */
  async settle(): Promise<void> {
    for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** Fires the earliest timer (moving the clock to it); false when none is armed. */
  async step(until = Number.POSITIVE_INFINITY): Promise<boolean> {
    await this.settle();
    let next: Pending | undefined;
    for (const t of this.#pending)
      if (!next || t.at < next.at || (t.at === next.at && t.id < next.id)) next = t;
    if (!next || next.at > until) return false;
    this.#pending = this.#pending.filter((t) => t !== next);
    this.#now = Math.max(this.#now, next.at);
    next.callback();
    await this.settle();
    return true;
  }

  /** Moves the clock forward by `ms`, firing every timer due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    while (await this.step(target)) {}
    this.#now = Math.max(this.#now, target);
    await this.settle();
  }

  /** Sets the clock to `instant` (not earlier than now), firing timers due on the way. */
  async advanceTo(instant: number): Promise<void> {
    await this.advance(instant - this.#now);
  }

  /** Fires timers until `done()` holds; throws if time runs out or nothing is left to fire. */
  async runUntil(done: () => boolean, maxMs = 30 * 86_400_000): Promise<void> {
    const limit = this.#now + maxMs;
    await this.settle();
    while (!done()) {
      if (!(await this.step(limit)))
        throw new Error(`simulation stuck at ${new Date(this.#now).toISOString()}`);
    }
  }
}
