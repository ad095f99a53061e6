/**
 * DynamoDB adapter of the processed-event store: one idempotency record per `webhookEventId`,
 * with a TTL, so a redelivered or redriven webhook event is acted on once.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import {
  PROCESSED_EVENT_TTL_MS,
  type ProcessedEventRecord,
  type ProcessedEventStore,
} from '#shared/webhooks/ports.ts';
/** How long an event is remembered: well past LINE's redelivery and SQS's retention (4 days). */
export const PROCESSED_EVENT_TTL_SECONDS = PROCESSED_EVENT_TTL_MS / 1000;
/** Put-then-read rounds one claim tries before giving up. */
const CLAIM_ATTEMPTS = 5;

function recordOf(eventId: string, item: Record<string, unknown>): ProcessedEventRecord {
  return {
    eventId,
    state: item.state as ProcessedEventRecord['state'],
    firstAttemptAt: item.firstAttemptAt as number,
    replyAttempted: item.replyAttempted === true,
    ...(item.outcome ? { outcome: item.outcome as string } : {}),
    ...(item.reason ? { reason: item.reason as string } : {}),
  };
}

const keyOf = (eventId: string) => ({ pk: `EVENT#${eventId}` });

/** Processed webhook events, one idempotency record each, remembered for a TTL. */
export class DynamoProcessedEventStore implements ProcessedEventStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.#tableName = tableName;
  }

  async claim(eventId: string, now: number): Promise<ProcessedEventRecord> {
    // A failed condition means the record exists, so a consistent read finds it; DynamoDB Local
    // can answer the read before the winning write is visible, and an expired record can vanish
    // between the two calls: then the claim is simply tried again (still conditional).
    for (let attempt = 1; ; attempt++) {
      if (await this.#create(eventId, now)) {
        return { eventId, state: 'processing', firstAttemptAt: now, replyAttempted: false };
      }
      const out = await this.#doc.send(
        new GetCommand({ TableName: this.#tableName, Key: keyOf(eventId), ConsistentRead: true }),
      );
      if (out.Item) return recordOf(eventId, out.Item);
      if (attempt >= CLAIM_ATTEMPTS)
        throw new Error(`event ${eventId}: claim kept losing to a record it cannot read`);
    }
  }

  async markReplyAttempted(eventId: string): Promise<boolean> {
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: keyOf(eventId),
          UpdateExpression: 'SET replyAttempted = :t',
          ConditionExpression: 'attribute_exists(pk) AND replyAttempted = :f',
          ExpressionAttributeValues: { ':t': true, ':f': false },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  async finish(eventId: string, state: 'done' | 'failed', outcome: string, reason?: string): Promise<void> {
    await this.#doc.send(
      new UpdateCommand({
        TableName: this.#tableName,
        Key: keyOf(eventId),
        UpdateExpression:
          reason === undefined ? 'SET #s = :s, outcome = :o' : 'SET #s = :s, outcome = :o, reason = :r',
        ExpressionAttributeNames: { '#s': 'state' },
        ExpressionAttributeValues: {
          ':s': state,
          ':o': outcome,
          ...(reason === undefined ? {} : { ':r': reason }),
        },
      }),
    );
  }

  /** Writes the event's record in state `processing`; false when one exists already. */
  async #create(eventId: string, now: number): Promise<boolean> {
    try {
      await this.#doc.send(
        new PutCommand({
          TableName: this.#tableName,
          Item: {
            ...keyOf(eventId),
            eventId,
            state: 'processing',
            firstAttemptAt: now,
            replyAttempted: false,
            expiresAt: Math.floor(now / 1000) + PROCESSED_EVENT_TTL_SECONDS,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }
}
