/** Checking what an operator gives for a LINE channel: its fields, its secret, its rules' patterns. */
import { z } from 'zod';
import { type Channel, type ChannelSecret, ID_PATTERN, MAX_REGEX_LENGTH } from './channel.ts';
import { ChannelError } from './errors.ts';
import { compileRule } from './keyword-rules.ts';

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

export class InvalidChannelError extends ChannelError {
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
