/**
 * LINE's reply tokens: single use, valid about a minute after they were issued; a redelivered
 * event's token shares single use with the original one and dies 20 minutes after the event.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '#shared/pacing/clock.ts';
import type { ReplyTokenIssuer } from './webhook-events.ts';

const REDELIVERED_TOKEN_MAX_EVENT_AGE_MS = 20 * 60 * 1000;

interface ReplyTokenState {
  readonly channelId: string;
  readonly to: string;
  readonly expiresAt: number;
  readonly eventTimestamp: number;
  readonly linkedTo: string | undefined;
  /** Shared by a token and its redelivered copies: one reply in all. */
  readonly use: { used: boolean };
}

/** The reply tokens the sandbox issued, and their use. */
export class ReplyTokens implements ReplyTokenIssuer {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #tokens = new Map<string, ReplyTokenState>();

  constructor(clock: Clock, ttlMs: number) {
    this.#clock = clock;
    this.#ttlMs = ttlMs;
  }

  issue(channelId: string, to: string, options: { eventTimestamp: number; linkedTo?: string }): string {
    const { eventTimestamp, linkedTo } = options;
    const token = randomBytes(16).toString('hex');
    const use = (linkedTo !== undefined ? this.#tokens.get(linkedTo)?.use : undefined) ?? { used: false };
    this.#tokens.set(token, {
      channelId,
      to,
      expiresAt: this.#clock.now() + this.#ttlMs,
      eventTimestamp,
      linkedTo,
      use,
    });
    return token;
  }

  channelOf(replyToken: string): string | undefined {
    return this.#tokens.get(replyToken)?.channelId;
  }

  /** Uses the channel's token at `now`: the conversation it answers, or undefined when it is not usable. */
  redeem(channelId: string, replyToken: string, now: number): string | undefined {
    const token = this.#tokens.get(replyToken);
    const usable =
      token !== undefined &&
      token.channelId === channelId &&
      !token.use.used &&
      now < token.expiresAt &&
      (token.linkedTo === undefined || now - token.eventTimestamp < REDELIVERED_TOKEN_MAX_EVENT_AGE_MS);
    if (!usable) return undefined;
    token.use.used = true;
    return token.to;
  }
}
