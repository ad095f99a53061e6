/**
 * Turns the command line's options into the API's request bodies: client settings and job options.
 * Only the form is checked here (a number is a number, an hours spec reads); what the values may be
 * is the API's to say, with its field errors, so the CLI and the console cannot disagree.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { numberOption, type Options, stringOption, wholeNumber } from './args.ts';
import { UsageError } from './errors.ts';

/** Reads a file as UTF-8 text; tests hand in their own. */
export type ReadText = (file: string) => string;

const readText: ReadText = (file) => readFileSync(file, 'utf8');

const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
type Weekday = (typeof WEEKDAYS)[number];
type Window = { readonly start: string; readonly end: string };

const DAY_GROUPS: Readonly<Record<string, readonly Weekday[]>> = {
  all: WEEKDAYS,
  daily: WEEKDAYS,
  weekdays: ['mon', 'tue', 'wed', 'thu', 'fri'],
  weekend: ['sat', 'sun'],
};

/** `mon`, `mon-fri` (a range may wrap: `fri-mon`), `all`, `weekdays`, `weekend`; `/` joins them. */
function daysOf(text: string, flag: string): Weekday[] {
  const days: Weekday[] = [];
  for (const part of text.toLowerCase().split('/')) {
    const group = DAY_GROUPS[part];
    if (group) {
      days.push(...group);
      continue;
    }
    const [from, to] = part.split('-') as [string, string | undefined];
    const a = WEEKDAYS.indexOf(from as Weekday);
    const b = to === undefined ? a : WEEKDAYS.indexOf(to as Weekday);
    if (a === -1 || b === -1) {
      throw new UsageError(
        `${flag}: "${part}" is not a day: use mon … sun, a range (mon-fri), all, weekdays or weekend`,
      );
    }
    for (let i = a; ; i = (i + 1) % 7) {
      days.push(WEEKDAYS[i]!);
      if (i === b) break;
    }
  }
  return days;
}

/** `09:00-18:00`, several joined by `+`; `closed` for none. Hours may be written `9:00`. */
function windowsOf(text: string, flag: string): Window[] {
  if (text.toLowerCase() === 'closed') return [];
  return text.split('+').map((part) => {
    const match = /^(\d{1,2}):(\d{2})\s*[-–~]\s*(\d{1,2}):(\d{2})$/.exec(part.trim());
    if (!match) throw new UsageError(`${flag}: "${part}" is not a window such as 09:00-18:00`);
    const [, h1, m1, h2, m2] = match;
    return { start: `${h1!.padStart(2, '0')}:${m1}`, end: `${h2!.padStart(2, '0')}:${m2}` };
  });
}

/**
 * Calling hours from the command line: JSON (`{"mon": [{"start": "09:00", "end": "18:00"}]}`),
 * `@FILE` of that JSON, or a spec such as `mon-fri=09:00-18:00,sat=10:00-12:00+13:00-17:00`
 * (days not named are closed).
 */
export function parseCallingHours(
  text: string,
  flag = '--calling-hours',
  read: ReadText = readText,
): unknown {
  const trimmed = text.trim();
  if (trimmed.startsWith('{') || trimmed.startsWith('@')) return jsonArgument(trimmed, flag, read);
  const weekly: Partial<Record<Weekday, Window[]>> = {};
  const entries = trimmed.split(/[,;]/).map((e) => e.trim());
  if (entries.every((e) => e === '')) throw new UsageError(`${flag} is empty`);
  for (const entry of entries) {
    if (entry === '') continue;
    const match = /^([a-z/-]+)\s*(?:=|\s)\s*(.+)$/i.exec(entry);
    if (!match)
      throw new UsageError(`${flag}: "${entry}" is not DAYS=HH:MM-HH:MM (e.g. mon-fri=09:00-18:00)`);
    const windows = windowsOf(match[2]!, flag);
    for (const day of daysOf(match[1]!, flag)) {
      if (weekly[day]) throw new UsageError(`${flag}: ${day} is given twice`);
      weekly[day] = windows;
    }
  }
  return weekly;
}

/** A JSON option: the JSON itself, or `@FILE` holding it. */
export function jsonArgument(value: string, flag: string, read: ReadText = readText): unknown {
  const fromFile = value.startsWith('@');
  const text = fromFile ? readFileArg(value.slice(1), flag, read) : value;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      `${flag}: ${fromFile ? `${value.slice(1)} is` : 'the value is'} not JSON (${(error as Error).message})`,
    );
  }
}

function readFileArg(file: string, flag: string, read: ReadText): string {
  try {
    return read(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      `${flag}: cannot read ${file}${code === 'ENOENT' ? ': no such file' : ` (${code ?? 'error'})`}`,
    );
  }
}

function jsonObjectFile(file: string, flag: string, read: ReadText): Record<string, unknown> {
  const value = jsonArgument(`@${file}`, flag, read);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UsageError(`${flag}: ${file} must hold a JSON object`);
  return value as Record<string, unknown>;
}

/** What of a client's stored settings a PUT takes back (`paused` is kept by the API itself). */
export function settingsForPut(current: ClientSettings): Record<string, unknown> {
  return {
    maxConcurrentCalls: current.maxConcurrentCalls,
    callsPerSecond: current.callsPerSecond,
    timeZone: current.timeZone,
    callingHours: current.callingHours.weekly,
    defaultRegion: current.defaultRegion,
    ...(current.messageChannelId === undefined ? {} : { messageChannelId: current.messageChannelId }),
    ...(current.jobDefaults === undefined ? {} : { jobDefaults: current.jobDefaults }),
    ...(current.telephony === undefined ? {} : { telephony: current.telephony }),
    ...(current.restrictedPeriods === undefined ? {} : { restrictedPeriods: current.restrictedPeriods }),
    ...(current.holidays === undefined ? {} : { holidays: current.holidays }),
  };
}

/**
 * The body of `PUT /clients/{clientId}`: `base` (the current settings with --merge, else nothing),
 * then --file, then the flags.
 */
export function clientSettingsBody(
  options: Options,
  base: Record<string, unknown> = {},
  read: ReadText = readText,
): Record<string, unknown> {
  const file = stringOption(options, 'file');
  const body: Record<string, unknown> = { ...base, ...(file ? jsonObjectFile(file, '--file', read) : {}) };
  const set = (key: string, value: unknown) => {
    if (value !== undefined) body[key] = value;
  };
  set('maxConcurrentCalls', wholeNumber(options, 'max-concurrent-calls', { min: 0 }));
  set('callsPerSecond', numberOption(options, 'calls-per-second'));
  set('timeZone', stringOption(options, 'time-zone'));
  const hours = stringOption(options, 'calling-hours');
  if (hours !== undefined) set('callingHours', parseCallingHours(hours, '--calling-hours', read));
  set('defaultRegion', stringOption(options, 'default-region'));
  set('messageChannelId', stringOption(options, 'message-channel'));
  setRestrictions(options, set, read);
  if (Object.keys(body).length === 0) {
    throw new UsageError(
      'clients put needs the settings: --file FILE or flags (see npm run ops -- clients put --help)',
    );
  }
  return body;
}

/** The body of `POST /clients/{clientId}/jobs`: --options, then the flags; the name defaults to the file's. */
export function jobOptionsBody(options: Options, read: ReadText = readText): Record<string, unknown> {
  const file = stringOption(options, 'options');
  const body: Record<string, unknown> = file ? jsonObjectFile(file, '--options', read) : {};
  const set = (key: string, value: unknown) => {
    if (value !== undefined) body[key] = value;
  };
  const csv = stringOption(options, 'csv');
  set('name', stringOption(options, 'name') ?? (body.name === undefined && csv ? listName(csv) : undefined));
  const channel = stringOption(options, 'channel');
  // `line,email,sms`: the message channels to fall back through, in order (the API checks the list).
  const channels = channel?.split(',').map((c) => c.trim());
  if (channels?.some((c) => !['call', 'line', 'email', 'sms', 'message'].includes(c)))
    throw new UsageError(`--channel must be call, line, email or sms, got ${JSON.stringify(channel)}`);
  set('channel', channels && channels.length > 1 ? channels : channel);
  const text = stringOption(options, 'message');
  const messageFile = stringOption(options, 'message-file');
  if (text !== undefined && messageFile !== undefined)
    throw new UsageError('give the message once: --message or --message-file');
  set('message', text);
  if (messageFile !== undefined) {
    const content = readFileArg(messageFile, '--message-file', read);
    if (body.channel === 'sms' && content.trimStart().startsWith('{"'))
      throw new UsageError('an SMS job sends one text: --message TEXT or a plain-text --message-file');
    set(
      'message',
      body.channel !== 'sms' && content.trimStart().startsWith('{')
        ? jsonArgument(`@${messageFile}`, '--message-file', read)
        : content.replace(/\r?\n$/, ''),
    );
  }
  textForSms(body);
  set('startAt', stringOption(options, 'start-at'));
  const hours = stringOption(options, 'calling-hours');
  if (hours !== undefined) set('callingHours', parseCallingHours(hours, '--calling-hours', read));
  set('scenarioId', stringOption(options, 'scenario'));
  set('maxAttempts', wholeNumber(options, 'max-attempts', { min: 0 }));
  set('retryDelaySeconds', wholeNumber(options, 'retry-delay', { min: 0 }));
  const retries = stringOption(options, 'retries');
  if (retries !== undefined) set('retries', jsonArgument(retries, '--retries', read));
  set('ringTimeoutSeconds', wholeNumber(options, 'ring-timeout', { min: 0 }));
  set('recipientColumn', stringOption(options, 'recipient-column'));
  setRestrictions(options, set, read);
  const by = stringOption(options, 'time-zone-by');
  if (by !== undefined && by !== 'client' && by !== 'recipient')
    throw new UsageError(`--time-zone-by must be client or recipient, got ${JSON.stringify(by)}`);
  set('timeZoneBy', by);
  return body;
}

/** An SMS job's --message / --message-file is its text (`sms.body`); LINE's JSON messages are refused. */
function textForSms(body: Record<string, unknown>): void {
  if (body.channel !== 'sms' || body.message === undefined) return;
  if (typeof body.message !== 'string')
    throw new UsageError('an SMS job sends one text: --message TEXT or a plain-text --message-file');
  body.sms = { body: body.message };
  delete body.message;
}

/** --restricted-periods (JSON or @FILE) and --holidays (a country code), for clients and jobs alike. */
function setRestrictions(options: Options, set: (key: string, value: unknown) => void, read: ReadText): void {
  const periods = stringOption(options, 'restricted-periods');
  if (periods !== undefined) set('restrictedPeriods', jsonArgument(periods, '--restricted-periods', read));
  const country = stringOption(options, 'holidays');
  if (country !== undefined) set('holidays', { country: country.toUpperCase() });
}

/** `lists/june calls.csv` → `june calls`. */
function listName(file: string): string {
  return path.basename(file).replace(/\.[^.]*$/, '') || path.basename(file);
}
