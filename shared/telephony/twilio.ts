/**
 * Twilio Programmable Voice as Switchboard reads it, with no I/O: the `X-Twilio-Signature` of a
 * status callback (HMAC-SHA1 over the URL Twilio requested plus the POST parameters sorted by
 * name, base64), a callback's parameters as a call status event, and a Call resource (`Calls/{Sid}.json`)
 * as a call snapshot. The wire facts and their sources are in `docs/provider-facts.md` (B).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { MissingSignatureError, SignatureMismatchError } from './callback-signature.ts';
import type { CallSnapshot, CallStatus, CallStatusEvent, ReportedCallStatus } from './port.ts';
import { MalformedCallStatusError } from './status-event.ts';

export const TWILIO_SIGNATURE_HEADER = 'X-Twilio-Signature';
/**
 * Set by Twilio when a Webhook Rule matches the URL: the request is then signed with that Webhook
 * Setting's SharedKey and algorithm (`key=…,algorithm=HMAC_SHA256`) instead of the Auth Token's
 * HMAC-SHA1 (twilio-node's WebhookSignatureValidation.md). Switchboard keeps no SharedKey.
 */
export const TWILIO_SIGNATURE_SETTINGS_HEADER = 'X-Twilio-Webhooks-Signature-Settings';
/** Twilio's REST API (`https://api.twilio.com/2010-04-01/…`). */
export const TWILIO_API_URL = 'https://api.twilio.com';
/** The status route Twilio's callbacks go to (the `{provider}` of the call-status route is `twilio`). */
export const TWILIO_STATUS_PATH = '/providers/twilio/calls/status';
/** The status callback events Switchboard asks for (`StatusCallbackEvent`). */
export const TWILIO_CALLBACK_EVENTS = ['initiated', 'ringing', 'answered', 'completed'] as const;

/** Form parameters as Twilio sends them: a name may repeat. */
export type FormParams = ReadonlyArray<readonly [string, string]>;

/** The form body's parameters, decoded (`+` is a space, `%2B` a plus), in the order received. */
export function parseForm(body: string): FormParams {
  return [...new URLSearchParams(body)];
}

/**
 * The signature Twilio sends for a POST to `url` with `params`: the URL, then each parameter's
 * name and value (values of a repeated name sorted, each once), names sorted, HMAC-SHA1 with the
 * auth token, base64. Sorted as Twilio's own validator sorts (twilio-node `getExpectedTwilioSignature`:
 * `Object.keys(params).sort()`, `Array.from(new Set(values)).sort()`): JavaScript's default sort,
 * by UTF-16 code units — which differs from UTF-8 byte order for a character above U+FFFF against
 * one in U+E000–U+FFFF (a surrogate, 0xD8xx, sorts first; its UTF-8 lead byte 0xF0 would sort last).
 */
export function twilioSignature(authToken: string, url: string, params: FormParams): string {
  const byName = new Map<string, string[]>();
  for (const [name, value] of params) byName.set(name, [...(byName.get(name) ?? []), value]);
  let data = url;
  for (const name of [...byName.keys()].sort()) {
    // A value repeated under one name counts once, as Twilio's validator computes it.
    for (const value of [...new Set(byName.get(name)!)].sort()) data += name + value;
  }
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/**
 * The forms of `url` Twilio may have signed: as given, and with the scheme's default port added or
 * removed (Twilio signs with and without it, as its own validators accept both).
 */
export function signedUrlForms(url: string): string[] {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [url];
  }
  const defaultPort = parsed.protocol === 'https:' ? '443' : parsed.protocol === 'http:' ? '80' : '';
  const forms = new Set([url]);
  const authority = /^([a-z]+:\/\/)([^/?#]+)(.*)$/i.exec(url);
  if (authority && defaultPort) {
    const [, scheme, host, rest] = authority as unknown as [string, string, string, string];
    if (host.endsWith(`:${defaultPort}`)) forms.add(scheme + host.slice(0, -(defaultPort.length + 1)) + rest);
    else if (!/:\d+$/.test(host)) forms.add(`${scheme}${host}:${defaultPort}${rest}`);
  }
  return [...forms];
}

/**
 * Checks `header` against every URL the caller may have used and every auth token in force (two
 * during a rotation), in constant time per comparison. Throws a `CallbackSignatureError` (401).
 */
export function verifyTwilioSignature(input: {
  readonly header: string | null | undefined;
  readonly urls: readonly string[];
  readonly params: FormParams;
  readonly authTokens: readonly string[];
  /** {@link TWILIO_SIGNATURE_SETTINGS_HEADER}, when the request carries it. */
  readonly settings?: string | null | undefined;
}): void {
  const header = input.header?.trim();
  if (!header) throw new MissingSignatureError(`missing ${TWILIO_SIGNATURE_HEADER} header`);
  if (input.settings?.trim()) {
    // Refused with its reason (logged), not guessed at: a Webhook Rule's key is not the Auth Token.
    throw new SignatureMismatchError(
      `${TWILIO_SIGNATURE_SETTINGS_HEADER} (${input.settings.trim().replace(/key=[^,]*/, 'key=…')}): signed with a Webhook Setting's SharedKey, which Switchboard does not hold; it verifies the Auth Token's HMAC-SHA1 only — remove the Webhook Rule that matches the status callback URL`,
    );
  }
  const given = Buffer.from(header, 'utf8');
  for (const token of input.authTokens) {
    for (const url of input.urls.flatMap(signedUrlForms)) {
      const expected = Buffer.from(twilioSignature(token, url, input.params), 'utf8');
      if (expected.length === given.length && timingSafeEqual(expected, given)) return;
    }
  }
  throw new SignatureMismatchError(`${TWILIO_SIGNATURE_HEADER} does not match`);
}

/** RFC 2822 as Twilio writes it (`Tue, 31 Aug 2010 20:36:28 +0000`). */
export function rfc2822(ms: number): string {
  return new Date(ms).toUTCString().replace(/GMT$/, '+0000');
}

/** An RFC 2822 (or ISO 8601) time as epoch ms; undefined when it is not a time. */
export function parseTwilioTime(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** AMD's answers that mean an answering machine (`machine_start`, `machine_end_beep`, …). */
export function isMachine(answeredBy: string | null | undefined): boolean {
  return typeof answeredBy === 'string' && answeredBy.startsWith('machine');
}

interface TwilioCallFacts {
  readonly status: string;
  readonly answeredBy?: string | undefined;
  readonly durationSeconds?: number | undefined;
  readonly sipResponseCode?: string | undefined;
  readonly errorCode?: string | undefined;
}

/**
 * Twilio's call status as Switchboard's: `in-progress` is answered; a `completed` call an
 * answering machine took (AMD on) is `voicemail`, one a fax took `failed`; `canceled` (hung up while queued or ringing) is
 * a failure that names it; `queued` and `initiated` are the call being dialled.
 */
function statusOf(facts: TwilioCallFacts): { status: CallStatus; reason?: string } {
  switch (facts.status) {
    case 'queued':
      return { status: 'queued' };
    case 'initiated':
    case 'ringing':
      return { status: 'ringing' };
    case 'in-progress':
      return { status: 'answered' };
    case 'completed':
      // A fax is nobody to leave a message with: failed, as Amazon Connect's FAX_MACHINE_DETECTED is.
      if (facts.answeredBy === 'fax') return { status: 'failed', reason: 'answered by fax' };
      return isMachine(facts.answeredBy)
        ? { status: 'voicemail', reason: `answered by ${facts.answeredBy}` }
        : { status: 'completed' };
    case 'busy':
      return { status: 'busy' };
    case 'no-answer':
      return { status: 'no-answer' };
    case 'canceled':
      return { status: 'failed', reason: 'canceled: hung up while queued or ringing' };
    case 'failed': {
      const detail = [
        facts.errorCode ? `Twilio error ${facts.errorCode}` : undefined,
        facts.sipResponseCode ? `SIP ${facts.sipResponseCode}` : undefined,
      ].filter(Boolean);
      return { status: 'failed', reason: detail.length ? `failed (${detail.join(', ')})` : 'failed' };
    }
    default:
      throw new MalformedCallStatusError(`unknown Twilio call status "${facts.status}"`);
  }
}

/** Ranks a snapshot read from the REST API, which has no sequence number: by how far along it is. */
const READ_SEQUENCE: Record<string, number> = { queued: 0, ringing: 1, answered: 2 };

/** A Call resource (`GET …/Calls/{Sid}.json`) as a snapshot of the call. */
export function twilioCallSnapshot(resource: unknown, idempotencyKey: string): CallSnapshot {
  const call = resource as Record<string, unknown> | null;
  const sid = call?.sid;
  const status = call?.status;
  if (typeof sid !== 'string' || typeof status !== 'string') {
    throw new MalformedCallStatusError('Twilio call without sid or status');
  }
  const duration = Number(call!.duration);
  const mapped = statusOf({
    status,
    answeredBy: typeof call!.answered_by === 'string' ? call!.answered_by : undefined,
  });
  const at =
    parseTwilioTime(call!.end_time as string) ??
    parseTwilioTime(call!.date_updated as string) ??
    parseTwilioTime(call!.date_created as string) ??
    0;
  return {
    callId: sid,
    idempotencyKey,
    status: mapped.status,
    at: new Date(at).toISOString(),
    sequence: READ_SEQUENCE[mapped.status] ?? 3,
    ...(mapped.status === 'completed' && Number.isFinite(duration) ? { durationSeconds: duration } : {}),
    ...(mapped.reason === undefined ? {} : { reason: mapped.reason }),
  };
}

/**
 * The key a called person presses to ask not to be called again. Twilio reports it as the `Digits`
 * parameter of a `<Gather>`'s action request (https://www.twilio.com/docs/voice/twiml/gather): a
 * flow whose Gather posts to the status callback URL puts the recipient on the suppression list.
 */
export const TWILIO_OPT_OUT_DIGITS = '9';

/**
 * A status callback's parameters as a call status event (`idempotencyKey`: the attempt the signed
 * callback URL names). `SequenceNumber` (from 0) orders the events of a call, so a late `ringing`
 * never undoes `in-progress`; Twilio numbers from 0 where Switchboard's events start at 1.
 */
export function twilioStatusEvent(params: FormParams, idempotencyKey: string, now: number): CallStatusEvent {
  const get = (name: string) => params.find(([n]) => n === name)?.[1];
  const callId = get('CallSid');
  const callStatus = get('CallStatus');
  if (!callId || !/^CA[0-9a-fA-F]{32}$/.test(callId)) {
    throw new MalformedCallStatusError('CallSid missing or not a call SID');
  }
  if (!callStatus) throw new MalformedCallStatusError('CallStatus missing');
  if (callStatus === 'queued') {
    throw new MalformedCallStatusError('a queued call sends no status callback');
  }
  const sequenceNumber = Number(get('SequenceNumber') ?? Number.NaN);
  const mapped = statusOf({
    status: callStatus,
    answeredBy: get('AnsweredBy'),
    sipResponseCode: get('SipResponseCode'),
    errorCode: get('ErrorCode'),
  });
  const duration = Number(get('CallDuration'));
  const at = parseTwilioTime(get('Timestamp')) ?? now;
  const optOut = get('Digits') === TWILIO_OPT_OUT_DIGITS;
  return {
    callId,
    idempotencyKey,
    status: mapped.status as ReportedCallStatus,
    at: new Date(at).toISOString(),
    // Without a SequenceNumber the status's rank orders it (a duplicate still changes nothing).
    sequence: Number.isInteger(sequenceNumber) && sequenceNumber >= 0 ? sequenceNumber + 1 : 1,
    ...(mapped.status === 'completed' && Number.isFinite(duration) ? { durationSeconds: duration } : {}),
    ...(mapped.reason === undefined ? {} : { reason: mapped.reason }),
    ...(optOut ? { optOut: true } : {}),
  };
}
