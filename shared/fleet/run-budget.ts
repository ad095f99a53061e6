/** What bounds a job manager run's reads (`job-manager.ts`): a budget of reads, and a limit on reads at once. */
import type { Clock } from '#shared/pacing/clock.ts';

/** The least time a step may spend reading tasks, however long the run took to get there. */
export const MIN_READ_MS = 5_000;

/** The reads a run may still make: a count, and a time after which none starts. */
export class ReadBudget {
  #left: number;
  readonly #clock: Clock;
  readonly #until: number;
  constructor(limit: number, clock: Clock, until: number) {
    this.#left = limit;
    this.#clock = clock;
    this.#until = Math.max(until, clock.now() + MIN_READ_MS);
  }
  take(): boolean {
    if (this.#left <= 0 || this.#clock.now() >= this.#until) return false;
    this.#left -= 1;
    return true;
  }
}

/** Runs `fn` over `items`, at most `limit` at a time. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
