/**
 * Calling hours: when a client's calls may start, as daily windows per weekday in the client's
 * IANA time zone. A window whose end is not after its start crosses midnight and belongs to the
 * day it starts (`fri 22:00–02:00` runs into Saturday morning). A job may carry its own hours,
 * which replace the client's ({@link effectiveCallingHours}).
 *
 * Wall-clock rule, which settles daylight-saving days: a window opens at the first instant the
 * zone's wall clock reaches its start on that date, and closes at the first instant it reaches
 * its end. So a boundary in a spring-forward gap falls on the transition itself (the clock
 * jumps past it there), and a boundary in a fall-back overlap takes its first occurrence: a
 * window ending at 01:30 closes at 01:30 daylight time and does not reopen when the clock
 * repeats 01:00–02:00. Time-zone arithmetic uses Intl.DateTimeFormat only.
 */
import { z } from 'zod';
import { PacingError } from './errors.ts';

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** `HH:MM` local times; `end` may be `24:00`, and an end at or before the start means the next day. */
export interface CallingWindow {
  readonly start: string;
  readonly end: string;
}

export interface CallingHours {
  /** IANA zone of the client, e.g. `Asia/Tokyo`. */
  readonly timeZone: string;
  /** Windows per weekday; a missing or empty day is closed. */
  readonly weekly: Readonly<Partial<Record<Weekday, readonly CallingWindow[]>>>;
}

export interface CallingHoursIssue {
  /** Where the problem is, e.g. `weekly.mon[0].start`. */
  readonly path: string;
  readonly message: string;
}

export class InvalidCallingHoursError extends PacingError {
  readonly issues: readonly CallingHoursIssue[];

  constructor(issues: readonly CallingHoursIssue[]) {
    super(`invalid calling hours: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`);
    this.issues = issues;
  }
}

const MINUTE = 60_000;
const DAY = 86_400_000;
const DAY_MINUTES = 1440;
const WEEK_MINUTES = 7 * DAY_MINUTES;
const START_RE = /^([01]\d|2[0-3]):[0-5]\d$/;
const END_RE = /^(([01]\d|2[0-3]):[0-5]\d|24:00)$/;

function minutesOf(time: string): number {
  return Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));
}

/**
 * Names the runtime has said are zones. Unknown strings are not remembered; known ones may be spelt
 * in any case ("asia/tokyo"), which input controls, so the set is bounded too.
 */
const knownZones = new Set<string>();
const ZONES_REMEMBERED = 2_048;

/** Whether the runtime knows `value` as an IANA time zone. */
export function isTimeZone(value: string): boolean {
  if (knownZones.has(value)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    if (knownZones.size >= ZONES_REMEMBERED) knownZones.clear();
    knownZones.add(value);
    return true;
  } catch {
    return false;
  }
}

const windowSchema = z
  .strictObject({
    start: z.string().regex(START_RE, 'must be a time HH:MM from 00:00 to 23:59'),
    end: z.string().regex(END_RE, 'must be a time HH:MM from 00:00 to 24:00'),
  })
  .superRefine((window, ctx) => {
    if (!START_RE.test(window.start) || !END_RE.test(window.end)) return;
    if (minutesOf(window.start) === minutesOf(window.end)) {
      ctx.addIssue({
        code: 'custom',
        path: ['end'],
        message: `start and end are both ${window.start}: use 00:00–24:00 for a whole day`,
      });
    }
  });

const weeklySchema = z.strictObject(
  Object.fromEntries(WEEKDAYS.map((day) => [day, z.array(windowSchema).optional()])) as Record<
    Weekday,
    z.ZodOptional<z.ZodArray<typeof windowSchema>>
  >,
);

/**
 * Abbreviations and bare offsets the runtime accepts as zones but a list must not: `EST` is a link
 * to America/Panama (UTC−5 all year) and `MST` to America/Phoenix, so a New York recipient's hours
 * would be an hour off all summer; `CST` is Chicago to the runtime and China to a Chinese list;
 * `+09:00` names no place. The tz database's own upper-case names that follow their place's
 * daylight saving (or have none) stay zones, and so do the short mixed-case ones: {@link UPPER_CASE_ZONES}.
 */
const ABBREVIATION_OR_OFFSET =
  /^(?:[A-Z]{2,5}|[A-Z]{3,5}[+-]?\d{1,2}(?:[A-Z]{3,5})?|[+-]\d{1,2}(?::?\d{2})?)$/;
const UPPER_CASE_ZONES = new Set([
  'UTC',
  'UCT',
  'GMT',
  'GMT0',
  'CET',
  'MET',
  'EET',
  'WET',
  'EST5EDT',
  'CST6CDT',
  'MST7MDT',
  'PST8PDT',
  'GB',
  'NZ',
  'PRC',
  'ROC',
  'ROK',
  // Names of five letters or fewer the tz database spells in mixed case (compared upper-cased).
  'CUBA',
  'EGYPT',
  'EIRE',
  'IRAN',
  'JAPAN',
  'LIBYA',
  'ZULU',
]);

/** True for an abbreviation or offset that is no zone of a place (`EST`, `cst`, `+09:00`), whatever its case. */
export function isAbbreviationOrOffset(zone: string): boolean {
  const upper = zone.trim().toUpperCase();
  return ABBREVIATION_OR_OFFSET.test(upper) && !UPPER_CASE_ZONES.has(upper);
}

export const callingHoursSchema = z
  .strictObject({
    timeZone: z
      .string()
      // Abbreviations are refused where settings are given (`shared/jobs/validation.ts`), not here:
      // hours stored before that rule must still compile.
      .refine(isTimeZone, 'must be an IANA time zone such as Asia/Tokyo'),
    weekly: weeklySchema,
  })
  .superRefine((hours, ctx) => {
    // Windows as minute ranges on a week that wraps from Sunday night into Monday morning.
    const ranges: { from: number; to: number; day: Weekday; index: number; label: string }[] = [];
    WEEKDAYS.forEach((day, dayIndex) => {
      (hours.weekly[day] ?? []).forEach((w, index) => {
        if (!START_RE.test(w.start) || !END_RE.test(w.end)) return;
        const start = minutesOf(w.start);
        const end = minutesOf(w.end);
        if (start === end) return;
        const from = dayIndex * DAY_MINUTES + start;
        ranges.push({
          from,
          to: dayIndex * DAY_MINUTES + (end > start ? end : end + DAY_MINUTES),
          day,
          index,
          label: `weekly.${day}[${index}] (${w.start}–${w.end})`,
        });
      });
    });
    // Windows are few (a handful a day), so every pair is compared, shifted by a week either way.
    ranges.forEach((later, i) => {
      for (const earlier of ranges.slice(0, i)) {
        const clash = [-WEEK_MINUTES, 0, WEEK_MINUTES].some(
          (shift) => earlier.from + shift < later.to && later.from < earlier.to + shift,
        );
        if (clash) {
          ctx.addIssue({
            code: 'custom',
            path: ['weekly', later.day, later.index],
            message: `overlaps ${earlier.label}`,
          });
        }
      }
    });
  });

/** Validates untrusted calling hours; throws {@link InvalidCallingHoursError} listing every problem. */
export function parseCallingHours(input: unknown): CallingHours {
  const result = callingHoursSchema.safeParse(input);
  if (result.success) return result.data;
  throw new InvalidCallingHoursError(
    result.error.issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message })),
  );
}

function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`))
    .join('');
}

/** The hours that govern a job: its own when it has them, else its client's. */
export function effectiveCallingHours(client: CallingHours, job?: CallingHours): CallingHours {
  return job ?? client;
}

// ---------------------------------------------------------------------------------------------
// Zone arithmetic. A "wall time" is the zone's local date and time written as if it were UTC
// milliseconds, so local dates are plain integers (Math.floor(wall / DAY)).

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/**
 * Each zone's offset (wall clock minus instant) by whole minute of the instant, for the minutes
 * asked about lately. Exact: a zone's offset changes only at its transitions, and a transition
 * between whole-minute offsets falls on a whole minute; an offset that is not whole minutes (local
 * mean time, before the zone's first standard time) is never remembered.
 */
const offsetsByMinute = new Map<string, Map<number, number>>();
const OFFSETS_REMEMBERED = 4_096;

/** The zone's wall clock at `instant`, as UTC-axis milliseconds. */
export function wallTimeAt(timeZone: string, instant: number): number {
  const minute = Math.floor(instant / MINUTE);
  let offsets = offsetsByMinute.get(timeZone);
  const known = offsets?.get(minute);
  if (known !== undefined) return instant + known;
  const minuteStart = minute * MINUTE;
  const offset = formattedWallTime(timeZone, minuteStart) - minuteStart;
  if (offset % MINUTE !== 0) return formattedWallTime(timeZone, instant);
  if (!offsets) {
    offsets = new Map();
    offsetsByMinute.set(timeZone, offsets);
  }
  if (offsets.size >= OFFSETS_REMEMBERED) offsets.clear();
  offsets.set(minute, offset);
  return instant + offset;
}

/** {@link wallTimeAt} from the runtime's time zone data (`Intl`), a few microseconds a call. */
function formattedWallTime(timeZone: string, instant: number): number {
  const fields: Record<string, number> = {};
  for (const part of formatterFor(timeZone).formatToParts(instant)) {
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  }
  const wholeSecond = Math.floor(instant / 1000) * 1000;
  return (
    Date.UTC(fields.year!, fields.month! - 1, fields.day!, fields.hour!, fields.minute!, fields.second!) +
    (instant - wholeSecond)
  );
}

/**
 * The first instant at which the zone's wall clock reaches `wall`: its first occurrence in a
 * fall-back overlap, the transition itself when `wall` lies in a spring-forward gap.
 */
export function firstInstantAtWallTime(timeZone: string, wall: number): number {
  const offsets = new Set([wall - DAY, wall, wall + DAY].map((t) => wallTimeAt(timeZone, t) - t));
  let first: number | undefined;
  for (const offset of offsets) {
    const candidate = wall - offset;
    if (wallTimeAt(timeZone, candidate) === wall && (first === undefined || candidate < first))
      first = candidate;
  }
  if (first !== undefined) return first;
  // In a gap: between these bounds the wall clock rises monotonically past `wall`.
  let before = wall - Math.max(...offsets);
  let after = wall - Math.min(...offsets);
  while (after - before > 1) {
    const mid = Math.floor((before + after) / 2);
    if (wallTimeAt(timeZone, mid) >= wall) after = mid;
    else before = mid;
  }
  return after;
}

interface Interval {
  start: number;
  end: number;
}

interface CompiledHours {
  readonly timeZone: string;
  /** Index 0 = Sunday (as Date#getUTCDay); minutes from the day's midnight, end may pass 1440. */
  readonly windowsByDay: readonly (readonly { start: number; end: number }[])[];
  readonly dayCache: Map<number, Interval[]>;
}

const compiled = new WeakMap<CallingHours, CompiledHours>();
/**
 * Compiled hours by content: hours read afresh (a job manager run reads every client's profile, a
 * broker its jobs) are new objects, mostly with the same few contents.
 */
const compiledByContent = new Map<string, CompiledHours>();
// (JSON drops keys whose value is undefined: such an object finds the hours it equals without them.
// Validation's entry point is parseCallingHours, which sees every key.)
const CONTENTS_REMEMBERED = 1_024;

function compile(hours: CallingHours): CompiledHours {
  const cached = compiled.get(hours);
  if (cached) return cached;
  const content = JSON.stringify(hours);
  const same = compiledByContent.get(content);
  if (same) {
    compiled.set(hours, same);
    return same;
  }
  const result = compileFresh(hours);
  compiled.set(hours, result);
  if (compiledByContent.size >= CONTENTS_REMEMBERED) compiledByContent.clear();
  compiledByContent.set(content, result);
  return result;
}

function compileFresh(hours: CallingHours): CompiledHours {
  const valid = parseCallingHours(hours);
  const windowsByDay: { start: number; end: number }[][] = [[], [], [], [], [], [], []];
  WEEKDAYS.forEach((day, i) => {
    const windows = (valid.weekly[day] ?? []).map((w) => {
      const start = minutesOf(w.start);
      const end = minutesOf(w.end);
      return { start, end: end > start ? end : end + DAY_MINUTES };
    });
    windowsByDay[(i + 1) % 7] = windows.sort((a, b) => a.start - b.start);
  });
  return { timeZone: valid.timeZone, windowsByDay, dayCache: new Map() };
}

/** The open intervals of windows that start on local date `day` (days since 1970-01-01). */
function intervalsOfDay(hours: CompiledHours, day: number): Interval[] {
  const cached = hours.dayCache.get(day);
  if (cached) return cached;
  const weekday = (((day + 4) % 7) + 7) % 7; // 1970-01-01 was a Thursday
  const intervals: Interval[] = [];
  for (const w of hours.windowsByDay[weekday] ?? []) {
    const start = firstInstantAtWallTime(hours.timeZone, day * DAY + w.start * MINUTE);
    const end = firstInstantAtWallTime(hours.timeZone, day * DAY + w.end * MINUTE);
    if (end > start) intervals.push({ start, end });
  }
  if (hours.dayCache.size > 256) hours.dayCache.clear();
  hours.dayCache.set(day, intervals);
  return intervals;
}

/** Maximal open periods (touching windows merged) of windows starting on `days` dates from `fromDay`. */
function* openPeriods(hours: CompiledHours, fromDay: number, days: number): Generator<Interval> {
  let current: Interval | undefined;
  for (let day = fromDay; day < fromDay + days; day++) {
    for (const next of intervalsOfDay(hours, day)) {
      if (current && next.start <= current.end) {
        current = { start: current.start, end: Math.max(current.end, next.end) };
      } else {
        if (current) yield current;
        current = { ...next };
      }
    }
  }
  if (current) yield current;
}

function localDay(hours: CompiledHours, instant: number): number {
  return Math.floor(wallTimeAt(hours.timeZone, instant) / DAY);
}

/** True when a call may start at `instant`. */
export function isOpen(hours: CallingHours, instant: number): boolean {
  const c = compile(hours);
  for (const period of openPeriods(c, localDay(c, instant) - 2, 4)) {
    if (period.start > instant) return false;
    if (instant < period.end) return true;
  }
  return false;
}

/** The first instant at or after `instant` when calls may start; undefined if never. */
export function nextOpening(hours: CallingHours, instant: number): number | undefined {
  const c = compile(hours);
  // Two weeks and a bit: every weekday comes round twice, even if one date's window fell in a gap.
  for (const period of openPeriods(c, localDay(c, instant) - 2, 17)) {
    if (period.end > instant) return Math.max(period.start, instant);
  }
  return undefined;
}
