/**
 * The part of a message transport that an AWS send API without an idempotency key shares, whatever
 * the channel (SES's `ses-transport.ts`, End User Messaging SMS's `sms-transport.ts`): it is not
 * idempotent, so an unanswered request is never resent blindly, only once more when the client
 * chose at-least-once; a 200 is the channel's acceptance, not delivery (its events say the rest);
 * and a failed request means what the service's own rules, then the generic ones, say
 * (`aws-send-failure.ts`).
 */
import type { SendUnit } from '#shared/campaign/send-queue.ts';
import type {
  MessageTransport,
  PreparedRequest,
  TransportLimits,
  TransportOutcome,
} from '#shared/campaign/transport.ts';
import { classifySendFailure, type ServiceFailureRules } from './aws-send-failure.ts';

/** What the subclass names: its channel, its limits, the client's delivery choice, its service's failures. */
export interface UnkeyedTransportShape {
  readonly channel: string;
  readonly limits: TransportLimits;
  /** The client's choice (`EmailSettings.delivery`, `SmsSettings.delivery`). */
  readonly delivery: 'at-most-once' | 'at-least-once' | undefined;
  readonly failures: ServiceFailureRules;
}

export abstract class UnkeyedAwsTransport<T extends object, R> implements MessageTransport<T, R> {
  readonly channel: string;
  readonly idempotent = false;
  /** The client chose at-least-once: a message left in doubt is sent once more. */
  readonly resendsInDoubt: boolean;
  readonly acceptedAs = 'accepted';
  readonly limits: TransportLimits;
  readonly #failures: ServiceFailureRules;

  constructor(shape: UnkeyedTransportShape) {
    this.channel = shape.channel;
    this.resendsInDoubt = shape.delivery === 'at-least-once';
    this.limits = shape.limits;
    this.#failures = shape.failures;
  }

  abstract groupOf(template: T): string | undefined;
  abstract prepare(unit: SendUnit<T>): PreparedRequest<R>;

  /** The request's answer, or what its failure means (never throws). */
  async send(prepared: PreparedRequest<R>): Promise<TransportOutcome> {
    try {
      return await this.request(prepared.request);
    } catch (error) {
      return classifySendFailure(error, this.#failures);
    }
  }

  /** Makes the request; throws the SDK's error when it fails. */
  protected abstract request(request: R): Promise<TransportOutcome>;
}
