import { describe, expect, it } from 'vitest';
import type { ClientSettings, Job } from '#shared/jobs/model.ts';
import { recipientTiming } from '#shared/jobs/recipient-timing.ts';
import { earliestStart, jobMayStartSomewhere, mayStartNow, taskZone } from '#shared/jobs/restrictions.ts';
import { parseJobOptions } from '#shared/jobs/validation.ts';
import { jobWaitingFor } from '#shared/jobs/waiting.ts';
import { checkTimeZoneCell, recipientZone, regionZone } from '#shared/pacing/recipient-zone.ts';
import { clientSettings, job as makeJob } from '../broker/fakes.ts';
import { ingestBytes } from '../csv/support.ts';
import { fieldErrorsOf } from './fakes.ts';

const at = (iso: string) => Date.parse(iso);
const everyDay = (timeZone: string, start: string, end: string) => ({
  timeZone,
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start, end }]]),
  ),
});
const tokyoClient = (over: Partial<ClientSettings> = {}) =>
  clientSettings({ timeZone: 'Asia/Tokyo', callingHours: everyDay('Asia/Tokyo', '09:00', '18:00'), ...over });
const byRecipient = (over: Partial<Job> = {}) =>
  makeJob({ startAt: at('2026-03-01T00:00:00Z'), timeZoneBy: 'recipient', ...over });

describe("a recipient's zone (issue 14 #4)", () => {
  it("comes from the number's country when it has one zone, else the client's", () => {
    expect(recipientZone('+819012345678', 'America/Chicago')).toBe('Asia/Tokyo');
    expect(recipientZone('+442071838750', 'Asia/Tokyo')).toBe('Europe/London');
    // The US spans many zones: the client's.
    expect(recipientZone('+12125550123', 'America/Chicago')).toBe('America/Chicago');
    expect(recipientZone('not a number', 'Asia/Tokyo')).toBe('Asia/Tokyo');
    expect(regionZone('KR', 'UTC')).toBe('Asia/Seoul');
    expect(regionZone(undefined, 'UTC')).toBe('UTC');
  });

  it('a list cell must be an IANA zone, written in its canonical spelling', () => {
    expect(checkTimeZoneCell(' america/new_york ')).toEqual({ ok: true, timeZone: 'America/New_York' });
    expect(checkTimeZoneCell('Asia/Tokyo')).toEqual({ ok: true, timeZone: 'Asia/Tokyo' });
    expect(checkTimeZoneCell('Mars/Olympus')).toMatchObject({ ok: false });
    expect(checkTimeZoneCell('+09:00 JST')).toMatchObject({ ok: false });
    // Abbreviations and offsets the runtime takes as zones name no place: EST is Panama to it
    // (no daylight saving), CST Chicago (China Standard Time to a Chinese list).
    for (const cell of ['EST', 'est', 'MST', 'CST', 'PST', 'JST', 'HST', '+09:00', '-0500', '+9']) {
      expect([cell, checkTimeZoneCell(cell)]).toEqual([
        cell,
        expect.objectContaining({ ok: false, reason: expect.stringContaining('abbreviation or offset') }),
      ]);
    }
    // The tz database's own short names stay zones.
    for (const [cell, zone] of [
      ['UTC', 'UTC'],
      ['EST5EDT', 'America/New_York'],
      ['Japan', 'Asia/Tokyo'],
      ['NZ', 'Pacific/Auckland'],
      ['Etc/GMT-9', 'Etc/GMT-9'],
    ]) {
      expect(checkTimeZoneCell(cell!)).toEqual({ ok: true, timeZone: zone });
    }
    // Every zone the runtime knows, and the tz database's old country names, stay zones.
    const names = [
      ...Intl.supportedValuesOf('timeZone'),
      ...['Singapore', 'Israel', 'Turkey', 'Poland', 'Portugal', 'Hongkong', 'Iceland', 'Jamaica'],
      ...['Navajo', 'Greenwich', 'Universal', 'Kwajalein', 'Egypt', 'Libya', 'Iran', 'Cuba', 'Eire', 'Zulu'],
    ];
    expect(names.filter((name) => !checkTimeZoneCell(name).ok)).toEqual([]);
  });
});

describe('the list: a timezone / タイムゾーン column', () => {
  it('overrides per row; a bad zone rejects the row with the column and the reason; good rows stay', async () => {
    const csv = [
      '電話番号,氏名,タイムゾーン,メモ',
      '090-1111-0001,一郎,America/New_York,a',
      '090-1111-0002,二郎,,b',
      '090-1111-0003,三郎,Tokyo time,c',
    ].join('\n');
    const run = await ingestBytes(Buffer.from(csv));
    expect(run.tasks.map((t) => [t.row, t.timeZone, t.variables])).toEqual([
      [2, 'America/New_York', { メモ: 'a' }],
      [3, undefined, { メモ: 'b' }],
    ]);
    expect(run.entries).toEqual([
      {
        row: 4,
        outcome: 'rejected',
        code: 'bad-time-zone',
        reason: 'not an IANA time zone (such as Asia/Tokyo or America/New_York)',
        column: 'タイムゾーン',
        value: 'Tokyo time',
      },
    ]);
  });

  it('a message list keeps a timezone column as a variable', async () => {
    const csv = 'userId,timezone\nU0123456789abcdef0123456789abcdef,Nowhere\n';
    const run = await ingestBytes(Buffer.from(csv), { channel: 'line' });
    expect(run.tasks.map((t) => t.variables)).toEqual([{ timezone: 'Nowhere' }]);
  });
});

describe('calling hours and restricted periods in the recipient zone', () => {
  const client = tokyoClient({ restrictedPeriods: [{ start: '2026-03-09' }] });
  const job = byRecipient();
  const ny = { timeZone: 'America/New_York' };

  it("09:00-18:00 is the recipient's 09:00-18:00, across New York's spring-forward", () => {
    // Sunday 8 March 2026, 02:00 EST → 03:00 EDT. 09:00 EDT = 13:00Z.
    expect(taskZone(client, job, ny)).toBe('America/New_York');
    expect(mayStartNow(client, job, at('2026-03-08T12:59:00Z'), 'America/New_York')).toBe(false);
    expect(mayStartNow(client, job, at('2026-03-08T13:00:00Z'), 'America/New_York')).toBe(true);
    // The day before, still EST: 09:00 = 14:00Z.
    expect(mayStartNow(client, job, at('2026-03-07T13:30:00Z'), 'America/New_York')).toBe(false);
    expect(mayStartNow(client, job, at('2026-03-07T14:00:00Z'), 'America/New_York')).toBe(true);
    // The same instant is 22:00 in Tokyo: closed for a client-zone job.
    expect(mayStartNow(client, makeJob({ startAt: 0 }), at('2026-03-08T13:00:00Z'))).toBe(false);
  });

  it("a restricted date is the recipient's date: 9 March in New York, then 10 March 09:00 EDT", () => {
    expect(mayStartNow(client, job, at('2026-03-09T14:00:00Z'), 'America/New_York')).toBe(false);
    expect(earliestStart(client, job, at('2026-03-09T14:00:00Z'), 'America/New_York')).toBe(
      at('2026-03-10T13:00:00Z'),
    );
  });

  it("a task stamps its zone and, as readyAt, its zone's first opening from the job's start", () => {
    // Job starts Sunday 1 March 00:00Z = 09:00 Tokyo, 19:00 New York (28 Feb).
    expect(recipientTiming(job, client, { recipient: '+819012345678' })).toEqual({
      readyAt: at('2026-03-01T00:00:00Z'),
      timeZone: 'Asia/Tokyo',
    });
    expect(
      recipientTiming(job, client, { recipient: '+819012345678', timeZone: 'America/New_York' }),
    ).toEqual({
      readyAt: at('2026-03-01T14:00:00Z'),
      timeZone: 'America/New_York',
    });
    // A client-zone job keeps readyAt = its start, and no zone on the task.
    expect(recipientTiming(makeJob({ startAt: 5 }), client, { recipient: '+819012345678' })).toEqual({
      readyAt: 5,
    });
  });

  it("the job manager and the job's view leave the hours to each task", () => {
    const night = at('2026-03-02T14:00:00Z'); // 23:00 Tokyo
    expect(jobMayStartSomewhere(client, job, night)).toBe(true);
    expect(jobMayStartSomewhere(client, makeJob({ startAt: 0 }), night)).toBe(false);
    expect(jobWaitingFor({ job, client, now: night })).toBeUndefined();
    expect(jobMayStartSomewhere({ ...client, paused: true }, job, night)).toBe(false);
  });

  it('timeZoneBy is validated: recipient or client, and not for a message job', () => {
    const settings = tokyoClient({ messageChannelId: 'line-main' });
    expect(parseJobOptions({ name: 'j', timeZoneBy: 'recipient' }, settings, 0)).toMatchObject({
      timeZoneBy: 'recipient',
    });
    expect(
      fieldErrorsOf(() => parseJobOptions({ name: 'j', timeZoneBy: 'moon' }, settings, 0)),
    ).toHaveProperty('timeZoneBy');
    expect(
      fieldErrorsOf(() =>
        parseJobOptions(
          { name: 'j', channel: 'message', message: 'hi', timeZoneBy: 'recipient' },
          settings,
          0,
        ),
      ),
    ).toEqual({
      timeZoneBy: ["a LINE job's recipients carry no zone: only a call job can use recipient"],
    });
  });
});
