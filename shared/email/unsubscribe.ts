/**
 * One-click unsubscribe (RFC 8058, https://www.rfc-editor.org/rfc/rfc8058): the headers a bulk
 * email carries, the signed per-recipient token in its URL, and the check of the POST a mail
 * client sends to that URL.
 *
 * What RFC 8058 asks, and how this module answers it:
 * - §3.1: one `List-Unsubscribe` header that "MUST contain one HTTPS URI" (it "MAY contain other
 *   non-HTTP/S URIs such as MAILTO:") and one `List-Unsubscribe-Post` header that "MUST contain
 *   the single key/value pair `List-Unsubscribe=One-Click`" — {@link listUnsubscribeHeaders}.
 *   Both must be covered by a valid DKIM signature (§4); that is the sending identity's DKIM
 *   set-up, outside this module.
 * - §3.1: the POST carries no cookies, no authorisation and no context, so "the URI ... MUST
 *   contain enough information to identify the mail recipient and the list", and SHOULD carry
 *   "an opaque identifier or another hard-to-forge component" that the server verifies — the
 *   {@link UnsubscribeTokens} token: client, job and address, with an HMAC-SHA256 over them.
 * - §3.2: the receiver POSTs the pair as the body, "SHOULD be sent as multipart/form-data" and
 *   "MAY be sent as application/x-www-form-urlencoded" — {@link isOneClickUnsubscribeBody} reads
 *   both. §5's ABNF has `postarg = "List-Unsubscribe=One-Click"`, and ABNF quoted strings are
 *   case-insensitive (RFC 5234 §2.3), so the pair is compared without regard to case.
 * - The endpoint must answer the POST itself: "The mail sender MUST NOT return an HTTPS redirect".
 *
 * Tokens do not expire. RFC 8058 sets no lifetime, mail is read (and its button pressed) long after
 * it was sent, and the rules that apply give floors, not ceilings: Gmail's sender guidelines ask
 * that unsubscribe requests be honoured within 48 hours
 * (https://support.google.com/a/answer/15263077), and the US CAN-SPAM Act requires an opt-out
 * mechanism to keep working for at least 30 days after the message was sent (15 U.S.C.
 * §7704(a)(3)(A)(ii); https://www.ftc.gov/business-guidance/resources/can-spam-act-compliance-guide-business).
 * Old tokens are retired by rotating the key (drop its `kid` from the verifier) or, more coarsely,
 * with `notBefore`: tokens issued before it are refused as `revoked`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header value that announces one-click (RFC 8058 §3.1), and the body a client POSTs (§3.2). */
export const ONE_CLICK_PAIR = 'List-Unsubscribe=One-Click';
/** Shortest secret accepted: SHA-256's output length (RFC 2104 §3: shorter keys are "strongly discouraged"). */
export const MIN_SECRET_BYTES = 32;
/** Longest token considered at all; anything longer is refused before it is decoded. */
export const MAX_TOKEN_CHARS = 1_024;
/** A one-click body is a few dozen bytes; a larger one is not read. */
export const MAX_ONE_CLICK_BODY_BYTES = 4_096;

/** Truncated MAC: 128 bits, half of SHA-256's output, the least RFC 2104 §5 recommends. */
const MAC_BYTES = 16;
const KID = /^[A-Za-z0-9_-]{1,16}$/;
const TOKEN = /^([A-Za-z0-9_-]{1,16})\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{22})$/;
/** Domain separation: a MAC made for anything else with the same secret is never a valid token. */
const CONTEXT = 'switchboard/unsubscribe/v1\n';

export type UnsubscribeSecret = Buffer | string;

/** Whom a token unsubscribes, from which client's mail, and the job whose message carried it. */
export interface UnsubscribeRequest {
  readonly clientId: string;
  readonly jobId: string;
  /** The recipient's normalised address (`shared/email/address.ts`). */
  readonly address: string;
}

export interface VerifiedUnsubscribe extends UnsubscribeRequest {
  /** When the token was signed (epoch ms, whole seconds). */
  readonly issuedAt: number;
}

export type UnsubscribeRefusal = 'malformed' | 'unknown-key' | 'bad-signature' | 'revoked';

export type UnsubscribeVerdict =
  | { readonly ok: true; readonly unsubscribe: VerifiedUnsubscribe }
  | { readonly ok: false; readonly reason: UnsubscribeRefusal };

export interface UnsubscribeTokenOptions {
  /** The id of `secret`, written into every token so keys can rotate (default `k1`). */
  readonly kid?: string;
  /** Earlier keys still accepted by {@link UnsubscribeTokens.verify}, by kid; never used to sign. */
  readonly retiredKeys?: Readonly<Record<string, UnsubscribeSecret>>;
  /** Tokens issued before this instant (epoch ms, to the second) are refused as `revoked`. */
  readonly notBefore?: number;
  readonly clock?: () => number;
}

/**
 * Signs and verifies unsubscribe tokens: `kid.payload.mac`, all base64url, where the payload is
 * the JSON array `[clientId, jobId, address, issuedAtSeconds]` and the MAC is HMAC-SHA256 over
 * the kid and payload, truncated to 128 bits.
 *
 * @example
 * const tokens = new UnsubscribeTokens(secret, { kid: '2025a', retiredKeys: { '2024b': oldSecret } });
 * const url = `https://u.example.com/unsubscribe/${tokens.sign({ clientId, jobId, address })}`;
 * const verdict = tokens.verify(tokenFromPath); // { ok: true, unsubscribe } | { ok: false, reason }
 */
export class UnsubscribeTokens {
  readonly #kid: string;
  readonly #keys: ReadonlyMap<string, Buffer>;
  readonly #notBefore: number | undefined;
  readonly #clock: () => number;

  /** Throws a RangeError for a secret shorter than 32 bytes or a kid that is not 1–16 of `A-Za-z0-9_-`. */
  constructor(secret: UnsubscribeSecret, options: UnsubscribeTokenOptions = {}) {
    this.#kid = options.kid ?? 'k1';
    const keys = new Map<string, Buffer>();
    for (const [kid, key] of Object.entries(options.retiredKeys ?? {})) keys.set(kid, secretBytes(kid, key));
    keys.set(this.#kid, secretBytes(this.#kid, secret));
    this.#keys = keys;
    this.#notBefore = options.notBefore;
    this.#clock = options.clock ?? Date.now;
  }

  /** The URL-safe token for one recipient of one job. Throws a RangeError past {@link MAX_TOKEN_CHARS}. */
  sign(request: UnsubscribeRequest): string {
    const { clientId, jobId, address } = request;
    for (const [field, value] of Object.entries({ clientId, jobId, address })) {
      if (typeof value !== 'string' || value === '')
        throw new RangeError(`${field} must be a non-empty string`);
    }
    const issuedAt = Math.floor(this.#clock() / 1000);
    const payload = Buffer.from(JSON.stringify([clientId, jobId, address, issuedAt])).toString('base64url');
    const signature = mac(this.#keys.get(this.#kid)!, this.#kid, payload).toString('base64url');
    const token = `${this.#kid}.${payload}.${signature}`;
    if (token.length > MAX_TOKEN_CHARS) {
      throw new RangeError(`the token would be ${token.length} characters; at most ${MAX_TOKEN_CHARS}`);
    }
    return token;
  }

  /**
   * Whom the token unsubscribes, or why it is refused. Never throws, whatever it is given: the
   * length is capped before any decoding, the MAC is compared in constant time, and the payload is
   * read only once its MAC matched.
   */
  verify(token: unknown): UnsubscribeVerdict {
    if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS) return refused('malformed');
    const parts = TOKEN.exec(token);
    if (!parts) return refused('malformed');
    const [, kid, payload, givenMac] = parts as unknown as [string, string, string, string];
    const given = Buffer.from(givenMac, 'base64url');
    // 22 characters carry 132 bits; only the canonical spelling of the 128 is a token.
    if (given.length !== MAC_BYTES || given.toString('base64url') !== givenMac) return refused('malformed');
    const key = this.#keys.get(kid);
    if (!key) return refused('unknown-key');
    if (!timingSafeEqual(mac(key, kid, payload), given)) return refused('bad-signature');
    const unsubscribe = readPayload(payload);
    if (!unsubscribe) return refused('malformed');
    if (this.#notBefore !== undefined && unsubscribe.issuedAt < Math.floor(this.#notBefore / 1000) * 1000) {
      return refused('revoked');
    }
    return { ok: true, unsubscribe };
  }
}

/**
 * The two headers of RFC 8058 §3.1, exactly: `List-Unsubscribe: <https://…>, <mailto:…>` and
 * `List-Unsubscribe-Post: List-Unsubscribe=One-Click`. Throws a RangeError for a URL that is not
 * https (plain http only to a loopback host: the local cloud), or for a URL or mailto that could
 * break out of its angle brackets or its header.
 */
export function listUnsubscribeHeaders(
  url: string,
  mailto?: string,
): { readonly 'List-Unsubscribe': string; readonly 'List-Unsubscribe-Post': string } {
  const https = headerUri(url, 'https:');
  const uris = mailto === undefined ? [https] : [https, headerUri(mailto, 'mailto:')];
  return {
    'List-Unsubscribe': uris.map((uri) => `<${uri}>`).join(', '),
    'List-Unsubscribe-Post': ONE_CLICK_PAIR,
  };
}

/**
 * True when a POST's body is RFC 8058's one-click request: the pair `List-Unsubscribe=One-Click`
 * as `application/x-www-form-urlencoded` or as a `multipart/form-data` field. Other fields beside
 * it are tolerated; a body without a content type is read as form-urlencoded. A body over
 * {@link MAX_ONE_CLICK_BODY_BYTES} is not read.
 */
export function isOneClickUnsubscribeBody(
  contentType: string | undefined,
  body: string | Uint8Array,
): boolean {
  const size = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  if (size > MAX_ONE_CLICK_BODY_BYTES) return false;
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  const mediaType = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (mediaType === 'multipart/form-data') return multipartHasOneClick(contentType!, text);
  if (mediaType === '' || mediaType === 'application/x-www-form-urlencoded') {
    for (const [key, value] of new URLSearchParams(text.trim())) if (isOneClick(key, value)) return true;
  }
  return false;
}

function isOneClick(key: string, value: string): boolean {
  return `${key}=${value}`.toLowerCase() === ONE_CLICK_PAIR.toLowerCase();
}

/** RFC 7578 parts, read just far enough to find a field named `List-Unsubscribe`. */
function multipartHasOneClick(contentType: string, body: string): boolean {
  const boundary = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  const delimiter = `--${boundary?.[1] ?? boundary?.[2] ?? ''}`;
  if (delimiter === '--') return false;
  const sections = body.split(delimiter);
  for (const section of sections.slice(1)) {
    if (section.startsWith('--')) break;
    const part = section.replace(/^[ \t]*\r?\n/, '').replace(/\r?\n$/, '');
    const blank = /\r?\n\r?\n/.exec(part);
    if (!blank) continue;
    const headers = part.slice(0, blank.index);
    const content = part.slice(blank.index + blank[0].length);
    const disposition = /^content-disposition\s*:\s*form-data\s*;(.*)$/im.exec(headers)?.[1] ?? '';
    const name = /(?:^|;)\s*name\s*=\s*(?:"([^"]*)"|([^;\s]+))/i.exec(disposition);
    if (name && isOneClick(name[1] ?? name[2]!, content.trim())) return true;
  }
  return false;
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

function headerUri(uri: string, scheme: 'https:' | 'mailto:'): string {
  // Checked on the input: URL parsing would quietly drop tabs and newlines, and a comma or
  // angle bracket would end the URI early for a reader of the header (RFC 2369 §2).
  if (typeof uri !== 'string' || /[\s<>,"]/.test(uri)) {
    throw new RangeError(`an unsubscribe URI cannot contain spaces, line breaks, "<", ">", "," or quotes`);
  }
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    throw new RangeError(`not a URI: ${JSON.stringify(uri)}`);
  }
  // The local cloud's API is plain http on a loopback address: no mail provider ever reaches it,
  // and its links are read only in the local outbox (`local/ses/outbox.ts`).
  const localHttp = scheme === 'https:' && parsed.protocol === 'http:' && LOOPBACK_HOSTS.has(parsed.hostname);
  if (parsed.protocol !== scheme && !localHttp) {
    throw new RangeError(
      scheme === 'https:'
        ? `the one-click unsubscribe URL must be https (RFC 8058 §3.1), got ${parsed.protocol}`
        : `the second unsubscribe URI must be a mailto:, got ${parsed.protocol}`,
    );
  }
  if (parsed.username || parsed.password) throw new RangeError('an unsubscribe URL cannot carry credentials');
  return parsed.href;
}

function secretBytes(kid: string, secret: UnsubscribeSecret): Buffer {
  if (!KID.test(kid))
    throw new RangeError(`a key id is 1 to 16 of A-Z, a-z, 0-9, "_" and "-", got ${JSON.stringify(kid)}`);
  const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
  if (bytes.length < MIN_SECRET_BYTES) {
    throw new RangeError(`the unsubscribe key ${kid} is ${bytes.length} bytes; at least ${MIN_SECRET_BYTES}`);
  }
  return bytes;
}

function mac(key: Buffer, kid: string, payload: string): Buffer {
  return createHmac('sha256', key).update(`${CONTEXT}${kid}.${payload}`).digest().subarray(0, MAC_BYTES);
}

/** The signed payload, read defensively even though its MAC matched (a key may have leaked). */
function readPayload(payload: string): VerifiedUnsubscribe | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 4) return undefined;
  const [clientId, jobId, address, issuedAt] = value as unknown[];
  if (typeof clientId !== 'string' || typeof jobId !== 'string' || typeof address !== 'string')
    return undefined;
  if (clientId === '' || jobId === '' || address === '') return undefined;
  if (typeof issuedAt !== 'number' || !Number.isSafeInteger(issuedAt) || issuedAt < 0) return undefined;
  return { clientId, jobId, address, issuedAt: issuedAt * 1000 };
}

function refused(reason: UnsubscribeRefusal): UnsubscribeVerdict {
  return { ok: false, reason };
}
