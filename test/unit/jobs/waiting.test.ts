import { describe, expect, it } from 'vitest';
import { cappedWaitingReason } from '#shared/contact-limits/model.ts';
import type { ClientSettings, Job } from '#shared/jobs/model.ts';
import { jobWaitingFor, localTime, nextTaskWait } from '#shared/jobs/waiting.ts';
import { clientSettings, job as makeJob } from '../broker/fakes.ts';

// Friday 2026-11-20 09:00 in Tokyo.
const NOW = Date.parse('2026-11-20T00:00:00Z');
const weekdays = (start: string, end: string) => ({
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri'].map((d) => [d, [{ start, end }]])),
});
const client = (over: Partial<ClientSettings> = {}) =>
  clientSettings({ callingHours: weekdays('09:00', '18:00'), maxConcurrentCalls: 3, ...over });
const job = (over: Partial<Job> = {}) => makeJob({ startAt: NOW - 1, ...over });

describe('what a job waits for (issue 13 #8)', () => {
  it('says nothing for a running job inside its hours below the limit, nor for a job that is not scheduled or running', () => {
    expect(jobWaitingFor({ job: job(), client: client(), now: NOW, callsInFlight: 2 })).toBeUndefined();
    for (const status of ['uploading', 'paused', 'completed', 'cancelled', 'failed'] as const) {
      expect(
        jobWaitingFor({ job: job({ status }), client: client({ paused: true }), now: NOW }),
      ).toBeUndefined();
    }
  });

  it('a scheduled job waits for its start time, in the client zone', () => {
    const startAt = Date.parse('2026-11-21T01:30:00Z');
    expect(jobWaitingFor({ job: job({ status: 'scheduled', startAt }), client: client(), now: NOW })).toEqual(
      {
        reason: 'start-time',
        until: '2026-11-21T01:30:00.000Z',
        message: 'scheduled to start at 2026-11-21 10:30 Asia/Tokyo',
      },
    );
  });

  it('a paused client comes before the hours', () => {
    const waiting = jobWaitingFor({ job: job(), client: client({ paused: true }), now: NOW + 12 * 3600_000 });
    expect(waiting).toMatchObject({ reason: 'client-paused' });
    expect(waiting?.until).toBeUndefined();
    expect(waiting?.message).toContain('POST /clients/c1/resume');
  });

  it("outside the client's hours: when they open next, across a weekend", () => {
    // Friday 19:00 Tokyo: next opening Monday 09:00.
    const friEvening = Date.parse('2026-11-20T10:00:00Z');
    expect(jobWaitingFor({ job: job(), client: client(), now: friEvening })).toEqual({
      reason: 'calling-hours',
      until: '2026-11-23T00:00:00.000Z',
      message: "outside the client's calling hours; they open at 2026-11-23 09:00 Asia/Tokyo",
    });
  });

  it("the job's own hours replace the client's, and a window that never opens says so", () => {
    const own = job({ callingHours: weekdays('13:00', '14:00') });
    expect(jobWaitingFor({ job: own, client: client(), now: NOW })).toMatchObject({
      reason: 'calling-hours',
      until: '2026-11-20T04:00:00.000Z',
      message: expect.stringContaining("the job's"),
    });
    const never = job({ callingHours: { timeZone: 'Asia/Tokyo', weekly: {} } });
    expect(jobWaitingFor({ job: never, client: client(), now: NOW })).toEqual({
      reason: 'calling-hours',
      message: "outside the job's calling hours, which never open",
    });
  });

  it('a call job at the concurrent limit waits for a call to end; a message job does not count calls', () => {
    expect(jobWaitingFor({ job: job(), client: client(), now: NOW, callsInFlight: 3 })).toMatchObject({
      reason: 'concurrent-limit',
      message: expect.stringContaining('limit of 3'),
    });
    expect(
      jobWaitingFor({ job: job({ channel: 'line' }), client: client(), now: NOW, callsInFlight: 3 }),
    ).toBeUndefined();
  });

  it('local times are DST-safe wall times', () => {
    // 2026-03-08 10:30 UTC is 06:30 in New York (EDT, after the spring-forward at 02:00).
    expect(localTime('America/New_York', Date.parse('2026-03-08T10:30:00Z'))).toBe(
      '2026-03-08 06:30 America/New_York',
    );
  });
});

describe('what a running call job waits for when its first waiting task is not due (issue 35 #7)', () => {
  const running = (over: Partial<Job> = {}) => job({ status: 'running', ...over });
  const later = NOW + 3 * 3600_000;

  it('a job read in its recipients’ zones: their local hours, with the first opening in its zone', () => {
    const waiting = nextTaskWait(
      running({ timeZoneBy: 'recipient' }),
      client(),
      { readyAt: later, timeZone: 'Europe/London' },
      NOW,
    );
    expect(waiting).toEqual({
      reason: 'recipient-hours',
      until: new Date(later).toISOString(),
      message: `every recipient left is outside their local calling hours or in a restricted period; the first opens at ${localTime('Europe/London', later)}`,
    });
  });

  it('a contact limit: named, with when the recipient may be contacted again', () => {
    const reason = cappedWaitingReason({ max: 1, per: 'day', channels: ['call', 'line'] }, later);
    const waiting = nextTaskWait(running(), client(), { readyAt: later, reason }, NOW);
    expect(waiting).toMatchObject({ reason: 'contact-limit', until: new Date(later).toISOString() });
    expect(waiting?.message).toBe(
      `its next recipient has been contacted as often as the contact limit (1 per day (call, line)) allows; they may be contacted again from ${localTime('Asia/Tokyo', later)}`,
    );
  });

  it('a retry delay otherwise; nothing when the task is due, unknown, or the job not running', () => {
    expect(nextTaskWait(running(), client(), { readyAt: later }, NOW)).toMatchObject({
      reason: 'retry-delay',
    });
    expect(nextTaskWait(running(), client(), { readyAt: NOW }, NOW)).toBeUndefined();
    expect(nextTaskWait(running(), client(), undefined, NOW)).toBeUndefined();
    expect(nextTaskWait(job({ status: 'scheduled' }), client(), { readyAt: later }, NOW)).toBeUndefined();
  });
});
