/**
 * The re-time rule (issue 14 #4): where a waiting task of a job read in its recipients' zones
 * belongs after its client's hours changed — earlier only, never before now nor its `notBefore`.
 */
import { describe, expect, it } from 'vitest';
import {
  contactTimeSettings,
  jobNeedsRetime,
  parseRetimeSweep,
  retimedReadyAt,
  retimeSweepStart,
} from '#shared/jobs/retime.ts';
import { clientSettings, job, T0 } from '../broker/fakes.ts';

const week = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
const hours = (start: string, end: string) => ({
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(week.map((d) => [d, [{ start, end }]])),
});
// T0 is Monday 10:00 in Tokyo, Sunday 20:00 in New York (EST, UTC-5).
const nineToSix = clientSettings({ callingHours: hours('09:00', '18:00') });
const sevenToSeven = clientSettings({ callingHours: hours('07:00', '19:00') });
const recipientJob = job({ timeZoneBy: 'recipient' });
const newYorkMonday9 = Date.parse('2026-03-02T14:00:00Z');
const newYorkMonday7 = Date.parse('2026-03-02T12:00:00Z');

describe('re-timing after the hours change', () => {
  it("moves a task stamped for an opening of the old hours to the new, earlier one in the recipient's zone", () => {
    const stamped = { readyAt: newYorkMonday9, timeZone: 'America/New_York' };
    expect(retimedReadyAt(sevenToSeven, recipientJob, stamped, T0)).toBe(newYorkMonday7);
    // Open until 22:00: Sunday 20:00 in New York is inside, so it is ready now.
    const wider = clientSettings({ callingHours: hours('07:00', '22:00') });
    expect(retimedReadyAt(wider, recipientJob, stamped, T0)).toBe(T0);
    // Under the same hours it stays where it is.
    expect(retimedReadyAt(nineToSix, recipientJob, stamped, T0)).toBeUndefined();
  });

  it("never earlier than now or the task's notBefore (a retry's delay, a contact limit's window)", () => {
    const wider = clientSettings({ callingHours: hours('00:00', '24:00') });
    const retry = { readyAt: newYorkMonday9, timeZone: 'America/New_York', notBefore: T0 + 3_600_000 };
    expect(retimedReadyAt(wider, recipientJob, retry, T0)).toBe(T0 + 3_600_000);
    // A task ready already is not touched.
    expect(
      retimedReadyAt(wider, recipientJob, { readyAt: T0 - 1, timeZone: 'Asia/Tokyo' }, T0),
    ).toBeUndefined();
    // A first attempt never moves before its job's start.
    const later = job({ timeZoneBy: 'recipient', startAt: T0 + 600_000 });
    expect(retimedReadyAt(wider, later, { readyAt: newYorkMonday9, timeZone: 'America/New_York' }, T0)).toBe(
      T0 + 600_000,
    );
  });

  it('only open call jobs read in their recipients zones are swept; only timing settings trigger it', () => {
    expect(jobNeedsRetime(recipientJob, T0)).toBe(true);
    expect(jobNeedsRetime(job({ timeZoneBy: 'client' }), T0)).toBe(false);
    expect(jobNeedsRetime(job({ timeZoneBy: 'recipient', status: 'completed' }), T0)).toBe(false);
    expect(jobNeedsRetime(job({ timeZoneBy: 'recipient', endAt: T0 }), T0)).toBe(false);
    expect(contactTimeSettings(nineToSix)).not.toBe(contactTimeSettings(sevenToSeven));
    expect(contactTimeSettings(nineToSix)).toBe(contactTimeSettings({ ...nineToSix, maxConcurrentCalls: 9 }));
  });

  it('reads its queue message, refusing a malformed one', () => {
    const start = retimeSweepStart('acme', 'J');
    expect(parseRetimeSweep({ ...start, cursor: 't-1' })).toEqual({ ...start, cursor: 't-1' });
    expect(() => parseRetimeSweep({ ...start, shard: 99 })).toThrow(/re-time sweep/);
  });
});
