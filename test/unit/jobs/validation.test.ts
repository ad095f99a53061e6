import { describe, expect, it } from 'vitest';
import { jobOptionsFromQuery, parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';
import { fieldErrorsOf, TOKYO_CLIENT } from './fakes.ts';

const NOW = Date.parse('2026-11-20T00:00:00Z');

describe('client settings', () => {
  it('accepts a complete contract and keeps the calling hours in the client zone', () => {
    const settings = parseClientSettings('acme', { ...TOKYO_CLIENT, messageChannelId: 'line-main' }, NOW);
    expect(settings).toMatchObject({
      clientId: 'acme',
      maxConcurrentCalls: 5,
      callsPerSecond: 2,
      timeZone: 'Asia/Tokyo',
      defaultRegion: 'JP',
      messageChannelId: 'line-main',
      updatedAt: NOW,
    });
    expect(settings.callingHours).toEqual({ timeZone: 'Asia/Tokyo', weekly: TOKYO_CLIENT.callingHours });
  });

  it('names every wrong field at once', () => {
    const errors = fieldErrorsOf(() =>
      parseClientSettings(
        'acme',
        {
          maxConcurrentCalls: 0,
          callsPerSecond: -1,
          timeZone: 'Mars/Olympus',
          callingHours: {
            mon: [
              { start: '09:00', end: '18:00' },
              { start: '17:00', end: '19:00' },
            ],
            tue: [{ start: '9am', end: '18:00' }],
          },
          defaultRegion: 'XX',
          colour: 'blue',
        },
        NOW,
      ),
    );
    expect(Object.keys(errors).sort()).toEqual(
      [
        'callingHours.mon[1]',
        'callingHours.tue[0].start',
        'callsPerSecond',
        'colour',
        'defaultRegion',
        'maxConcurrentCalls',
        'timeZone',
      ].sort(),
    );
    expect(errors.timeZone).toEqual(['must be an IANA time zone such as Asia/Tokyo']);
    // EST is Panama to the runtime (no daylight saving): refused where settings are given.
    expect(
      fieldErrorsOf(() => parseClientSettings('acme', { ...TOKYO_CLIENT, timeZone: 'EST' }, NOW)),
    ).toEqual({
      timeZone: [
        'must be an IANA time zone such as Asia/Tokyo or America/New_York (not an abbreviation such as EST, nor an offset)',
      ],
    });
    expect(() => parseClientSettings('acme', { ...TOKYO_CLIENT, timeZone: 'Singapore' }, NOW)).not.toThrow();
    expect(errors['callingHours.mon[1]']![0]).toMatch(/overlaps weekly\.mon\[0\]/);
    expect(errors.colour).toEqual(['is not a known field']);
  });

  it('says which required fields are missing, and rejects an unknown weekday', () => {
    const errors = fieldErrorsOf(() => parseClientSettings('acme', { callingHours: { funday: [] } }, NOW));
    expect(errors).toHaveProperty('maxConcurrentCalls');
    expect(errors).toHaveProperty('callsPerSecond');
    expect(errors).toHaveProperty('defaultRegion');
    expect(errors['callingHours.funday']).toEqual(['is not a weekday (mon … sun)']);
  });

  it('takes allowPartialDelivery as true or false, and names the field for anything else', () => {
    expect(
      parseClientSettings('acme', { ...TOKYO_CLIENT, allowPartialDelivery: true }, NOW).allowPartialDelivery,
    ).toBe(true);
    expect(parseClientSettings('acme', TOKYO_CLIENT, NOW)).not.toHaveProperty('allowPartialDelivery');
    for (const bad of ['yes', 1, null]) {
      expect(
        fieldErrorsOf(() => parseClientSettings('acme', { ...TOKYO_CLIENT, allowPartialDelivery: bad }, NOW)),
      ).toEqual({
        allowPartialDelivery: ['must be true or false'],
      });
    }
  });

  it('refuses a client id that cannot be part of a path and a key', () => {
    expect(fieldErrorsOf(() => parseClientSettings('a/b', TOKYO_CLIENT, NOW))).toHaveProperty('clientId');
  });
});

describe('job options', () => {
  const client = parseClientSettings('acme', TOKYO_CLIENT, NOW);

  it('fills what is not given from the client defaults, then the built-in ones', () => {
    expect(parseJobOptions({ name: 'March' }, client, NOW)).toEqual({
      name: 'March',
      channel: 'call',
      scenarioId: 'default',
      startAt: NOW,
      maxAttempts: 3,
      retryDelaySeconds: 1800,
    });
    const withDefaults = { ...client, jobDefaults: { scenarioId: 'renewal', maxAttempts: 5 } };
    expect(
      parseJobOptions({ name: 'March', startAt: '2026-12-01T09:00:00+09:00' }, withDefaults, NOW),
    ).toMatchObject({
      scenarioId: 'renewal',
      maxAttempts: 5,
      startAt: Date.parse('2026-12-01T00:00:00Z'),
    });
  });

  it('takes a calling hours override in the client zone and reports its field errors', () => {
    const options = parseJobOptions(
      { name: 'x', callingHours: { sat: [{ start: '10:00', end: '12:00' }] } },
      client,
      NOW,
    );
    expect(options.callingHours).toEqual({
      timeZone: 'Asia/Tokyo',
      weekly: { sat: [{ start: '10:00', end: '12:00' }] },
    });
    const errors = fieldErrorsOf(() =>
      parseJobOptions(
        {
          name: '',
          channel: 'fax',
          maxAttempts: 0,
          startAt: 'tomorrow',
          callingHours: { sat: [{ start: '10:00', end: '25:00' }] },
        },
        client,
        NOW,
      ),
    );
    expect(Object.keys(errors).sort()).toEqual([
      'callingHours.sat[0].end',
      'channel',
      'maxAttempts',
      'name',
      'startAt',
    ]);
  });

  it('needs a message channel on the client for a message job', () => {
    const job = { name: 'x', channel: 'message', message: 'Hello' };
    expect(fieldErrorsOf(() => parseJobOptions(job, client, NOW))).toEqual({
      channel: ['a LINE job needs the client to have a messageChannelId'],
    });
  });

  it('reads numbers and calling hours from an inline upload query string', () => {
    expect(
      jobOptionsFromQuery({
        name: 'q',
        maxAttempts: '2',
        startAt: '1700000000000',
        callingHours: '{"mon":[]}',
      }),
    ).toEqual({ name: 'q', maxAttempts: 2, startAt: 1700000000000, callingHours: { mon: [] } });
  });

  it('refuses what would break a job later: an instant past the year 9999, a message nested or sized past reason, an unknown message type', () => {
    const messaging = { ...client, messageChannelId: 'ch1' };
    expect(fieldErrorsOf(() => parseJobOptions({ name: 'x', startAt: 9e15 }, client, NOW))).toEqual({
      startAt: [expect.stringContaining('year 10000')],
    });
    let deep: Record<string, unknown> = { type: 'text', text: 'x' };
    for (let i = 0; i < 5_000; i++) deep = { contents: deep };
    const nested = { name: 'x', channel: 'message', message: { messages: [{ type: 'flex', ...deep }] } };
    expect(fieldErrorsOf(() => parseJobOptions(nested, messaging, NOW))).toEqual({
      message: ['is nested more than 20 levels deep'],
    });
    const big = {
      name: 'x',
      channel: 'message',
      message: { messages: [{ type: 'flex', alt: 'x'.repeat(70_000) }] },
    };
    expect(fieldErrorsOf(() => parseJobOptions(big, messaging, NOW)).message).toEqual([
      expect.stringContaining('at most 65536'),
    ]);
    const banana = { name: 'x', channel: 'message', message: { messages: [{ type: 'banana' }] } };
    expect(Object.keys(fieldErrorsOf(() => parseJobOptions(banana, messaging, NOW)))).toEqual([
      'message.messages[0].type',
    ]);
  });

  it('reads true and false for a boolean option of an inline upload query string', () => {
    expect(jobOptionsFromQuery({ name: 'q', ignoreContactLimits: 'true' })).toEqual({
      name: 'q',
      ignoreContactLimits: true,
    });
    expect(jobOptionsFromQuery({ name: 'q', ignoreContactLimits: 'yes' })).toEqual({
      name: 'q',
      ignoreContactLimits: 'yes',
    });
  });
});

describe('keys that are names of Object.prototype (issue 13 #2)', () => {
  const hostile = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'];

  it('names each as an unknown field of client settings, with no 500', () => {
    for (const key of hostile) {
      const body = JSON.parse(JSON.stringify(TOKYO_CLIENT).replace(/^\{/, `{"${key}":1,`));
      const errors = fieldErrorsOf(() => parseClientSettings('acme', body, NOW));
      expect(Object.keys(errors), key).toEqual([key]);
      expect(errors[key]).toEqual(['is not a known field']);
    }
  });

  it('names each as an unknown option in an inline upload query, and as an unknown weekday', () => {
    const client = parseClientSettings('acme', TOKYO_CLIENT, NOW);
    for (const key of hostile) {
      const errors = fieldErrorsOf(() =>
        parseJobOptions(jobOptionsFromQuery({ name: 'x', [key]: '1' }), client, NOW),
      );
      expect(Object.keys(errors), key).toContain(key);
      const hours = fieldErrorsOf(() =>
        parseJobOptions({ name: 'x', callingHours: JSON.parse(`{"${key}":[]}`) }, client, NOW),
      );
      expect(Object.keys(hours).join(), key).toContain(key);
    }
  });
});
