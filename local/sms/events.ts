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
 * Delivery is at least once: a `deliver` that rejects is tried again with exponential backoff, and
 * the faults (`../ses/faults.ts`, shared with the SES stand-in) lose, duplicate, delay and reorder
 * events. Without faults a text's events arrive in the order they happened.
 */
import type { TimerHandle, Timers } from '#shared/pacing/clock.ts';
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
export interface PublishedSmsEvent {
  readonly event: SmsEvent;
  readonly configurationSet: string;
  readonly fate: 'pending' | 'delivered' | 'lost' | 'undeliverable';
  /** Calls of `deliver`, retries and duplicates included. */
  readonly attempts: number;
  /** Calls that resolved: 2 when the event was duplicated. */
  readonly deliveries: number;
  readonly reordered: boolean;
}

type EventRecord = { -readonly [K in keyof PublishedSmsEvent]: PublishedSmsEvent[K] };

export interface SmsEventRetry {
  /** Calls of `deliver` per event copy before it is given up (default 8). */
  readonly attempts?: number;
  /** Ms before the first retry, doubling after each (default 50, at most `maxDelayMs`, default 2 000). */
  readonly firstDelayMs?: number;
  readonly maxDelayMs?: number;
}

export interface SmsPublisherOptions {
  readonly deliver: (event: SmsEvent) => Promise<void>;
  readonly faults: SesFaults;
  readonly timers: Timers;
  readonly retry?: SmsEventRetry;
}

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
  readonly #options: SmsPublisherOptions;
  readonly #log: EventRecord[] = [];
  readonly #sleeping = new Map<TimerHandle, () => void>();
  #running = 0;
  #waiters: (() => void)[] = [];
  #stopped = false;

  constructor(options: SmsPublisherOptions) {
    this.#options = options;
  }

  /** Every event published so far, with its fate. */
  log(): readonly PublishedSmsEvent[] {
    return this.#log.map((record) => ({ ...record }));
  }

  /** Resolves once no event waits for a delivery, a retry or a delay. */
  idle(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
      this.#checkIdle();
    });
  }

  /** Publishes `text`'s events (its `outcome`'s) that the configuration set's destination matches. */
  publish(text: SentText, outcome: SmsOutcome, matching: ReadonlySet<MatchingEventType>): void {
    if (text.configurationSet === undefined || this.#stopped) return;
    const events = eventsOf(text, outcome).filter(
      (event) => matching.has('ALL') || matching.has('TEXT_ALL') || matching.has(event.eventType),
    );
    if (events.length === 0) return;
    const { faults } = this.#options;
    const reordered = faults.drawReorder();
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
    if (reordered) {
      for (const record of faults.shuffle(records)) this.#track(this.#dispatch(record, faults.delayMs(true)));
    } else {
      this.#track(
        (async () => {
          for (const record of records) await this.#dispatch(record, faults.delayMs(false));
        })(),
      );
    }
  }

  /** Stops every wait and delivery still to come. */
  stop(): void {
    this.#stopped = true;
    for (const [handle, wake] of this.#sleeping) {
      this.#options.timers.clearTimeout(handle);
      wake();
    }
    this.#sleeping.clear();
  }

  /** One event: maybe lost, maybe twice, each copy tried until `deliver` resolves or attempts run out. */
  async #dispatch(record: EventRecord, delayMs: number): Promise<void> {
    const { faults } = this.#options;
    if (faults.drawEvent('lost')) {
      record.fate = 'lost';
      return;
    }
    const copies = faults.drawEvent('duplicated') ? 2 : 1;
    if (delayMs > 0) await this.#sleep(delayMs);
    for (let copy = 0; copy < copies; copy++) await this.#attempt(record);
    if (record.fate === 'pending') record.fate = 'undeliverable';
  }

  async #attempt(record: EventRecord): Promise<void> {
    const { attempts = 8, firstDelayMs = 50, maxDelayMs = 2_000 } = this.#options.retry ?? {};
    for (let n = 0; n < attempts && !this.#stopped; n++) {
      if (n > 0) await this.#sleep(Math.min(maxDelayMs, firstDelayMs * 2 ** (n - 1)));
      if (this.#stopped) return;
      record.attempts += 1;
      try {
        await this.#options.deliver(structuredClone(record.event));
        record.deliveries += 1;
        record.fate = 'delivered';
        return;
      } catch {
        // tried again after the backoff, as the destination's consumer would be
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const handle = this.#options.timers.setTimeout(() => {
        this.#sleeping.delete(handle);
        resolve();
      }, ms);
      this.#sleeping.set(handle, resolve);
    });
  }

  #track(work: Promise<void>): void {
    this.#running += 1;
    void work.finally(() => {
      this.#running -= 1;
      this.#checkIdle();
    });
  }

  #checkIdle(): void {
    if (this.#running > 0) return;
    const ready = this.#waiters;
    this.#waiters = [];
    for (const resolve of ready) resolve();
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
