/**
 * Event publishing, as a configuration set's event destination does it: each accepted text's events,
 * as the JSON records End User Messaging SMS writes (AWS End User Messaging SMS User Guide, "Example
 * event data": https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-format.html
 * — `eventType`, `eventVersion` "1.0", `eventTimestamp` in ms, `isFinal`, `originationPhoneNumber`,
 * `destinationPhoneNumber`, `messageId`, `messageRequestTimestamp`, `messageEncoding`, `messageType`,
 * `messageStatus`, `messageStatusDescription`, `context`, `totalMessageParts`, `totalMessagePrice`,
 * `totalCarrierFee`), handed to the destination's consumer (`deliver`: what an SNS subscription or a
 * Firehose stream would pass on). The event types are the guide's "Event types for SMS, MMS, and
 * voice" (https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-types.html).
 *
 * What happens to a text is its destination's outcome: `delivered` (the default) is TEXT_SUCCESSFUL
 * (the carrier accepted it) then TEXT_DELIVERED (the handset did, final); `successful` is a final
 * TEXT_SUCCESSFUL (countries without delivery receipts); a failure type (TEXT_BLOCKED,
 * TEXT_UNREACHABLE, …) is that one final event. A number that matches the API's pattern but is no
 * valid phone number is accepted and ends TEXT_INVALID ("invalid events occur when the destination
 * phone number isn't valid").
 *
 * Delivery is at least once (`../event-delivery.ts`): a `deliver` that rejects is tried again with
 * exponential backoff, and the faults (`../ses/faults.ts`, shared with the SES stand-in) lose, duplicate, delay and reorder
 * events. Without faults a text's events arrive in the order they happened.
 */
import { EventDeliverer, type EventDelivererOptions, type PublishedDelivery } from '../event-delivery.ts';
import type { SesFaults } from '../ses/faults.ts';
import type { SentText } from './operations.ts';

export const SMS_EVENT_TYPES = [
  'TEXT_QUEUED',
  'TEXT_PENDING',
  'TEXT_SUCCESSFUL',
  'TEXT_DELIVERED',
  'TEXT_BLOCKED',
  'TEXT_TTL_EXPIRED',
  'TEXT_CARRIER_UNREACHABLE',
  'TEXT_INVALID',
  'TEXT_INVALID_MESSAGE',
  'TEXT_CARRIER_BLOCKED',
  'TEXT_UNREACHABLE',
  'TEXT_SPAM',
  'TEXT_UNKNOWN',
  'TEXT_PROTECT_BLOCKED',
] as const;
export type SmsEventType = (typeof SMS_EVENT_TYPES)[number];
/** What an event destination matches: a type, or every text event. */
export type MatchingEventType = SmsEventType | 'TEXT_ALL' | 'ALL';

/** The final failures a destination can be given as its outcome. */
export type FailureEventType = Exclude<
  SmsEventType,
  'TEXT_QUEUED' | 'TEXT_PENDING' | 'TEXT_SUCCESSFUL' | 'TEXT_DELIVERED'
>;
/** What becomes of a text sent to a destination. */
export type SmsOutcome = 'delivered' | 'successful' | FailureEventType;

/** One event record, as the event destination receives it. */
export interface SmsEvent {
  readonly eventType: SmsEventType;
  readonly eventVersion: '1.0';
  readonly eventTimestamp: number;
  readonly isFinal: boolean;
  readonly originationPhoneNumber: string;
  readonly destinationPhoneNumber: string;
  readonly isInternationalSend: boolean;
  readonly isoCountryCode?: string;
  readonly messageId: string;
  readonly messageRequestTimestamp: number;
  readonly messageEncoding: 'GSM' | 'UCS2';
  readonly messageType: 'TRANSACTIONAL' | 'PROMOTIONAL';
  readonly messageStatus: string;
  readonly messageStatusDescription: string;
  readonly context?: Readonly<Record<string, string>>;
  readonly totalMessageParts: number;
  readonly totalMessagePrice: number;
  readonly totalCarrierFee: number;
}

/** One event handed to the destination, and what became of it. */
export interface PublishedSmsEvent extends PublishedDelivery<SmsEvent> {
  readonly configurationSet: string;
}

type EventRecord = { -readonly [K in keyof PublishedSmsEvent]: PublishedSmsEvent[K] };

/** Ms after the request that each event is stamped with (the stand-in's carrier is quick). */
const SUCCESSFUL_AFTER_MS = 300;
const DELIVERED_AFTER_MS = 1_500;

const DESCRIPTIONS: Record<SmsEventType, string> = {
  TEXT_QUEUED: 'Message is queued for delivery',
  TEXT_PENDING: 'Message is being delivered',
  TEXT_SUCCESSFUL: 'Message has been accepted by phone carrier',
  TEXT_DELIVERED: 'Message has been delivered to the handset',
  TEXT_BLOCKED: "Message was blocked by the recipient's device or carrier",
  TEXT_TTL_EXPIRED: 'Message was not delivered within its time to live',
  TEXT_CARRIER_UNREACHABLE: "A temporary error occurred on the recipient's carrier network",
  TEXT_INVALID: 'The destination phone number is not valid',
  TEXT_INVALID_MESSAGE: 'The message body is not valid and cannot be sent',
  TEXT_CARRIER_BLOCKED: "The recipient's carrier blocked the message",
  TEXT_UNREACHABLE: "The recipient's device is not available",
  TEXT_SPAM: "The recipient's carrier identified the message as spam",
  TEXT_UNKNOWN: 'Message could not be delivered for an unknown reason',
  TEXT_PROTECT_BLOCKED: 'Message was blocked by a protect configuration',
};

export class SmsEventPublisher {
  readonly #faults: SesFaults;
  readonly #log: EventRecord[] = [];
  readonly #deliverer: EventDeliverer<SmsEvent>;

  constructor(options: EventDelivererOptions<SmsEvent>) {
    this.#faults = options.faults;
    this.#deliverer = new EventDeliverer(options);
  }

  /** Every event published so far, with its fate. */
  log(): readonly PublishedSmsEvent[] {
    return this.#log.map((record) => ({ ...record }));
  }

  /** Resolves once no event waits for a delivery, a retry or a delay. */
  idle(): Promise<void> {
    return this.#deliverer.idle();
  }

  /** Publishes `text`'s events (its `outcome`'s) that the configuration set's destination matches. */
  publish(text: SentText, outcome: SmsOutcome, matching: ReadonlySet<MatchingEventType>): void {
    if (text.configurationSet === undefined || this.#deliverer.stopped) return;
    const events = eventsOf(text, outcome).filter(
      (event) => matching.has('ALL') || matching.has('TEXT_ALL') || matching.has(event.eventType),
    );
    if (events.length === 0) return;
    const reordered = this.#faults.drawReorder();
    const records = events.map((event) => {
      const record: EventRecord = {
        event,
        configurationSet: text.configurationSet!,
        fate: 'pending',
        attempts: 0,
        deliveries: 0,
        reordered,
      };
      this.#log.push(record);
      return record;
    });
    this.#deliverer.deliver(records, reordered);
  }

  /** Stops every wait and delivery still to come. */
  stop(): void {
    this.#deliverer.stop();
  }
}

/** The events of one text, in the order they happen. */
function eventsOf(text: SentText, outcome: SmsOutcome): SmsEvent[] {
  const event = (eventType: SmsEventType, afterMs: number, isFinal: boolean): SmsEvent => ({
    eventType,
    eventVersion: '1.0',
    eventTimestamp: text.at + afterMs,
    isFinal,
    originationPhoneNumber: text.origin,
    destinationPhoneNumber: text.destination,
    isInternationalSend: false,
    ...(text.isoCountryCode === undefined ? {} : { isoCountryCode: text.isoCountryCode }),
    messageId: text.messageId,
    messageRequestTimestamp: text.at,
    messageEncoding: text.encoding,
    messageType: text.messageType,
    messageStatus: eventType.slice('TEXT_'.length),
    messageStatusDescription: DESCRIPTIONS[eventType],
    ...(Object.keys(text.context).length > 0 ? { context: { ...text.context } } : {}),
    totalMessageParts: text.parts,
    totalMessagePrice: text.price,
    totalCarrierFee: 0,
  });
  if (!text.validNumber) return [event('TEXT_INVALID', SUCCESSFUL_AFTER_MS, true)];
  if (outcome === 'successful') return [event('TEXT_SUCCESSFUL', SUCCESSFUL_AFTER_MS, true)];
  if (outcome === 'delivered') {
    return [
      event('TEXT_SUCCESSFUL', SUCCESSFUL_AFTER_MS, false),
      event('TEXT_DELIVERED', DELIVERED_AFTER_MS, true),
    ];
  }
  return [event(outcome, SUCCESSFUL_AFTER_MS, true)];
}
