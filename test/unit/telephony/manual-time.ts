/** Wall time the test moves by hand, with timers that fire only when it does. */
import type { SandboxTime } from '#local/telephony-sandbox.ts';

interface Timer {
  readonly at: number;
  readonly order: number;
  readonly callback: () => void;
}

export class ManualTime implements SandboxTime {
  #now: number;
  #nextId = 1;
  readonly #timers = new Map<number, Timer>();

  constructor(start = Date.parse('2026-01-05T09:00:00.000Z')) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(callback: () => void, ms: number): unknown {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), order: id, callback });
    return id;
  }

  clearTimer(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way, in order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#earliest();
      if (!due || due[1].at > target) break;
      this.#timers.delete(due[0]);
      this.#now = Math.max(this.#now, due[1].at);
      due[1].callback();
    }
    this.#now = target;
  }

  /** Fires timers until none is left, moving time to each. */
  runAll(): void {
    for (;;) {
      const due = this.#earliest();
      if (!due) return;
      this.advance(due[1].at - this.#now);
    }
  }

  #earliest(): [number, Timer] | undefined {
    let best: [number, Timer] | undefined;
    for (const entry of this.#timers) {
      const [, t] = entry;
      if (!best || t.at < best[1].at || (t.at === best[1].at && t.order < best[1].order)) best = entry;
    }
    return best;
  }
}
