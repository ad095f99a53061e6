/**
 * The pool's pacing, one lane per limit of the channel (`MessageTransport.limits.lanes`): LINE
 * limits each endpoint of a channel on its own (push 2,000 requests/s, multicast 200/s:
 * `shared/line/rate-limits.ts`), so pushes and multicasts each take tokens from their own bucket;
 * SES has one lane, counted in recipients. A lane is one token bucket for all of the pipeline's
 * senders, with a FIFO of waiters and a single timer, so the pool as a whole keeps the endpoint's
 * rate and a 429 holds back every sender of that endpoint, not just the one that got it.
 */
import { LINE_RATE_LIMITS } from '#shared/line/rate-limits.ts';
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import { TokenBucket } from '#shared/pacing/token-bucket.ts';

export interface PipelineRate {
  /** Push requests per second (LINE: 2,000 per channel); Infinity for none. */
  readonly perSecond: number;
  /**
   * Multicast requests per second (LINE: 200 per channel). Default: LINE's 200, or `perSecond` when
   * that is lower (Infinity when `perSecond` is: no limit at all).
   */
  readonly multicastPerSecond?: number;
  /**
   * Requests that may go back to back after a lull, per lane. Default 1 % of a second's worth (20
   * at 2,000/s, 2 at 200/s): timers fire a millisecond or so late, and without a little burst every
   * late wake would lose its share of the rate; a rate counted in recipients, at least a request's
   * worth (`defaultBurst`). LINE's own bucket holds a full second's worth.
   */
  readonly burst?: number;
}

/** The rate each lane keeps, from a {@link PipelineRate}. */
export function laneRates(rate: PipelineRate): Readonly<Record<'push' | 'multicast', number>> {
  const multicast =
    rate.multicastPerSecond ??
    (Number.isFinite(rate.perSecond) ? Math.min(rate.perSecond, LINE_RATE_LIMITS.multicast) : rate.perSecond);
  return { push: rate.perSecond, multicast };
}

export class SendPacer {
  readonly #lanes: ReadonlyMap<string, PacerLane>;

  /**
   * One lane per key of `lanes`, each at its rate (units per second: requests, or recipients for a
   * channel whose rate counts them); `burst` as {@link PipelineRate.burst}, by default
   * {@link defaultBurst}.
   */
  constructor(
    pacing: {
      readonly lanes: Readonly<Record<string, number>>;
      readonly burst: number | undefined;
      /** Units a full request costs: 1, or its recipients when the rate counts them. */
      readonly unitsPerRequest: number;
    },
    clock: Clock,
    timers: Timers,
    backOffBaseMs: number,
  ) {
    this.#lanes = new Map(
      Object.entries(pacing.lanes).map(([name, perSecond]) => [
        name,
        new PacerLane(
          perSecond,
          pacing.burst ?? defaultBurst(perSecond, pacing.unitsPerRequest),
          clock,
          timers,
          backOffBaseMs,
        ),
      ]),
    );
  }

  /**
   * Waits for `cost` units of `lane` (and for its 429 back-off to end); false when the pipeline
   * stopped. A cost above 1 goes as soon as one unit is there and holds the lane back by the rest.
   */
  acquire(lane: string, cost = 1): Promise<boolean> {
    return this.#lane(lane).acquire(cost);
  }

  /** A 429 from `lane`: none of its requests starts until the wait is over. */
  backOff(lane: string, retryAfterMs: number | undefined, random: () => number): void {
    this.#lane(lane).backOff(retryAfterMs, random);
  }

  succeeded(lane: string): void {
    this.#lane(lane).succeeded();
  }

  abort(): void {
    for (const lane of this.#lanes.values()) lane.abort();
  }

  #lane(name: string): PacerLane {
    const lane = this.#lanes.get(name);
    if (lane === undefined) throw new RangeError(`no pacing lane ${name}`);
    return lane;
  }
}

/**
 * A lane's burst when none is given: 1 % of a second's worth (timers fire a millisecond or so late),
 * and for a rate counted in recipients at least one full request's worth, up to a quarter of a
 * second's: a request of 50 costs 250 ms at 200/s, and a send that went 20 ms late (a timer, a
 * claim's parsing on the event loop) would otherwise lose those 20 ms of the rate for good. SES's own
 * bucket holds a second's worth, so a request's worth ahead is never throttled.
 */
export function defaultBurst(perSecond: number, unitsPerRequest: number): number | undefined {
  if (!Number.isFinite(perSecond)) return undefined;
  const jitter = Math.max(1, Math.round(perSecond / 100));
  return Math.max(jitter, Math.min(unitsPerRequest, Math.floor(perSecond / 4)));
}

/** One endpoint's bucket, waiters and 429 back-off. */
class PacerLane {
  readonly #bucket: TokenBucket | undefined;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #backOffBaseMs: number;
  readonly #waiters: Array<{ resolve: (ok: boolean) => void; cost: number }> = [];
  #pausedUntil = 0;
  #level = 0;
  #timer: TimerHandle | undefined;
  #aborted = false;

  constructor(
    perSecond: number,
    burst: number | undefined,
    clock: Clock,
    timers: Timers,
    backOffBaseMs: number,
  ) {
    this.#bucket = Number.isFinite(perSecond)
      ? new TokenBucket({
          ratePerSecond: perSecond,
          burst: burst ?? 1,
        })
      : undefined;
    this.#clock = clock;
    this.#timers = timers;
    this.#backOffBaseMs = backOffBaseMs;
  }

  acquire(cost: number): Promise<boolean> {
    if (this.#aborted) return Promise.resolve(false);
    if (this.#waiters.length === 0 && this.#ready(this.#clock.now(), cost)) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      this.#waiters.push({ resolve, cost });
      this.#schedule();
    });
  }

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
    for (const waiter of this.#waiters.splice(0)) waiter.resolve(false);
  }

  #ready(now: number, cost: number): boolean {
    return now >= this.#pausedUntil && (this.#bucket ? this.#bucket.tryTake(now, cost) : true);
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
    while (this.#waiters.length > 0 && this.#ready(now, this.#waiters[0]!.cost))
      this.#waiters.shift()!.resolve(true);
    this.#schedule();
  }
}
