/** The ports of outcome webhooks: where a client's target is read, where deliveries are queued. */
import type { OutcomeEvent } from './events.ts';

/** Where a client's events are POSTed, and the secret they are signed with. */
export interface OutcomeTarget {
  readonly url: string;
  readonly secret: string;
}

/** One queued delivery: up to {@link MAX_EVENTS_PER_DELIVERY} events of one client. */
export interface OutcomeDelivery {
  readonly clientId: string;
  readonly events: readonly OutcomeEvent[];
}

/** Events per delivery (one POST): at ~500 bytes each, far below SQS's 256 KiB message. */
export const MAX_EVENTS_PER_DELIVERY = 50;

/** Which clients have a webhook configured (the producer asks, so the others cost nothing more). */
export interface OutcomeWebhookDirectory {
  hasWebhook(clientId: string): Promise<boolean>;
}

/** A client's target, read at delivery time (a changed URL or secret applies to what is queued). */
export interface OutcomeTargets {
  targetOf(clientId: string): Promise<OutcomeTarget | undefined>;
}

export interface OutcomeDeliveryQueue {
  /** Queues deliveries (batched as the queue allows); throws when any could not be queued. */
  send(deliveries: readonly OutcomeDelivery[]): Promise<void>;
}

/** The answer of a POST: a status, or a failure to get one (refused, reset, timed out). */
export type PostResult = { readonly status: number } | { readonly error: string };

export interface OutcomeHttp {
  post(url: string, body: string, headers: Readonly<Record<string, string>>): Promise<PostResult>;
}

/** The client's outcome webhook secret, written by the client API and never read back by it. */
export interface OutcomeSecretWriter {
  put(clientId: string, secret: string, now: number): Promise<void>;
}
