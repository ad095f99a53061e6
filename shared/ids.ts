/**
 * Identifiers: ULIDs (sortable ids for jobs and LINE's `webhookEventId`), their UUID form (the
 * `X-Line-Retry-Key` of a webhook-driven send), and deterministic UUIDs derived from names (the
 * retry / idempotency key of a job task's attempt, the id of a job created from an S3 object).
 */
import { hash, randomBytes } from 'node:crypto';
import { SwitchboardError } from './errors.ts';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const ULID_RE = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/i;
const DECODE: Record<string, number> = Object.fromEntries([...CROCKFORD].map((c, i) => [c, i]));

export class InvalidUlidError extends SwitchboardError {}

/** True when `value` is a 26-character Crockford base32 ULID (case-insensitive, ≤ 128 bits). */
export function isUlid(value: string): boolean {
  return ULID_RE.test(value);
}

/**
 * The UUID with the same 128 bits as a ULID (hex 8-4-4-4-12, lower case), as LINE's retry key
 * wants it. Throws {@link InvalidUlidError} for anything that is not a ULID.
 */
export function ulidToUuid(ulid: string): string {
  if (!isUlid(ulid)) throw new InvalidUlidError(`not a ULID: ${JSON.stringify(ulid)}`);
  let value = 0n;
  for (const char of ulid.toUpperCase()) value = (value << 5n) | BigInt(DECODE[char]!);
  return formatUuid(value.toString(16).padStart(32, '0'));
}

/** A new ULID for `time` (ms since epoch): 48-bit time, 80 random bits. */
export function newUlid(time: number = Date.now()): string {
  if (!Number.isInteger(time) || time < 0 || time > 2 ** 48 - 1)
    throw new RangeError(`bad ULID time ${time}`);
  let out = '';
  let t = time;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[t % 32]! + out;
    t = Math.floor(t / 32);
  }
  const random = randomBytes(10);
  let r = BigInt(`0x${random.toString('hex')}`);
  let tail = '';
  for (let i = 0; i < 16; i++) {
    tail = CROCKFORD[Number(r & 31n)]! + tail;
    r >>= 5n;
  }
  return out + tail;
}

/** Switchboard's namespace for name-based UUIDs (RFC 9562 version 5). */
export const SWITCHBOARD_NAMESPACE = '0f7c0b1e-5a55-4d1c-9c3e-3b1f2a7d9e10';

/** Namespaces' bytes, parsed once (a broker derives a few ids a message, all in one namespace). */
const namespaceBytes = new Map<string, Buffer>();

/** A deterministic RFC 9562 version-5 UUID of `name` in `namespace`. */
export function uuidV5(name: string, namespace: string = SWITCHBOARD_NAMESPACE): string {
  let ns = namespaceBytes.get(namespace);
  if (!ns) {
    ns = Buffer.from(namespace.replaceAll('-', ''), 'hex');
    if (ns.length !== 16) throw new RangeError(`bad namespace UUID ${namespace}`);
    namespaceBytes.set(namespace, ns);
  }
  // One-shot hashing: no Hash object a call.
  const digest = hash('sha1', Buffer.concat([ns, Buffer.from(name, 'utf8')]), 'buffer');
  digest[6] = (digest[6]! & 0x0f) | 0x50;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  return formatUuid(digest.toString('hex', 0, 16));
}

function formatUuid(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
