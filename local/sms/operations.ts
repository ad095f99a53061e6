/**
 * The End User Messaging SMS operations the stand-in serves. `SendTextMessage` checks what the
 * service checks, in this order:
 *
 * 1. the request against the model's constraints (`./requests.ts`; `ValidationException`, `FIELD_VALIDATION_FAILED`
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
 * The constraints are read in `./requests.ts`, from the SDK model and the API reference's
 * `SendTextMessage` page
 * (https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_SendTextMessage.html). The
 * exception names, members and reasons are the SDK's (`dist-types/models/errors.d.ts`, `enums.d.ts`);
 * the messages' wording is the stand-in's own where the service's was not found.
 */
import { randomUUID } from 'node:crypto';
import { isValidPhoneNumber, parsePhoneNumberFromString } from 'libphonenumber-js/max';
import type { Clock } from '#shared/pacing/clock.ts';
import { type MessageParts, messageParts, type SmsEncoding } from '#shared/sms/parts.ts';
import type { OptedOutNumber, OriginationIdentity, SmsAccount } from './account.ts';
import type { MatchingEventType, SmsEventPublisher, SmsOutcome } from './events.ts';
import {
  endUserFilter,
  type MessageType,
  optionalString,
  optionalStrings,
  phoneViolations,
  readSendTextMessage,
  type SendTextMessageRequest,
} from './requests.ts';
import { epochSeconds, smsError, validationFailure } from './wire.ts';

export type { MessageType } from './requests.ts';

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

  /** `PinpointSMSVoiceV2.SendTextMessage`: checked as the service checks it, then sent (unless a dry run). */
  sendTextMessage(input: Record<string, unknown>): { MessageId: string } {
    const request = readSendTextMessage(input);
    const configurationSet = this.#configurationSet(request.configurationSet);
    const identity = this.#identity(request.originationIdentity);
    const cost = messageParts(request.body);
    const price = round(cost.parts * this.#parts.account.spend.pricePerPart);
    this.#mayIdentitySend(request, identity, cost.parts, price);
    const messageId = randomUUID();
    if (!request.dryRun) {
      this.#parts.account.recordSpend(price);
      this.#accept({ messageId, request, identity, configurationSet, cost, price });
    }
    return { MessageId: messageId };
  }

  /** Steps 4 to 7: the opt-out list, `MaxPrice`, the monthly spend, the identity's MPS. */
  #mayIdentitySend(
    request: SendTextMessageRequest,
    identity: OriginationIdentity,
    parts: number,
    price: number,
  ): void {
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
    if (!account.takeParts(identity, parts, request.dryRun))
      throw smsError('ThrottlingException', 'Rate exceeded');
  }

  /** Records the text and publishes its events to the configuration set's destination. */
  #accept(accepted: {
    messageId: string;
    request: SendTextMessageRequest;
    identity: OriginationIdentity;
    configurationSet: string | undefined;
    cost: MessageParts;
    price: number;
  }): void {
    const { messageId, request, identity, configurationSet, cost, price } = accepted;
    const destination = request.destination;
    const phone = parsePhoneNumberFromString(destination.startsWith('+') ? destination : `+${destination}`);
    const text: SentText = {
      messageId,
      at: this.#parts.clock.now(),
      destination,
      originationIdentity: request.originationIdentity ?? identity.id,
      origin: identity.origin,
      body: request.body,
      messageType: request.messageType,
      ...(configurationSet === undefined ? {} : { configurationSet }),
      context: request.context,
      ...cost,
      price,
      ...(phone?.country === undefined ? {} : { isoCountryCode: phone.country }),
      validNumber: phone !== undefined && isValidPhoneNumber(phone.number),
    };
    this.#sent.push(text);
    if (configurationSet !== undefined) {
      const outcome = this.#parts.outcomes.get(destination) ?? 'delivered';
      this.#parts.publisher.publish(text, outcome, this.#parts.configurationSets.get(configurationSet)!);
    }
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
    if (!Number.isInteger(start) || start < 0) {
      throw smsError('ValidationException', 'The NextToken is not valid.', { Reason: 'INVALID_NEXT_TOKEN' });
    }
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

/** The resource type an unknown origination identity's name suggests. */
function resourceTypeOf(name: string): string {
  if (/^pool-|:pool\//.test(name)) return 'pool';
  if (/^\+?\d+$|^phone-|:phone-number\//.test(name)) return 'phone-number';
  return 'sender-id';
}

const round = (usd: number) => Math.round(usd * 1e6) / 1e6;
