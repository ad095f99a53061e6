/**
 * The signature of telephony status callbacks (Stripe-style):
 * `X-Switchboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.
 * The timestamp is signed with the body, so a captured callback cannot be replayed once it is
 * older than the tolerance.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { TelephonyError } from './errors.ts';

/** The header the provider signs callbacks with (HTTP header names are case-insensitive). */
export const CALLBACK_SIGNATURE_HEADER = 'X-Switchboard-Signature';
/** How far (either way) a callback's timestamp may be from the receiver's clock. */
export const DEFAULT_SIGNATURE_TOLERANCE_SECONDS = 300;

/** Any reason a callback's signature is not accepted; all of them mean 401, change nothing. */
export class CallbackSignatureError extends TelephonyError {}
export class MissingSignatureError extends CallbackSignatureError {}
export class MalformedSignatureError extends CallbackSignatureError {}
export class StaleSignatureError extends CallbackSignatureError {}
export class SignatureMismatchError extends CallbackSignatureError {}

type RawBody = string | Uint8Array;

function hmacHex(secret: string, timestamp: number, rawBody: RawBody): string {
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  return createHmac('sha256', secret).update(`${timestamp}.`, 'utf8').update(body).digest('hex');
}

/** The header value signing `rawBody` at `timestampSeconds` (unix seconds). */
export function signCallback(secret: string, rawBody: RawBody, timestampSeconds: number): string {
  if (!Number.isInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError(`timestamp must be whole unix seconds, got ${timestampSeconds}`);
  }
  return `t=${timestampSeconds},v1=${hmacHex(secret, timestampSeconds, rawBody)}`;
}

export interface VerifyCallbackOptions {
  /** The header value as received; `undefined` when the header is absent. */
  readonly header: string | null | undefined;
  /** The body bytes exactly as received (API Gateway's base64 body decoded first). */
  readonly rawBody: RawBody;
  /** The current secret, or several during a rotation (any one may match). */
  readonly secrets: string | readonly string[];
  readonly clock: { now(): number };
  readonly toleranceSeconds?: number;
}

/**
 * Verifies a callback's signature on its raw body, in constant time. Returns the signed
 * timestamp (unix seconds); throws a {@link CallbackSignatureError} subclass otherwise.
 */
export function verifyCallbackSignature(options: VerifyCallbackOptions): number {
  const { header, rawBody, clock } = options;
  const tolerance = options.toleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
  if (header === undefined || header === null || header.trim() === '') {
    throw new MissingSignatureError(`missing ${CALLBACK_SIGNATURE_HEADER} header`);
  }
  const { timestamp, signatures } = parseHeader(header);
  const ageSeconds = clock.now() / 1000 - timestamp;
  if (Math.abs(ageSeconds) > tolerance) {
    throw new StaleSignatureError(
      `callback timestamp ${timestamp} is ${Math.round(ageSeconds)} s from now (tolerance ${tolerance} s)`,
    );
  }
  const secrets = typeof options.secrets === 'string' ? [options.secrets] : options.secrets;
  if (secrets.length === 0) throw new RangeError('no callback secret to verify with');
  for (const secret of secrets) {
    const expected = Buffer.from(hmacHex(secret, timestamp, rawBody), 'hex');
    for (const given of signatures) {
      if (given.length === expected.length && timingSafeEqual(given, expected)) return timestamp;
    }
  }
  throw new SignatureMismatchError('callback signature does not match');
}

function parseHeader(header: string): { timestamp: number; signatures: Buffer[] } {
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) throw new MalformedSignatureError('signature header parts must be key=value');
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (timestamp !== undefined || !/^\d{1,12}$/.test(value)) {
        throw new MalformedSignatureError('signature header needs exactly one numeric t=');
      }
      timestamp = Number(value);
    } else if (key === 'v1') {
      if (!/^[0-9a-f]{64}$/i.test(value)) throw new MalformedSignatureError('v1 must be 64 hex digits');
      signatures.push(Buffer.from(value, 'hex'));
    }
    // Other schemes (a future v2) are skipped so the provider can add one without breaking us.
  }
  if (timestamp === undefined) throw new MalformedSignatureError('signature header has no t=');
  if (signatures.length === 0) throw new MalformedSignatureError('signature header has no v1=');
  return { timestamp, signatures };
}
