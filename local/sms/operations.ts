/**
 * The End User Messaging SMS operations the stand-in serves. `SendTextMessage` checks what the
 * service checks, in this order:
 *
 * 1. the request against the model's constraints (`ValidationException`, `FIELD_VALIDATION_FAILED`
 *    with `Fields`): `DestinationPhoneNumber` required, 1–20 characters, `^\+?[1-9][0-9]{1,18}$`;
 *    `OriginationIdentity` 1–256, `^[A-Za-z0-9_:/\+-]+$`; `MessageBody` 1–1,600 characters, not blank
 *    (the model's `TextMessageBody`); `MessageType` TRANSACTIONAL or PROMOTIONAL;
 *    `ConfigurationSetName` 1–256, `^[A-Za-z0-9_:/-]+$`; `Context` at most 5 entries, keys 1–100
 *    without spaces, values 1–800 not starting or ending with a space; `TimeToLive` 5–259,200 s. A
 *    text with no `MessageBody` is `MISSING_PARAMETER`;
 * 2. the configuration set, by name or ARN, exists → else `ResourceNotFoundException`
 *    (`ResourceType` `configuration-set`);
 * 3. the origination identity (phone number, its id or ARN, sender ID or its ARN, pool id or ARN)
 *    is the account's → else `ResourceNotFoundException`; with none named the service picks one, and
 *    an account with none is `ConflictException` `NO_ORIGINATION_IDENTITIES_FOUND`;
 * 4. the destination is not on the identity's opt-out list → else `ConflictException`
 *    `DESTINATION_PHONE_NUMBER_OPTED_OUT`;
 * 5. `MaxPrice`, when given, covers the text's price → else `ValidationException` `PRICE_OVER_THRESHOLD`;
 * 6. the month's spend stays under the limit → else `ServiceQuotaExceededException`
 *    `MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT`;
 * 7. the identity's message parts per second → else `ThrottlingException`.
 *
 * A `DryRun` send is checked the same way (against its own MPS bucket) and answered with a message
 * id, but nothing is sent, recorded, charged or published.
 *
 * The constraints are the SDK model's (aws-sdk-js-v3 / aws-sdk-go-v2
 * `codegen/sdk-codegen/aws-models/pinpoint-sms-voice-v2.json`: `TextMessageBody`,
 * `TextMessageOriginationIdentity`, `PhoneNumber`, `ConfigurationSetNameOrArn`, `TimeToLive`) and the
 * API reference's `SendTextMessage` page
 * (https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_SendTextMessage.html). The
 * exception names, members and reasons are the SDK's (`dist-types/models/errors.d.ts`, `enums.d.ts`);
 * the messages' wording is the stand-in's own where the service's was not found.
 */
import { randomUUID } from 'node:crypto';
import { isValidPhoneNumber, parsePhoneNumberFromString } from 'libphonenumber-js/max';
import type { Clock } from '#shared/pacing/clock.ts';
import { messageParts, type SmsEncoding } from '#shared/sms/parts.ts';
import type { OptedOutNumber, OriginationIdentity, SmsAccount } from './account.ts';
import type { MatchingEventType, SmsEventPublisher, SmsOutcome } from './events.ts';
import { epochSeconds, type FieldViolation, smsError, validationFailure } from './wire.ts';

export type MessageType = 'TRANSACTIONAL' | 'PROMOTIONAL';

/** One text the stand-in accepted and "sent": what a test or a demo reads. */
export interface SentText {
  readonly messageId: string;
  readonly at: number;
  readonly destination: string;
  /** The origination identity as the request named it (or the one the service picked). */
  readonly originationIdentity: string;
  /** What the recipient sees it come from: the phone number or the sender ID. */
  readonly origin: string;
  readonly body: string;
  readonly messageType: MessageType;
  readonly configurationSet?: string;
  readonly context: Readonly<Record<string, string>>;
  readonly encoding: SmsEncoding;
  readonly parts: number;
  readonly characters: number;
  /** US dollars: parts × the account's price per part. */
  readonly price: number;
  readonly isoCountryCode?: string;
  /** False for a number that fits the API's pattern but is no phone number (its event: TEXT_INVALID). */
  readonly validNumber: boolean;
}

export interface SmsOperationsParts {
  readonly account: SmsAccount;
  readonly publisher: SmsEventPublisher;
  readonly clock: Clock;
  readonly region: string;
  readonly accountId: string;
  /** Configuration sets that exist, each with the event types its event destination matches. */
  readonly configurationSets: ReadonlyMap<string, ReadonlySet<MatchingEventType>>;
  /** What becomes of a text to each destination (default `delivered`). */
  readonly outcomes: ReadonlyMap<string, SmsOutcome>;
}

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

export class SmsOperations {
  readonly #parts: SmsOperationsParts;
  readonly #sent: SentText[] = [];

  constructor(parts: SmsOperationsParts) {
    this.#parts = parts;
  }

  /** Every text accepted, in order. */
  sent(): readonly SentText[] {
    return [...this.#sent];
  }

  /** `PinpointSMSVoiceV2.SendTextMessage`. */
  sendTextMessage(input: Record<string, unknown>): { MessageId: string } {
    const request = readSendTextMessage(input);
    const configurationSet = this.#configurationSet(request.configurationSet);
    const identity = this.#identity(request.originationIdentity);
    const { account } = this.#parts;
    if (account.isOptedOut(identity, request.destination)) {
      throw smsError(
        'ConflictException',
        `The destination phone number ${request.destination} is opted out.`,
        {
          Reason: 'DESTINATION_PHONE_NUMBER_OPTED_OUT',
          ResourceType: 'opted-out-number',
          ResourceId: request.destination,
        },
      );
    }
    const cost = messageParts(request.body);
    const price = round(cost.parts * account.spend.pricePerPart);
    if (request.maxPrice !== undefined && price > request.maxPrice) {
      throw smsError(
        'ValidationException',
        `The message's price ${price} is over MaxPrice ${request.maxPrice}.`,
        {
          Reason: 'PRICE_OVER_THRESHOLD',
        },
      );
    }
    if (!request.dryRun && !account.spendAllows(price)) {
      throw smsError(
        'ServiceQuotaExceededException',
        'The monthly spend limit for text messages has been reached.',
        {
          Reason: 'MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT',
        },
      );
    }
    if (!account.takeParts(identity, cost.parts, request.dryRun)) {
      throw smsError('ThrottlingException', 'Rate exceeded');
    }
    const messageId = randomUUID();
    if (request.dryRun) return { MessageId: messageId };
    account.recordSpend(price);
    const phone = parsePhoneNumberFromString(
      request.destination.startsWith('+') ? request.destination : `+${request.destination}`,
    );
    const text: SentText = {
      messageId,
      at: this.#parts.clock.now(),
      destination: request.destination,
      originationIdentity: request.originationIdentity ?? identity.id,
      origin: identity.origin,
      body: request.body,
      messageType: request.messageType,
      ...(configurationSet === undefined ? {} : { configurationSet }),
      context: request.context,
      ...cost,
      price,
      ...(phone?.country === undefined ? {} : { isoCountryCode: phone.country }),
      validNumber: isValidPhoneNumber(phone?.number ?? request.destination),
    };
    this.#sent.push(text);
    if (configurationSet !== undefined) {
      const outcome = this.#parts.outcomes.get(request.destination) ?? 'delivered';
      this.#parts.publisher.publish(text, outcome, this.#parts.configurationSets.get(configurationSet)!);
    }
    return { MessageId: messageId };
  }

  /** `PinpointSMSVoiceV2.DescribeOptedOutNumbers`: the list, filtered by number and by who opted out. */
  describeOptedOutNumbers(input: Record<string, unknown>): Record<string, unknown> {
    const list = this.#optOutList(input.OptOutListName);
    const numbers = optionalStrings(input, 'OptedOutNumbers');
    const violations = (numbers ?? []).flatMap((number, i) =>
      phoneViolations(`OptedOutNumbers.${i + 1}`, number),
    );
    if (violations.length > 0) throw validationFailure(violations);
    const endUser = endUserFilter(input.Filters);
    const matching = this.#parts.account
      .optedOut(list)
      .filter((entry) => numbers === undefined || numbers.includes(entry.number))
      .filter((entry) => endUser === undefined || entry.endUser === endUser);
    const start = input.NextToken === undefined ? 0 : Number(input.NextToken);
    const max = typeof input.MaxResults === 'number' ? input.MaxResults : 100;
    const page = matching.slice(start, start + max);
    return {
      OptOutListArn: this.#parts.account.optOutListArn(list),
      OptOutListName: list,
      OptedOutNumbers: page.map((entry) => ({
        OptedOutNumber: entry.number,
        OptedOutTimestamp: epochSeconds(entry.at),
        EndUserOptedOut: entry.endUser,
      })),
      ...(start + max < matching.length ? { NextToken: String(start + max) } : {}),
    };
  }

  /** `PinpointSMSVoiceV2.PutOptedOutNumber`: the account opts a number out (not the end user). */
  putOptedOutNumber(input: Record<string, unknown>): Record<string, unknown> {
    const list = this.#optOutList(input.OptOutListName);
    const number = this.#optedOutNumber(input);
    return this.#entryResult(list, this.#parts.account.optOut(list, number, false));
  }

  /** `PinpointSMSVoiceV2.DeleteOptedOutNumber`: a number not on the list is `ResourceNotFoundException`. */
  deleteOptedOutNumber(input: Record<string, unknown>): Record<string, unknown> {
    const list = this.#optOutList(input.OptOutListName);
    const number = this.#optedOutNumber(input);
    const removed = this.#parts.account.optIn(list, number);
    if (!removed) {
      throw smsError('ResourceNotFoundException', `Opted out number ${number} not found in ${list}.`, {
        ResourceType: 'opted-out-number',
        ResourceId: number,
      });
    }
    return this.#entryResult(list, removed);
  }

  #entryResult(list: string, entry: OptedOutNumber): Record<string, unknown> {
    return {
      OptOutListArn: this.#parts.account.optOutListArn(list),
      OptOutListName: list,
      OptedOutNumber: entry.number,
      OptedOutTimestamp: epochSeconds(entry.at),
      EndUserOptedOut: entry.endUser,
    };
  }

  #optedOutNumber(input: Record<string, unknown>): string {
    const number = optionalString(input, 'OptedOutNumber');
    const violations = phoneViolations('OptedOutNumber', number);
    if (violations.length > 0) throw validationFailure(violations);
    return number!;
  }

  #optOutList(nameOrArn: unknown): string {
    if (typeof nameOrArn !== 'string' || nameOrArn === '') {
      throw validationFailure([
        { name: 'OptOutListName', value: nameOrArn, constraint: 'Member must not be null' },
      ]);
    }
    const name = this.#parts.account.optOutListName(nameOrArn);
    if (name === undefined) {
      throw smsError('ResourceNotFoundException', `Opt-out list ${nameOrArn} not found.`, {
        ResourceType: 'opt-out-list',
        ResourceId: nameOrArn,
      });
    }
    return name;
  }

  /** The configuration set's name, when one is named (by name or ARN) and exists. */
  #configurationSet(nameOrArn: string | undefined): string | undefined {
    if (nameOrArn === undefined) return undefined;
    const { region, accountId, configurationSets } = this.#parts;
    const prefix = `arn:aws:sms-voice:${region}:${accountId}:configuration-set/`;
    const name = nameOrArn.startsWith(prefix) ? nameOrArn.slice(prefix.length) : nameOrArn;
    if (!configurationSets.has(name)) {
      throw smsError('ResourceNotFoundException', `Configuration set ${nameOrArn} not found.`, {
        ResourceType: 'configuration-set',
        ResourceId: nameOrArn,
      });
    }
    return name;
  }

  #identity(name: string | undefined): OriginationIdentity {
    const { account } = this.#parts;
    if (name === undefined) {
      const picked = account.anyIdentity();
      if (!picked) {
        throw smsError('ConflictException', 'No origination identities found to send the message.', {
          Reason: 'NO_ORIGINATION_IDENTITIES_FOUND',
        });
      }
      return picked;
    }
    const identity = account.identity(name);
    if (!identity) {
      throw smsError('ResourceNotFoundException', `Origination identity ${name} not found.`, {
        ResourceType: resourceTypeOf(name),
        ResourceId: name,
      });
    }
    return identity;
  }
}

interface SendTextMessageRequest {
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
function readSendTextMessage(input: Record<string, unknown>): SendTextMessageRequest {
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

function phoneViolations(name: string, value: string | undefined): FieldViolation[] {
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
function endUserFilter(filters: unknown): boolean | undefined {
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

function optionalString(input: Record<string, unknown>, field: string): string | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw smsError('SerializationException', `${field} must be a string.`);
  return value;
}

function optionalStrings(input: Record<string, unknown>, field: string): string[] | undefined {
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

/** The resource type an unknown origination identity's name suggests. */
function resourceTypeOf(name: string): string {
  if (/^pool-|:pool\//.test(name)) return 'pool';
  if (/^\+?\d+$|^phone-|:phone-number\//.test(name)) return 'phone-number';
  return 'sender-id';
}

const round = (usd: number) => Math.round(usd * 1e6) / 1e6;
