/**
 * One rate for several senders in a process: every client a broker sends email for takes its
 * recipients from the same bucket, so the account's rate (SES's `MaxSendRate`, counted in
 * recipients, the account's in the region) holds however many clients send at once. The rate can
 * change while in use (`retune`: the account's quota was read again, or the number of brokers
 * sharing it changed); takers wait in the order they came.
 */
import type { Clock, TimerHandle, Timers } from './clock.ts';
import { TokenBucket } from './token-bucket.ts';

export interface SharedRateOptions {
  /** Units a second, > 0. */
  readonly perSecond: number;
  /** Units that may go back to back after a lull (a request's worth: see `defaultBurst`). */
  readonly burst: number;
  readonly clock: Clock;
  readonly timers: Timers;
}

export class SharedRate {
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #waiters: Array<{ readonly cost: number; readonly resolve: () => void }> = [];
  #bucket: TokenBucket;
  #burst: number;
  #timer: TimerHandle | undefined;
  /** When a unit was last asked for: whether this process sends at all lately. */
  #lastAskedAt = Number.NEGATIVE_INFINITY;

  constructor(options: SharedRateOptions) {
    this.#clock = options.clock;
    this.#timers = options.timers;
    this.#burst = burstOf(options.burst);
    this.#bucket = new TokenBucket({ ratePerSecond: options.perSecond, burst: this.#burst });
  }

  get perSecond(): number {
    return this.#bucket.ratePerSecond;
  }

  get lastAskedAt(): number {
    return this.#lastAskedAt;
  }

  /** Waits until `cost` units may go (a cost above the burst goes when one is there, and holds the next back). */
  take(cost: number): Promise<void> {
    this.#lastAskedAt = this.#clock.now();
    if (this.#waiters.length === 0 && this.#bucket.tryTake(this.#clock.now(), cost)) return Promise.resolve();
    return new Promise((resolve) => {
      this.#waiters.push({ cost, resolve });
      this.#schedule();
    });
  }

  /** The same bucket at a new rate, what was taken ahead owed at the new rate (`TokenBucket.rescaledAt`). */
  retune(perSecond: number, burst = this.#burst): void {
    if (perSecond === this.#bucket.ratePerSecond && burstOf(burst) === this.#burst) return;
    this.#burst = burstOf(burst);
    this.#bucket = this.#bucket.rescaledAt(this.#clock.now(), {
      ratePerSecond: perSecond,
      burst: this.#burst,
    });
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#waiters.length === 0) return;
    const wait = Math.max(1, this.#bucket.msUntilNextToken(this.#clock.now()));
    this.#timer = this.#timers.setTimeout(() => this.#pump(), wait);
  }

  #pump(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    while (this.#waiters.length > 0 && this.#bucket.tryTake(now, this.#waiters[0]!.cost))
      this.#waiters.shift()!.resolve();
    this.#schedule();
  }
}

const burstOf = (burst: number) => Math.max(1, Math.floor(burst));
