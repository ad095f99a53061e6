/**
 * An AWS End User Messaging SMS stand-in (service `pinpoint-sms-voice-v2`): the AWS JSON 1.0 protocol
 * `@aws-sdk/client-pinpoint-sms-voice-v2` speaks (point the client's `endpoint` at `url`), SigV4-checked
 * like AWS (signing name `sms-voice`), serving `SendTextMessage` and, for the opt-out lists,
 * `DescribeOptedOutNumbers`, `PutOptedOutNumber` and `DeleteOptedOutNumber`.
 *
 * It refuses what the service refuses (`local/sms/operations.ts`: the model's constraints, unknown
 * configuration sets and origination identities, opted-out destinations, the monthly spend limit,
 * each identity's message parts per second counted with `shared/sms/parts.ts`), keeps every text it
 * accepts (`sent()`: body, encoding, parts, price), publishes each text's events as a configuration
 * set's event destination does (`local/sms/events.ts`: TEXT_SUCCESSFUL, TEXT_DELIVERED, the failures,
 * at-least-once to `deliver`) and injects the service's faults: the same kinds as the SES stand-in
 * (`local/ses/faults.ts`: an answer lost after the text was accepted, 500 `InternalServerException`,
 * 503, bursts of `ThrottlingException`, events lost, duplicated, delayed or reordered).
 *
 * Sources: the SDK's model (`@aws-sdk/client-pinpoint-sms-voice-v2` 3.1138: operations, members,
 * exception classes and their `Reason` enums; the Smithy model's length and pattern constraints), and
 * - https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_SendTextMessage.html
 * - https://docs.aws.amazon.com/sms-voice/latest/userguide/sms-limitations-character.html (parts)
 * - https://docs.aws.amazon.com/sms-voice/latest/userguide/sms-limitations-mps.html (MPS)
 * - https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-format.html and
 *   …/configuration-sets-event-types.html (the event records and types)
 *
 * Signatures are checked against the wall clock (the SDK signs with it); MPS, spend and event times
 * against the injected `clock`. Not reproduced: pools' member numbers and shared routes, two-way
 * messaging (an end user's STOP is `optOut(number)` here), keywords, registrations, protect
 * configurations, message templates, `TimeToLive` expiry, destination-country rules of identities
 * and the 30-day wait before a number deleted from an opt-out list can be deleted again.
 *
 * Two-way messaging: `reply(from, to, body)` is a customer texting one of the account's numbers; the
 * number's opt-out list changes as the service changes it for the required keywords, and the
 * documented two-way payload goes to `deliverInbound` (the number's SNS topic and its subscription:
 * `local/sms/inbound.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Clock, systemClock, systemTimers, type Timers } from '#shared/pacing/clock.ts';
import { LOCAL_ACCOUNT } from './api-gateway.ts';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './cloud.ts';
import type { EventRetry } from './event-delivery.ts';
import { RunningStandIn, type StandInParts } from './running-stand-in.ts';
import { type SesFaultRates, SesFaults } from './ses/faults.ts';
import { readBody } from './ses/wire.ts';
import {
  DEFAULT_OPT_OUT_LIST,
  type OptedOutNumber,
  type OriginationIdentitySettings,
  SmsAccount,
  type SpendSettings,
} from './sms/account.ts';
import {
  type MatchingEventType,
  type PublishedSmsEvent,
  type SmsEvent,
  SmsEventPublisher,
  type SmsOutcome,
} from './sms/events.ts';
import { type InboundTextPayload, type PublishedInboundText, TwoWayMessages } from './sms/inbound.ts';
import { type SentText, SmsOperations } from './sms/operations.ts';
import { parseBody, type SmsErrorType, signingRefusal, smsAnswer, smsError } from './sms/wire.ts';
import { checkSignature, type ServiceWire, sendWithFaults } from './stand-in-front.ts';
import { FrontError, serveFront } from './telephony-sandbox/http-front.ts';

export type { EventRetry } from './event-delivery.ts';
export type { OriginationIdentitySettings, SpendSettings } from './sms/account.ts';
export type {
  MatchingEventType,
  PublishedSmsEvent,
  SmsEvent,
  SmsEventType,
  SmsOutcome,
} from './sms/events.ts';
export type { InboundTextPayload, PublishedInboundText } from './sms/inbound.ts';
export type { MessageType, SentText } from './sms/operations.ts';
/** The stand-in's faults: the SES stand-in's kinds, by rate or forced. */
export type SmsFaultRates = SesFaultRates;

/** What the local cloud's SMS uses: the local credentials and region, a phone number, a configuration set. */
export const LOCAL_SMS = {
  region: LOCAL_REGION,
  accessKeyId: LOCAL_CREDENTIALS.accessKeyId,
  secretAccessKey: LOCAL_CREDENTIALS.secretAccessKey,
  /** A US toll-free number: 3 MPS, as the MPS page gives toll-free numbers. */
  originationNumber: '+18445550100',
  originationMps: 3,
  configurationSet: 'switchboard-sms',
} as const;

/** A configuration set; its event destination matches `eventTypes` (default `TEXT_ALL`; `[]`: none). */
export interface SmsConfigurationSetSettings {
  readonly eventTypes?: readonly MatchingEventType[];
}

export interface SmsEmulatorOptions {
  readonly port?: number;
  readonly region?: string;
  /** Secret access keys by access key id (default: the local cloud's credentials). */
  readonly credentials?: Readonly<Record<string, string>>;
  /** The account's origination identities (default: {@link LOCAL_SMS}'s number). */
  readonly identities?: readonly OriginationIdentitySettings[];
  /** Opt-out lists and the numbers on them, opted out by their end users (default: an empty "Default"). */
  readonly optOutLists?: Readonly<Record<string, readonly string[]>>;
  /** Configuration sets that exist (default: {@link LOCAL_SMS}'s, matching every text event). */
  readonly configurationSets?: Readonly<Record<string, SmsConfigurationSetSettings>>;
  /** What becomes of texts to these destinations (default `delivered`). */
  readonly outcomes?: Readonly<Record<string, SmsOutcome>>;
  /** The monthly spend limit and the price of a part, in US dollars (default: no limit, $0.0083 a part). */
  readonly spend?: Partial<SpendSettings>;
  /** The event destination's consumer: resolves once the event was handled; a rejection is retried. */
  readonly deliver?: (event: SmsEvent) => Promise<void>;
  /** The two-way channel's consumer: each customer's text back ({@link SmsEmulator.reply}), retried as events are. */
  readonly deliverInbound?: (text: InboundTextPayload) => Promise<void>;
  readonly retry?: EventRetry;
  readonly faults?: Partial<SmsFaultRates>;
  /** The faults' source of randomness (default `Math.random`). */
  readonly random?: () => number;
  readonly clock?: Clock;
  readonly timers?: Timers;
}

/** The stand-in's default price of a part, in US dollars: of the order of a US part's, not a quote. */
const DEFAULT_PRICE_PER_PART = 0.0083;
/** The body AWS JSON 1.0 accepts at most here: a 1,600-character text is far below it. */
const MAX_BODY_BYTES = 256 * 1024;

/** A running stand-in; start it with {@link startSmsEmulator}. */
export class SmsEmulator extends RunningStandIn<SentText, PublishedSmsEvent> {
  /** The account: identities added, spend limit changed, money spent this month. */
  readonly account: Pick<SmsAccount, 'addIdentity' | 'setSpend' | 'spend' | 'spentThisMonth'>;
  readonly #account: SmsAccount;
  readonly #twoWay: TwoWayMessages;

  constructor(
    url: string,
    parts: StandInParts<SentText, PublishedSmsEvent> & { account: SmsAccount; twoWay: TwoWayMessages },
    close: () => Promise<void>,
  ) {
    super(url, parts, async () => {
      parts.twoWay.stop();
      await close();
    });
    this.account = parts.account;
    this.#account = parts.account;
    this.#twoWay = parts.twoWay;
  }

  /** An end user's STOP taking effect on `optOutList` (default "Default") without a text: end-user opted out. */
  optOut(number: string, optOutList = DEFAULT_OPT_OUT_LIST): OptedOutNumber {
    return this.#account.optOut(optOutList, number, true);
  }

  /**
   * The customer `from` texts `body` to the account's number `to` (two-way SMS): an opt-out keyword
   * puts `from` on the number's opt-out list, and the payload goes to `deliverInbound`.
   */
  reply(from: string, to: string, body: string): InboundTextPayload {
    return this.#twoWay.receive(from, to, body);
  }

  /** Every customer's text published so far, with what became of its delivery. */
  inboundTexts(): readonly PublishedInboundText[] {
    return this.#twoWay.log();
  }

  /** Resolves once every event and every inbound text was delivered, lost or given up. */
  override async idle(): Promise<void> {
    await Promise.all([super.idle(), this.#twoWay.idle()]);
  }
}

/** Starts the stand-in on 127.0.0.1 (`port`, or a free one). */
export async function startSmsEmulator(options: SmsEmulatorOptions = {}): Promise<SmsEmulator> {
  const clock = options.clock ?? systemClock;
  const region = options.region ?? LOCAL_REGION;
  const account = new SmsAccount(
    { clock, region, accountId: LOCAL_ACCOUNT },
    options.identities ?? [
      { kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: LOCAL_SMS.originationMps },
    ],
    options.optOutLists ?? { [DEFAULT_OPT_OUT_LIST]: [] },
    {
      monthlySpendLimit: Number.POSITIVE_INFINITY,
      pricePerPart: DEFAULT_PRICE_PER_PART,
      ...options.spend,
    },
  );
  const faults = new SesFaults(options.faults, options.random);
  const publisher = new SmsEventPublisher({
    deliver: options.deliver ?? (async () => {}),
    faults,
    timers: options.timers ?? systemTimers,
    ...(options.retry ? { retry: options.retry } : {}),
  });
  const sets = options.configurationSets ?? { [LOCAL_SMS.configurationSet]: {} };
  const timers = options.timers ?? systemTimers;
  const operations = new SmsOperations({
    account,
    publisher,
    clock,
    region,
    accountId: LOCAL_ACCOUNT,
    configurationSets: new Map(
      Object.entries(sets).map(([name, set]) => [name, new Set(set.eventTypes ?? ['TEXT_ALL'])]),
    ),
    outcomes: new Map(Object.entries(options.outcomes ?? {})),
  });
  const front = new SmsFront(operations, faults, {
    region,
    secrets: options.credentials ?? { [LOCAL_CREDENTIALS.accessKeyId]: LOCAL_CREDENTIALS.secretAccessKey },
  });
  const served = await serveFront(
    (req, res) =>
      front.handle(req, res).catch((error: unknown) => {
        if (error instanceof FrontError) throw error;
        throw smsError('InternalServerException', 'Internal server error.');
      }),
    { __type: 'com.amazonaws.pinpointsmsvoicev2#InternalServerException', Message: 'Internal server error.' },
    options.port,
  );
  const twoWay = new TwoWayMessages(
    { account, faults, sent: () => operations.sent() },
    {
      deliver: options.deliverInbound ?? (async () => {}),
      timers,
      ...(options.retry ? { retry: options.retry } : {}),
    },
  );
  return new SmsEmulator(served.url, { account, faults, operations, publisher, twoWay }, () =>
    served.close(),
  );
}

const TARGET_PREFIX = 'PinpointSMSVoiceV2.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';

/** The service's answers, and its refusals of a send the faults refuse. */
const SMS_WIRE: ServiceWire<SmsErrorType> = {
  error: smsError,
  answer: smsAnswer,
  refusals: {
    throttled: ['ThrottlingException', 'Rate exceeded'],
    'internal-failure': ['InternalServerException', 'Internal server error.'],
    'service-unavailable': ['ServiceUnavailable', 'The service is unavailable. Please try again later.'],
  },
};

/** HTTP to operations: the signature, the protocol's envelope, the send faults. */
class SmsFront {
  readonly #operations: SmsOperations;
  readonly #faults: SesFaults;
  readonly #settings: { region: string; secrets: Readonly<Record<string, string>> };

  constructor(
    operations: SmsOperations,
    faults: SesFaults,
    settings: { region: string; secrets: Readonly<Record<string, string>> },
  ) {
    this.#operations = operations;
    this.#faults = faults;
    this.#settings = settings;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req, MAX_BODY_BYTES, () =>
      smsError('SerializationException', `The request body is more than ${MAX_BODY_BYTES} bytes long.`),
    );
    this.#checkSignature(req, body);
    const operation = this.#operation(req);
    const input = parseBody(body);
    const ops = this.#operations;
    switch (operation) {
      case 'SendTextMessage':
        return this.#send(req, res, () => ops.sendTextMessage(input));
      case 'DescribeOptedOutNumbers':
        return smsAnswer(res, ops.describeOptedOutNumbers(input));
      case 'PutOptedOutNumber':
        return smsAnswer(res, ops.putOptedOutNumber(input));
      case 'DeleteOptedOutNumber':
        return smsAnswer(res, ops.deleteOptedOutNumber(input));
      default:
        throw smsError('UnknownOperationException', `The stand-in does not serve ${operation}.`);
    }
  }

  /** The operation `POST /` names in `X-Amz-Target`, with the protocol's content type. */
  #operation(req: IncomingMessage): string {
    const target = req.headers['x-amz-target'];
    const path = new URL(req.url ?? '/', 'http://sms').pathname;
    if (
      req.method !== 'POST' ||
      path !== '/' ||
      typeof target !== 'string' ||
      !target.startsWith(TARGET_PREFIX)
    ) {
      throw smsError('UnknownOperationException', 'The operation is not recognised.');
    }
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== CONTENT_TYPE) {
      throw smsError('SerializationException', `The content type must be ${CONTENT_TYPE}.`);
    }
    return target.slice(TARGET_PREFIX.length);
  }

  /** The signature checked, as the service's front end refuses it. */
  #checkSignature(req: IncomingMessage, body: Buffer): void {
    if (req.headers.authorization === undefined) {
      throw smsError('MissingAuthenticationTokenException', 'Missing Authentication Token');
    }
    const { secrets, region } = this.#settings;
    checkSignature(req, body, { secrets, region, service: 'sms-voice' }, signingRefusal);
  }

  /** A send, with its faults (`sendWithFaults`), in the service's words. */
  #send(req: IncomingMessage, res: ServerResponse, operation: () => unknown): void {
    sendWithFaults(this.#faults, SMS_WIRE, { req, res }, operation);
  }
}
