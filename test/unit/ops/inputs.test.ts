import { describe, expect, it } from 'vitest';
import type { ClientSettings } from '#shared/jobs/model.ts';
import {
  clientSettingsBody,
  jobOptionsBody,
  parseCallingHours,
  type ReadText,
  settingsForPut,
} from '../../../scripts/ops/inputs.ts';

/** Files by name; any other is missing, as the file system would say. */
function files(contents: Record<string, string>): ReadText {
  return (file) => {
    const text = contents[file];
    if (text === undefined) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
    return text;
  };
}

const NINE_TO_SIX = [{ start: '09:00', end: '18:00' }];

describe('calling hours on the command line', () => {
  it('reads day ranges, groups and several windows a day; days not named are closed', () => {
    expect(parseCallingHours('mon-fri=09:00-18:00,sat=10:00-12:00+13:00-17:00')).toEqual({
      mon: NINE_TO_SIX,
      tue: NINE_TO_SIX,
      wed: NINE_TO_SIX,
      thu: NINE_TO_SIX,
      fri: NINE_TO_SIX,
      sat: [
        { start: '10:00', end: '12:00' },
        { start: '13:00', end: '17:00' },
      ],
    });
    expect(Object.keys(parseCallingHours('all=00:00-24:00') as object)).toEqual([
      'mon',
      'tue',
      'wed',
      'thu',
      'fri',
      'sat',
      'sun',
    ]);
    expect(parseCallingHours('weekend 9:00-12:00; wed=closed')).toEqual({
      sat: [{ start: '09:00', end: '12:00' }],
      sun: [{ start: '09:00', end: '12:00' }],
      wed: [],
    });
    // A range may wrap the week; a window may cross midnight (the API decides what that means).
    expect(parseCallingHours('fri-mon=22:00-02:00')).toEqual({
      fri: [{ start: '22:00', end: '02:00' }],
      sat: [{ start: '22:00', end: '02:00' }],
      sun: [{ start: '22:00', end: '02:00' }],
      mon: [{ start: '22:00', end: '02:00' }],
    });
    expect(parseCallingHours('mon/wed=09:00-18:00')).toEqual({ mon: NINE_TO_SIX, wed: NINE_TO_SIX });
  });

  it('takes JSON, or a file of it with @', () => {
    expect(parseCallingHours('{"mon": [{"start": "09:00", "end": "18:00"}]}')).toEqual({ mon: NINE_TO_SIX });
    const read = files({ 'hours.json': '{"tue": [{"start": "09:00", "end": "18:00"}]}' });
    expect(parseCallingHours('@hours.json', '--calling-hours', read)).toEqual({ tue: NINE_TO_SIX });
  });

  it('names what it cannot read', () => {
    expect(() => parseCallingHours('mon-fry=09:00-18:00')).toThrow(
      '--calling-hours: "mon-fry" is not a day: use mon … sun, a range (mon-fri), all, weekdays or weekend',
    );
    expect(() => parseCallingHours('mon=9-18')).toThrow(
      '--calling-hours: "9-18" is not a window such as 09:00-18:00',
    );
    expect(() => parseCallingHours('mon=09:00-18:00,weekdays=10:00-11:00')).toThrow(
      '--calling-hours: mon is given twice',
    );
    expect(() => parseCallingHours('09:00-18:00')).toThrow(
      '--calling-hours: "09:00-18:00" is not DAYS=HH:MM-HH:MM (e.g. mon-fri=09:00-18:00)',
    );
    expect(() => parseCallingHours('{"mon": ')).toThrow(/^--calling-hours: the value is not JSON/);
    expect(() => parseCallingHours('@missing.json', '--calling-hours', files({}))).toThrow(
      '--calling-hours: cannot read missing.json: no such file',
    );
  });
});

describe('client settings from the command line', () => {
  it('lays the flags over --file, and --file over the current settings', () => {
    const read = files({
      's.json': '{"maxConcurrentCalls": 4, "timeZone": "Asia/Tokyo", "defaultRegion": "JP"}',
    });
    expect(
      clientSettingsBody(
        {
          file: 's.json',
          'calls-per-second': '1.5',
          'calling-hours': 'mon=09:00-18:00',
          'message-channel': 'ch1',
        },
        { maxConcurrentCalls: 2, callsPerSecond: 9, defaultRegion: 'US' },
        read,
      ),
    ).toEqual({
      maxConcurrentCalls: 4,
      callsPerSecond: 1.5,
      timeZone: 'Asia/Tokyo',
      defaultRegion: 'JP',
      callingHours: { mon: NINE_TO_SIX },
      messageChannelId: 'ch1',
    });
  });

  it('refuses numbers that are not numbers, and an empty put; leaves ranges to the API', () => {
    expect(() => clientSettingsBody({ 'max-concurrent-calls': 'six' })).toThrow(
      '--max-concurrent-calls must be a whole number ≥ 0, got "six"',
    );
    expect(() => clientSettingsBody({ 'calls-per-second': '' })).toThrow(
      '--calls-per-second must be a number, got ""',
    );
    expect(() => clientSettingsBody({})).toThrow(/^clients put needs the settings/);
    expect(clientSettingsBody({ 'max-concurrent-calls': '0' })).toEqual({ maxConcurrentCalls: 0 });
    expect(() => clientSettingsBody({ file: 'a.json' }, {}, files({ 'a.json': '[1]' }))).toThrow(
      '--file: a.json must hold a JSON object',
    );
  });

  it('turns stored settings back into what a PUT takes', () => {
    const stored: ClientSettings = {
      clientId: 'acme',
      maxConcurrentCalls: 6,
      callsPerSecond: 2,
      timeZone: 'Asia/Tokyo',
      callingHours: { timeZone: 'Asia/Tokyo', weekly: { mon: NINE_TO_SIX } },
      defaultRegion: 'JP',
      paused: true,
      telephony: { provider: 'http', baseUrl: 'https://tel.example' },
      updatedAt: 1,
    };
    expect(settingsForPut(stored)).toEqual({
      maxConcurrentCalls: 6,
      callsPerSecond: 2,
      timeZone: 'Asia/Tokyo',
      callingHours: { mon: NINE_TO_SIX },
      defaultRegion: 'JP',
      telephony: { provider: 'http', baseUrl: 'https://tel.example' },
    });
    // --merge keeps restricted periods and holidays (a PUT without them removes them).
    const restricted = {
      ...stored,
      restrictedPeriods: [{ start: '2026-12-31' }],
      holidays: { country: 'JP' },
    };
    expect(settingsForPut(restricted)).toMatchObject({
      restrictedPeriods: [{ start: '2026-12-31' }],
      holidays: { country: 'JP' },
    });
  });

  it('takes restricted periods (JSON or @FILE) and a holidays country (issue 14 #3)', () => {
    const periods = '[{"start":"2026-12-29","end":"2027-01-03","name":"year-end"}]';
    expect(clientSettingsBody({ 'restricted-periods': periods, holidays: 'jp' })).toEqual({
      restrictedPeriods: [{ start: '2026-12-29', end: '2027-01-03', name: 'year-end' }],
      holidays: { country: 'JP' },
    });
    expect(
      jobOptionsBody(
        { csv: 'list.csv', 'restricted-periods': '@p.json', 'time-zone-by': 'recipient' },
        files({ 'p.json': '[{"start":"2026-12-24"}]' }),
      ),
    ).toEqual({ name: 'list', restrictedPeriods: [{ start: '2026-12-24' }], timeZoneBy: 'recipient' });
    expect(() => jobOptionsBody({ csv: 'l.csv', 'time-zone-by': 'moon' })).toThrow(
      '--time-zone-by must be client or recipient, got "moon"',
    );
  });
});

describe('job options from the command line', () => {
  it("names the job after its list and maps every flag to the API's field", () => {
    expect(
      jobOptionsBody({
        client: 'c1',
        csv: 'lists/June calls.csv',
        channel: 'call',
        'start-at': '2026-12-01T09:00:00+09:00',
        'calling-hours': 'weekdays=10:00-16:00',
        scenario: 'reminder',
        'max-attempts': '2',
        'retry-delay': '600',
        retries: '{"busy": {"maxAttempts": 4}}',
        'ring-timeout': '30',
        'recipient-column': '携帯',
      }),
    ).toEqual({
      name: 'June calls',
      channel: 'call',
      startAt: '2026-12-01T09:00:00+09:00',
      callingHours: {
        mon: [{ start: '10:00', end: '16:00' }],
        tue: [{ start: '10:00', end: '16:00' }],
        wed: [{ start: '10:00', end: '16:00' }],
        thu: [{ start: '10:00', end: '16:00' }],
        fri: [{ start: '10:00', end: '16:00' }],
      },
      scenarioId: 'reminder',
      maxAttempts: 2,
      retryDelaySeconds: 600,
      retries: { busy: { maxAttempts: 4 } },
      ringTimeoutSeconds: 30,
      recipientColumn: '携帯',
    });
  });

  it('reads the message as text or from a file (JSON when it is an object), and --options under the flags', () => {
    const read = files({
      'msg.json': '{"messages": [{"type": "text", "text": "Hi {{name}}"}]}\n',
      'msg.txt': 'こんにちは {{name}} 様\n',
      'opts.json': '{"name": "from file", "channel": "message", "maxAttempts": 1}',
    });
    expect(jobOptionsBody({ csv: 'a.csv', channel: 'message', message: 'Hello {{name}}' })).toEqual({
      name: 'a',
      channel: 'message',
      message: 'Hello {{name}}',
    });
    expect(jobOptionsBody({ csv: 'a.csv', 'message-file': 'msg.json' }, read).message).toEqual({
      messages: [{ type: 'text', text: 'Hi {{name}}' }],
    });
    expect(jobOptionsBody({ csv: 'a.csv', 'message-file': 'msg.txt' }, read).message).toBe(
      'こんにちは {{name}} 様',
    );
    expect(jobOptionsBody({ csv: 'a.csv', options: 'opts.json', 'max-attempts': '3' }, read)).toEqual({
      name: 'from file',
      channel: 'message',
      maxAttempts: 3,
    });
  });

  it("an SMS job's --message or plain-text --message-file is its text; LINE's JSON is refused", () => {
    const read = files({ 'sms.txt': '{{name}}様、明日10時です\n', 'msg.json': '{"messages": []}' });
    expect(jobOptionsBody({ csv: 'a.csv', channel: 'sms', message: '{{name}}様' })).toEqual({
      name: 'a',
      channel: 'sms',
      sms: { body: '{{name}}様' },
    });
    expect(jobOptionsBody({ csv: 'a.csv', channel: 'sms', 'message-file': 'sms.txt' }, read).sms).toEqual({
      body: '{{name}}様、明日10時です',
    });
    expect(() => jobOptionsBody({ csv: 'a.csv', channel: 'sms', 'message-file': 'msg.json' }, read)).toThrow(
      /an SMS job sends one text/,
    );
    expect(() => jobOptionsBody({ csv: 'a.csv', channel: 'fax' })).toThrow(/call, line, email or sms/);
  });

  it('reads a list of channels as the ones to fall back through', () => {
    expect(jobOptionsBody({ csv: 'a.csv', channel: 'line, email,sms' }).channel).toEqual([
      'line',
      'email',
      'sms',
    ]);
    expect(() => jobOptionsBody({ csv: 'a.csv', channel: 'line,fax' })).toThrow(
      '--channel must be call, line, email or sms, got "line,fax"',
    );
  });

  it('refuses what cannot be sent', () => {
    expect(() => jobOptionsBody({ csv: 'a.csv', channel: 'fax' })).toThrow(
      '--channel must be call, line, email or sms, got "fax"',
    );
    expect(() => jobOptionsBody({ csv: 'a.csv', message: 'a', 'message-file': 'b' })).toThrow(
      'give the message once: --message or --message-file',
    );
    expect(() => jobOptionsBody({ csv: 'a.csv', retries: '{busy}' })).toThrow(
      /^--retries: the value is not JSON/,
    );
    expect(() => jobOptionsBody({ csv: 'a.csv', 'max-attempts': 'three' })).toThrow(
      '--max-attempts must be a whole number ≥ 0, got "three"',
    );
  });
});
