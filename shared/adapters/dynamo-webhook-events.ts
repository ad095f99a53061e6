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
export function makeDynamoProcessedEventStore(
  doc: DynamoDBDocumentClient,
  tableName: string,
): ProcessedEventStore {
  const key = (eventId: string) => ({ pk: `EVENT#${eventId}` });
  return {
    async claim(eventId, now) {
      try {
        await doc.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...key(eventId),
              eventId,
              state: 'processing',
              firstAttemptAt: now,
              replyAttempted: false,
              expiresAt: Math.floor(now / 1000) + PROCESSED_EVENT_TTL_SECONDS,
            },
            ConditionExpression: 'attribute_not_exists(pk)',
          }),
        );
        return { eventId, state: 'processing', firstAttemptAt: now, replyAttempted: false };
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
      const out = await doc.send(
        new GetCommand({ TableName: tableName, Key: key(eventId), ConsistentRead: true }),
      );
      const item = out.Item!;
      return {
        eventId,
        state: item.state,
        firstAttemptAt: item.firstAttemptAt,
        replyAttempted: item.replyAttempted === true,
        ...(item.outcome ? { outcome: item.outcome } : {}),
        ...(item.reason ? { reason: item.reason } : {}),
      } satisfies ProcessedEventRecord;
    },
    async markReplyAttempted(eventId) {
      try {
        await doc.send(
          new UpdateCommand({
            TableName: tableName,
            Key: key(eventId),
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
    },
    async finish(eventId, state, outcome, reason) {
      await doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key: key(eventId),
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
    },
  };
}
