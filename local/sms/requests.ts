/**
 * `SendTextMessage` and the opt-out list requests read from their JSON bodies and checked against the
 * SDK model's constraints (aws-sdk-js-v3 / aws-sdk-go-v2 `codegen/sdk-codegen/aws-models/
 * pinpoint-sms-voice-v2.json`: `PhoneNumber`, `TextMessageOriginationIdentity`, `TextMessageBody`,
 * `ConfigurationSetNameOrArn`, `ContextMap`, `TimeToLive`; the same on the API reference's
 * `SendTextMessage` page). A failed constraint is `ValidationException` `FIELD_VALIDATION_FAILED`
 * listing the fields; a value of the wrong JSON type is `SerializationException`, as the protocol's
 * deserializer refuses it.
 */
import { type FieldViolation, smsError, validationFailure } from './wire.ts';

export type MessageType = 'TRANSACTIONAL' | 'PROMOTIONAL';

const PHONE_NUMBER = /^\+?[1-9][0-9]{1,18}$/;
const ORIGINATION_IDENTITY = /^[A-Za-z0-9_:/+-]+$/;
const CONFIGURATION_SET = /^[A-Za-z0-9_:/-]+$/;
const NOT_BLANK = /^(?!\s*$)[\s\S]+$/;
const CONTEXT_KEY = /^\S+$/;
const CONTEXT_VALUE = /^(?!\s)[\s\S]+(?<!\s)$/;
const MESSAGE_TYPES: readonly string[] = ['TRANSACTIONAL', 'PROMOTIONAL'];
const MAX_BODY = 1_600;
const MAX_CONTEXT_ENTRIES = 5;

/** A string's length as Smithy's `@length` counts it: Unicode code points. */
const codePoints = (value: string) => [...value].length;

export interface SendTextMessageRequest {
  readonly destination: string;
  readonly originationIdentity?: string;
  readonly body: string;
  readonly messageType: MessageType;
  readonly configurationSet?: string;
  readonly context: Readonly<Record<string, string>>;
  readonly maxPrice?: number;
  readonly dryRun: boolean;
}

/** A `SendTextMessage` body read and checked against the model's constraints. */
export function readSendTextMessage(input: Record<string, unknown>): SendTextMessageRequest {
  const destination = optionalString(input, 'DestinationPhoneNumber');
  const originationIdentity = optionalString(input, 'OriginationIdentity');
  const body = optionalString(input, 'MessageBody');
  const messageType = optionalString(input, 'MessageType');
  const configurationSet = optionalString(input, 'ConfigurationSetName');
  const context = optionalStringMap(input, 'Context');
  const timeToLive = input.TimeToLive;
  const violations: FieldViolation[] = [
    ...phoneViolations('DestinationPhoneNumber', destination),
    ...lengthAndPattern('OriginationIdentity', originationIdentity, 256, ORIGINATION_IDENTITY),
    ...lengthAndPattern('MessageBody', body, MAX_BODY, NOT_BLANK),
    ...lengthAndPattern('ConfigurationSetName', configurationSet, 256, CONFIGURATION_SET),
    ...contextViolations(context),
  ];
  if (messageType !== undefined && !MESSAGE_TYPES.includes(messageType)) {
    violations.push({
      name: 'MessageType',
      value: messageType,
      constraint: `Member must satisfy enum value set: [${MESSAGE_TYPES.join(', ')}]`,
    });
  }
  if (
    timeToLive !== undefined &&
    (!Number.isInteger(timeToLive) || (timeToLive as number) < 5 || (timeToLive as number) > 259_200)
  ) {
    violations.push({
      name: 'TimeToLive',
      value: timeToLive,
      constraint: 'Member must have value greater than or equal to 5 and less than or equal to 259200',
    });
  }
  if (violations.length > 0) throw validationFailure(violations);
  if (body === undefined) {
    throw smsError('ValidationException', 'MessageBody is required to send a text message.', {
      Reason: 'MISSING_PARAMETER',
      Fields: [{ Name: 'MessageBody', Message: 'MessageBody is required' }],
    });
  }
  const maxPrice = optionalString(input, 'MaxPrice');
  return {
    destination: destination!,
    ...(originationIdentity === undefined ? {} : { originationIdentity }),
    body,
    messageType: (messageType as MessageType | undefined) ?? 'TRANSACTIONAL',
    ...(configurationSet === undefined ? {} : { configurationSet }),
    context: context ?? {},
    ...(maxPrice === undefined ? {} : { maxPrice: Number(maxPrice) }),
    dryRun: input.DryRun === true,
  };
}

export function phoneViolations(name: string, value: string | undefined): FieldViolation[] {
  if (value === undefined) return [{ name, value, constraint: 'Member must not be null' }];
  return lengthAndPattern(name, value, 20, PHONE_NUMBER);
}

function lengthAndPattern(
  name: string,
  value: string | undefined,
  max: number,
  pattern: RegExp,
): FieldViolation[] {
  if (value === undefined) return [];
  const length = codePoints(value);
  if (length < 1 || length > max) {
    return [{ name, value, constraint: `Member must have length less than or equal to ${max}` }];
  }
  if (!pattern.test(value)) {
    return [{ name, value, constraint: `Member must satisfy regular expression pattern: ${pattern.source}` }];
  }
  return [];
}

function contextViolations(context: Readonly<Record<string, string>> | undefined): FieldViolation[] {
  if (context === undefined) return [];
  const entries = Object.entries(context);
  if (entries.length > MAX_CONTEXT_ENTRIES) {
    return [
      { name: 'Context', value: context, constraint: 'Member must have length less than or equal to 5' },
    ];
  }
  return entries.flatMap(([key, value]) => [
    ...lengthAndPattern('Context', key, 100, CONTEXT_KEY).map((v) => ({
      ...v,
      constraint: `Map keys must satisfy constraint: [${v.constraint}]`,
    })),
    ...lengthAndPattern(`Context.${key}`, value, 800, CONTEXT_VALUE),
  ]);
}

/** The `end-user-opted-out` filter's value, if the request filters on it. */
export function endUserFilter(filters: unknown): boolean | undefined {
  if (!Array.isArray(filters)) return undefined;
  for (const filter of filters as { Name?: unknown; Values?: unknown }[]) {
    if (filter?.Name !== 'end-user-opted-out') {
      throw smsError('ValidationException', `Unknown filter name ${String(filter?.Name)}.`, {
        Reason: 'INVALID_FILTER_VALUES',
      });
    }
    const values = Array.isArray(filter.Values) ? filter.Values : [];
    if (values.length === 1 && (values[0] === 'true' || values[0] === 'false')) return values[0] === 'true';
    throw smsError('ValidationException', 'end-user-opted-out takes one value, true or false.', {
      Reason: 'INVALID_FILTER_VALUES',
    });
  }
  return undefined;
}

// ---- reading the JSON body: a value of the wrong type is a SerializationException --------------

export function optionalString(input: Record<string, unknown>, field: string): string | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw smsError('SerializationException', `${field} must be a string.`);
  return value;
}

export function optionalStrings(input: Record<string, unknown>, field: string): string[] | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    throw smsError('SerializationException', `${field} must be a list of strings.`);
  }
  return value as string[];
}

function optionalStringMap(
  input: Record<string, unknown>,
  field: string,
): Record<string, string> | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (
    typeof value !== 'object' ||
    Array.isArray(value) ||
    Object.values(value).some((v) => typeof v !== 'string')
  ) {
    throw smsError('SerializationException', `${field} must be a map of strings.`);
  }
  return value as Record<string, string>;
}
