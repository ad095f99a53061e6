/**
 * Signature Version 4 verification as AWS services do it, for the local stand-ins that must refuse
 * what AWS refuses (the strict S3 path now; the IAM-authorised HTTP API routes later): the
 * `Authorization` header form and the presigned-URL (query) form, the credential scope (date,
 * region, service), the clock skew (15 minutes) and, for presigned URLs, the expiry (at most 7 days).
 *
 * The signature is recomputed from the request as received (method, path as sent, query, the
 * signed headers, the payload hash the client declared) with the secret of the access key id, and
 * compared in constant time. Source: AWS General Reference, "Create a signed AWS API request" and
 * the S3 API Reference, "Authenticating Requests: Using Query Parameters".
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { LocalCloudError } from './errors.ts';

export interface SigV4Request {
  readonly method: string;
  /** Path and query exactly as received (`/bucket/key?x=1`). */
  readonly url: string;
  /** Header names in any case; repeated headers joined with `,`. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface SigV4Options {
  /** Secret access keys by access key id. */
  readonly secrets: Readonly<Record<string, string>>;
  readonly region: string;
  readonly service: string;
  readonly now?: number;
  /**
   * The request body: its SHA-256 is the payload hash when the request declares none
   * (`x-amz-content-sha256`), as API Gateway's IAM authorizer computes it.
   */
  readonly body?: Uint8Array;
  /** Presigned URLs only when false (S3 takes both). Default: both. */
  readonly allowHeader?: boolean;
  readonly allowQuery?: boolean;
}

/** Why a request was refused, with the status and error code the service would answer. */
export class SigV4Error extends LocalCloudError {
  readonly status: 400 | 403;
  readonly code: string;
  constructor(status: 400 | 403, code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
    this.code = code;
  }
}

export interface SigV4Result {
  readonly accessKeyId: string;
  /** How the request was signed. */
  readonly form: 'header' | 'query';
  /** The payload hash the signature covers (`UNSIGNED-PAYLOAD`, `STREAMING-…` or a hex SHA-256). */
  readonly payloadHash: string;
  /** Headers and, for a presigned URL, the `x-amz-*` query parameters S3 reads as headers. */
  readonly signedValues: ReadonlyMap<string, string>;
}

const SKEW_MS = 15 * 60 * 1000;
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

/** RFC 3986 encoding, as SigV4 requires (`encodeURIComponent` leaves `!'()*` alone). */
export function rfc3986(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

const sha256Hex = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

function signingKey(secret: string, date: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
}

function header(request: SigV4Request, name: string): string | undefined {
  for (const [key, value] of Object.entries(request.headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(',') : value;
  }
  return undefined;
}

/** `YYYYMMDDTHHMMSSZ` → epoch ms, or NaN. */
function amzDate(value: string | undefined): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value ?? '');
  return m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) : Number.NaN;
}

function parseQuery(raw: string): [string, string][] {
  if (!raw) return [];
  return raw.split('&').map((pair) => {
    const at = pair.indexOf('=');
    const decode = (s: string) => {
      try {
        return decodeURIComponent(s.replace(/\+/g, '%20'));
      } catch (error) {
        throw new SigV4Error(400, 'InvalidArgument', 'the query string is not valid percent-encoding', {
          cause: error,
        });
      }
    };
    return at < 0 ? [decode(pair), ''] : [decode(pair.slice(0, at)), decode(pair.slice(at + 1))];
  });
}

function canonicalQuery(params: [string, string][]): string {
  return params
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

interface Parsed {
  readonly form: 'header' | 'query';
  readonly accessKeyId: string;
  readonly scope: { date: string; region: string; service: string };
  readonly signedHeaders: string[];
  readonly signature: string;
  readonly date: string;
  readonly payloadHash: string;
  readonly query: [string, string][];
  readonly expiresSeconds?: number;
}

function parseCredential(credential: string): Pick<Parsed, 'accessKeyId' | 'scope'> {
  const parts = credential.split('/');
  if (parts.length !== 5 || parts[4] !== 'aws4_request') {
    throw new SigV4Error(400, 'AuthorizationHeaderMalformed', `the credential is malformed: ${credential}`);
  }
  return { accessKeyId: parts[0]!, scope: { date: parts[1]!, region: parts[2]!, service: parts[3]! } };
}

function parse(request: SigV4Request, options: SigV4Options): Parsed {
  const [, rawQuery = ''] = request.url.split(/\?(.*)/s);
  const query = parseQuery(rawQuery);
  const get = (name: string) => query.find(([k]) => k === name)?.[1];
  const authorization = header(request, 'authorization');
  if (get('X-Amz-Algorithm') !== undefined && options.allowQuery !== false) {
    if (get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256') {
      throw new SigV4Error(
        400,
        'AuthorizationQueryParametersError',
        'X-Amz-Algorithm must be AWS4-HMAC-SHA256',
      );
    }
    const expires = Number(get('X-Amz-Expires'));
    if (!Number.isInteger(expires) || expires < 1 || expires > MAX_PRESIGN_SECONDS) {
      throw new SigV4Error(
        400,
        'AuthorizationQueryParametersError',
        'X-Amz-Expires must be a number of seconds from 1 to 604800',
      );
    }
    return {
      form: 'query',
      ...parseCredential(get('X-Amz-Credential') ?? ''),
      signedHeaders: (get('X-Amz-SignedHeaders') ?? '').split(';').filter(Boolean),
      signature: get('X-Amz-Signature') ?? '',
      date: get('X-Amz-Date') ?? '',
      payloadHash: get('X-Amz-Content-Sha256') ?? 'UNSIGNED-PAYLOAD',
      query: query.filter(([k]) => k !== 'X-Amz-Signature'),
      expiresSeconds: expires,
    };
  }
  if (authorization !== undefined && options.allowHeader !== false) {
    const m =
      /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]+)$/.exec(
        authorization.trim(),
      );
    if (!m)
      throw new SigV4Error(400, 'AuthorizationHeaderMalformed', 'the Authorization header is malformed');
    return {
      form: 'header',
      ...parseCredential(m[1]!),
      signedHeaders: m[2]!.split(';'),
      signature: m[3]!,
      date: header(request, 'x-amz-date') ?? header(request, 'date') ?? '',
      payloadHash:
        header(request, 'x-amz-content-sha256') ?? sha256Hex(Buffer.from(options.body ?? new Uint8Array())),
      query,
    };
  }
  throw new SigV4Error(403, 'AccessDenied', 'the request is not signed');
}

/** Verifies a request's SigV4 signature; throws {@link SigV4Error} as the service would answer. */
export function verifySigV4(request: SigV4Request, options: SigV4Options): SigV4Result {
  const parsed = parse(request, options);
  const secret = options.secrets[parsed.accessKeyId];
  if (secret === undefined) {
    throw new SigV4Error(403, 'InvalidAccessKeyId', 'the access key id does not exist in our records');
  }
  checkDateAndScope(parsed, options);
  if (!parsed.signedHeaders.includes('host')) {
    throw new SigV4Error(403, 'AccessDenied', 'the host header must be signed');
  }
  const signedValues = signedHeaderValues(request, parsed);
  const expected = expectedSignature(request, options, parsed, signedValues, secret);
  if (options.body !== undefined && /^[0-9a-f]{64}$/.test(parsed.payloadHash)) {
    if (sha256Hex(Buffer.from(options.body)) !== parsed.payloadHash) {
      throw new SigV4Error(
        403,
        'SignatureDoesNotMatch',
        'the body is not the one the request signature covers',
      );
    }
  }
  const given = Buffer.from(/^[0-9a-f]{64}$/.test(parsed.signature) ? parsed.signature : '', 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new SigV4Error(
      403,
      'SignatureDoesNotMatch',
      'the request signature we calculated does not match the signature you provided',
    );
  }
  if (parsed.form === 'query') addPresignedValues(parsed.query, signedValues);
  return {
    accessKeyId: parsed.accessKeyId,
    form: parsed.form,
    payloadHash: parsed.payloadHash,
    signedValues,
  };
}

/**
 * The signing date (well-formed, the credential scope's date, within the clock skew or, for a
 * presigned URL, not expired) and the scope's region and service.
 */
function checkDateAndScope(parsed: Parsed, options: SigV4Options): void {
  const signedAt = amzDate(parsed.date);
  if (Number.isNaN(signedAt) || parsed.date.slice(0, 8) !== parsed.scope.date) {
    throw new SigV4Error(
      403,
      'AccessDenied',
      'the signing date is missing, malformed or not the credential scope date',
    );
  }
  if (parsed.scope.region !== options.region || parsed.scope.service !== options.service) {
    throw new SigV4Error(
      400,
      'AuthorizationHeaderMalformed',
      `the credential scope names ${parsed.scope.region}/${parsed.scope.service}; expected ${options.region}/${options.service}`,
    );
  }
  const now = options.now ?? Date.now();
  if (parsed.form === 'query') {
    if (now > signedAt + parsed.expiresSeconds! * 1000)
      throw new SigV4Error(403, 'AccessDenied', 'Request has expired');
    if (signedAt - now > SKEW_MS)
      throw new SigV4Error(403, 'AccessDenied', 'the request is signed in the future');
  } else if (Math.abs(now - signedAt) > SKEW_MS) {
    throw new SigV4Error(
      403,
      'RequestTimeTooSkewed',
      'the difference between the request time and the current time is too large',
    );
  }
}

/** Each signed header's value, trimmed and with runs of spaces folded, as the canonical request has it. */
function signedHeaderValues(request: SigV4Request, parsed: Parsed): Map<string, string> {
  const signedValues = new Map<string, string>();
  for (const name of parsed.signedHeaders) {
    const value = header(request, name);
    if (value === undefined)
      throw new SigV4Error(403, 'SignatureDoesNotMatch', `the signed header ${name} is missing`);
    signedValues.set(name, value.trim().replace(/\s+/g, ' '));
  }
  return signedValues;
}

/** The signature the request should carry: HMAC of the string to sign, with the scope's signing key. */
function expectedSignature(
  request: SigV4Request,
  options: SigV4Options,
  parsed: Parsed,
  signedValues: ReadonlyMap<string, string>,
  secret: string,
): Buffer {
  const path = request.url.split('?')[0] || '/';
  // Every service but S3 encodes each path segment twice: once on the wire, once more here.
  const canonicalPath = options.service === 's3' ? path : path.split('/').map(rfc3986).join('/');
  const canonical = [
    request.method.toUpperCase(),
    canonicalPath,
    canonicalQuery(parsed.query),
    ...parsed.signedHeaders.map((name) => `${name}:${signedValues.get(name)}`),
    '',
    parsed.signedHeaders.join(';'),
    parsed.payloadHash,
  ].join('\n');
  const scope = `${parsed.scope.date}/${parsed.scope.region}/${parsed.scope.service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', parsed.date, scope, sha256Hex(canonical)].join('\n');
  return hmac(signingKey(secret, parsed.scope.date, parsed.scope.region, parsed.scope.service), toSign);
}

/** A presigned URL's other `x-amz-*` query parameters, which S3 reads as headers. */
function addPresignedValues(query: readonly [string, string][], signedValues: Map<string, string>): void {
  for (const [k, v] of query)
    if (
      /^x-amz-/i.test(k) &&
      !/^X-Amz-(Algorithm|Credential|Date|Expires|SignedHeaders|Content-Sha256|Security-Token)$/.test(k)
    )
      signedValues.set(k.toLowerCase(), v);
}
