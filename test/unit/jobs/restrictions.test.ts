import { describe, expect, it } from 'vitest';
import type { ClientSettings, Job } from '#shared/jobs/model.ts';
import { earliestStart, mayStartNow } from '#shared/jobs/restrictions.ts';
import { parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';
import { jobWaitingFor } from '#shared/jobs/waiting.ts';
import { clientSettings, job as makeJob } from '../broker/fakes.ts';
import { fieldErrorsOf, TOKYO_CLIENT } from './fakes.ts';

// Friday 2026-11-20 09:00 in Tokyo.
const NOW = Date.parse('2026-11-20T00:00:00Z');
const weekdays = (timeZone: string, start: string, end: string) => ({
  timeZone,
  weekly: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri'].map((d) => [d, [{ start, end }]])),
});
const client = (over: Partial<ClientSettings> = {}) =>
  clientSettings({ callingHours: weekdays('Asia/Tokyo', '09:00', '18:00'), ...over });
const job = (over: Partial<Job> = {}) => makeJob({ startAt: NOW - 1, ...over });

describe('where a start is decided, restricted periods hold it (issue 14 #3)', () => {
  it("a client's period stops every job; a job's adds to the client's", () => {
    const today = { restrictedPeriods: [{ start: '2026-11-20', name: 'office move' }] };
    expect(mayStartNow(client(), job(), NOW)).toBe(true);
    expect(mayStartNow(client(today), job(), NOW)).toBe(false);
    expect(mayStartNow(client(), job(today), NOW)).toBe(false);
    const lunch = { restrictedPeriods: [{ start: '2026-11-20T12:00', end: '2026-11-20T13:00' }] };
    expect(mayStartNow(client(), job(lunch), NOW)).toBe(true);
    expect(mayStartNow(client(today), job(lunch), NOW)).toBe(false);
  });

  it('the next start skips the restricted days and waits for the hours after them', () => {
    // Friday restricted, the weekend closed: Monday 09:00.
    const c = client({ restrictedPeriods: [{ start: '2026-11-20' }] });
    expect(earliestStart(c, job(), NOW)).toBe(Date.parse('2026-11-23T00:00:00Z'));
    // Monday 2026-11-23 is 勤労感謝の日: with Japan's holidays, Tuesday 09:00.
    const withHolidays = client({
      restrictedPeriods: [{ start: '2026-11-20' }],
      holidays: { country: 'JP' },
    });
    expect(earliestStart(withHolidays, job(), NOW)).toBe(Date.parse('2026-11-24T00:00:00Z'));
    expect(earliestStart(client(), job(), NOW)).toBe(NOW);
  });

  it('the job says it waits for a restricted period, and until when', () => {
    const c = client({
      restrictedPeriods: [{ start: '2026-11-20T08:00', end: '2026-11-20T10:30', name: 'system upgrade' }],
    });
    expect(jobWaitingFor({ job: job(), client: c, now: NOW })).toEqual({
      reason: 'restricted-period',
      until: '2026-11-20T01:30:00.000Z',
      message: 'inside the restricted period system upgrade until 2026-11-20 10:30 Asia/Tokyo',
    });
    const holiday = jobWaitingFor({
      job: job(),
      client: client({ holidays: { country: 'JP' } }),
      now: Date.parse('2026-11-23T01:00:00Z'),
    });
    expect(holiday).toEqual({
      reason: 'restricted-period',
      until: '2026-11-23T15:00:00.000Z',
      message:
        'inside the restricted period 勤労感謝の日 (JP) until 2026-11-24 00:00 Asia/Tokyo; starts resume at 2026-11-24 09:00 Asia/Tokyo, when the hours open',
    });
  });

  it('periods are read in the zone of the hours that apply (New York)', () => {
    const ny = client({
      timeZone: 'America/New_York',
      callingHours: weekdays('America/New_York', '09:00', '18:00'),
      restrictedPeriods: [{ start: '2026-11-09' }],
    });
    expect(mayStartNow(ny, job(), Date.parse('2026-11-09T14:00:00Z'))).toBe(false); // Mon 09:00 EST
    expect(mayStartNow(ny, job(), Date.parse('2026-11-10T14:00:00Z'))).toBe(true);
  });
});

describe('bad input: restricted periods and holidays are named at their field', () => {
  it('client settings: a period ending before it starts, a bad date, an unknown country, too many', () => {
    const errors = fieldErrorsOf(() =>
      parseClientSettings(
        'acme',
        {
          ...TOKYO_CLIENT,
          restrictedPeriods: [
            { start: '2026-12-31', end: '2026-12-29' },
            { start: '2026-02-30' },
            { start: '2026-05-01', end: 'soon' },
          ],
          holidays: { country: 'XX' },
        },
        NOW,
      ),
    );
    expect(errors).toEqual({
      'restrictedPeriods[0].end': ['ends before it starts (2026-12-31)'],
      'restrictedPeriods[1].start': ['must be a date YYYY-MM-DD or a local date-time YYYY-MM-DDTHH:MM[:SS]'],
      'restrictedPeriods[2].end': ['must be a date YYYY-MM-DD or a local date-time YYYY-MM-DDTHH:MM[:SS]'],
      'holidays.country': ['must be a country code whose holidays are known, such as JP or US'],
    });
    const many = Array.from({ length: 101 }, () => ({ start: '2026-01-01' }));
    expect(
      fieldErrorsOf(() => parseClientSettings('acme', { ...TOKYO_CLIENT, restrictedPeriods: many }, NOW)),
    ).toEqual({
      restrictedPeriods: ['at most 100 periods'],
    });
  });

  it('client settings keep valid periods and holidays; jobDefaults take them too', () => {
    const settings = parseClientSettings(
      'acme',
      {
        ...TOKYO_CLIENT,
        restrictedPeriods: [{ start: '2026-12-29', end: '2027-01-03', name: '年末年始' }],
        holidays: { country: 'JP' },
        jobDefaults: { restrictedPeriods: [{ start: '2026-12-24' }] },
      },
      NOW,
    );
    expect(settings.restrictedPeriods).toEqual([
      { start: '2026-12-29', end: '2027-01-03', name: '年末年始' },
    ]);
    expect(settings.holidays).toEqual({ country: 'JP' });
    expect(parseJobOptions({ name: 'j' }, settings, NOW)).toMatchObject({
      restrictedPeriods: [{ start: '2026-12-24' }],
    });
    const own = parseJobOptions(
      { name: 'j', restrictedPeriods: [{ start: '2026-12-25' }], holidays: { country: 'US' } },
      settings,
      NOW,
    );
    expect(own).toMatchObject({ restrictedPeriods: [{ start: '2026-12-25' }], holidays: { country: 'US' } });
    expect(
      fieldErrorsOf(() =>
        parseClientSettings('acme', { ...TOKYO_CLIENT, jobDefaults: { holidays: { country: 'ZZ' } } }, NOW),
      ),
    ).toEqual({
      'jobDefaults.holidays.country': ['must be a country code whose holidays are known, such as JP or US'],
    });
  });

  it('job options: the same errors at the job field', () => {
    const settings = parseClientSettings('acme', TOKYO_CLIENT, NOW);
    expect(
      fieldErrorsOf(() =>
        parseJobOptions(
          {
            name: 'j',
            restrictedPeriods: [{ start: '2026-11-21T10:00', end: '2026-11-21T09:00' }],
            holidays: {},
          },
          settings,
          NOW,
        ),
      ),
    ).toEqual({
      'restrictedPeriods[0].end': ['ends before it starts (2026-11-21T10:00)'],
      'holidays.country': ['Invalid input: expected string, received undefined'],
    });
  });
});
