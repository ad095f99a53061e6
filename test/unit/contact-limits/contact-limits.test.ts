/**
 * Contact limits: the client setting's validation (errors at the field), the windows they count in
 * (on the client's wall clock, DST-safe), which limits a contact must pass, and what a task over
 * its cap does.
 */
import { describe, expect, it } from 'vitest';
import {
  type ContactLimit,
  cappedReason,
  cappedWaitingReason,
  capSlots,
  contactChannelOf,
  isCappedReason,
  isCappedWaitingReason,
  limitName,
  overCapMove,
  windowOf,
} from '#shared/contact-limits/model.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';
import { fieldErrorsOf } from '../jobs/fakes.ts';

const SETTINGS = {
  maxConcurrentCalls: 5,
  callsPerSecond: 2,
  timeZone: 'Asia/Tokyo',
  callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
  defaultRegion: 'JP',
};
const NOW = Date.parse('2026-11-25T03:00:00Z');
const withLimits = (contactLimits: unknown) => () =>
  parseClientSettings('c1', { ...SETTINGS, contactLimits }, NOW);

describe('contactLimits in the client settings', () => {
  it('accepts hour, day, week and N-day limits over call and line', () => {
    const limits = [
      { max: 1, per: 'hour', channels: ['call'] },
      { max: 2, per: 'day', channels: ['call', 'line'] },
      { max: 5, per: 'week', channels: ['line'] },
      { max: 8, per: { days: 30 }, channels: ['call', 'line'] },
    ];
    expect(withLimits(limits)().contactLimits).toEqual(limits);
    expect(parseClientSettings('c1', SETTINGS, NOW).contactLimits).toBeUndefined();
  });

  it('refuses a cap of 0, an unknown channel, a bad period, naming each field', () => {
    expect(Object.keys(fieldErrorsOf(withLimits([{ max: 0, per: 'day', channels: ['call'] }])))).toEqual([
      'contactLimits[0].max',
    ]);
    expect(
      Object.keys(fieldErrorsOf(withLimits([{ max: 1, per: 'day', channels: ['call', 'fax'] }]))),
    ).toEqual(['contactLimits[0].channels[1]']);
    expect(Object.keys(fieldErrorsOf(withLimits([{ max: 1, per: 'month', channels: ['call'] }])))).toEqual([
      'contactLimits[0].per',
    ]);
    expect(
      Object.keys(fieldErrorsOf(withLimits([{ max: 1, per: { days: 0 }, channels: ['call'] }]))),
    ).toEqual(['contactLimits[0].per.days']);
    expect(Object.keys(fieldErrorsOf(withLimits([{ max: 1.5, per: 'day', channels: [] }]))).sort()).toEqual([
      'contactLimits[0].channels',
      'contactLimits[0].max',
    ]);
    expect(
      Object.keys(
        fieldErrorsOf(withLimits([{ max: 1, per: 'day', channels: ['call', 'call'], extra: 1 }])),
      ).sort(),
    ).toEqual(['contactLimits[0].channels', 'contactLimits[0].extra']);
    expect(Object.keys(fieldErrorsOf(withLimits('daily')))).toEqual(['contactLimits']);
  });

  it('lets a job opt out with ignoreContactLimits, a boolean', () => {
    const client = withLimits([{ max: 1, per: 'day', channels: ['call'] }])() as ClientSettings;
    expect(parseJobOptions({ name: 'n', ignoreContactLimits: true }, client, NOW).ignoreContactLimits).toBe(
      true,
    );
    expect(parseJobOptions({ name: 'n' }, client, NOW).ignoreContactLimits).toBeUndefined();
    expect(
      Object.keys(
        fieldErrorsOf(() => parseJobOptions({ name: 'n', ignoreContactLimits: 'yes' }, client, NOW)),
      ),
    ).toEqual(['ignoreContactLimits']);
  });
});

describe('the window a contact counts in', () => {
  it("follows the client's wall clock: hour from :00, day from midnight, week from Monday", () => {
    // 2026-11-25T03:20Z is 12:20 on Wednesday 25 November in Tokyo (UTC+9).
    const at = Date.parse('2026-11-25T03:20:00Z');
    expect(windowOf('hour', at, 'Asia/Tokyo')).toEqual({
      start: Date.parse('2026-11-25T03:00:00Z'),
      end: Date.parse('2026-11-25T04:00:00Z'),
    });
    expect(windowOf('day', at, 'Asia/Tokyo')).toEqual({
      start: Date.parse('2026-11-24T15:00:00Z'),
      end: Date.parse('2026-11-25T15:00:00Z'),
    });
    expect(windowOf('week', at, 'Asia/Tokyo')).toEqual({
      start: Date.parse('2026-11-22T15:00:00Z'), // Monday 23 November, 00:00 in Tokyo
      end: Date.parse('2026-11-29T15:00:00Z'),
    });
    const three = windowOf({ days: 3 }, at, 'Asia/Tokyo');
    expect(three.end - three.start).toBe(3 * 86_400_000);
    expect(three.start <= at && at < three.end).toBe(true);
  });

  it('is a 23-hour day on the spring-forward date and a 25-hour one in the fall', () => {
    const spring = windowOf('day', Date.parse('2026-03-08T18:00:00Z'), 'America/New_York');
    expect(spring.end - spring.start).toBe(23 * 3_600_000);
    const fall = windowOf('day', Date.parse('2026-11-01T18:00:00Z'), 'America/New_York');
    expect(fall.end - fall.start).toBe(25 * 3_600_000);
  });
});

describe('which limits a contact must pass', () => {
  const limits: ContactLimit[] = [
    { max: 1, per: 'hour', channels: ['call'] },
    { max: 3, per: 'day', channels: ['call', 'line'] },
    { max: 2, per: 'week', channels: ['line'] },
  ];

  it('those over its channel, each counted under its own name and window', () => {
    const call = capSlots(limits, contactChannelOf('call'), NOW, 'Asia/Tokyo');
    expect(call.map((s) => s.limit)).toEqual([limits[0], limits[1]]);
    const line = capSlots(limits, contactChannelOf('message'), NOW, 'Asia/Tokyo');
    expect(line.map((s) => s.counter)).toEqual([
      `call+line/day/3#${Date.parse('2026-11-24T15:00:00Z')}`,
      `line/week/2#${Date.parse('2026-11-22T15:00:00Z')}`,
    ]);
    // The same limit named from either channel counts in the same counter.
    expect(limitName({ max: 3, per: 'day', channels: ['line', 'call'] })).toBe(limitName(limits[1]!));
    expect(capSlots(undefined, 'call', NOW, 'Asia/Tokyo')).toEqual([]);
  });

  it('a task over its cap waits for the window inside its job, else ends saying why', () => {
    expect(overCapMove(1_000, undefined)).toBe('wait');
    expect(overCapMove(1_000, 2_000)).toBe('wait');
    expect(overCapMove(2_000, 2_000)).toBe('end');
    const reason = cappedReason(limits[1]!, Date.parse('2026-11-25T15:00:00Z'));
    expect(reason).toBe(
      "capped: contact limit 3 per day (call, line) reached until 2026-11-25T15:00:00.000Z, after the job's end",
    );
    expect(isCappedReason(reason)).toBe(true);
    expect(isCappedWaitingReason(reason)).toBe(false);
    const waiting = cappedWaitingReason(limits[1]!, Date.parse('2026-11-25T15:00:00Z'));
    expect(waiting).toBe(
      'capped: waiting until 2026-11-25T15:00:00.000Z (contact limit 3 per day (call, line))',
    );
    expect(isCappedWaitingReason(waiting)).toBe(true);
  });
});
