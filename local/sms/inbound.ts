/**
 * Two-way SMS, as an origination number with a two-way channel hands a customer's text to its SNS
 * topic: the documented payload ("Example of a two-way SMS message payload for Amazon SNS topics",
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/two-way-sms-payload.html —
 * `originationNumber` the customer's, `destinationNumber` ours, `messageKeyword` the registered
 * keyword the text matched, `messageBody`, `inboundMessageId`, `previousPublishedMessageId` the last
 * text sent from our number to theirs), published at least once (`../event-delivery.ts`, with the
 * stand-in's faults: lost, duplicated, delayed) to `deliver`, what an SQS subscription with raw
 * message delivery passes on.
 *
 * A text whose first word is one of the service's required opt-out keywords puts the sender on the
 * number's opt-out list, as the service does by itself ("Required opt-out keywords",
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/keywords-required.html); an opt-in keyword
 * (UNSTOP, START) takes it off. Keywords the account registers itself are not reproduced.
 */
import { randomUUID } from 'node:crypto';
import { OPT_IN_KEYWORDS, OPT_OUT_KEYWORDS } from '#shared/sms/inbound.ts';
import { EventDeliverer, type EventDelivererOptions, type PublishedDelivery } from '../event-delivery.ts';
import type { SesFaults } from '../ses/faults.ts';
import type { OriginationIdentity, SmsAccount } from './account.ts';
import type { SentText } from './operations.ts';

/** The two-way payload, as the number's SNS topic receives it. */
export interface InboundTextPayload {
  readonly originationNumber: string;
  readonly destinationNumber: string;
  readonly messageKeyword: string;
  readonly messageBody: string;
  readonly inboundMessageId: string;
  readonly previousPublishedMessageId: string;
}

export type PublishedInboundText = PublishedDelivery<InboundTextPayload>;
type InboundRecord = { -readonly [K in keyof PublishedInboundText]: PublishedInboundText[K] };

export interface TwoWayParts {
  readonly account: SmsAccount;
  readonly faults: SesFaults;
  /** The texts sent so far (for `previousPublishedMessageId`). */
  readonly sent: () => readonly SentText[];
}

export class TwoWayMessages {
  readonly #parts: TwoWayParts;
  readonly #deliverer: EventDeliverer<InboundTextPayload>;
  readonly #log: InboundRecord[] = [];

  constructor(parts: TwoWayParts, delivery: Omit<EventDelivererOptions<InboundTextPayload>, 'faults'>) {
    this.#parts = parts;
    this.#deliverer = new EventDeliverer({ ...delivery, faults: parts.faults });
  }

  /**
   * `from` texts `body` to `to`, a number of the account: its opt-out list changes as the service
   * changes it, and the payload is published. Throws for a number the account does not own.
   */
  receive(from: string, to: string, body: string): InboundTextPayload {
    const identity = this.#parts.account.identity(to);
    if (identity?.kind !== 'phone-number') throw new Error(`${to} is no phone number of the account`);
    const keyword = this.#keyword(identity, from, body);
    const previous = this.#parts
      .sent()
      .filter((text) => text.origin === to && text.destination === from)
      .at(-1);
    const payload: InboundTextPayload = {
      originationNumber: from,
      destinationNumber: to,
      messageKeyword: keyword,
      messageBody: body,
      inboundMessageId: randomUUID(),
      previousPublishedMessageId: previous?.messageId ?? '',
    };
    if (this.#deliverer.stopped) return payload;
    const reordered = false;
    const record: InboundRecord = { event: payload, fate: 'pending', attempts: 0, deliveries: 0, reordered };
    this.#log.push(record);
    this.#deliverer.deliver([record], reordered);
    return payload;
  }

  /** Every inbound text published so far, with its fate. */
  log(): readonly PublishedInboundText[] {
    return this.#log.map((record) => ({ ...record }));
  }

  idle(): Promise<void> {
    return this.#deliverer.idle();
  }

  stop(): void {
    this.#deliverer.stop();
  }

  /** The keyword the text matched ('' for none), the opt-out list changed as the service would. */
  #keyword(identity: OriginationIdentity, from: string, body: string): string {
    const first = (body.trim().split(/\s+/)[0] ?? '').toUpperCase();
    const account = this.#parts.account;
    if (OPT_OUT_KEYWORDS.has(first)) {
      account.optOut(identity.optOutList, from, true);
      return first;
    }
    if (OPT_IN_KEYWORDS.has(first)) {
      account.optIn(identity.optOutList, from);
      return first;
    }
    return '';
  }
}
