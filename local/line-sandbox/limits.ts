/** LINE's two limits on sending: the per-second rate limit and the monthly message quota. */
import { QUOTA_CONSUMPTION_PATH, type SendEndpoint } from '#shared/line/messaging-client.ts';
import type { EndpointRates } from '#shared/line/rate-limits.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { Answer } from './answers.ts';

/**
 * A token bucket per channel and endpoint, each at its own rate from LINE's table (push 2,000/s,
 * multicast 200/s, reply 2,000/s: `shared/line/rate-limits.ts`). A bucket holds a second's worth.
 */
export class RateLimiter {
  readonly #clock: Clock;
  #rates: EndpointRates;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(rates: EndpointRates, clock: Clock) {
    this.#rates = rates;
    this.#clock = clock;
  }

  /** Changes some endpoints' rates (`Infinity` lifts one); every bucket starts full again. */
  set(rates: Partial<EndpointRates>): void {
    this.#rates = { ...this.#rates, ...rates };
    this.#buckets.clear();
  }

  /** Takes one request from the channel's bucket for `endpoint`; false when it is empty. */
  take(channelId: string, endpoint: SendEndpoint): boolean {
    const rate = this.#rates[endpoint];
    if (!Number.isFinite(rate)) return true;
    const key = `${channelId}:${endpoint}`;
    const now = this.#clock.now();
    const state = this.#buckets.get(key) ?? { tokens: rate, at: now };
    const refilled = Math.min(rate, state.tokens + ((now - state.at) * rate) / 1000);
    const allowed = refilled >= 1;
    this.#buckets.set(key, { tokens: allowed ? refilled - 1 : refilled, at: now });
    return allowed;
  }
}

/**
 * LINE's monthly message quota: push and multicast count one message per recipient (replies are
 * free); a send over the limit is refused with a 429 naming the monthly limit.
 */
export class MonthlyQuota {
  limit: number | undefined;
  readonly #used = new Map<string, number>();

  constructor(limit: number | undefined) {
    this.limit = limit;
  }

  /** True (and counted) when `recipients` more messages fit in the channel's quota. */
  take(channelId: string, recipients: number): boolean {
    const used = this.#used.get(channelId) ?? 0;
    if (this.limit !== undefined && used + recipients > this.limit) return false;
    this.#used.set(channelId, used + recipients);
    return true;
  }

  setUsed(used: Readonly<Record<string, number>>): void {
    for (const [channelId, count] of Object.entries(used)) this.#used.set(channelId, count);
  }

  /** The answer to `GET /v2/bot/message/quota` or `/quota/consumption`. */
  answer(path: string, channelId: string): Answer {
    if (path === QUOTA_CONSUMPTION_PATH)
      return { status: 200, body: { totalUsage: this.#used.get(channelId) ?? 0 } };
    return {
      status: 200,
      body: this.limit === undefined ? { type: 'none' } : { type: 'limited', value: this.limit },
    };
  }
}
