/**
 * Validation of what operators send: client settings and job options. Every problem is reported
 * at once, by field path (`callingHours.mon[0].start`), so a form can show each next to its field.
 */
import { z } from 'zod';
import { contactLimitsSchema } from '#shared/contact-limits/model.ts';
import { isKnownRegion } from '#shared/csv/recipients.ts';
import { normalizeEmailAddress } from '#shared/email/address.ts';
import { type EmailTemplate, validateEmailTemplate } from '#shared/email/template.ts';
import { type CallingHours, isAbbreviationOrOffset } from '#shared/pacing/calling-hours.ts';
import { holidayCalendarSchema, restrictedPeriodsSchema } from '#shared/pacing/restricted-periods.ts';
import { type SmsTemplate, validateSmsTemplate } from '#shared/sms/template.ts';
import { SUPPRESSION_SOURCES } from '#shared/suppressions/model.ts';
import { CONNECT_RING_TIMEOUT, telephonySettingsSchema } from '#shared/telephony/settings.ts';
import { emptyFieldErrors, type FieldErrors, ValidationError } from './errors.ts';
import { add, collect, parseHours } from './field-problems.ts';
import { messageSchema, toTemplate, UnreadableJson } from './message-option.ts';
import {
  type ClientSettings,
  currentChannel,
  isMessageChannel,
  type Job,
  type JobChannel,
  type JobDefaults,
  type MessageChannel,
} from './model.ts';
import { retryPolicySchema } from './retry-policy.ts';

/** Why a zone abbreviation or offset is refused where a client's settings are given. */
const ABBREVIATION_REASON =
  'must be an IANA time zone such as Asia/Tokyo or America/New_York (not an abbreviation such as EST, nor an offset)';

/** `message` is the word before email for `line`: still taken, and stored as `line` (docs/api.md). */
const channelSchema = z
  .enum(['call', 'line', 'email', 'sms', 'message'], { error: 'must be call, line, email or sms' })
  .transform(currentChannel);

/** An address as SES takes it in a From or Reply-To (`shared/email/address.ts`'s rules). */
const emailAddressSchema = z.string().superRefine((value, ctx) => {
  const checked = normalizeEmailAddress(value);
  if (!checked.ok) ctx.addIssue({ code: 'custom', message: checked.reason });
  else if (checked.address !== value)
    ctx.addIssue({ code: 'custom', message: `must be written as ${checked.address}` });
});

/**
 * A client's email sending (`EmailSettings`). No configuration set: every email names the stack's,
 * the only one the brokers may send under (IAM) and whose events reach Switchboard.
 */
const emailSettingsSchema = z.strictObject({
  from: emailAddressSchema,
  fromName: z
    .string()
    .min(1)
    .max(256)
    .refine((name) => !/[\r\n\0"]/.test(name), 'must hold no line break and no double quote')
    .optional(),
  replyTo: z.array(emailAddressSchema).min(1).max(10, 'at most 10 addresses').optional(),
  delivery: z.enum(['at-most-once', 'at-least-once']).optional(),
});
/**
 * An origination identity as `SendTextMessage` takes it: a phone number in E.164, a phone number's
 * or pool's id (`phone-…`, `pool-…`), a sender ID (1–11 letters, digits or -), or the ARN of one.
 */
const ORIGINATION_IDENTITY = [
  /^\+[1-9][0-9]{1,14}$/,
  /^(phone|pool|senderid)-[0-9a-f]{32}$/,
  /^[A-Za-z0-9-]{1,11}$/,
  /^arn:aws[a-z-]*:sms-voice:[a-z0-9-]+:[0-9]{12}:(phone-number|pool|sender-id)\/[A-Za-z0-9_/-]{1,200}$/,
];

/**
 * A client's SMS sending (`SmsSettings`). No configuration set: every text names the stack's, the
 * only one the brokers may send under and whose events reach Switchboard.
 */
const smsSettingsSchema = z.strictObject({
  originationIdentity: z
    .string()
    .refine(
      (identity) => ORIGINATION_IDENTITY.some((pattern) => pattern.test(identity)),
      'must be a phone number in E.164 (+815012345678), a phone number or pool id (phone-…, pool-…), a sender ID of 1-11 letters, digits or -, or the ARN of one',
    ),
  partsPerSecond: z
    .number('must be a number of message parts per second')
    .min(0.1, 'must be at least 0.1 (a part every 10 s)')
    .max(10_000, 'must be at most 10,000')
    .optional(),
  messageType: z.enum(['TRANSACTIONAL', 'PROMOTIONAL']).optional(),
  delivery: z.enum(['at-most-once', 'at-least-once']).optional(),
});
const maxAttemptsSchema = z.number().int('must be a whole number').min(1).max(10);
const retryDelaySchema = z
  .number()
  .int('must be a whole number of seconds')
  .min(0)
  .max(7 * 86400);
const idSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters')
  .regex(/^[\w.:-]+$/, 'may hold only letters, digits and . _ : -');

const jobDefaultsSchema = z.strictObject({
  channel: channelSchema.optional(),
  scenarioId: idSchema.optional(),
  maxAttempts: maxAttemptsSchema.optional(),
  retryDelaySeconds: retryDelaySchema.optional(),
  restrictedPeriods: restrictedPeriodsSchema.optional(),
  holidays: holidayCalendarSchema.optional(),
  retries: retryPolicySchema.optional(),
});

const clientSettingsSchema = z.strictObject({
  maxConcurrentCalls: z.number().int('must be a whole number').min(1).max(10_000),
  callsPerSecond: z.number().min(0.01, 'must be at least 0.01 (a call every 100 s)').max(1_000),
  timeZone: z.string(),
  /** Windows per weekday, in `timeZone`. */
  callingHours: z.record(z.string(), z.unknown()),
  defaultRegion: z.string().refine(isKnownRegion, 'must be a region code such as JP or US'),
  messageChannelId: idSchema.optional(),
  /** How its email jobs are sent (Amazon SES). */
  email: emailSettingsSchema.optional(),
  /** How its SMS jobs are sent (AWS End User Messaging SMS). */
  sms: smsSettingsSchema.optional(),
  jobDefaults: jobDefaultsSchema.optional(),
  /** Settable here too (a GET's answer can be PUT back); `POST …/pause` and `/resume` are the usual way. */
  paused: z.boolean().optional(),
  telephony: telephonySettingsSchema.optional(),
  /** Validated by `shared/outcomes/settings.ts` (its URL rule depends on the deployment). */
  outcomeWebhook: z.unknown().optional(),
  /** Dates or ranges (local, in `timeZone`) when nothing of the client starts. */
  restrictedPeriods: restrictedPeriodsSchema.optional(),
  /** `{ country }`: that country's public holidays restrict every job of the client. */
  holidays: holidayCalendarSchema.optional(),
  /** Frequency caps per recipient across jobs and channels (`shared/contact-limits/model.ts`). */
  contactLimits: contactLimitsSchema.optional(),
  /** Per source, `person` or `channel` (`shared/suppressions/model.ts`). */
  suppressionScope: z
    .partialRecord(
      z.enum(SUPPRESSION_SOURCES, {
        error: `must name a source of suppression entries (${SUPPRESSION_SOURCES.join(', ')})`,
      }),
      z.enum(['channel', 'person'], { error: 'must be "channel" or "person"' }),
    )
    .optional(),
  /** Send a message job partly when LINE's monthly quota cannot cover all of it (default: pause it). */
  allowPartialDelivery: z.boolean('must be true or false').optional(),
});

/** Client ids and job ids as they may appear in a path and an S3 key. */
export function isValidClientId(clientId: string): boolean {
  return /^[A-Za-z0-9_-]{1,64}$/.test(clientId);
}

/**
 * A client's settings as a GET answers them, made a PUT's input (what the comment on `paused`
 * promises: a GET's answer can be PUT back): `updatedAt` and `outcomeWebhook.secretSetAt` are
 * dropped (read-only), `clientId` must be the path's, and `callingHours` as stored
 * (`{timeZone, weekly}`) becomes its weekly windows when its zone is the settings' own. Anything
 * else is left for validation, which names every unknown field.
 */
export function clientSettingsInput(clientId: string, input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const { updatedAt: _updatedAt, clientId: named, ...rest } = input as Record<string, unknown>;
  if (named !== undefined && named !== clientId) {
    throw new ValidationError('invalid client settings', {
      ...emptyFieldErrors(),
      clientId: [`must be the client of the path (${clientId}), or left out`],
    });
  }
  const hours = rest.callingHours as Record<string, unknown> | undefined;
  if (
    hours &&
    typeof hours === 'object' &&
    'weekly' in hours &&
    Object.keys(hours).every((k) => k === 'weekly' || k === 'timeZone')
  ) {
    if (hours.timeZone !== undefined && hours.timeZone !== rest.timeZone) {
      throw new ValidationError('invalid client settings', {
        ...emptyFieldErrors(),
        'callingHours.timeZone': ["must be the settings' timeZone, or left out"],
      });
    }
    rest.callingHours = hours.weekly;
  }
  const webhook = rest.outcomeWebhook as Record<string, unknown> | undefined;
  if (webhook && typeof webhook === 'object' && 'secretSetAt' in webhook) {
    const { secretSetAt: _set, ...kept } = webhook;
    rest.outcomeWebhook = kept;
  }
  return rest;
}

/** Validates a client's settings from an operator's request; throws {@link ValidationError}. */
export function parseClientSettings(clientId: string, input: unknown, now: number): ClientSettings {
  const errors = emptyFieldErrors();
  if (!isValidClientId(clientId)) add(errors, 'clientId', 'must be 1-64 letters, digits, _ or -');
  const parsed = clientSettingsSchema.safeParse(input);
  if (!parsed.success) collect(errors, parsed.error.issues);
  const raw = input as { timeZone?: unknown; callingHours?: unknown } | undefined;
  let hours: CallingHours | undefined;
  if (typeof raw?.timeZone === 'string' && isAbbreviationOrOffset(raw.timeZone))
    add(errors, 'timeZone', ABBREVIATION_REASON);
  else hours = parseHours(errors, raw?.timeZone, raw?.callingHours, 'callingHours');
  if (!parsed.success || !hours || Object.keys(errors).length > 0) {
    throw new ValidationError('invalid client settings', errors);
  }
  const data = parsed.data;
  return {
    clientId,
    maxConcurrentCalls: data.maxConcurrentCalls,
    callsPerSecond: data.callsPerSecond,
    timeZone: hours.timeZone,
    callingHours: hours,
    defaultRegion: data.defaultRegion,
    ...(data.messageChannelId === undefined ? {} : { messageChannelId: data.messageChannelId }),
    ...(data.email === undefined ? {} : { email: data.email }),
    ...(data.sms === undefined ? {} : { sms: data.sms }),
    ...(data.jobDefaults === undefined ? {} : { jobDefaults: data.jobDefaults }),
    ...(data.paused === undefined ? {} : { paused: data.paused }),
    ...(data.telephony === undefined ? {} : { telephony: data.telephony }),
    ...(data.restrictedPeriods === undefined ? {} : { restrictedPeriods: data.restrictedPeriods }),
    ...(data.holidays === undefined ? {} : { holidays: data.holidays }),
    ...(data.contactLimits === undefined ? {} : { contactLimits: data.contactLimits }),
    ...(data.suppressionScope === undefined ? {} : { suppressionScope: data.suppressionScope }),
    ...(data.allowPartialDelivery === undefined ? {} : { allowPartialDelivery: data.allowPartialDelivery }),
    updatedAt: now,
  };
}

/** What a new job is created with, after defaults. */
export type JobOptions = Pick<
  Job,
  | 'name'
  | 'channel'
  | 'fallback'
  | 'scenarioId'
  | 'startAt'
  | 'endAt'
  | 'callingHours'
  | 'restrictedPeriods'
  | 'holidays'
  | 'timeZoneBy'
  | 'maxAttempts'
  | 'retryDelaySeconds'
  | 'retries'
  | 'ringTimeoutSeconds'
  | 'recipientColumn'
  | 'message'
  | 'email'
  | 'sms'
  | 'ignoreContactLimits'
>;

/** An instant: ISO 8601 with its offset (`2026-11-25T18:00:00+09:00`), or epoch milliseconds. */
const instantSchema = z.union([
  z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time' }),
  // Up to the year 9999, as an ISO date-time can be: a later instant has no ISO form at all.
  z.number().int().min(0).max(253_402_300_799_999, 'must be before the year 10000'),
]);

/** Days, hours, minutes, seconds of an ISO 8601 duration (`P2D`, `PT4H`, `PT90M`, `P1DT12H`). */
const ISO_DURATION = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;
/** The longest `expireAfter`: a year (a longer one is most likely a typo). */
export const MAX_EXPIRE_AFTER_MS = 366 * 86_400_000;

/**
 * The length of an ISO 8601 duration in days, hours, minutes and seconds (no years, months or
 * weeks: their length depends on the calendar), in ms; undefined when `text` is not one.
 */
export function isoDurationMs(text: string): number | undefined {
  const match = ISO_DURATION.exec(text);
  if (!match || text === 'P' || text.endsWith('T')) return undefined;
  const [, days, hours, minutes, seconds] = match.map((part) => Number(part ?? 0));
  return (((days! * 24 + hours!) * 60 + minutes!) * 60 + seconds!) * 1000;
}

const expireAfterSchema = z.string().refine((text) => {
  const ms = isoDurationMs(text);
  return ms !== undefined && ms > 0 && ms <= MAX_EXPIRE_AFTER_MS;
}, 'must be an ISO 8601 duration from PT1S to P366D, in days, hours, minutes and seconds (e.g. PT4H, PT90M, P2D)');

/**
 * A job's channel, or an ordered list of message channels to fall back through (`line`, `email`,
 * `sms`, each once): the first is the job's `channel`, the rest its `fallback`.
 */
const jobChannelSchema = z.union(
  [
    channelSchema,
    z
      .array(channelSchema, { error: 'must be a channel, or a list of message channels' })
      .min(1, 'must name at least one channel')
      .refine((list) => list.length === 1 || list.every(isMessageChannel), {
        message: 'only message channels (line, email, sms) can fall back: a call job has one channel',
      })
      .refine((list) => new Set(list).size === list.length, { message: 'must name each channel once' }),
  ],
  { error: 'must be call, line, email or sms, or a list of the message channels to fall back through' },
);

const jobOptionsSchema = z.strictObject({
  name: z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters'),
  channel: jobChannelSchema.optional(),
  scenarioId: idSchema.optional(),
  startAt: instantSchema.optional(),
  /** The job's end: an instant after `startAt`, not in the past. */
  endAt: instantSchema.optional(),
  /** The job's end as a duration after `startAt` (ISO 8601, e.g. `PT4H`); not with `endAt`. */
  expireAfter: expireAfterSchema.optional(),
  callingHours: z.record(z.string(), z.unknown()).optional(),
  /** On top of the client's; the client's `jobDefaults` ones when absent. */
  restrictedPeriods: restrictedPeriodsSchema.optional(),
  holidays: holidayCalendarSchema.optional(),
  /** `recipient`: calling hours and restricted periods apply in each recipient's zone (call jobs). */
  timeZoneBy: z.enum(['client', 'recipient']).optional(),
  maxAttempts: maxAttemptsSchema.optional(),
  retryDelaySeconds: retryDelaySchema.optional(),
  retries: retryPolicySchema.optional(),
  ringTimeoutSeconds: z.number().int('must be a whole number of seconds').min(5).max(600).optional(),
  recipientColumn: z.string().min(1).max(200).optional(),
  message: messageSchema.optional(),
  /** An email job's email: subject, HTML and / or text, with `{{column}}` placeholders. */
  email: z
    .unknown()
    .superRefine((value, ctx) => {
      for (const problem of validateEmailTemplate(value)) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional(),
  /** An SMS job's text: `{ body }`, with `{{column}}` placeholders. */
  sms: z
    .unknown()
    .superRefine((value, ctx) => {
      for (const problem of validateSmsTemplate(value)) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional(),
  /** The job is not counted against, nor held by, the client's contact limits (a transactional notice). */
  ignoreContactLimits: z.boolean().optional(),
});

/** Built-in defaults where neither the request nor the client's `jobDefaults` say. */
export const JOB_DEFAULTS: Required<
  Pick<JobDefaults, 'channel' | 'scenarioId' | 'maxAttempts' | 'retryDelaySeconds'>
> = {
  channel: 'call',
  scenarioId: 'default',
  maxAttempts: 3,
  retryDelaySeconds: 1800,
};

/**
 * Validates a job's options against its client (the calling hours override is in the client's
 * zone); missing options come from the client's `jobDefaults`, then {@link JOB_DEFAULTS}.
 */
export function parseJobOptions(input: unknown, client: ClientSettings, now: number): JobOptions {
  const errors = emptyFieldErrors();
  const parsed = jobOptionsSchema.safeParse(input);
  if (!parsed.success) collect(errors, parsed.error.issues);
  const rawHours = (input as { callingHours?: unknown } | undefined)?.callingHours;
  const hours =
    rawHours === undefined ? undefined : parseHours(errors, client.timeZone, rawHours, 'callingHours');
  const data = parsed.success ? parsed.data : undefined;
  const [channel, ...fallback] = channelList(data?.channel ?? client.jobDefaults?.channel);
  channelRules(errors, channel!, client, parsed.success ? data : undefined, fallback as MessageChannel[]);
  const ring = data?.ringTimeoutSeconds;
  if (
    ring !== undefined &&
    client.telephony?.provider === 'connect' &&
    (ring < CONNECT_RING_TIMEOUT.min || ring > CONNECT_RING_TIMEOUT.max)
  ) {
    add(
      errors,
      'ringTimeoutSeconds',
      `Amazon Connect rings ${CONNECT_RING_TIMEOUT.min} to ${CONNECT_RING_TIMEOUT.max} seconds`,
    );
  }
  const startAt = data?.startAt === undefined ? now : instantMs(data.startAt);
  const endAt = data ? jobEnd(errors, data, startAt, now) : undefined;
  if (!data || Object.keys(errors).length > 0) throw new ValidationError('invalid job options', errors);
  return {
    name: data.name,
    channel: channel!,
    ...(fallback.length === 0 ? {} : { fallback: fallback as MessageChannel[] }),
    scenarioId: data.scenarioId ?? client.jobDefaults?.scenarioId ?? JOB_DEFAULTS.scenarioId,
    startAt,
    ...(endAt === undefined ? {} : { endAt }),
    ...(hours ? { callingHours: hours } : {}),
    ...jobRestrictionOptions(data, client.jobDefaults),
    ...(data.timeZoneBy === 'recipient' ? { timeZoneBy: 'recipient' as const } : {}),
    maxAttempts: data.maxAttempts ?? client.jobDefaults?.maxAttempts ?? JOB_DEFAULTS.maxAttempts,
    retryDelaySeconds:
      data.retryDelaySeconds ?? client.jobDefaults?.retryDelaySeconds ?? JOB_DEFAULTS.retryDelaySeconds,
    ...jobRetryOptions(data, client.jobDefaults),
    ...(data.ringTimeoutSeconds === undefined ? {} : { ringTimeoutSeconds: data.ringTimeoutSeconds }),
    ...(data.recipientColumn === undefined ? {} : { recipientColumn: data.recipientColumn }),
    ...(data.message === undefined ? {} : { message: toTemplate(data.message) }),
    ...(data.email === undefined ? {} : { email: data.email as EmailTemplate }),
    ...(data.sms === undefined ? {} : { sms: { body: (data.sms as SmsTemplate).body } }),
    ...(data.ignoreContactLimits ? { ignoreContactLimits: true } : {}),
  };
}

/** A job of each channel, as a message names it. */
const A_JOB: Readonly<Record<JobChannel, string>> = {
  call: 'a call job',
  line: 'a LINE job',
  email: 'an email job',
  sms: 'an SMS job',
};

/** The job's channels in order: the one given (or the default), or the list given. */
function channelList(given: JobChannel | readonly JobChannel[] | undefined): JobChannel[] {
  if (given === undefined) return [JOB_DEFAULTS.channel];
  return typeof given === 'string' ? [given] : [...given];
}

/** What each message channel asks of a job that uses it: the client's settings, and its content. */
const CHANNEL_NEEDS: Readonly<
  Record<
    MessageChannel,
    {
      readonly short: string;
      readonly hasSettings: (client: ClientSettings) => boolean;
      readonly settings: string;
      readonly content: 'message' | 'email' | 'sms';
      readonly contentText: string;
      /** What the channel sends, as "only a LINE job sends a message" names it. */
      readonly sends: string;
    }
  >
> = {
  line: {
    short: 'LINE',
    hasSettings: (client) => Boolean(client.messageChannelId),
    settings: 'a messageChannelId',
    content: 'message',
    contentText: 'its message (text, or { messages: [...] })',
    sends: 'a message',
  },
  email: {
    short: 'email',
    hasSettings: (client) => Boolean(client.email),
    settings: 'email settings (a From address)',
    content: 'email',
    contentText: 'its email ({ subject, html and / or text })',
    sends: 'an email',
  },
  sms: {
    short: 'SMS',
    hasSettings: (client) => Boolean(client.sms),
    settings: 'SMS settings (an origination identity)',
    content: 'sms',
    contentText: 'its text ({ body })',
    sends: 'a text',
  },
};

/** What a job's channels (its channel and those it falls back to) ask of its client and its options. */
function channelRules(
  errors: Record<string, string[]>,
  channel: JobChannel,
  client: ClientSettings,
  data: { message?: unknown; email?: unknown; sms?: unknown; timeZoneBy?: string } | undefined,
  fallback: readonly MessageChannel[] = [],
): void {
  const uses = new Set<JobChannel>([channel, ...fallback]);
  const named = fallback.length === 0 ? A_JOB[channel] : 'a job that falls back to it';
  for (const [c, needs] of Object.entries(CHANNEL_NEEDS) as [
    MessageChannel,
    (typeof CHANNEL_NEEDS)['line'],
  ][]) {
    if (!uses.has(c)) {
      if (data?.[needs.content] !== undefined)
        add(errors, needs.content, `only ${A_JOB[c]} sends ${needs.sends}; ${named} does not`);
      continue;
    }
    // The job's own channel reads as "a LINE job"; one it falls back to as "LINE".
    const subject = channel === c ? A_JOB[c] : needs.short;
    if (!needs.hasSettings(client))
      add(errors, 'channel', `${subject} needs the client to have ${needs.settings}`);
    if (data && data[needs.content] === undefined)
      add(errors, needs.content, `${subject} needs ${needs.contentText}`);
  }
  if (channel !== 'call' && data?.timeZoneBy === 'recipient') {
    add(
      errors,
      'timeZoneBy',
      `${A_JOB[channel]}'s recipients carry no zone: only a call job can use recipient`,
    );
  }
}

/** The job's restricted periods and holidays: its own, else the client's `jobDefaults`. */
function jobRestrictionOptions(
  data: Pick<JobOptions, 'restrictedPeriods' | 'holidays'>,
  defaults: JobDefaults | undefined,
): Pick<JobOptions, 'restrictedPeriods' | 'holidays'> {
  const periods = data.restrictedPeriods ?? defaults?.restrictedPeriods;
  const holidays = data.holidays ?? defaults?.holidays;
  return {
    ...(periods === undefined || periods.length === 0 ? {} : { restrictedPeriods: periods }),
    ...(holidays === undefined ? {} : { holidays }),
  };
}

/**
 * The job's retries by outcome: its own, else the client's `jobDefaults` ones. A job's policy
 * replaces the default whole (an outcome it leaves out falls back to its `maxAttempts`, not to the
 * default's entry), so what a job says is all there is to read to know how it retries.
 */
export function jobRetryOptions(
  data: Pick<JobOptions, 'retries'>,
  defaults: JobDefaults | undefined,
): Pick<JobOptions, 'retries'> {
  const retries = data.retries ?? defaults?.retries;
  return retries === undefined ? {} : { retries };
}

function instantMs(value: string | number): number {
  return typeof value === 'number' ? value : Date.parse(value);
}

/**
 * The job's end from `endAt` or `expireAfter` (counted from `startAt`), checked against the start
 * and against `now`; undefined when neither is given or one is wrong (the error is added).
 */
function jobEnd(
  errors: Record<string, string[]>,
  options: { readonly endAt?: string | number; readonly expireAfter?: string },
  startAt: number,
  now: number,
): number | undefined {
  if (options.endAt !== undefined && options.expireAfter !== undefined) {
    add(errors, 'endAt', 'give endAt or expireAfter, not both');
    add(errors, 'expireAfter', 'give endAt or expireAfter, not both');
    return undefined;
  }
  const field = options.endAt === undefined ? 'expireAfter' : 'endAt';
  const endAt =
    options.endAt !== undefined
      ? instantMs(options.endAt)
      : options.expireAfter !== undefined
        ? startAt + isoDurationMs(options.expireAfter)!
        : undefined;
  if (endAt === undefined) return undefined;
  if (endAt <= startAt) {
    add(errors, field, `must end after startAt (${new Date(startAt).toISOString()})`);
  } else if (endAt <= now) {
    add(
      errors,
      field,
      field === 'endAt'
        ? 'is in the past'
        : `ends in the past: startAt + expireAfter is ${new Date(endAt).toISOString()}`,
    );
  }
  return endAt;
}

/**
 * Job options from a query string (an inline CSV upload carries its options there): numbers are
 * read as numbers, `true`/`false` as booleans, `callingHours` as JSON, a `channel` with commas as
 * the list to fall back through; anything unreadable is left
 * for validation to name.
 */
export function jobOptionsFromQuery(
  query: Readonly<Record<string, string | undefined>>,
): Record<string, unknown> {
  // No prototype: a query key `__proto__` is a key (and an unknown field), not the prototype.
  const out = Object.create(null) as Record<string, unknown>;
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (key === 'maxAttempts' || key === 'retryDelaySeconds' || key === 'ringTimeoutSeconds') {
      out[key] = numberOr(value);
    } else if (BOOLEAN_OPTIONS.has(key) && (value === 'true' || value === 'false')) {
      out[key] = value === 'true';
    } else if (key === 'startAt' || key === 'endAt') out[key] = /^\d+$/.test(value) ? Number(value) : value;
    // `?channel=line,email,sms`: the channels to fall back through.
    else if (key === 'channel' && value.includes(',')) out[key] = value.split(',').map((c) => c.trim());
    else if ((key === 'message' && value.trimStart().startsWith('{')) || key === 'email' || key === 'sms') {
      try {
        out[key] = JSON.parse(value);
      } catch {
        out[key] = new UnreadableJson(value);
      }
    } else if (
      key === 'callingHours' ||
      key === 'retries' ||
      key === 'restrictedPeriods' ||
      key === 'holidays'
    ) {
      try {
        out[key] = JSON.parse(value);
      } catch {
        out[key] = value;
      }
    } else out[key] = value;
  }
  return out;
}

/** Job options that are true or false (`?ignoreContactLimits=true`). */
const BOOLEAN_OPTIONS = new Set(['ignoreContactLimits']);

function numberOr(value: string): unknown {
  const n = Number(value);
  return value.trim() !== '' && Number.isFinite(n) ? n : value;
}

export type { FieldErrors };
