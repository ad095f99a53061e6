/**
 * Restricted periods: dates or date ranges during which no call or message starts, whatever the
 * calling hours say (a company holiday, a blackout around an incident), plus, on request, the
 * national (public) holidays of a country from the `date-holidays` library.
 *
 * Periods are local dates and times in the zone the calling hours use, and follow their
 * wall-clock rule ({@link firstInstantAtWallTime}): a boundary falls at the first instant the
 * zone's clock reaches it, so a daylight-saving day is neither skipped nor counted twice.
 *
 * - `start`: `YYYY-MM-DD` (from 00:00 of that day) or `YYYY-MM-DDTHH:MM[:SS]` (from that time);
 * - `end`: `YYYY-MM-DD` = through the end of that day (inclusive), `YYYY-MM-DDTHH:MM[:SS]` = up to
 *   that time (exclusive); absent = the start's day only (or the rest of it).
 *
 * A holiday restricts its whole local date (00:00 to the next 00:00) in that same zone.
 */
import Holidays from 'date-holidays';
import { z } from 'zod';
import { firstInstantAtWallTime, wallTimeAt } from './calling-hours.ts';

export interface RestrictedPeriod {
  readonly start: string;
  readonly end?: string;
  /** Shown to operators (`the job waits for "year-end closing" until …`). */
  readonly name?: string;
}

/** The national holidays of `country` (ISO 3166-1 alpha-2, e.g. `JP`), `date-holidays`' `public` type. */
export interface HolidayCalendar {
  readonly country: string;
}

/** Everything that restricts a start, in one zone. */
export interface Restrictions {
  readonly periods: readonly RestrictedPeriod[];
  /** Countries whose public holidays are restricted. */
  readonly holidays: readonly string[];
}

/** Most periods a client or a job may list (each start checks them all). */
export const MAX_RESTRICTED_PERIODS = 100;

const DAY = 86_400_000;
const LOCAL_RE = /^(\d{4})-(\d{2})-(\d{2})(?:T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?)?$/;

/** A local date or date-time as wall-time milliseconds (see `calling-hours.ts`); undefined if not real. */
export function parseLocal(text: string): { wall: number; dateOnly: boolean } | undefined {
  const m = LOCAL_RE.exec(text);
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = Date.UTC(year, month - 1, day);
  const check = new Date(date);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day)
    return undefined;
  if (m[4] === undefined) return { wall: date, dateOnly: true };
  const seconds = (Number(m[4]) * 60 + Number(m[5])) * 60 + Number(m[6] ?? 0);
  return { wall: date + seconds * 1000, dateOnly: false };
}

/** The wall-time interval `[from, to)` of a valid period. */
function wallInterval(period: RestrictedPeriod): { from: number; to: number } {
  const start = parseLocal(period.start)!;
  const end = period.end === undefined ? undefined : parseLocal(period.end)!;
  const from = start.wall;
  if (!end) return { from, to: Math.floor(from / DAY) * DAY + DAY };
  return { from, to: end.dateOnly ? end.wall + DAY : end.wall };
}

const LOCAL_MESSAGE = 'must be a date YYYY-MM-DD or a local date-time YYYY-MM-DDTHH:MM[:SS]';

export const restrictedPeriodSchema = z
  .strictObject({
    start: z.string().refine((s) => parseLocal(s) !== undefined, LOCAL_MESSAGE),
    end: z
      .string()
      .refine((s) => parseLocal(s) !== undefined, LOCAL_MESSAGE)
      .optional(),
    name: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters').optional(),
  })
  .superRefine((period, ctx) => {
    if (!parseLocal(period.start) || period.end === undefined || !parseLocal(period.end)) return;
    const { from, to } = wallInterval(period);
    if (to <= from) {
      ctx.addIssue({ code: 'custom', path: ['end'], message: `ends before it starts (${period.start})` });
    }
  });

export const restrictedPeriodsSchema = z
  .array(restrictedPeriodSchema)
  .max(MAX_RESTRICTED_PERIODS, `at most ${MAX_RESTRICTED_PERIODS} periods`);

let countries: ReadonlySet<string> | undefined;

/** Whether `date-holidays` knows the country's holidays. */
export function isHolidayCountry(country: string): boolean {
  countries ??= new Set(Object.keys(new Holidays().getCountries()));
  return countries.has(country);
}

export const holidayCalendarSchema = z.strictObject({
  country: z
    .string()
    .refine(isHolidayCountry, 'must be a country code whose holidays are known, such as JP or US'),
});

// ---------------------------------------------------------------------------------------------
// Holidays: the local dates (days since 1970-01-01) of a country's public holidays, per year.

const holidayDays = new Map<string, ReadonlySet<number>>();
const calendars = new Map<string, Holidays>();

function publicHolidays(country: string, year: number): ReadonlySet<number> {
  const key = `${country}/${year}`;
  let days = holidayDays.get(key);
  if (days) return days;
  let calendar = calendars.get(country);
  if (!calendar) {
    calendar = new Holidays(country);
    calendars.set(country, calendar);
  }
  const set = new Set<number>();
  for (const holiday of calendar.getHolidays(year)) {
    if (holiday.type !== 'public') continue;
    const first = Math.floor(Date.parse(`${holiday.date.slice(0, 10)}T00:00:00Z`) / DAY);
    const length = Math.max(1, Math.round((holiday.end.getTime() - holiday.start.getTime()) / DAY));
    for (let d = 0; d < length; d++) set.add(first + d);
  }
  days = set;
  if (holidayDays.size > 512) holidayDays.clear();
  holidayDays.set(key, days);
  return days;
}

/** The name of the public holiday on local date `day`, if any (for the operator's message). */
function holidayName(country: string, day: number): string {
  const date = new Date(day * DAY).toISOString().slice(0, 10);
  const found = calendars.get(country)?.isHoliday(`${date} 12:00`);
  const match = found ? found.find((h) => h.type === 'public') : undefined;
  return match ? `${match.name} (${country})` : `a public holiday (${country})`;
}

// ---------------------------------------------------------------------------------------------
// Checking an instant.

interface Compiled {
  readonly timeZone: string;
  readonly restrictions: Restrictions;
  /** Periods as instants `[start, end)`, sorted by start. */
  readonly periods: readonly { start: number; end: number; name: string }[];
}

const compiledByZone = new WeakMap<Restrictions, Map<string, Compiled>>();

function compile(restrictions: Restrictions, timeZone: string): Compiled {
  let byZone = compiledByZone.get(restrictions);
  if (!byZone) {
    byZone = new Map();
    compiledByZone.set(restrictions, byZone);
  }
  const cached = byZone.get(timeZone);
  if (cached) return cached;
  const periods = restrictions.periods
    .map((period) => {
      const { from, to } = wallInterval(period);
      return {
        start: firstInstantAtWallTime(timeZone, from),
        end: firstInstantAtWallTime(timeZone, to),
        name: period.name ?? (period.end ? `${period.start} – ${period.end}` : period.start),
      };
    })
    .filter((p) => p.end > p.start)
    .sort((a, b) => a.start - b.start);
  const result: Compiled = { timeZone, restrictions, periods };
  if (byZone.size > 64) byZone.clear();
  byZone.set(timeZone, result);
  return result;
}

/** One restriction holding `instant`: when it ends and what it is. */
export interface RestrictionHit {
  readonly end: number;
  readonly name: string;
}

/** The restriction holding `instant`; a holiday's name is looked up only when asked (it is slow). */
function hitAt(c: Compiled, instant: number): { end: number; name: () => string } | undefined {
  for (const period of c.periods) {
    if (period.start > instant) break;
    if (instant < period.end) return { end: period.end, name: () => period.name };
  }
  if (c.restrictions.holidays.length === 0) return undefined;
  const day = Math.floor(wallTimeAt(c.timeZone, instant) / DAY);
  const year = new Date(day * DAY).getUTCFullYear();
  for (const country of c.restrictions.holidays) {
    if (!publicHolidays(country, year).has(day)) continue;
    return {
      end: firstInstantAtWallTime(c.timeZone, (day + 1) * DAY),
      name: () => holidayName(country, day),
    };
  }
  return undefined;
}

/** True when `instant` is inside a restricted period or holiday, in `timeZone`. */
export function isRestricted(restrictions: Restrictions, timeZone: string, instant: number): boolean {
  if (restrictions.periods.length === 0 && restrictions.holidays.length === 0) return false;
  return hitAt(compile(restrictions, timeZone), instant) !== undefined;
}

/**
 * The restriction holding `instant`, with `end` = the first instant no restriction holds (back to
 * back periods and holidays count as one: a period ending on the eve of a holiday ends after it);
 * undefined when nothing restricts `instant`.
 */
export function restrictionAt(
  restrictions: Restrictions,
  timeZone: string,
  instant: number,
): RestrictionHit | undefined {
  if (restrictions.periods.length === 0 && restrictions.holidays.length === 0) return undefined;
  const c = compile(restrictions, timeZone);
  const first = hitAt(c, instant);
  if (!first) return undefined;
  let end = first.end;
  // Bounded: a run of restricted days longer than this is a configuration to question anyway.
  for (let i = 0; i < 1000; i++) {
    const next = hitAt(c, end);
    if (!next) break;
    end = next.end;
  }
  return { end, name: first.name() };
}

export const NO_RESTRICTIONS: Restrictions = Object.freeze({ periods: [], holidays: [] });
