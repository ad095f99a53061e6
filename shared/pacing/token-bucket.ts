/**
 * The line's rate limit: a token bucket, written as the equivalent "generic cell rate algorithm"
 * (one number, the theoretical arrival time of the next start, instead of a token count that
 * drifts with floating-point refills).
 *
 * Guarantee. With rate R starts/s, burst B and interval I = 1000/R + marginMs, any two starts i < j
 * (in order) satisfy t_j - t_i >= (j - i - (B - 1)) * I. Hence, for every window width W:
 *
 * - a half-open window [t, t + W) holds at most ceil(B + W/I) - 1 starts;
 * - a closed window [t, t + W] holds at most floor(B + W/I) starts.
 *
 * With the default B = 1 and no margin, every [t, t + 1000) window holds at most ceil(R) starts,
 * for integer and fractional R alike (0.5/s: at most one start in any 2 s; 2.5/s: at most 3 in
 * any second, 5 in any 2 s). A closed 1000 ms window may hold R + 1 when starts fall exactly
 * 1000 ms apart; `marginMs > 0` removes that edge and absorbs up to `marginMs` of jitter between
 * our start instants and the instants the far side measures. A burst above 1 lets B starts go at
 * once and so breaks the "R per sliding second" rule of a line: keep B = 1 for lines.
 */

export interface TokenBucketOptions {
  /** Sustained starts per second, > 0 (fractions allowed: 0.5 is one start every 2 s). */
  readonly ratePerSecond: number;
  /** Starts allowed back to back from a full bucket; integer >= 1. Default 1. */
  readonly burst?: number;
  /** Extra spacing added to every interval, in ms. Default 0. */
  readonly marginMs?: number;
}

/** Rate limiter over an injected time: pass `now` (ms) to every call; no timers inside. */
export class TokenBucket {
  readonly ratePerSecond: number;
  readonly burst: number;
  /** Spacing between starts at the sustained rate, in ms. */
  readonly intervalMs: number;
  readonly #toleranceMs: number;
  /** When the bucket would be full again at the sustained rate; -Infinity = full. */
  #theoreticalArrival = Number.NEGATIVE_INFINITY;

  constructor(options: TokenBucketOptions) {
    const { ratePerSecond, burst = 1, marginMs = 0 } = options;
    if (!Number.isFinite(ratePerSecond) || ratePerSecond <= 0) {
      throw new RangeError(`ratePerSecond must be a positive number, got ${ratePerSecond}`);
    }
    if (!Number.isInteger(burst) || burst < 1)
      throw new RangeError(`burst must be an integer >= 1, got ${burst}`);
    if (!Number.isFinite(marginMs) || marginMs < 0) {
      throw new RangeError(`marginMs must be >= 0, got ${marginMs}`);
    }
    this.ratePerSecond = ratePerSecond;
    this.burst = burst;
    this.intervalMs = 1000 / ratePerSecond + marginMs;
    this.#toleranceMs = (burst - 1) * this.intervalMs;
  }

  /**
   * Takes a token if one is available at `now`; true means the caller may start one call. A `cost`
   * above 1 takes that many at once (an email to 50 recipients spends 50 of a rate counted in
   * recipients): it goes when one token is available and holds the next start back by all of them,
   * so the rate is kept over any window longer than one request.
   */
  tryTake(now: number, cost = 1): boolean {
    if (now < this.#theoreticalArrival - this.#toleranceMs) return false;
    this.#theoreticalArrival = Math.max(this.#theoreticalArrival, now) + cost * this.intervalMs;
    return true;
  }

  /**
   * The same line at a new rate (the contract changed while it was in use): the next start may come
   * one new interval after the last start, so a change never lets two starts closer than either
   * interval says.
   */
  retuned(options: TokenBucketOptions): TokenBucket {
    const next = new TokenBucket(options);
    if (Number.isFinite(this.#theoreticalArrival)) {
      next.#theoreticalArrival = this.#theoreticalArrival - this.intervalMs + next.intervalMs;
    }
    return next;
  }

  /**
   * The same bucket at a new rate, its debt carried over in units: what was taken ahead of `now`
   * (a request of 50 at 1/s is 50 s ahead) is owed at the new rate, not at the old one. Two starts
   * are never closer than the smaller of the two intervals. For a rate counted in recipients, whose
   * takes cost many units at once.
   */
  rescaledAt(now: number, options: TokenBucketOptions): TokenBucket {
    const next = new TokenBucket(options);
    if (Number.isFinite(this.#theoreticalArrival)) {
      const owed = Math.max(0, this.#theoreticalArrival - now) / this.intervalMs;
      next.#theoreticalArrival = now + owed * next.intervalMs;
    }
    return next;
  }

  /** Whole milliseconds from `now` until {@link tryTake} would succeed; 0 when it would now. */
  msUntilNextToken(now: number): number {
    return Math.max(0, Math.ceil(this.#theoreticalArrival - this.#toleranceMs - now));
  }
}
