/** LINE's two limits on sending: the per-second rate limit and the monthly message quota. */
import { QUOTA_CONSUMPTION_PATH } from '#shared/line/messaging-client.ts';
import type { Answer } from './answers.ts';
import type { Clock } from './contract.ts';

/** A token bucket per channel and kind of send (push and multicast share one; replies have their own). */
export class RateLimiter {
  readonly #clock: Clock;
  #perSecond: number;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(perSecond: number, clock: Clock) {
    this.#perSecond = perSecond;
    this.#clock = clock;
  }

  /** Changes the rate (`Infinity` lifts it); every bucket starts full again. */
  set(perSecond: number): void {
    this.#perSecond = perSecond;
    this.#buckets.clear();
  }

  /** Takes one request from the channel's bucket; false when it is empty. */
  take(channelId: string, bucket: 'send' | 'reply'): boolean {
    const rate = this.#perSecond;
    if (!Number.isFinite(rate)) return true;
    const key = `${channelId}:${bucket}`;
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
