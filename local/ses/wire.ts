/**
 * The SES v2 wire, as `@aws-sdk/client-sesv2` reads it: REST-JSON bodies, errors named by the
 * `x-amzn-errortype` header with `{"message": …}` as the body (the SDK's `loadRestJsonErrorCode`
 * reads the header first), every answer carrying `x-amzn-requestid`. The statuses are the SDK
 * model's (`@aws-sdk/client-sesv2` schemas: `MessageRejected` 400, `NotFoundException` 404,
 * `TooManyRequestsException` 429, …) and the common errors' (`InternalFailure` 500,
 * `ServiceUnavailable` 503: AWS "Common Errors").
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SigV4Error } from '../sigv4.ts';
import { answer, FrontError } from '../telephony-sandbox/http-front.ts';

/** The errors SES v2 answers, with the HTTP status each has in the SDK's model. */
export const SES_ERROR_STATUS = {
  AccountSuspendedException: 400,
  AlreadyExistsException: 400,
  BadRequestException: 400,
  LimitExceededException: 400,
  MailFromDomainNotVerifiedException: 400,
  MessageRejected: 400,
  SendingPausedException: 400,
  NotFoundException: 404,
  TooManyRequestsException: 429,
  InternalFailure: 500,
  ServiceUnavailable: 503,
  UnknownOperationException: 404,
  SerializationException: 400,
  UnrecognizedClientException: 403,
  SignatureDoesNotMatch: 403,
  InvalidSignatureException: 403,
  IncompleteSignatureException: 403,
} as const;

export type SesErrorType = keyof typeof SES_ERROR_STATUS;

/** A refusal as SES answers it: status, `x-amzn-errortype` and `{ message }`. */
export function sesError(type: SesErrorType, message: string): FrontError {
  return new FrontError(
    SES_ERROR_STATUS[type],
    { message },
    { 'x-amzn-errortype': type, 'x-amzn-requestid': randomUUID() },
  );
}

/** A 200 with a JSON body. */
export function sesAnswer(res: ServerResponse, body: unknown): void {
  answer(res, 200, body, { 'x-amzn-requestid': randomUUID() });
}

/**
 * How the SES endpoint refuses a request whose signature does not pass: an access key it does not
 * know is `UnrecognizedClientException` ("The security token included in the request is
 * invalid."), a signature that does not match `SignatureDoesNotMatch` (the wording AWS uses on the
 * `email` endpoint), a stale signing date `InvalidSignatureException`; the rest (malformed
 * header, wrong scope) `IncompleteSignatureException`. All 403.
 */
export function signingRefusal(error: SigV4Error): FrontError {
  switch (error.code) {
    case 'InvalidAccessKeyId':
      return sesError(
        'UnrecognizedClientException',
        'The security token included in the request is invalid.',
      );
    case 'SignatureDoesNotMatch':
      return sesError(
        'SignatureDoesNotMatch',
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
      );
    case 'RequestTimeTooSkewed':
      return sesError('InvalidSignatureException', `Signature expired: ${error.message}`);
    default:
      return sesError('IncompleteSignatureException', error.message);
  }
}

/**
 * The whole body. Past `limit` bytes the rest is read and dropped (so the client sees an answer,
 * not a broken pipe) and `tooLarge` is thrown once it has all arrived.
 */
export async function readBody(req: IncomingMessage, limit: number, tooLarge: () => Error): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size <= limit) chunks.push(chunk as Buffer);
  }
  if (size > limit) throw tooLarge();
  return Buffer.concat(chunks);
}

/** A JSON object field by field, each read refusing as SES does (`BadRequestException`). */
export class JsonFields {
  readonly #value: Record<string, unknown>;
  readonly #path: string;

  constructor(value: unknown, path: string) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw sesError('BadRequestException', `${path || 'The request body'} must be an object`);
    }
    this.#value = value as Record<string, unknown>;
    this.#path = path;
  }

  /** The request body; a body that is no JSON object is a `SerializationException`. */
  static ofBody(body: Buffer): JsonFields {
    let value: unknown;
    try {
      value = body.length === 0 ? {} : JSON.parse(body.toString('utf8'));
    } catch {
      throw sesError('SerializationException', 'The request body is not valid JSON');
    }
    return new JsonFields(value, '');
  }

  #name(field: string): string {
    return this.#path ? `${this.#path}.${field}` : field;
  }

  has(field: string): boolean {
    return this.#value[field] !== undefined && this.#value[field] !== null;
  }

  optionalString(field: string): string | undefined {
    const value = this.#value[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string')
      throw sesError('BadRequestException', `${this.#name(field)} must be a string`);
    return value;
  }

  string(field: string): string {
    const value = this.optionalString(field);
    if (value === undefined || value === '') {
      throw sesError('BadRequestException', `Missing required parameter ${this.#name(field)}`);
    }
    return value;
  }

  strings(field: string): string[] {
    const value = this.#value[field];
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
      throw sesError('BadRequestException', `${this.#name(field)} must be a list of strings`);
    }
    return value as string[];
  }

  optionalObject(field: string): JsonFields | undefined {
    return this.has(field) ? new JsonFields(this.#value[field], this.#name(field)) : undefined;
  }

  object(field: string): JsonFields {
    const found = this.optionalObject(field);
    if (!found) throw sesError('BadRequestException', `Missing required parameter ${this.#name(field)}`);
    return found;
  }

  objects(field: string): JsonFields[] {
    const value = this.#value[field];
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) throw sesError('BadRequestException', `${this.#name(field)} must be a list`);
    return value.map((item, i) => new JsonFields(item, `${this.#name(field)}[${i}]`));
  }
}
