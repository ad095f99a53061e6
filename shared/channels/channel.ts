/**
 * A LINE channel as Switchboard serves it: who owns it, how webhooks are verified (one secret, or
 * two during a rotation), how it sends (access token), and how it answers automatically. The record
 * only: checking an operator's input is `channel-input.ts`, matching a message to a rule
 * `keyword-rules.ts` (the webhook receiver imports neither: its bundle carries no zod or RE2).
 */

/** How automatic answers are sent: `reply` (free, at most once) or `push` (exactly once, quota). */
export type AutoAnswerMode = 'reply' | 'push';

export interface KeywordRule {
  readonly match: 'exact' | 'contains' | 'regex';
  readonly pattern: string;
  readonly answer: string;
  readonly ignoreCase?: boolean;
}

export interface ChannelSecret {
  readonly value: string;
  /** A previous secret stays valid until then (epoch ms), so a rotation drops no webhook. */
  readonly retiresAt?: number;
}

export interface Channel {
  readonly channelId: string;
  readonly clientId: string;
  readonly secrets: readonly ChannelSecret[];
  readonly accessToken: string;
  readonly autoAnswer: AutoAnswerMode;
  readonly greeting?: string;
  readonly rules: readonly KeywordRule[];
  /** The answer when no rule matches; no answer at all when absent. */
  readonly fallback?: string;
  readonly updatedAt: number;
}

/** Longest regex pattern a rule may carry: patterns run on every message of the channel. */
export const MAX_REGEX_LENGTH = 200;
/** Message text longer than this is matched on its first part only (LINE allows 5,000). */
export const MAX_MATCHED_TEXT = 2_000;

/** Channel and client ids: 1-64 letters, digits, `_` or `-`. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** The secrets a webhook may be signed with at `now`: the current one, and a retiring one. */
export function liveSecrets(channel: Channel, now: number): string[] {
  return channel.secrets.filter((s) => s.retiresAt === undefined || s.retiresAt > now).map((s) => s.value);
}

/** A channel with its secrets and token masked, for printing and logs. */
export function redactChannel(channel: Channel): Record<string, unknown> {
  return {
    ...channel,
    secrets: channel.secrets.map((s) => ({
      value: mask(s.value),
      ...(s.retiresAt ? { retiresAt: s.retiresAt } : {}),
    })),
    accessToken: mask(channel.accessToken),
  };
}

function mask(value: string): string {
  return `${value.slice(0, 2)}…(${value.length} chars)`;
}
