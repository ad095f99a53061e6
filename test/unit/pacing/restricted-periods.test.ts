import { describe, expect, it } from 'vitest';
import {
  isRestricted,
  parseLocal,
  type Restrictions,
  restrictedPeriodsSchema,
  restrictionAt,
} from '#shared/pacing/restricted-periods.ts';

const at = (iso: string) => Date.parse(iso);
const periods = (...list: Restrictions['periods']): Restrictions => ({ periods: list, holidays: [] });
const NY = 'America/New_York';
const TOKYO = 'Asia/Tokyo';

describe('restricted periods: boundaries (issue 14 #3)', () => {
  it('a single date restricts that whole local day: from 00:00 inclusive to the next 00:00 exclusive', () => {
    const r = periods({ start: '2026-12-31' });
    expect(isRestricted(r, TOKYO, at('2026-12-30T14:59:59.999Z'))).toBe(false); // 23:59:59.999 JST
    expect(isRestricted(r, TOKYO, at('2026-12-30T15:00:00Z'))).toBe(true); // 00:00 JST
    expect(isRestricted(r, TOKYO, at('2026-12-31T14:59:59.999Z'))).toBe(true); // 23:59:59.999 JST
    expect(isRestricted(r, TOKYO, at('2026-12-31T15:00:00Z'))).toBe(false); // 2027-01-01 00:00 JST
    expect(restrictionAt(r, TOKYO, at('2026-12-31T03:00:00Z'))).toEqual({
      end: at('2026-12-31T15:00:00Z'),
      name: '2026-12-31',
    });
  });

  it('a date range includes its end date; a date-time end is exclusive', () => {
    const days = periods({ start: '2026-12-29', end: '2027-01-03', name: 'year-end' });
    expect(restrictionAt(days, TOKYO, at('2026-12-29T00:00:00Z'))).toEqual({
      end: at('2027-01-03T15:00:00Z'),
      name: 'year-end',
    });
    const hours = periods({ start: '2026-11-20T12:00', end: '2026-11-20T13:30' });
    expect(isRestricted(hours, TOKYO, at('2026-11-20T02:59:59Z'))).toBe(false);
    expect(isRestricted(hours, TOKYO, at('2026-11-20T03:00:00Z'))).toBe(true);
    expect(isRestricted(hours, TOKYO, at('2026-11-20T04:29:59.999Z'))).toBe(true);
    expect(isRestricted(hours, TOKYO, at('2026-11-20T04:30:00Z'))).toBe(false);
  });

  it('the same local dates are other instants in another zone', () => {
    const r = periods({ start: '2026-07-04' });
    expect(isRestricted(r, NY, at('2026-07-04T03:59:00Z'))).toBe(false); // 23:59 EDT on the 3rd
    expect(isRestricted(r, NY, at('2026-07-04T04:00:00Z'))).toBe(true);
    expect(isRestricted(r, TOKYO, at('2026-07-04T03:59:00Z'))).toBe(true);
  });

  it('back-to-back periods end together', () => {
    const r = periods(
      { start: '2026-12-24', end: '2026-12-25' },
      { start: '2026-12-26T00:00', end: '2026-12-26T12:00' },
    );
    expect(restrictionAt(r, TOKYO, at('2026-12-24T01:00:00Z'))?.end).toBe(at('2026-12-26T03:00:00Z'));
  });
});

describe('restricted periods across daylight saving time (America/New_York)', () => {
  it('spring forward: the day of the jump is 23 hours long and ends at the next local midnight', () => {
    // 2026-03-08: 02:00 EST becomes 03:00 EDT.
    const r = periods({ start: '2026-03-08' });
    expect(restrictionAt(r, NY, at('2026-03-08T05:00:00Z'))).toEqual({
      end: at('2026-03-09T04:00:00Z'), // 00:00 EDT
      name: '2026-03-08',
    });
    expect(isRestricted(r, NY, at('2026-03-08T04:59:59Z'))).toBe(false); // 23:59:59 EST on the 7th
    expect(at('2026-03-09T04:00:00Z') - at('2026-03-08T05:00:00Z')).toBe(23 * 3600_000);
  });

  it('a boundary inside the spring-forward gap falls at the jump itself', () => {
    const r = periods({ start: '2026-03-08T02:30', end: '2026-03-08T05:00' });
    expect(isRestricted(r, NY, at('2026-03-08T06:59:59Z'))).toBe(false); // 01:59:59 EST
    expect(isRestricted(r, NY, at('2026-03-08T07:00:00Z'))).toBe(true); // 03:00 EDT, the jump
  });

  it('fall back: a boundary in the repeated hour takes its first occurrence, and the day is 25 hours', () => {
    // 2026-11-01: 02:00 EDT becomes 01:00 EST.
    const r = periods({ start: '2026-11-01T00:00', end: '2026-11-01T01:30' });
    expect(restrictionAt(r, NY, at('2026-11-01T04:00:00Z'))?.end).toBe(at('2026-11-01T05:30:00Z')); // 01:30 EDT
    expect(isRestricted(r, NY, at('2026-11-01T06:15:00Z'))).toBe(false); // 01:15 EST, the second time round
    const day = periods({ start: '2026-11-01' });
    expect(restrictionAt(day, NY, at('2026-11-01T04:00:00Z'))?.end).toBe(at('2026-11-02T05:00:00Z'));
    expect(at('2026-11-02T05:00:00Z') - at('2026-11-01T04:00:00Z')).toBe(25 * 3600_000);
  });
});

describe('national holidays from date-holidays', () => {
  const jp: Restrictions = { periods: [], holidays: ['JP'] };

  it('restricts the public holidays of Japan, whole days in Tokyo, substitute holidays included', () => {
    // 2026-11-03 文化の日 (Tuesday), 2026-05-06 振替休日 for 憲法記念日.
    const culture = restrictionAt(jp, TOKYO, at('2026-11-03T01:00:00Z'));
    expect(culture).toEqual({ end: at('2026-11-03T15:00:00Z'), name: '文化の日 (JP)' });
    expect(isRestricted(jp, TOKYO, at('2026-11-02T14:59:59Z'))).toBe(false);
    expect(isRestricted(jp, TOKYO, at('2026-11-02T15:00:00Z'))).toBe(true);
    expect(isRestricted(jp, TOKYO, at('2026-11-04T01:00:00Z'))).toBe(false);
    expect(isRestricted(jp, TOKYO, at('2026-05-06T01:00:00Z'))).toBe(true);
  });

  it('Golden Week runs together: 3, 4, 5 and the substitute 6 May end on the 7th', () => {
    expect(restrictionAt(jp, TOKYO, at('2026-05-03T01:00:00Z'))?.end).toBe(at('2026-05-06T15:00:00Z'));
  });

  it('a period next to a holiday ends after both (Silver Week 2026: 21–23 September)', () => {
    const r: Restrictions = { periods: [{ start: '2026-09-20' }], holidays: ['JP'] };
    expect(restrictionAt(r, TOKYO, at('2026-09-20T01:00:00Z'))?.end).toBe(at('2026-09-23T15:00:00Z'));
  });

  it('an ordinary day is not restricted, and no restrictions cost nothing', () => {
    expect(isRestricted(jp, TOKYO, at('2026-11-20T01:00:00Z'))).toBe(false);
    expect(restrictionAt({ periods: [], holidays: [] }, TOKYO, at('2026-11-03T01:00:00Z'))).toBeUndefined();
  });

  it("US holidays in New York's zone: Independence Day observed on Friday 3 July 2026", () => {
    const us: Restrictions = { periods: [], holidays: ['US'] };
    expect(isRestricted(us, NY, at('2026-07-04T16:00:00Z'))).toBe(true);
    expect(isRestricted(us, NY, at('2026-12-25T16:00:00Z'))).toBe(true);
    expect(isRestricted(us, NY, at('2026-12-28T16:00:00Z'))).toBe(false);
  });
});

describe('validation of periods', () => {
  const issues = (input: unknown) =>
    (restrictedPeriodsSchema.safeParse(input).error?.issues ?? []).map((i) => [i.path.join('.'), i.message]);

  it('reads dates and local date-times, refusing dates that do not exist', () => {
    expect(parseLocal('2026-02-28')).toEqual({ wall: Date.UTC(2026, 1, 28), dateOnly: true });
    expect(parseLocal('2026-02-28T09:30')?.wall).toBe(Date.UTC(2026, 1, 28, 9, 30));
    expect(parseLocal('2026-02-28T09:30:15')?.wall).toBe(Date.UTC(2026, 1, 28, 9, 30, 15));
    for (const bad of [
      '2026-02-30',
      '2026-13-01',
      '2026-1-1',
      '2026-01-01T24:00',
      '2026-01-01T09:00:60',
      '2026-01-01 09:00',
      '',
    ])
      expect(parseLocal(bad)).toBeUndefined();
  });

  it('names a period that ends before it starts, a bad date and too many periods', () => {
    expect(issues([{ start: '2026-12-31', end: '2026-12-30' }])).toEqual([
      ['0.end', 'ends before it starts (2026-12-31)'],
    ]);
    expect(issues([{ start: '2026-12-31T10:00', end: '2026-12-31T10:00' }])).toEqual([
      ['0.end', 'ends before it starts (2026-12-31T10:00)'],
    ]);
    expect(issues([{ start: '2026-12-31', end: '2026-12-31' }])).toEqual([]);
    expect(issues([{ start: '2026-02-30' }])[0]?.[0]).toBe('0.start');
    expect(issues(Array.from({ length: 101 }, () => ({ start: '2026-01-01' })))).toEqual([
      ['', 'at most 100 periods'],
    ]);
  });
});
