/**
 * The End User Messaging SMS wire, as `@aws-sdk/client-pinpoint-sms-voice-v2` speaks it: AWS JSON
 * 1.0, every call a `POST /` naming its operation in `X-Amz-Target: PinpointSMSVoiceV2.<Operation>`
 * with an `application/x-amz-json-1.0` body; an error is named by the body's `__type` (the SDK reads
 * it first, before `x-amzn-errortype`, and drops the `namespace#` prefix) beside its modeled members
 * (`Message`, `Reason`, `ResourceType`, `ResourceId`, `Fields`). Timestamps are epoch seconds.
 *
 * Statuses: the API reference gives 400 for every modeled client error of the service, throttling
 * included, and 500 for `InternalServerException` (each operation's "Errors" section, e.g.
 * https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_SetVoiceMessageSpendLimitOverride.html);
 * `ServiceUnavailable` is AWS's common 503. The signing refusals (`UnrecognizedClientException`,
 * `InvalidSignatureException`, `IncompleteSignatureException`) are the names and 400s that AWS JSON
 * services answer from their common front end (`MissingAuthenticationTokenException` for a request
 * not signed at all); their exact wording on this endpoint was not found.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { SigV4Error } from '../sigv4.ts';
import { answer, FrontError } from '../telephony-sandbox/http-front.ts';

/** The service's namespace, as `__type` carries it. */
const NAMESPACE = 'com.amazonaws.pinpointsmsvoicev2';
/** The namespace of the errors AWS's common front end answers. */
const COMMON_NAMESPACE = 'com.amazon.coral.service';

/** The errors this stand-in answers, with their HTTP status and whether they are the service's own. */
const SMS_ERRORS = {
  AccessDeniedException: [400, NAMESPACE],
  ConflictException: [400, NAMESPACE],
  ResourceNotFoundException: [400, NAMESPACE],
  ServiceQuotaExceededException: [400, NAMESPACE],
  ThrottlingException: [400, NAMESPACE],
  ValidationException: [400, NAMESPACE],
  InternalServerException: [500, NAMESPACE],
  ServiceUnavailable: [503, COMMON_NAMESPACE],
  UnknownOperationException: [400, COMMON_NAMESPACE],
  SerializationException: [400, COMMON_NAMESPACE],
  UnrecognizedClientException: [400, COMMON_NAMESPACE],
  InvalidSignatureException: [400, COMMON_NAMESPACE],
  IncompleteSignatureException: [400, COMMON_NAMESPACE],
  MissingAuthenticationTokenException: [400, COMMON_NAMESPACE],
} as const satisfies Record<string, readonly [number, string]>;

export type SmsErrorType = keyof typeof SMS_ERRORS;

/** The members an error carries beside its `Message` (the SDK model's names). */
export interface SmsErrorMembers {
  readonly Reason?: string;
  readonly ResourceType?: string;
  readonly ResourceId?: string;
  readonly Fields?: readonly { readonly Name: string; readonly Message: string }[];
  readonly RequestId?: string;
}

/** A refusal as the service answers it: status, `{ __type, Message, … }`. */
export function smsError(type: SmsErrorType, message: string, members: SmsErrorMembers = {}): FrontError {
  const [status, namespace] = SMS_ERRORS[type];
  const requestId = randomUUID();
  // The common front end's errors spell their message in lower case, the service's in upper.
  const text = namespace === NAMESPACE ? { Message: message } : { message };
  return new FrontError(
    status,
    { __type: `${namespace}#${type}`, ...text, ...members },
    { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': requestId },
  );
}

/** A 200 with an AWS JSON 1.0 body. */
export function smsAnswer(res: ServerResponse, body: unknown): void {
  answer(res, 200, body, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': randomUUID() });
}

/**
 * How the endpoint refuses a request whose signature does not pass: an unknown access key is
 * `UnrecognizedClientException`, a signature that does not match or a stale signing date
 * `InvalidSignatureException`, the rest (malformed header, wrong scope) `IncompleteSignatureException`.
 */
export function signingRefusal(error: SigV4Error): FrontError {
  switch (error.code) {
    case 'InvalidAccessKeyId':
      return smsError(
        'UnrecognizedClientException',
        'The security token included in the request is invalid.',
      );
    case 'SignatureDoesNotMatch':
      return smsError(
        'InvalidSignatureException',
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
      );
    case 'RequestTimeTooSkewed':
      return smsError('InvalidSignatureException', `Signature expired: ${error.message}`);
    default:
      return smsError('IncompleteSignatureException', error.message);
  }
}

/** Epoch seconds, as AWS JSON 1.0 writes a timestamp. */
export const epochSeconds = (ms: number): number => ms / 1000;

/** One field that fails its constraint, as a `ValidationException` lists it. */
export interface FieldViolation {
  readonly name: string;
  readonly value: unknown;
  readonly constraint: string;
}

/**
 * The model's constraints failed: `ValidationException` with `FIELD_VALIDATION_FAILED` and each
 * field in `Fields`, the message in the Coral validator's words ("1 validation error detected:
 * Value … at '…' failed to satisfy constraint: …").
 */
export function validationFailure(violations: readonly FieldViolation[]): FrontError {
  const count = violations.length;
  const details = violations.map(
    (v) =>
      `Value ${describe(v.value)} at '${lowerFirst(v.name)}' failed to satisfy constraint: ${v.constraint}`,
  );
  return smsError(
    'ValidationException',
    `${count} validation error${count === 1 ? '' : 's'} detected: ${details.join('; ')}`,
    {
      Reason: 'FIELD_VALIDATION_FAILED',
      Fields: violations.map((v) => ({ Name: v.name, Message: v.constraint })),
    },
  );
}

const lowerFirst = (name: string) => name.charAt(0).toLowerCase() + name.slice(1);

function describe(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (typeof value === 'string') return `'${value.length > 40 ? `${value.slice(0, 40)}…` : value}'`;
  return typeof value === 'object' ? 'the value' : `'${String(value)}'`;
}

/** The request body as a JSON object; anything else is `SerializationException`. */
export function parseBody(body: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = body.length === 0 ? {} : JSON.parse(body.toString('utf8'));
  } catch {
    throw smsError('SerializationException', 'Start of structure or map found where not expected.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw smsError('SerializationException', 'The request body must be a JSON object.');
  }
  return value as Record<string, unknown>;
}
