/**
 * A LINE channel as Switchboard serves it: who owns it, how webhooks are verified (one secret, or
 * two during a rotation), how it sends (access token), and how it answers automatically.
 */
import { RE2JS } from 're2js';
import { z } from 'zod';

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

/**
 * Keyword rules' regular expressions run on RE2's linear-time engine (`re2js`, a JavaScript port of
 * RE2): any LINE user's text is matched in time proportional to its length, whatever pattern an
 * operator saved. Node's backtracking engine has no time limit: `^(a|a)*$` against 29 `a`s and a
 * `!` blocked the process for seconds, and no syntactic check catches every such pattern. RE2 has
 * no backreferences or lookaround; a pattern using them is refused when saved.
 */
const compiled = new Map<string, RE2JS>();
const MAX_COMPILED = 1_000;

function compileRule(pattern: string, ignoreCase: boolean): RE2JS {
  const key = `${ignoreCase ? 'i' : '-'}${pattern}`;
  let regex = compiled.get(key);
  if (!regex) {
    regex = RE2JS.compile(pattern, ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(key, regex);
  }
  return regex;
}

const text = z.string().min(1).max(5_000);

const ruleSchema = z
  .strictObject({
    match: z.enum(['exact', 'contains', 'regex']),
    pattern: z.string().min(1).max(500),
    answer: text,
    ignoreCase: z.boolean().optional(),
  })
  .superRefine((rule, ctx) => {
    if (rule.match !== 'regex') return;
    if (rule.pattern.length > MAX_REGEX_LENGTH) {
      ctx.addIssue({
        code: 'custom',
        path: ['pattern'],
        message: `a regex may have at most ${MAX_REGEX_LENGTH} characters`,
      });
      return;
    }
    try {
      compileRule(rule.pattern, rule.ignoreCase === true);
    } catch (error) {
      ctx.addIssue({
        code: 'custom',
        path: ['pattern'],
        message: `not a valid regex (RE2 syntax: no backreferences or lookaround): ${(error as Error).message.replace(/^error parsing regexp: /, '')}`,
      });
    }
  });

/** Channel and client ids: 1-64 letters, digits, `_` or `-`. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

const idSchema = z.string().regex(ID_PATTERN, 'must be 1-64 letters, digits, "_" or "-"');

/** A LINE channel secret as an operator pastes it: no spaces (a stray one would fail every signature). */
const channelSecretSchema = z
  .string()
  .min(8, 'looks too short for a LINE channel secret')
  .max(256, 'looks too long for a LINE channel secret')
  .regex(/^\S+$/, 'must not contain spaces');

/** What an operator gives to create or replace a channel (an unknown field is refused, not dropped). */
export const channelInputSchema = z.strictObject({
  channelId: idSchema,
  clientId: idSchema,
  channelSecret: channelSecretSchema,
  accessToken: z
    .string()
    .min(8, 'looks too short for a channel access token')
    .max(1_024)
    .regex(/^\S+$/, 'must not contain spaces'),
  autoAnswer: z.enum(['reply', 'push']).default('push'),
  greeting: text.optional(),
  rules: z.array(ruleSchema).max(200).default([]),
  fallback: text.optional(),
});

export type ChannelInput = z.input<typeof channelInputSchema>;

export class InvalidChannelError extends Error {
  override name = 'InvalidChannelError';
  readonly fieldErrors: Record<string, string[]>;
  constructor(fieldErrors: Record<string, string[]>) {
    super(
      `invalid channel: ${Object.entries(fieldErrors)
        .map(([field, messages]) => `${field}: ${messages.join('; ')}`)
        .join(', ')}`,
    );
    this.fieldErrors = fieldErrors;
  }
}

/** Validates operator input into a channel (a new secret replaces all previous ones). */
export function channelFromInput(input: unknown, now: number): Channel {
  const parsed = channelInputSchema.safeParse(input);
  if (!parsed.success) {
    // No prototype: a field named `__proto__` or `toString` is reported like any other.
    const fieldErrors = Object.create(null) as Record<string, string[]>;
    for (const issue of parsed.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) fieldErrors[[...issue.path, key].join('.')] = ['is not a known field'];
        continue;
      }
      const field = issue.path.join('.') || '(body)';
      fieldErrors[field] = [...(fieldErrors[field] ?? []), issue.message];
    }
    throw new InvalidChannelError(fieldErrors);
  }
  const { channelSecret, ...rest } = parsed.data;
  return { ...rest, secrets: [{ value: channelSecret }], updatedAt: now };
}

/**
 * The channel after a secret rotation: the new secret verifies from now on, the old one until
 * `graceMs` from now (LINE may still deliver webhooks signed with it).
 */
export function rotateSecret(
  channel: Channel,
  newSecret: string,
  now: number,
  graceMs = 24 * 3600_000,
): Channel {
  const checked = channelSecretSchema.safeParse(newSecret);
  if (!checked.success)
    throw new InvalidChannelError({ channelSecret: checked.error.issues.map((issue) => issue.message) });
  const current = channel.secrets.find((s) => s.retiresAt === undefined) ?? channel.secrets[0];
  const secrets: ChannelSecret[] = [{ value: newSecret }];
  if (current && current.value !== newSecret)
    secrets.push({ value: current.value, retiresAt: now + graceMs });
  return { ...channel, secrets, updatedAt: now };
}

/** The secrets a webhook may be signed with at `now`: the current one, and a retiring one. */
export function liveSecrets(channel: Channel, now: number): string[] {
  return channel.secrets.filter((s) => s.retiresAt === undefined || s.retiresAt > now).map((s) => s.value);
}

/** The automatic answer to a text message: the first matching rule, else the fallback. */
export function answerFor(channel: Channel, messageText: string): string | undefined {
  const textToMatch = messageText.slice(0, MAX_MATCHED_TEXT);
  for (const rule of channel.rules) {
    if (ruleMatches(rule, textToMatch)) return rule.answer;
  }
  return channel.fallback;
}

function ruleMatches(rule: KeywordRule, value: string): boolean {
  const fold = (s: string) => (rule.ignoreCase ? s.toLocaleLowerCase() : s);
  switch (rule.match) {
    case 'exact':
      return fold(value.trim()) === fold(rule.pattern.trim());
    case 'contains':
      return fold(value).includes(fold(rule.pattern));
    case 'regex':
      return compileRule(rule.pattern, rule.ignoreCase === true)
        .matcher(value)
        .find();
  }
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
