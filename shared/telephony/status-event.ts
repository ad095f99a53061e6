/**
 * Reading what the provider sends: a status callback's body (after its signature is checked on
 * the raw bytes) and the call snapshot `GET /calls/{callId}` answers with.
 */
import { z } from 'zod';
import { type VerifyCallbackOptions, verifyCallbackSignature } from './callback-signature.ts';
import { TelephonyError } from './errors.ts';
import type { CallSnapshot, CallStatusEvent } from './port.ts';
import { CALL_STATUSES, REPORTED_CALL_STATUSES } from './port.ts';

/** A callback body or call snapshot that is not valid JSON of the documented shape. */
export class MalformedCallStatusError extends TelephonyError {}

const common = {
  callId: z.string().min(1),
  idempotencyKey: z.string().min(1),
  at: z.iso.datetime({ offset: true }),
  durationSeconds: z.number().nonnegative().optional(),
  reason: z.string().optional(),
  optOut: z.boolean().optional(),
};
const eventSchema = z.object({
  ...common,
  status: z.enum(REPORTED_CALL_STATUSES),
  sequence: z.int().positive(),
});
const snapshotSchema = z.object({
  ...common,
  status: z.enum(CALL_STATUSES),
  sequence: z.int().nonnegative(),
});

function decode(rawBody: string | Uint8Array): unknown {
  const text = typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    throw new MalformedCallStatusError('body is not JSON');
  }
}

function describe(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
}

/** Parses a status callback's body; throws {@link MalformedCallStatusError}. Unknown fields are dropped. */
export function parseCallStatusEvent(rawBody: string | Uint8Array): CallStatusEvent {
  const result = eventSchema.safeParse(decode(rawBody));
  if (!result.success) throw new MalformedCallStatusError(`bad status callback: ${describe(result.error)}`);
  return result.data;
}

/** Parses a call snapshot (already decoded JSON); throws {@link MalformedCallStatusError}. */
export function parseCallSnapshot(value: unknown): CallSnapshot {
  const result = snapshotSchema.safeParse(value);
  if (!result.success) throw new MalformedCallStatusError(`bad call snapshot: ${describe(result.error)}`);
  return result.data;
}

/**
 * Verifies a status callback's signature on its raw body, then parses it. Throws a
 * `CallbackSignatureError` (answer 401) or a {@link MalformedCallStatusError} (answer 400).
 */
export function readSignedCallStatusEvent(options: VerifyCallbackOptions): CallStatusEvent {
  verifyCallbackSignature(options);
  return parseCallStatusEvent(options.rawBody);
}
