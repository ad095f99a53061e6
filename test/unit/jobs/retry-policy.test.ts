import { describe, expect, it } from 'vitest';
import { settlementFor } from '#shared/broker/settle.ts';
import { ValidationError } from '#shared/jobs/errors.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { nextRetry, type RetryPolicy, retryDelayMs } from '#shared/jobs/retry-policy.ts';
import { jobOptionsFromQuery, parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';

const T0 = Date.UTC(2026, 10, 25, 1, 0, 0);
const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};
const MIN = 60_000;

describe('retry schedules', () => {
  it('fixed, linear, exponential (capped) and a list whose last wait repeats', () => {
    const waits = (schedule: Parameters<typeof retryDelayMs>[0]) =>
      [1, 2, 3, 4].map((n) => retryDelayMs(schedule, n) / MIN);
    expect(waits({ kind: 'fixed', seconds: 1800 })).toEqual([30, 30, 30, 30]);
    expect(waits({ kind: 'linear', seconds: 600, stepSeconds: 300 })).toEqual([10, 15, 20, 25]);
    expect(waits({ kind: 'exponential', seconds: 300, factor: 2, maxSeconds: 1800 })).toEqual([
      5, 10, 20, 30,
    ]);
    expect(waits({ kind: 'list', seconds: [1800, 3600, 7200] })).toEqual([30, 60, 120, 120]);
  });
});

describe('retries by outcome', () => {
  const job = {
    maxAttempts: 3,
    retryDelaySeconds: 300,
    retries: {
      busy: { maxAttempts: 4, delay: { kind: 'exponential', seconds: 300, factor: 2 } },
      'no-answer': { maxAttempts: 3, delay: { kind: 'list', seconds: [1800, 3600, 7200] } },
      voicemail: { maxAttempts: 1 },
      failed: { maxAttempts: 2, delay: { kind: 'fixed', seconds: 60 } },
    } satisfies RetryPolicy,
  };

  it('each outcome has its own attempts and schedule', () => {
    expect(nextRetry('busy', 3, job)).toEqual({ delayMs: 20 * MIN });
    expect(nextRetry('busy', 4, job)).toBeUndefined();
    expect(nextRetry('no-answer', 2, job)).toEqual({ delayMs: 60 * MIN });
    expect(nextRetry('no-answer', 3, job)).toBeUndefined();
    expect(nextRetry('voicemail', 1, job)).toBeUndefined();
    expect(nextRetry('failed', 1, job)).toEqual({ delayMs: MIN });
  });

  it('settles a failed call as a retry when the policy allows it, and ends it after', () => {
    expect(settlementFor('failed', { attempts: 1, now: T0, reason: 'unreachable' }, job)).toEqual({
      state: 'retry-wait',
      lastResult: 'failed',
      readyAt: T0 + MIN,
    });
    expect(settlementFor('failed', { attempts: 2, now: T0, reason: 'unreachable' }, job)).toEqual({
      state: 'failed',
      lastResult: 'failed',
      reason: 'unreachable',
    });
    expect(settlementFor('voicemail', { attempts: 1, now: T0 }, job)).toEqual({
      state: 'failed',
      lastResult: 'voicemail',
      reason: 'voicemail on all 1 attempts',
    });
  });

  it('without a policy: busy, no-answer and voicemail use maxAttempts and the fixed delay; failed is not retried', () => {
    const plain = { maxAttempts: 3, retryDelaySeconds: 300 };
    expect(nextRetry('voicemail', 2, plain)).toEqual({ delayMs: 5 * MIN });
    expect(nextRetry('busy', 3, plain)).toBeUndefined();
    expect(nextRetry('failed', 1, plain)).toBeUndefined();
  });

  it('a cancelled job retries nothing', () => {
    expect(settlementFor('failed', { attempts: 1, now: T0 }, { ...job, status: 'cancelled' })).toMatchObject({
      state: 'cancelled',
    });
  });
});

describe('the retries job option', () => {
  const client: ClientSettings = {
    clientId: 'acme',
    maxConcurrentCalls: 2,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS,
    defaultRegion: 'JP',
    updatedAt: T0,
  };

  it('is kept on the job as given', () => {
    const retries = { busy: { maxAttempts: 5, delay: { kind: 'linear', seconds: 600, stepSeconds: 600 } } };
    expect(parseJobOptions({ name: 'j', retries }, client, T0).retries).toEqual(retries);
  });

  it('names every bad field', () => {
    const bad = {
      name: 'j',
      retries: {
        busy: { maxAttempts: 3 },
        'no-answer': { maxAttempts: 0, delay: { kind: 'fixed', seconds: 60 } },
        voicemail: { maxAttempts: 2, delay: { kind: 'list', seconds: [] } },
        failed: { maxAttempts: 2, delay: { kind: 'exponential', seconds: 60, factor: 0.5 } },
        hangup: { maxAttempts: 2 },
      },
    };
    let error: unknown;
    try {
      parseJobOptions(bad, client, T0);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    const fields = Object.keys((error as ValidationError).fieldErrors).sort();
    expect(fields).toEqual(
      [
        'retries.busy.delay',
        'retries.hangup',
        'retries.failed.delay.factor',
        'retries.no-answer.maxAttempts',
        'retries.voicemail.delay.seconds',
      ].sort(),
    );
  });

  it('is read from a query string as JSON (inline uploads)', () => {
    expect(jobOptionsFromQuery({ retries: '{"busy":{"maxAttempts":1}}' })).toEqual({
      retries: { busy: { maxAttempts: 1 } },
    });
  });
});

describe("the client's default retries (jobDefaults.retries)", () => {
  const defaults: RetryPolicy = {
    busy: { maxAttempts: 3, delay: { kind: 'list', seconds: [1800, 3600, 7200] } },
    'no-answer': { maxAttempts: 1 },
  };
  const settings = {
    maxConcurrentCalls: 2,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS.weekly,
    defaultRegion: 'JP',
  };
  const client = parseClientSettings('acme', { ...settings, jobDefaults: { retries: defaults } }, T0);

  it('is kept with the client settings', () => {
    expect(client.jobDefaults?.retries).toEqual(defaults);
  });

  it('is what a job without retries of its own gets, and its settlements follow it', () => {
    const job = parseJobOptions({ name: 'j' }, client, T0);
    expect(job.retries).toEqual(defaults);
    expect(settlementFor('busy', { attempts: 1, now: T0 }, job)).toEqual({
      state: 'retry-wait',
      lastResult: 'busy',
      readyAt: T0 + 30 * MIN,
    });
    expect(settlementFor('no-answer', { attempts: 1, now: T0 }, job)).toMatchObject({ state: 'failed' });
  });

  it("is replaced whole by a job's own retries, not merged with them", () => {
    const own: RetryPolicy = { voicemail: { maxAttempts: 2, delay: { kind: 'fixed', seconds: 60 } } };
    expect(parseJobOptions({ name: 'j', retries: own }, client, T0).retries).toEqual(own);
  });

  it('names every bad field under jobDefaults.retries', () => {
    let error: unknown;
    try {
      parseClientSettings(
        'acme',
        {
          ...settings,
          jobDefaults: {
            retries: {
              busy: { maxAttempts: 3 },
              failed: { maxAttempts: 11, delay: { kind: 'fixed', seconds: 60 } },
              hangup: { maxAttempts: 2 },
            },
          },
        },
        T0,
      );
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect(Object.keys((error as ValidationError).fieldErrors).sort()).toEqual(
      [
        'jobDefaults.retries.busy.delay',
        'jobDefaults.retries.failed.maxAttempts',
        'jobDefaults.retries.hangup',
      ].sort(),
    );
  });
});
