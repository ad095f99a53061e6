/**
 * SES's events handled in a test as the deployed stack handles them, without the queue's minutes:
 * the email-events use case (`shared/email/email-outcomes.ts`) over the real DynamoDB stores, and a
 * stand-in for the `ses-events` queue's give-back — an event the use case throws `ReopenLater` for
 * (its bounced task's end not written or counted yet) is handled again later, on its own, holding
 * up no event after it, as a message given back to a queue holds up no other.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoDeliveryOutcomeStore } from '#shared/adapters/dynamo-delivery-outcomes.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { DynamoTaskReopen } from '#shared/adapters/dynamo-task-reopen.ts';
import { makeRecordEmailEvent } from '#shared/email/email-outcomes.ts';
import { EMAIL_DELIVERY_RANK } from '#shared/email/ses-events.ts';
import { makeReopenUnreached, ReopenLater } from '#shared/jobs/reopen.ts';

/** How long a given-back event waits before it is handled again, ms, and how many times at most. */
const GIVE_BACK_MS = 500;
const MAX_TRIES = 120;

export class EmailEventsHandled {
  readonly #record: (event: unknown) => Promise<unknown>;
  readonly #givenBack = new Set<Promise<void>>();
  /** Events still given back after {@link MAX_TRIES} (a test asserts there are none). */
  readonly neverHandled: unknown[] = [];

  constructor(doc: DynamoDBDocumentClient, tables: { controlTable: string; tasksTable: string }) {
    this.#record = makeRecordEmailEvent({
      outcomes: new DynamoDeliveryOutcomeStore(doc, tables.tasksTable, EMAIL_DELIVERY_RANK, 'email'),
      suppressions: new DynamoSuppressionStore(doc, tables.controlTable),
      reopen: makeReopenUnreached(new DynamoTaskReopen(doc, tables), { now: () => Date.now() }),
    });
  }

  /** The SES stand-in's `deliver`: handles one event; resolves once handled or given back. */
  readonly deliver = (event: unknown): Promise<void> => this.#handle(event, MAX_TRIES);

  /** Resolves once every event published so far by `ses` was handled, those given back included. */
  async settled(ses: { idle(): Promise<void> }): Promise<void> {
    await ses.idle();
    while (this.#givenBack.size > 0) {
      await Promise.all([...this.#givenBack]);
      await ses.idle();
    }
  }

  async #handle(event: unknown, triesLeft: number): Promise<void> {
    try {
      await this.#record(event);
    } catch (error) {
      if (!(error instanceof ReopenLater) || triesLeft === 0) throw error;
      const again = new Promise((resolve) => setTimeout(resolve, GIVE_BACK_MS))
        .then(() => this.#handle(event, triesLeft - 1))
        .catch((failure: unknown) => void this.neverHandled.push(failure));
      this.#givenBack.add(again);
      void again.finally(() => this.#givenBack.delete(again));
    }
  }
}
