/**
 * The signature of an outcome webhook: `Switchboard-Signature: t=<unix seconds>,v1=<hex>`, where
 * `v1` is HMAC-SHA256 (the client's outcome secret) over `t` + "." + the raw body, as Stripe signs.
 * The same scheme the telephony callbacks use, so one verifier (and one explanation) serves both:
 * a receiver recomputes the HMAC over the bytes it received, compares in constant time, and refuses
 * a `t` more than 5 minutes from its clock (a replay).
 */
import {
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  signCallback,
  verifyCallbackSignature,
} from '#shared/telephony/callback-signature.ts';

export const OUTCOME_SIGNATURE_HEADER = 'Switchboard-Signature';
/** A receiver should refuse a signature older (or newer) than this: 5 minutes. */
export const OUTCOME_SIGNATURE_TOLERANCE_SECONDS = DEFAULT_SIGNATURE_TOLERANCE_SECONDS;

/** The header value for `rawBody`, signed at `nowMs` (rounded down to whole seconds). */
export function signOutcomeBody(secret: string, rawBody: string | Uint8Array, nowMs: number): string {
  return signCallback(secret, rawBody, Math.floor(nowMs / 1000));
}

/**
 * Verifies a delivery as a receiver does; returns the signed timestamp (unix seconds) or throws a
 * `CallbackSignatureError` (missing, malformed, stale, mismatch).
 */
export function verifyOutcomeSignature(options: {
  header: string | null | undefined;
  rawBody: string | Uint8Array;
  secret: string;
  nowMs: number;
}): number {
  return verifyCallbackSignature({
    header: options.header,
    rawBody: options.rawBody,
    secrets: options.secret,
    clock: { now: () => options.nowMs },
    toleranceSeconds: OUTCOME_SIGNATURE_TOLERANCE_SECONDS,
  });
}
