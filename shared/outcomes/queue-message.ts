/**
 * The outcome-webhooks queue's message: one delivery (one POST of up to 50 events of a client),
 * written by the outcome producer's queue (`shared/adapters/sqs-outcome-deliveries.ts`) and read
 * by the outcome webhook worker (`lambdas/outcome-webhooks/handler.ts`). Both sides use this
 * module, so the contract has one home: the body is the delivery as JSON.
 */
import type { OutcomeDelivery } from './ports.ts';

/** The body of the queue message that carries `delivery`. */
export function encodeOutcomeDelivery(delivery: OutcomeDelivery): string {
  return JSON.stringify(delivery);
}

/** A queue message's body as a delivery; undefined for what the producer never writes. */
export function parseOutcomeDelivery(body: string): OutcomeDelivery | undefined {
  try {
    const value = JSON.parse(body) as OutcomeDelivery;
    return typeof value?.clientId === 'string' && Array.isArray(value.events) ? value : undefined;
  } catch {
    return undefined;
  }
}
