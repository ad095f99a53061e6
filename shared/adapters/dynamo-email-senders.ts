/**
 * Who sends email in the deployment (`shared/email/send-rate-share.ts`), in the tasks table: one
 * item per sending broker under one partition, `until` in ms, lapsing after a day by the table's
 * TTL (`expiresAt`, seconds) so brokers long gone leave nothing behind. No item is a task: the
 * table's stream filters pass only task state changes.
 */
import { type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { EmailSenders } from '#shared/email/send-rate-share.ts';

export const EMAIL_SENDERS_PK = 'EMAIL_SENDERS';
const KEEP_S = 86_400;

interface SenderItem {
  readonly pk: typeof EMAIL_SENDERS_PK;
  readonly sk: string;
  readonly until: number;
  readonly expiresAt: number;
}

export class DynamoEmailSenders implements EmailSenders {
  readonly #doc: DynamoDBDocumentClient;
  readonly #table: string;

  constructor(doc: DynamoDBDocumentClient, tasksTable: string) {
    this.#doc = doc;
    this.#table = tasksTable;
  }

  async announce(brokerId: string, until: number): Promise<void> {
    const item: SenderItem = {
      pk: EMAIL_SENDERS_PK,
      sk: brokerId,
      until,
      expiresAt: Math.floor(until / 1000) + KEEP_S,
    };
    await this.#doc.send(new PutCommand({ TableName: this.#table, Item: item }));
  }

  async others(brokerId: string, now: number): Promise<number> {
    let count = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const out = await this.#doc.send(
        new QueryCommand({
          TableName: this.#table,
          KeyConditionExpression: 'pk = :pk',
          // A filter may not name a key attribute: this broker's own entry is left out below.
          FilterExpression: '#until > :now',
          ExpressionAttributeNames: { '#until': 'until' },
          ExpressionAttributeValues: { ':pk': EMAIL_SENDERS_PK, ':now': now },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      count += (out.Items ?? []).filter((item) => item.sk !== brokerId).length;
      start = out.LastEvaluatedKey;
    } while (start);
    return count;
  }
}
