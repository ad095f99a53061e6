/**
 * Polls while a page is shown: every `intervalMs` while answers come, backing off (doubling, up
 * to 30 s) while they fail, and saying so — a network error shows a retrying state, never a blank
 * page. `stop()` when the page goes.
 */
import { isTransient } from './api.ts';

export interface Poller {
  stop(): void;
  /** Polls now (after a change the user made). */
  now(): void;
}

export function poll<T>(options: {
  readonly read: () => Promise<T>;
  readonly onData: (data: T) => boolean | undefined;
  readonly onState: (state: {
    readonly retrying: boolean;
    readonly message?: string;
    readonly inMs?: number;
  }) => void;
  readonly intervalMs: number;
}): Poller {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let delay = options.intervalMs;
  const tick = async () => {
    timer = undefined;
    try {
      const data = await options.read();
      if (stopped) return;
      delay = options.intervalMs;
      options.onState({ retrying: false });
      // onData answers true when there is nothing more to watch (the job has ended).
      if (options.onData(data) === true) return;
    } catch (error) {
      if (stopped) return;
      if (!isTransient(error)) {
        options.onState({ retrying: false, message: (error as Error).message });
        return;
      }
      delay = Math.min(delay * 2, 30_000);
      options.onState({ retrying: true, message: (error as Error).message, inMs: delay });
    }
    if (!stopped) timer = setTimeout(tick, delay);
  };
  void tick();
  return {
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
    now: () => {
      if (stopped) return;
      if (timer) clearTimeout(timer);
      void tick();
    },
  };
}
