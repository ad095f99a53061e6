/**
 * An Amazon SES v2 stand-in: the REST-JSON protocol `@aws-sdk/client-sesv2` speaks (point the
 * client's `endpoint` at `url`), SigV4-checked like AWS, serving `SendEmail`
 * (`POST /v2/email/outbound-emails`), `SendBulkEmail` (`POST /v2/email/outbound-bulk-emails`),
 * `GetAccount` (`GET /v2/email/account`) and `CreateEmailTemplate` / `GetEmailTemplate` /
 * `DeleteEmailTemplate` (`/v2/email/templates[/{TemplateName}]`). It refuses what SES refuses
 * (`local/ses/operations.ts`: unverified senders, the sandbox, 50 recipients, 40 MB, a missing
 * configuration set, the sending rate and the daily quota, a paused or suspended account), publishes
 * each email's events as a configuration set's EventBridge destination does (`local/ses/events.ts`:
 * the mailbox simulator's outcomes, at-least-once delivery to `deliver`) and injects SES's faults
 * (`local/ses/faults.ts`). Given an `outbox` directory, it also writes each email it accepts there as
 * a `.eml` file, for a developer to read what was sent (`local/ses/outbox.ts`); nothing on the wire
 * changes.
 *
 * Why not the npm package `aws-ses-v2-local`: it accepts the sends and shows them, but refuses
 * nothing (no identities, sandbox, quotas or rate), publishes no events, knows no mailbox-simulator
 * address, injects no fault and does not check signatures — everything a test of the email channel
 * needs to prove something about a deployment.
 *
 * Wire details were taken from the SDK's own model (`@aws-sdk/client-sesv2` 3.1176 schemas: paths,
 * shapes, error names and statuses, the `BulkEmailStatus` enum, whose `CONFIGURATION_SET_NOT_FOUND`
 * and `TEMPLATE_NOT_FOUND` the reference page spells `…_DOES_NOT_EXIST`) and these pages:
 * - https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_BulkEmailEntryResult.html
 * - https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_MessageTag.html and API_MessageHeader.html
 * - https://docs.aws.amazon.com/ses/latest/dg/quotas.html (recipients, 50 a message, 40 MB on v2,
 *   sandbox 200 a day and 1 a second)
 * - https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html
 * - https://docs.aws.amazon.com/ses/latest/dg/send-an-email-from-console.html#send-email-simulator
 * - https://docs.aws.amazon.com/ses/latest/dg/monitoring-eventbridge.html and
 *   https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-ses.html (detail-types, source
 *   `aws.ses`, best-effort and possibly out of order)
 * - https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-firehose-contents.html and
 *   …-firehose-examples.html ("Monitor email sending using Amazon SES event publishing": the
 *   `mail`, `bounce`, `complaint`, `delivery`, `send` and `failure` objects, the `ses:` tags)
 * - https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html (`InternalFailure`
 *   500, `ServiceUnavailable` 503)
 *
 * Signatures are checked against the wall clock (the SDK signs with it), quotas and event times
 * against the injected `clock`. Not reproduced: identities managed through the API, custom MAIL
 * FROM domains (`MailFromDomainNotVerifiedException`), dedicated IP pools, contact lists and
 * `ListManagementOptions`, OPEN/CLICK/DELIVERY_DELAY/SUBSCRIPTION events, Handlebars helpers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Clock, systemClock, systemTimers, type Timers } from '#shared/pacing/clock.ts';
import { LOCAL_ACCOUNT } from './api-gateway.ts';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './cloud.ts';
import type { EventBridgeEvent } from './connect-emulator.ts';
import type { EventRetry } from './event-delivery.ts';
import { RunningStandIn, type StandInParts } from './running-stand-in.ts';
import { type AccountSettings, SesAccount } from './ses/account.ts';
import { EmailTemplates, type SentEmail } from './ses/compose.ts';
import { type PublishedEvent, SES_EVENT_TYPES, SesEventPublisher, type SesEventType } from './ses/events.ts';
import { type SesFaultRates, SesFaults } from './ses/faults.ts';
import { type Caller, SesOperations } from './ses/operations.ts';
import { SesOutbox } from './ses/outbox.ts';
import { JsonFields, readBody, type SesErrorType, sesAnswer, sesError, signingRefusal } from './ses/wire.ts';
import { checkSignature, type ServiceWire, sendWithFaults } from './stand-in-front.ts';
import { FrontError, serveFront } from './telephony-sandbox/http-front.ts';

export type { EventRetry } from './event-delivery.ts';
export type { AccountSettings, AccountSnapshot } from './ses/account.ts';
export type { MessageHeader, SentEmail } from './ses/compose.ts';
export type { PublishedEvent, SesEventType } from './ses/events.ts';
export type { EventFault, SendFault, SesFaultRates } from './ses/faults.ts';
export type { EventBridgeEvent };

/** What the local cloud's SES uses: the local credentials and region, a verified domain and sender, a configuration set. */
export const LOCAL_SES = {
  region: LOCAL_REGION,
  accessKeyId: LOCAL_CREDENTIALS.accessKeyId,
  secretAccessKey: LOCAL_CREDENTIALS.secretAccessKey,
  domain: 'example.com',
  from: 'news@example.com',
  configurationSet: 'switchboard-email',
} as const;

/** A configuration set; its EventBridge destination matches `eventTypes` (default: every type; `[]`: no destination). */
export interface ConfigurationSetSettings {
  readonly eventTypes?: readonly SesEventType[];
}

export interface SesEmulatorOptions {
  readonly port?: number;
  readonly region?: string;
  /** Secret access keys by access key id (default: the local cloud's credentials). */
  readonly credentials?: Readonly<Record<string, string>>;
  /** Verified identities, addresses and domains (default: {@link LOCAL_SES}'s domain). */
  readonly identities?: readonly string[];
  /** Configuration sets that exist (default: {@link LOCAL_SES}'s, publishing every event type). */
  readonly configurationSets?: Readonly<Record<string, ConfigurationSetSettings>>;
  /** Quotas and state (default: production, 14 a second, 50,000 a day; the sandbox: 1 and 200). */
  readonly account?: Partial<AccountSettings>;
  /** Addresses on the account-level suppression list: sent, then bounced (OnAccountSuppressionList). */
  readonly suppressed?: readonly string[];
  /** The EventBridge rule's target: resolves once the event was handled; a rejection is retried. */
  readonly deliver?: (event: EventBridgeEvent) => Promise<void>;
  readonly retry?: EventRetry;
  readonly faults?: Partial<SesFaultRates>;
  /** The faults' source of randomness (default `Math.random`). */
  readonly random?: () => number;
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** Largest message as sent (default 40 MB, SES v2's). */
  readonly maxMessageBytes?: number;
  /**
   * A directory to write each email accepted for sending to, as `{MessageId}.eml`, for a developer
   * to read (`./ses/outbox.ts`; created if missing). Default: none, the emails are only in `sent()`.
   */
  readonly outbox?: string;
}

const MAX_MESSAGE_BYTES = 40 * 1024 * 1024;

/** A running stand-in; start it with {@link startSesEmulator}. */
export class SesEmulator extends RunningStandIn<SentEmail, PublishedEvent> {
  /** The account: `account.set({ maxSendRate, max24HourSend, sendingEnabled, suspended, sandbox })`, `verify(identity)`. */
  readonly account: Pick<SesAccount, 'set' | 'verify' | 'snapshot' | 'settings'>;
  /** The directory each email sent is written to as a `.eml` file, when the stand-in was given one. */
  readonly outbox: string | undefined;

  constructor(
    url: string,
    parts: StandInParts<SentEmail, PublishedEvent> & { account: SesAccount; outbox?: SesOutbox },
    close: () => Promise<void>,
  ) {
    super(url, parts, close);
    this.outbox = parts.outbox?.directory;
    this.account = parts.account;
  }
}

/** Starts the stand-in on 127.0.0.1 (`port`, or a free one). */
export async function startSesEmulator(options: SesEmulatorOptions = {}): Promise<SesEmulator> {
  const clock = options.clock ?? systemClock;
  const region = options.region ?? LOCAL_REGION;
  const account = new SesAccount(clock, options.account ?? {}, options.identities ?? [LOCAL_SES.domain]);
  const faults = new SesFaults(options.faults, options.random);
  const publisher = new SesEventPublisher({
    deliver: options.deliver ?? (async () => {}),
    region,
    account: LOCAL_ACCOUNT,
    faults,
    clock,
    timers: options.timers ?? systemTimers,
    suppressed: new Set((options.suppressed ?? []).map((address) => address.toLowerCase())),
    ...(options.retry ? { retry: options.retry } : {}),
  });
  const sets = options.configurationSets ?? { [LOCAL_SES.configurationSet]: {} };
  const maxMessageBytes = options.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  const outbox = options.outbox === undefined ? undefined : new SesOutbox(options.outbox);
  const operations = new SesOperations({
    account,
    templates: new EmailTemplates(),
    publisher,
    clock,
    region,
    accountId: LOCAL_ACCOUNT,
    configurationSets: new Map(
      Object.entries(sets).map(([name, set]) => [name, new Set(set.eventTypes ?? SES_EVENT_TYPES)]),
    ),
    maxMessageBytes,
    ...(outbox ? { outbox } : {}),
  });
  const front = new SesFront(operations, faults, {
    region,
    secrets: options.credentials ?? { [LOCAL_CREDENTIALS.accessKeyId]: LOCAL_CREDENTIALS.secretAccessKey },
    // A message of maxMessageBytes is base64 in the JSON body: a third more, and the rest of the request.
    maxBodyBytes: Math.ceil((maxMessageBytes * 4) / 3) + 1024 * 1024,
  });
  const served = await serveFront(
    (req, res) =>
      front.handle(req, res).catch((error: unknown) => {
        if (error instanceof FrontError) throw error;
        throw sesError('InternalFailure', 'The request processing has failed because of an unknown error.');
      }),
    { message: 'internal error' },
    options.port,
  );
  return new SesEmulator(
    served.url,
    { account, faults, operations, publisher, ...(outbox ? { outbox } : {}) },
    () => served.close(),
  );
}

/** SES's answers, and its refusals of a send the faults refuse. */
const SES_WIRE: ServiceWire<SesErrorType> = {
  error: sesError,
  answer: sesAnswer,
  refusals: {
    throttled: ['TooManyRequestsException', 'Maximum sending rate exceeded.'],
    'internal-failure': [
      'InternalFailure',
      'The request processing has failed because of an unknown error, exception or failure.',
    ],
    'service-unavailable': [
      'ServiceUnavailable',
      'The request has failed due to a temporary failure of the server.',
    ],
  },
};

/** HTTP to operations: the signature, the route, the send faults. */
class SesFront {
  readonly #operations: SesOperations;
  readonly #faults: SesFaults;
  readonly #settings: { region: string; secrets: Readonly<Record<string, string>>; maxBodyBytes: number };

  constructor(
    operations: SesOperations,
    faults: SesFaults,
    settings: { region: string; secrets: Readonly<Record<string, string>>; maxBodyBytes: number },
  ) {
    this.#operations = operations;
    this.#faults = faults;
    this.#settings = settings;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req, this.#settings.maxBodyBytes, () =>
      sesError('MessageRejected', `Message length is more than ${this.#settings.maxBodyBytes} bytes long.`),
    );
    const caller = this.#caller(req, body);
    const method = req.method ?? 'GET';
    const path = new URL(req.url ?? '/', 'http://ses').pathname;
    const ops = this.#operations;
    if (method === 'POST' && path === '/v2/email/outbound-emails') {
      return this.#send(req, res, () => ops.sendEmail(JsonFields.ofBody(body), caller));
    }
    if (method === 'POST' && path === '/v2/email/outbound-bulk-emails') {
      return this.#send(req, res, () => ops.sendBulkEmail(JsonFields.ofBody(body), caller));
    }
    if (method === 'GET' && path === '/v2/email/account') return sesAnswer(res, ops.getAccount());
    if (method === 'POST' && path === '/v2/email/templates') {
      return sesAnswer(res, ops.createEmailTemplate(JsonFields.ofBody(body)));
    }
    const template = /^\/v2\/email\/templates\/([^/]+)$/.exec(path);
    if (template && method === 'GET')
      return sesAnswer(res, ops.getEmailTemplate(decodeURIComponent(template[1]!)));
    if (template && method === 'DELETE') {
      return sesAnswer(res, ops.deleteEmailTemplate(decodeURIComponent(template[1]!)));
    }
    throw sesError('UnknownOperationException', `No operation ${method} ${path}`);
  }

  /** The signature checked, as SES would refuse it; the caller it names. */
  #caller(req: IncomingMessage, body: Buffer): Caller {
    const { secrets, region } = this.#settings;
    const signed = checkSignature(req, body, { secrets, region, service: 'ses' }, signingRefusal);
    const ip = req.socket.remoteAddress ?? '127.0.0.1';
    return { accessKeyId: signed.accessKeyId, sourceIp: ip.replace(/^::ffff:/, '') };
  }

  /** A send, with its faults (`sendWithFaults`), in SES's words. */
  #send(req: IncomingMessage, res: ServerResponse, operation: () => unknown): void {
    sendWithFaults(this.#faults, SES_WIRE, { req, res }, operation);
  }
}
