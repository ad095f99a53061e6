import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CallingHours,
  type CallingWindow,
  effectiveCallingHours,
  InvalidCallingHoursError,
  isOpen,
  nextOpening,
  parseCallingHours,
  WEEKDAYS,
  type Weekday,
  wallTimeAt,
} from '#shared/pacing/calling-hours.ts';

const at = (iso: string): number => Date.parse(iso);
const nine2six = [{ start: '09:00', end: '18:00' }];

const tokyoOffice: CallingHours = {
  timeZone: 'Asia/Tokyo',
  weekly: { mon: nine2six, tue: nine2six, wed: nine2six, thu: nine2six, fri: nine2six, sat: [], sun: [] },
};

function issuesOf(input: unknown): { path: string; message: string }[] {
  try {
    parseCallingHours(input);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidCallingHoursError);
    return [...(error as InvalidCallingHoursError).issues];
  }
  throw new Error('expected the calling hours to be rejected');
}

const MINUTE = 60_000;

/**
 * When the open period containing `instant` ends, read off `isOpen` a minute at a time (every
 * boundary here is on a whole minute): undefined when closed at `instant`, Infinity when still open
 * 8 days on.
 */
function closesAt(hours: CallingHours, instant: number): number | undefined {
  if (!isOpen(hours, instant)) return undefined;
  for (let t = instant + MINUTE; t <= instant + 8 * 86_400_000; t += MINUTE) if (!isOpen(hours, t)) return t;
  return Number.POSITIVE_INFINITY;
}

describe('calling hours in the client’s time zone', () => {
  it('opens at 09:00 and closes at 18:00 Tokyo time on weekdays', () => {
    expect(isOpen(tokyoOffice, at('2025-06-02T00:00:00Z'))).toBe(true); // Mon 09:00 JST
    expect(isOpen(tokyoOffice, at('2025-06-01T23:59:59.999Z'))).toBe(false);
    expect(isOpen(tokyoOffice, at('2025-06-02T08:59:59.999Z'))).toBe(true);
    expect(isOpen(tokyoOffice, at('2025-06-02T09:00:00Z'))).toBe(false); // 18:00 JST
    expect(closesAt(tokyoOffice, at('2025-06-02T03:00:00Z'))).toBe(at('2025-06-02T09:00:00Z'));
    expect(closesAt(tokyoOffice, at('2025-06-02T10:00:00Z'))).toBeUndefined();
  });

  it('after Friday’s close, next opens on Monday morning', () => {
    expect(nextOpening(tokyoOffice, at('2025-06-06T09:00:00Z'))).toBe(at('2025-06-09T00:00:00Z'));
    // Open now: the next opening is now.
    expect(nextOpening(tokyoOffice, at('2025-06-06T05:00:00Z'))).toBe(at('2025-06-06T05:00:00Z'));
  });

  it('gives a window across midnight to the day it starts', () => {
    const lateFriday: CallingHours = {
      timeZone: 'Asia/Tokyo',
      weekly: { fri: [{ start: '22:00', end: '02:00' }] },
    };
    expect(isOpen(lateFriday, at('2025-06-06T16:00:00Z'))).toBe(true); // Sat 01:00 JST
    expect(isOpen(lateFriday, at('2025-06-05T16:00:00Z'))).toBe(false); // Fri 01:00 JST
    expect(closesAt(lateFriday, at('2025-06-06T13:00:00Z'))).toBe(at('2025-06-06T17:00:00Z'));
    expect(nextOpening(lateFriday, at('2025-06-06T17:00:00Z'))).toBe(at('2025-06-13T13:00:00Z'));
  });

  it('treats a Sunday-night window as running into Monday', () => {
    const sundayNight: CallingHours = {
      timeZone: 'UTC',
      weekly: { sun: [{ start: '23:00', end: '01:00' }] },
    };
    expect(isOpen(sundayNight, at('2025-06-09T00:30:00Z'))).toBe(true); // Monday 00:30
    expect(closesAt(sundayNight, at('2025-06-08T23:00:00Z'))).toBe(at('2025-06-09T01:00:00Z'));
  });

  it('counts back-to-back windows as one open period', () => {
    const split: CallingHours = {
      timeZone: 'UTC',
      weekly: { mon: [{ start: '22:00', end: '24:00' }], tue: [{ start: '00:00', end: '03:00' }] },
    };
    expect(closesAt(split, at('2025-06-02T23:00:00Z'))).toBe(at('2025-06-03T03:00:00Z'));
  });

  it('knows hours that never open and hours that never close', () => {
    const never: CallingHours = { timeZone: 'Europe/London', weekly: {} };
    expect(isOpen(never, at('2025-06-02T12:00:00Z'))).toBe(false);
    expect(nextOpening(never, at('2025-06-02T12:00:00Z'))).toBeUndefined();
    const always: CallingHours = {
      timeZone: 'Europe/London',
      weekly: Object.fromEntries(WEEKDAYS.map((d) => [d, [{ start: '00:00', end: '24:00' }]])),
    };
    expect(isOpen(always, at('2025-03-30T01:30:00Z'))).toBe(true);
    expect(closesAt(always, at('2025-03-30T01:30:00Z'))).toBe(Number.POSITIVE_INFINITY);
  });

  it('lets a job’s own hours replace the client’s', () => {
    const evenings: CallingHours = {
      timeZone: 'Asia/Tokyo',
      weekly: { mon: [{ start: '18:00', end: '21:00' }] },
    };
    expect(effectiveCallingHours(tokyoOffice)).toBe(tokyoOffice);
    const hours = effectiveCallingHours(tokyoOffice, evenings);
    expect(isOpen(hours, at('2025-06-02T03:00:00Z'))).toBe(false);
    expect(isOpen(hours, at('2025-06-02T10:00:00Z'))).toBe(true);
  });
});

describe('calling hours across daylight-saving changes', () => {
  it('New York spring forward: a start inside the skipped hour opens when the clock jumps', () => {
    const hours: CallingHours = {
      timeZone: 'America/New_York',
      weekly: { sun: [{ start: '02:30', end: '04:00' }] },
    };
    // 2025-03-09: 02:00 EST becomes 03:00 EDT at 07:00Z.
    expect(isOpen(hours, at('2025-03-09T06:59:59.999Z'))).toBe(false);
    expect(nextOpening(hours, at('2025-03-09T05:00:00Z'))).toBe(at('2025-03-09T07:00:00Z'));
    expect(closesAt(hours, at('2025-03-09T07:00:00Z'))).toBe(at('2025-03-09T08:00:00Z')); // 04:00 EDT
  });

  it('New York spring forward: an end inside the skipped hour closes when the clock jumps', () => {
    const hours: CallingHours = {
      timeZone: 'America/New_York',
      weekly: { sat: [{ start: '22:00', end: '02:30' }] },
    };
    expect(closesAt(hours, at('2025-03-09T03:00:00Z'))).toBe(at('2025-03-09T07:00:00Z'));
    expect(isOpen(hours, at('2025-03-09T06:59:00Z'))).toBe(true); // 01:59 EST
    expect(isOpen(hours, at('2025-03-09T07:00:00Z'))).toBe(false); // 03:00 EDT
  });

  it('New York spring forward: the same 09:00 is an hour earlier in UTC', () => {
    const daily: CallingHours = { timeZone: 'America/New_York', weekly: { sat: nine2six, sun: nine2six } };
    expect(nextOpening(daily, at('2025-03-08T00:00:00Z'))).toBe(at('2025-03-08T14:00:00Z'));
    expect(nextOpening(daily, at('2025-03-08T23:30:00Z'))).toBe(at('2025-03-09T13:00:00Z'));
  });

  it('New York fall back: a window ending at 01:30 does not reopen when 01:00–02:00 repeats', () => {
    const hours: CallingHours = {
      timeZone: 'America/New_York',
      weekly: { sat: [{ start: '22:00', end: '01:30' }] },
    };
    // 2025-11-02: 02:00 EDT becomes 01:00 EST at 06:00Z.
    expect(closesAt(hours, at('2025-11-02T02:00:00Z'))).toBe(at('2025-11-02T05:30:00Z')); // 01:30 EDT
    expect(isOpen(hours, at('2025-11-02T06:15:00Z'))).toBe(false); // 01:15 EST, second time round
    expect(nextOpening(hours, at('2025-11-02T05:30:00Z'))).toBe(at('2025-11-09T03:00:00Z')); // next Sat, EST
  });

  it('New York fall back: a window starting in the repeated hour opens at its first occurrence', () => {
    const hours: CallingHours = {
      timeZone: 'America/New_York',
      weekly: { sun: [{ start: '01:30', end: '03:00' }] },
    };
    expect(nextOpening(hours, at('2025-11-02T00:00:00Z'))).toBe(at('2025-11-02T05:30:00Z'));
    expect(closesAt(hours, at('2025-11-02T05:30:00Z'))).toBe(at('2025-11-02T08:00:00Z')); // 03:00 EST
  });

  it('London: office hours follow BST, and the skipped hour opens at the change', () => {
    const office: CallingHours = {
      timeZone: 'Europe/London',
      weekly: { mon: nine2six, fri: nine2six, sun: [{ start: '01:30', end: '06:00' }] },
    };
    expect(nextOpening(office, at('2025-03-28T00:00:00Z'))).toBe(at('2025-03-28T09:00:00Z')); // GMT
    // 2025-03-30: 01:00 GMT becomes 02:00 BST at 01:00Z.
    expect(nextOpening(office, at('2025-03-29T12:00:00Z'))).toBe(at('2025-03-30T01:00:00Z'));
    expect(closesAt(office, at('2025-03-30T01:00:00Z'))).toBe(at('2025-03-30T05:00:00Z'));
    expect(nextOpening(office, at('2025-03-30T05:00:00Z'))).toBe(at('2025-03-31T08:00:00Z')); // BST
    expect(closesAt(office, at('2025-03-31T08:00:00Z'))).toBe(at('2025-03-31T17:00:00Z'));
  });

  it('London fall back: a late window closes at the first 01:30', () => {
    const hours: CallingHours = {
      timeZone: 'Europe/London',
      weekly: { sat: [{ start: '23:00', end: '01:30' }] },
    };
    // 2025-10-26: 02:00 BST becomes 01:00 GMT at 01:00Z.
    expect(nextOpening(hours, at('2025-10-25T12:00:00Z'))).toBe(at('2025-10-25T22:00:00Z'));
    expect(closesAt(hours, at('2025-10-25T22:00:00Z'))).toBe(at('2025-10-26T00:30:00Z'));
    expect(isOpen(hours, at('2025-10-26T01:15:00Z'))).toBe(false); // 01:15 GMT
  });

  it('Sydney: daylight time ends in April and starts in October', () => {
    const daily: CallingHours = {
      timeZone: 'Australia/Sydney',
      weekly: Object.fromEntries(WEEKDAYS.map((d) => [d, [{ start: '09:00', end: '17:00' }]])),
    };
    // 2025-04-06: 03:00 AEDT becomes 02:00 AEST at 2025-04-05T16:00Z.
    expect(nextOpening(daily, at('2025-04-04T12:00:00Z'))).toBe(at('2025-04-04T22:00:00Z')); // Sat, AEDT
    expect(nextOpening(daily, at('2025-04-05T06:00:00Z'))).toBe(at('2025-04-05T23:00:00Z')); // Sun, AEST
    const lateSaturday: CallingHours = {
      timeZone: 'Australia/Sydney',
      weekly: { sat: [{ start: '23:00', end: '02:30' }] },
    };
    expect(closesAt(lateSaturday, at('2025-04-05T12:00:00Z'))).toBe(at('2025-04-05T15:30:00Z')); // 02:30 AEDT
    expect(isOpen(lateSaturday, at('2025-04-05T16:15:00Z'))).toBe(false); // 02:15 AEST
    // 2025-10-05: 02:00 AEST becomes 03:00 AEDT at 2025-10-04T16:00Z; 02:30 never shows.
    expect(closesAt(lateSaturday, at('2025-10-04T13:00:00Z'))).toBe(at('2025-10-04T16:00:00Z'));
  });
});

describe('calling hours validation', () => {
  it('accepts a full week and back-to-back windows', () => {
    expect(parseCallingHours(tokyoOffice)).toEqual(tokyoOffice);
    expect(() =>
      parseCallingHours({
        timeZone: 'Europe/London',
        weekly: {
          mon: [
            { start: '09:00', end: '12:00' },
            { start: '12:00', end: '24:00' },
          ],
          tue: [],
        },
      }),
    ).not.toThrow();
  });

  it('names an unknown time zone', () => {
    expect(issuesOf({ timeZone: 'Mars/Olympus', weekly: {} })).toEqual([
      { path: 'timeZone', message: expect.stringContaining('IANA time zone') },
    ]);
  });

  it('names a time that is not on the clock', () => {
    const issues = issuesOf({ timeZone: 'Asia/Tokyo', weekly: { mon: [{ start: '25:00', end: '9:00' }] } });
    expect(issues.map((i) => i.path)).toEqual(['weekly.mon[0].start', 'weekly.mon[0].end']);
  });

  it('rejects a window whose start equals its end', () => {
    expect(issuesOf({ timeZone: 'Asia/Tokyo', weekly: { tue: [{ start: '09:00', end: '09:00' }] } })).toEqual(
      [{ path: 'weekly.tue[0].end', message: expect.stringContaining('00:00–24:00') }],
    );
  });

  it('rejects overlapping windows, on the same day, past midnight and from Sunday into Monday', () => {
    const w = (start: string, end: string): CallingWindow => ({ start, end });
    expect(
      issuesOf({ timeZone: 'UTC', weekly: { wed: [w('09:00', '12:00'), w('11:00', '13:00')] } }),
    ).toEqual([{ path: 'weekly.wed[1]', message: 'overlaps weekly.wed[0] (09:00–12:00)' }]);
    expect(
      issuesOf({ timeZone: 'UTC', weekly: { mon: [w('22:00', '02:00')], tue: [w('01:00', '05:00')] } }),
    ).toEqual([{ path: 'weekly.tue[0]', message: 'overlaps weekly.mon[0] (22:00–02:00)' }]);
    expect(
      issuesOf({ timeZone: 'UTC', weekly: { mon: [w('00:30', '05:00')], sun: [w('23:00', '01:00')] } }).map(
        (i) => i.path,
      ),
    ).toEqual(['weekly.sun[0]']);
  });

  it('still reads hours stored with an abbreviation (refused where settings are given, not here)', () => {
    expect(() => parseCallingHours({ timeZone: 'EST', weekly: {} })).not.toThrow();
  });

  it('rejects unknown days and fields rather than ignoring them', () => {
    const issues = issuesOf({ timeZone: 'UTC', weekly: { monday: [] }, zone: 'x' });
    expect(issues.map((i) => i.path).sort()).toEqual(['', 'weekly']);
  });

  it('refuses to evaluate hours that do not validate', () => {
    expect(() => isOpen({ timeZone: 'UTC', weekly: { mon: [{ start: '24:00', end: '01:00' }] } }, 0)).toThrow(
      InvalidCallingHoursError,
    );
  });
});

/** Random valid weekly hours: disjoint windows cut from sorted minute marks across the week. */
const weeklyHours = fc
  .uniqueArray(fc.integer({ min: 0, max: 7 * 1440 - 1 }), { minLength: 2, maxLength: 14 })
  .map((marks) => {
    const sorted = [...marks].sort((a, b) => a - b);
    const weekly: Partial<Record<Weekday, CallingWindow[]>> = {};
    const hhmm = (m: number): string =>
      `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
    for (let i = 0; i + 1 < sorted.length; i += 2) {
      const from = sorted[i]!;
      const to = Math.min(sorted[i + 1]!, from + 1439);
      const day = Math.floor(from / 1440);
      const start = from - day * 1440;
      const end = to - day * 1440;
      const window = { start: hhmm(start), end: end === 1440 ? '24:00' : hhmm(end % 1440) };
      const weekday = WEEKDAYS[day]!;
      weekly[weekday] = [...(weekly[weekday] ?? []), window];
    }
    return weekly;
  });

const zones = fc.constantFrom(
  'America/New_York',
  'Europe/London',
  'Australia/Sydney',
  'Australia/Lord_Howe',
  'Asia/Tokyo',
  'Asia/Kolkata',
);
const instants2025 = fc.integer({ min: at('2025-01-01T00:00:00Z'), max: at('2026-01-01T00:00:00Z') });

describe('calling hours, for any valid week in any zone', () => {
  it('agrees with itself: the next opening is open, and closed just before it', () => {
    fc.assert(
      fc.property(zones, weeklyHours, instants2025, (timeZone, weekly, instant) => {
        const hours = parseCallingHours({ timeZone, weekly });
        const opening = nextOpening(hours, instant);
        expect(opening).toBeDefined();
        expect(opening!).toBeGreaterThanOrEqual(instant);
        expect(opening! - instant).toBeLessThanOrEqual(8 * 86_400_000);
        expect(isOpen(hours, opening!)).toBe(true);
        if (opening! > instant) {
          expect(isOpen(hours, opening! - 1)).toBe(false);
          expect(isOpen(hours, Math.floor((instant + opening!) / 2))).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('is open exactly when the local wall clock is inside a window, away from clock changes', () => {
    fc.assert(
      fc.property(zones, weeklyHours, instants2025, (timeZone, weekly, instant) => {
        const offset = (t: number): number => wallTimeAt(timeZone, t) - t;
        fc.pre(offset(instant - 6 * 3_600_000) === offset(instant + 6 * 3_600_000));
        const wall = wallTimeAt(timeZone, instant);
        const day = Math.floor(wall / 86_400_000);
        const minute = (wall - day * 86_400_000) / 60_000;
        const weekdayOf = (d: number): Weekday => WEEKDAYS[(((d + 3) % 7) + 7) % 7]!;
        const minutes = (time: string): number => Number(time.slice(0, 2)) * 60 + Number(time.slice(3));
        const inside = [0, 1].some((back) =>
          (weekly[weekdayOf(day - back)] ?? []).some((w) => {
            const start = minutes(w.start);
            const end = minutes(w.end) > start ? minutes(w.end) : minutes(w.end) + 1440;
            const m = minute + back * 1440;
            return start <= m && m < end;
          }),
        );
        expect(isOpen(parseCallingHours({ timeZone, weekly }), instant)).toBe(inside);
      }),
      { numRuns: 500 },
    );
  });
});

describe('wallTimeAt', () => {
  /** The wall clock straight from Intl, to the second, plus the milliseconds (the reference). */
  const formatters = new Map<string, Intl.DateTimeFormat>();
  function reference(timeZone: string, instant: number): number {
    let f = formatters.get(timeZone);
    if (!f) {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
      formatters.set(timeZone, f);
    }
    const p = Object.fromEntries(f.formatToParts(instant).map((x) => [x.type, Number(x.value)]));
    return (
      Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) +
      (((instant % 1000) + 1000) % 1000)
    );
  }

  // One test per area (Africa, America, …) so that no single test holds the whole sweep: the work
  // is the same, and a loaded machine gets a generous bound per area rather than one for all.
  const zones = Intl.supportedValuesOf('timeZone');
  const areas = [...new Set(zones.map((zone) => zone.split('/')[0]!))];
  let transitions = 0;
  it.each(areas)(
    'matches the zone data to the millisecond around every clock change, 1950–2040, in every %s zone the runtime knows, asked in any order',
    (area) => {
      const offset = (zone: string, t: number) => reference(zone, t) - t;
      // Four-week steps find the changes (two within four weeks are rare; the spot checks still run)
      const STEP = 28 * 86_400_000;
      for (const zone of zones.filter((z) => z.split('/')[0] === area)) {
        // A binary search finds each change's millisecond.
        const checks: number[] = [];
        let next = offset(zone, Date.UTC(1950, 0, 1));
        for (let t = Date.UTC(1950, 0, 1); t < Date.UTC(2040, 0, 1); t += STEP) {
          const was = next;
          next = offset(zone, t + STEP);
          if (was === next) continue;
          let before = t;
          let after = t + STEP;
          while (after - before > 1) {
            const mid = Math.floor((before + after) / 2);
            if (offset(zone, mid) === was) before = mid;
            else after = mid;
          }
          transitions += 1;
          checks.push(
            after - 61_000,
            after - 1_000,
            after - 1,
            after,
            after + 1,
            after + 59_999,
            after + 60_000,
          );
        }
        // Later instants first, then earlier ones: what was remembered must not answer for another.
        for (const t of [...checks.reverse(), ...checks.reverse()])
          expect(wallTimeAt(zone, t)).toBe(reference(zone, t));
      }
    },
    180_000,
  );

  it('has swept more than 10,000 clock changes across every area', () => {
    expect(transitions).toBeGreaterThan(10_000);
  });
});
