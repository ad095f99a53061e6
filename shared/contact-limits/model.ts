/**
 * Contact limits (frequency caps): how often one person may be contacted by a client, across its
 * jobs and channels. A client's `contactLimits` is a list of `{max, per, channels}`: at most `max`
 * contacts (calls started, messages sent) on the given `channels` (`call`, `line`) per window of
 * `per` (`hour`, `day`, `week`, or `{days: N}`). A job may opt out with `ignoreContactLimits: true`
 * (a transactional notice).
 *
 * Windows are fixed and follow the client's wall clock (`timeZone`): an hour from :00, a day from
 * midnight, a week from Monday midnight, N days from midnight of every Nth day counted from
 * 1970-01-01 (local). So "2 per day" means 2 per calendar day in the client's zone, as an operator
 * reads it (and as Amazon Connect's daily limits count), DST-safe through `firstInstantAtWallTime`.
 *
 * Enforced where a contact starts: each applicable limit is one counter item per recipient and
 * window, incremented in the start's own transaction under the condition that it is below `max`
 * (`shared/adapters/dynamo-contact-caps.ts`), so two brokers or two jobs can never both take the
 * last slot. A task over a limit waits for the window's end when that is inside its job's life;
 * else it ends with {@link cappedReason}.
 */
import { z } from 'zod';
import type { JobChannel } from '#shared/jobs/model.ts';
import { firstInstantAtWallTime, wallTimeAt } from '#shared/pacing/calling-hours.ts';

export const CONTACT_CHANNELS = ['call', 'line', 'email', 'sms'] as const;
export type ContactChannel = (typeof CONTACT_CHANNELS)[number];

export type ContactPeriod = 'hour' | 'day' | 'week' | { readonly days: number };

export interface ContactLimit {
  readonly max: number;
  readonly per: ContactPeriod;
  readonly channels: readonly ContactChannel[];
}

/** Most limits a client may set (each is one more item in every start's transaction). */
export const CONTACT_LIMITS_MAX = 5;
/** Longest `{days: N}` window. */
export const CONTACT_PERIOD_DAYS_MAX = 366;

const periodSchema = z.union(
  [
    z.enum(['hour', 'day', 'week']),
    z.strictObject({
      days: z
        .number()
        .int('must be a whole number of days')
        .min(1, 'must be at least 1 day')
        .max(CONTACT_PERIOD_DAYS_MAX, `must be at most ${CONTACT_PERIOD_DAYS_MAX} days`),
    }),
  ],
  { error: 'must be "hour", "day", "week" or {"days": N}' },
);

const limitSchema = z.strictObject({
  max: z
    .number()
    .int('must be a whole number')
    .min(1, 'must be at least 1 (a cap of 0 would contact nobody: pause the client instead)')
    .max(1_000),
  per: periodSchema,
  channels: z
    .array(z.enum(CONTACT_CHANNELS, { error: 'must be "call", "line", "email" or "sms"' }))
    .min(1, 'must name at least one channel')
    .refine((channels) => new Set(channels).size === channels.length, 'must not name a channel twice'),
});

/** The schema of a client's `contactLimits` (its issues carry paths such as `[0].max`). */
export const contactLimitsSchema = z
  .array(limitSchema)
  .max(CONTACT_LIMITS_MAX, `at most ${CONTACT_LIMITS_MAX} limits`);

/** The channel a job contacts on (a job stored before email says `message` for `line`). */
export function contactChannelOf(jobChannel: JobChannel | 'message'): ContactChannel {
  return jobChannel === 'message' ? 'line' : jobChannel;
}

/** A name of the limit, stable while its settings are (the counter's key part). */
export function limitName(limit: ContactLimit): string {
  const per = typeof limit.per === 'string' ? limit.per : `${limit.per.days}d`;
  return `${[...limit.channels].sort().join('+')}/${per}/${limit.max}`;
}

export interface ContactWindow {
  readonly start: number;
  readonly end: number;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The window of `per` that holds `now`, on the wall clock of `timeZone`. */
export function windowOf(per: ContactPeriod, now: number, timeZone: string): ContactWindow {
  const wall = wallTimeAt(timeZone, now);
  if (per === 'hour') {
    const start = wall - (wall % HOUR);
    return { start: now - (wall - start), end: now - (wall - start) + HOUR };
  }
  const days = per === 'day' ? 1 : per === 'week' ? 7 : per.days;
  const dayNumber = Math.floor(wall / DAY);
  // 1970-01-01 was a Thursday: weeks start on Monday, 4 days later on the day count.
  const first = per === 'week' ? dayNumber - ((dayNumber + 3) % 7) : dayNumber - (dayNumber % days);
  return {
    start: firstInstantAtWallTime(timeZone, first * DAY),
    end: firstInstantAtWallTime(timeZone, (first + days) * DAY),
  };
}

/** One limit a contact must pass: the counter to take a slot of, its cap, and its window. */
export interface CapSlot {
  readonly limit: ContactLimit;
  /** The counter's sort key: the limit's name and its window's start. */
  readonly counter: string;
  readonly max: number;
  readonly window: ContactWindow;
}

/** The limits a contact on `channel` at `now` must pass, with the window each counts in. */
export function capSlots(
  limits: readonly ContactLimit[] | undefined,
  channel: ContactChannel,
  now: number,
  timeZone: string,
): CapSlot[] {
  return (limits ?? [])
    .filter((limit) => limit.channels.includes(channel))
    .map((limit) => {
      const window = windowOf(limit.per, now, timeZone);
      return { limit, counter: `${limitName(limit)}#${window.start}`, max: limit.max, window };
    });
}

/** How a limit reads in words: `2 per day (call, line)`. */
export function describeLimit(limit: ContactLimit): string {
  const per = typeof limit.per === 'string' ? limit.per : `${limit.per.days} days`;
  return `${limit.max} per ${per} (${limit.channels.join(', ')})`;
}

/** The reason a task ends with when its recipient's limit is reached until after its job ends. */
export function cappedReason(limit: ContactLimit, until: number): string {
  return `capped: contact limit ${describeLimit(limit)} reached until ${new Date(until).toISOString()}, after the job's end`;
}

/**
 * The reason a task over a limit carries while it waits for the window's end (shown in the job's
 * report; cleared when the task starts): `capped: waiting until … (contact limit 2 per day (call))`.
 */
export function cappedWaitingReason(limit: ContactLimit, until: number): string {
  return `capped: waiting until ${new Date(until).toISOString()} (contact limit ${describeLimit(limit)})`;
}

/** Is `reason` one {@link cappedWaitingReason} wrote (a task still waiting, not ended)? */
export function isCappedWaitingReason(reason: string | undefined): boolean {
  return reason?.startsWith('capped: waiting until ') === true;
}

/** Is `reason` one {@link cappedReason} (or, for a waiting task, {@link cappedWaitingReason}) wrote? */
export function isCappedReason(reason: string | undefined): boolean {
  return reason?.startsWith('capped: ') === true;
}

/**
 * What a task over a limit does: wait for the window's end when the job is still open then
 * (no `endAt`, or an `endAt` after it), else end.
 */
export function overCapMove(until: number, jobEndAt: number | undefined): 'wait' | 'end' {
  return jobEndAt === undefined || until < jobEndAt ? 'wait' : 'end';
}
