/**
 * LINE webhook signatures: `x-line-signature` = base64(HMAC-SHA256(channel secret, raw body)).
 * Verified on the raw bytes as received; a body that was parsed and re-serialised (key order,
 * whitespace, `\uXXXX` escapes, emoji) no longer matches, so never verify `JSON.stringify(...)`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Name of the header LINE signs webhooks with (sent in any letter case). */
export const SIGNATURE_HEADER = 'x-line-signature';

/** At most two secrets are live at once: the current one and, during a rotation, the previous one. */
export const MAX_CHANNEL_SECRETS = 2;

const DIGEST_BYTES = 32;
const ZEROS = Buffer.alloc(DIGEST_BYTES);

/** The `x-line-signature` value LINE would send for `rawBody` signed with `channelSecret`. */
export function signBody(rawBody: Uint8Array | string, channelSecret: string): string {
  return createHmac('sha256', channelSecret).update(rawBody).digest('base64');
}

/**
 * True when `signatureHeader` is the signature of `rawBody` under one of `secrets` (one, or two
 * during a secret rotation). A missing, empty or malformed header is simply not valid. Every secret
 * is checked, each with a constant-time comparison of equal-length buffers, so the answer's timing
 * does not depend on which secret matched nor on how much of the signature was right.
 * Throws a RangeError when no secret or more than {@link MAX_CHANNEL_SECRETS} are given: that is a
 * configuration error, not a bad request.
 */
export function verifySignature(
  rawBody: Uint8Array,
  signatureHeader: string | undefined,
  secrets: readonly string[],
): boolean {
  if (secrets.length === 0 || secrets.length > MAX_CHANNEL_SECRETS) {
    throw new RangeError(`expected 1 to ${MAX_CHANNEL_SECRETS} channel secrets, got ${secrets.length}`);
  }
  const given = decodeSignature(signatureHeader);
  // A header of the wrong shape is compared against zeros anyway: the work done stays the same.
  const candidate = given ?? ZEROS;
  let matched = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(rawBody).digest();
    matched = timingSafeEqual(expected, candidate) || matched;
  }
  return given !== undefined && matched;
}

/** The 32 signature bytes of a canonical base64 header, or undefined for anything else. */
function decodeSignature(header: string | undefined): Buffer | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  // Buffer's base64 decoder skips characters it does not know; insisting on the canonical form
  // keeps "almost base64" headers from being read as something else.
  const bytes = Buffer.from(value, 'base64');
  if (bytes.length !== DIGEST_BYTES || bytes.toString('base64') !== value) return undefined;
  return bytes;
}
