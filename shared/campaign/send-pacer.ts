/**
 * One token bucket for all of a pipeline's senders, with a FIFO of waiters and a single timer, so
 * the pool as a whole keeps the channel's rate and a 429 holds everyone back, not just the sender
 * that got it.
 */
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import { TokenBucket } from '#shared/pacing/token-bucket.ts';

export interface PipelineRate {
  /** HTTP requests per second for push + multicast together (LINE: 2,000 per channel); Infinity for none. */
  readonly perSecond: number;
  /**
   * Requests that may go back to back after a lull. Default 1 % of a second's worth (20 at
   * 2,000/s): timers fire a millisecond or so late, and without a little burst every late wake
   * would lose its share of the rate. LINE's own bucket holds a full second's worth.
   */
  readonly burst?: number;
}

export class SendPacer {
  readonly #bucket: TokenBucket | undefined;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #backOffBaseMs: number;
  readonly #waiters: Array<(ok: boolean) => void> = [];
  #pausedUntil = 0;
  #level = 0;
  #timer: TimerHandle | undefined;
  #aborted = false;

  constructor(rate: PipelineRate, clock: Clock, timers: Timers, backOffBaseMs: number) {
    this.#bucket = Number.isFinite(rate.perSecond)
      ? new TokenBucket({
          ratePerSecond: rate.perSecond,
          burst: rate.burst ?? Math.max(1, Math.round(rate.perSecond / 100)),
        })
      : undefined;
    this.#clock = clock;
    this.#timers = timers;
    this.#backOffBaseMs = backOffBaseMs;
  }

  /** Waits for a token (and for any 429 back-off to end); false when the pipeline stopped. */
  acquire(): Promise<boolean> {
    if (this.#aborted) return Promise.resolve(false);
    if (this.#waiters.length === 0 && this.#ready(this.#clock.now())) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      this.#waiters.push(resolve);
      this.#schedule();
    });
  }

  /** A 429: nobody sends until the wait is over. */
  backOff(retryAfterMs: number | undefined, random: () => number): void {
    const now = this.#clock.now();
    // 429s of requests sent before the back-off began are the same episode: no escalation.
    if (now >= this.#pausedUntil) this.#level++;
    const ceiling = Math.min(30_000, this.#backOffBaseMs * 2 ** Math.min(this.#level - 1, 10));
    const wait = retryAfterMs ?? Math.ceil(ceiling / 2 + (random() * ceiling) / 2);
    if (now + wait > this.#pausedUntil) {
      this.#pausedUntil = now + wait;
      if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#schedule();
    }
  }

  succeeded(): void {
    this.#level = 0;
  }

  abort(): void {
    this.#aborted = true;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const resolve of this.#waiters.splice(0)) resolve(false);
  }

  #ready(now: number): boolean {
    return now >= this.#pausedUntil && (this.#bucket ? this.#bucket.tryTake(now) : true);
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#waiters.length === 0 || this.#aborted) return;
    const now = this.#clock.now();
    const wait = Math.max(this.#pausedUntil - now, this.#bucket ? this.#bucket.msUntilNextToken(now) : 0, 1);
    this.#timer = this.#timers.setTimeout(() => this.#pump(), wait);
  }

  #pump(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    while (this.#waiters.length > 0 && this.#ready(now)) this.#waiters.shift()!(true);
    this.#schedule();
  }
}
