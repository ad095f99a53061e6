/**
 * Event publishing to EventBridge, as a configuration set's EventBridge destination does it: each
 * accepted email's events, in the default bus's envelope, handed to the rule's target (`deliver`).
 *
 * What happens to each recipient is the mailbox simulator's (any label: `bounce+x@` is `bounce@`):
 * success@ and any other address SEND then DELIVERY; bounce@ SEND then BOUNCE (Permanent, General,
 * 5.1.1); ooto@ SEND then DELIVERY (the auto-reply goes to the sender, no event); complaint@ SEND,
 * DELIVERY then COMPLAINT (abuse); suppressionlist@ (and the account's suppressed addresses) SEND
 * then BOUNCE (Permanent, OnAccountSuppressionList). An email whose template could not be rendered
 * has one RENDERING_FAILURE event and nothing else.
 *
 * Delivery is at least once (`../event-delivery.ts`): a `deliver` that rejects is tried again with
 * exponential backoff, as EventBridge retries a target (it keeps going for 24 hours; here
 * `retry.attempts` in all), and the faults lose, duplicate, delay and reorder events. Without faults
 * a message's events arrive in the order they happened, one after the other.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '#shared/pacing/clock.ts';
import type { EventBridgeEvent } from '../connect-emulator.ts';
import {
  type DeliveryRecord,
  EventDeliverer,
  type EventDelivererOptions,
  type PublishedDelivery,
} from '../event-delivery.ts';
import type { SentEmail } from './compose.ts';

export const SES_EVENT_TYPES = [
  'SEND',
  'REJECT',
  'BOUNCE',
  'COMPLAINT',
  'DELIVERY',
  'OPEN',
  'CLICK',
  'RENDERING_FAILURE',
  'DELIVERY_DELAY',
  'SUBSCRIPTION',
] as const;
export type SesEventType = (typeof SES_EVENT_TYPES)[number];

/** The types this stand-in produces: `detail-type` on the bus, `detail.eventType`, and the detail's own object. */
const ON_THE_BUS = {
  SEND: ['Email Sent', 'Send', 'send'],
  DELIVERY: ['Email Delivered', 'Delivery', 'delivery'],
  BOUNCE: ['Email Bounced', 'Bounce', 'bounce'],
  COMPLAINT: ['Email Complaint Received', 'Complaint', 'complaint'],
  RENDERING_FAILURE: ['Email Rendering Failed', 'Rendering Failure', 'failure'],
} as const satisfies Partial<Record<SesEventType, readonly [string, string, string]>>;
type ProducedType = keyof typeof ON_THE_BUS;

export const SIMULATOR_DOMAIN = 'simulator.amazonses.com';

/** The mailbox simulator's scenario for an address (labels dropped), if it is one of its addresses. */
export function simulatorScenario(address: string): string | undefined {
  const at = address.lastIndexOf('@');
  if (address.slice(at + 1).toLowerCase() !== SIMULATOR_DOMAIN) return undefined;
  return address.slice(0, at).split('+')[0]!.toLowerCase();
}

/** One event handed to the target, and what became of it. */
export type PublishedEvent = PublishedDelivery<EventBridgeEvent>;
type EventRecord = DeliveryRecord<EventBridgeEvent>;

/** Who sent, as SES records it in the automatic `ses:` tags and the identity ARN. */
export interface SendContext {
  readonly sourceArn: string;
  readonly sourceIp: string;
  readonly callerIdentity: string;
}

export interface PublisherOptions extends EventDelivererOptions<EventBridgeEvent> {
  readonly region: string;
  readonly account: string;
  readonly clock: Clock;
  readonly suppressed: ReadonlySet<string>;
}

const iso = (ms: number) => new Date(ms).toISOString();
const feedbackId = () => `0100${Date.now().toString(16)}-${randomUUID()}-000000`;
const REPORTING_MTA = 'dns; amazonses.com';
const SUPPRESSED_DIAGNOSTIC =
  'Amazon SES did not send the message to this address because it is on the suppression list for your account. For more information about removing addresses from the suppression list, see the Amazon SES Developer Guide at https://docs.aws.amazon.com/ses/latest/DeveloperGuide/sending-email-suppression-list.html';

export class SesEventPublisher {
  readonly #options: PublisherOptions;
  readonly #log: EventRecord[] = [];
  readonly #deliverer: EventDeliverer<EventBridgeEvent>;

  constructor(options: PublisherOptions) {
    this.#options = options;
    this.#deliverer = new EventDeliverer(options);
  }

  /** Every event published so far, with its fate. */
  log(): readonly PublishedEvent[] {
    return this.#log.map((record) => ({ ...record }));
  }

  /** Resolves once no event waits for a delivery, a retry or a delay. */
  idle(): Promise<void> {
    return this.#deliverer.idle();
  }

  /** Publishes `email`'s events of the `types` the configuration set's destination matches. */
  publish(email: SentEmail, types: ReadonlySet<SesEventType>, context: SendContext): void {
    if (email.configurationSet === undefined || this.#deliverer.stopped) return;
    const events = this.#eventsOf(email, email.configurationSet, context).filter(([type]) => types.has(type));
    if (events.length === 0) return;
    const reordered = this.#options.faults.drawReorder();
    const records = events.map(([, event]) => {
      const record: EventRecord = { event, fate: 'pending', attempts: 0, deliveries: 0, reordered };
      this.#log.push(record);
      return record;
    });
    this.#deliverer.deliver(records, reordered);
  }

  /** Stops every wait and delivery still to come. */
  stop(): void {
    this.#deliverer.stop();
  }

  // ---- the events of one email ---------------------------------------------------------------

  #eventsOf(
    email: SentEmail,
    configurationSet: string,
    context: SendContext,
  ): [ProducedType, EventBridgeEvent][] {
    const mail = this.#mail(email, configurationSet, context);
    const at = email.at;
    const make = (type: ProducedType, ms: number, detail: object): [ProducedType, EventBridgeEvent] => [
      type,
      this.#envelope(type, ms, configurationSet, { mail, [ON_THE_BUS[type][2]]: detail }),
    ];
    if (email.renderingFailure !== undefined) {
      return [
        make('RENDERING_FAILURE', at, { errorMessage: email.renderingFailure, templateName: email.template }),
      ];
    }
    const events = [make('SEND', at, {})];
    for (const address of [...email.to, ...email.cc, ...email.bcc]) {
      const scenario = simulatorScenario(address);
      const suppressed =
        scenario === 'suppressionlist' || this.#options.suppressed.has(address.toLowerCase());
      if (suppressed || scenario === 'bounce') {
        events.push(make('BOUNCE', at + 100, bounce(address, suppressed, at + 100)));
        continue;
      }
      events.push(
        make('DELIVERY', at + 250, {
          timestamp: iso(at + 250),
          processingTimeMillis: 250,
          recipients: [address],
          smtpResponse: '250 2.6.0 Message received',
          remoteMtaIp: '127.0.0.1',
          reportingMTA: 'a8-30.smtp-out.amazonses.com',
        }),
      );
      if (scenario === 'complaint') {
        events.push(
          make('COMPLAINT', at + 1000, {
            feedbackId: feedbackId(),
            complaintSubType: null,
            complainedRecipients: [{ emailAddress: address }],
            timestamp: iso(at + 1000),
            userAgent: 'Amazon SES Mailbox Simulator',
            complaintFeedbackType: 'abuse',
            arrivalDate: iso(at + 250),
          }),
        );
      }
    }
    return events;
  }

  #mail(email: SentEmail, configurationSet: string, context: SendContext): Record<string, unknown> {
    const tags: Record<string, string[]> = {};
    for (const [name, value] of Object.entries(email.tags)) tags[name] = [value];
    Object.assign(tags, {
      'ses:configuration-set': [configurationSet],
      'ses:source-ip': [context.sourceIp],
      'ses:from-domain': [email.fromAddress.slice(email.fromAddress.lastIndexOf('@') + 1)],
      'ses:caller-identity': [context.callerIdentity],
    });
    return {
      timestamp: iso(email.at),
      source: email.from,
      sourceArn: context.sourceArn,
      sendingAccountId: this.#options.account,
      messageId: email.messageId,
      destination: [...email.to, ...email.cc, ...email.bcc],
      headersTruncated: false,
      headers: headersOf(email),
      commonHeaders: {
        from: [email.from],
        ...(email.replyTo.length > 0 ? { replyTo: [...email.replyTo] } : {}),
        ...(email.to.length > 0 ? { to: [...email.to] } : {}),
        ...(email.cc.length > 0 ? { cc: [...email.cc] } : {}),
        messageId: email.messageId,
        ...(email.subject === undefined ? {} : { subject: email.subject }),
      },
      tags,
    };
  }

  #envelope(type: ProducedType, ms: number, configurationSet: string, detail: object): EventBridgeEvent {
    const { region, account } = this.#options;
    return {
      version: '0',
      id: randomUUID(),
      'detail-type': ON_THE_BUS[type][0],
      source: 'aws.ses',
      account,
      time: iso(ms).replace(/\.\d{3}Z$/, 'Z'),
      region,
      resources: [`arn:aws:ses:${region}:${account}:configuration-set/${configurationSet}`],
      detail: { eventType: ON_THE_BUS[type][1], ...detail },
    };
  }
}

function bounce(address: string, suppressed: boolean, ms: number): object {
  return {
    feedbackId: feedbackId(),
    bounceType: 'Permanent',
    bounceSubType: suppressed ? 'OnAccountSuppressionList' : 'General',
    bouncedRecipients: [
      {
        emailAddress: address,
        action: 'failed',
        status: '5.1.1',
        diagnosticCode: suppressed ? SUPPRESSED_DIAGNOSTIC : 'smtp; 550 5.1.1 user unknown',
      },
    ],
    timestamp: iso(ms),
    reportingMTA: REPORTING_MTA,
  };
}

/** The message's headers as the events list them: SES's own, then the caller's (a raw message's are its own). */
function headersOf(email: SentEmail): { name: string; value: string }[] {
  if (email.raw) return email.headers.map((h) => ({ ...h }));
  const own = [
    { name: 'From', value: email.from },
    ...(email.replyTo.length > 0 ? [{ name: 'Reply-To', value: email.replyTo.join(', ') }] : []),
    ...(email.to.length > 0 ? [{ name: 'To', value: email.to.join(', ') }] : []),
    ...(email.cc.length > 0 ? [{ name: 'Cc', value: email.cc.join(', ') }] : []),
    ...(email.subject === undefined ? [] : [{ name: 'Subject', value: email.subject }]),
    { name: 'MIME-Version', value: '1.0' },
    {
      name: 'Content-Type',
      value:
        email.text !== undefined && email.html !== undefined
          ? 'multipart/alternative; boundary="----=_Part_0_0.0"'
          : `text/${email.html !== undefined ? 'html' : 'plain'}; charset=UTF-8`,
    },
  ];
  return [...own, ...email.headers.map((h) => ({ ...h }))];
}
