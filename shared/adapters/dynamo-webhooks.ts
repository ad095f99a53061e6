/**
 * DynamoDB adapters for the webhook side: channels (their own KMS-encrypted table), processed
 * webhook events (idempotency records with a TTL) and opt-outs (the control table).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { Channel } from '#shared/channels/channel.ts';
import {
  type ChannelStore,
  type OptOutStore,
  PROCESSED_EVENT_TTL_MS,
  type ProcessedEventRecord,
  type ProcessedEventStore,
} from '#shared/webhooks/ports.ts';

/** How long an event is remembered: well past LINE's redelivery and SQS's retention (4 days). */
export const PROCESSED_EVENT_TTL_SECONDS = PROCESSED_EVENT_TTL_MS / 1000;

export function makeDynamoChannelStore(doc: DynamoDBDocumentClient, tableName: string): ChannelStore {
  return {
    async get(channelId) {
      const out = await doc.send(
        new GetCommand({ TableName: tableName, Key: { channelId }, ConsistentRead: false }),
      );
      return out.Item as Channel | undefined;
    },
    async put(channel) {
      await doc.send(new PutCommand({ TableName: tableName, Item: channel }));
    },
  };
}

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

/** BatchGetItem calls of one opt-out lookup in flight at once. */
const OPT_OUT_READS_AT_ONCE = 5;

export interface OptOutStoreOptions {
  /**
   * A lookup of more recipients than this first reads the client's whole opt-out partition in one
   * Query of up to `smallPartitionItems` records: most clients have a few hundred opt-outs, and one
   * Query of them costs a fraction of the BatchGetItems for a page of 500 recipients (and is one
   * round trip). Default 50.
   */
  readonly partitionReadAbove?: number;
  /** Largest opt-out partition read whole. Default 1,000. */
  readonly smallPartitionItems?: number;
  /** How long a client's partition, once found too big, is looked up key by key. Default 10 min. */
  readonly bigPartitionMemoryMs?: number;
  readonly now?: () => number;
}

/** Opt-outs in the control table (pk=OPTOUT#{clientId}, sk=recipient), the latest event per recipient. */
export class DynamoOptOutStore implements OptOutStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #partitionReadAbove: number;
  readonly #smallPartitionItems: number;
  readonly #bigPartitionMemoryMs: number;
  readonly #now: () => number;
  /** Clients whose opt-out partition was too big to read whole, and when that was seen. */
  readonly #bigPartitions = new Map<string, number>();

  constructor(doc: DynamoDBDocumentClient, tableName: string, options: OptOutStoreOptions = {}) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#partitionReadAbove = options.partitionReadAbove ?? 50;
    this.#smallPartitionItems = options.smallPartitionItems ?? 1_000;
    this.#bigPartitionMemoryMs = options.bigPartitionMemoryMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  async record(
    clientId: string,
    recipient: string,
    optedOut: boolean,
    eventTimestamp: number,
  ): Promise<boolean> {
    try {
      await this.#doc.send(
        new PutCommand({
          TableName: this.#tableName,
          Item: { pk: optOutPk(clientId), sk: recipient, optedOut, eventTimestamp },
          // `<=`: of two events with the same timestamp, the later processed (FIFO) wins.
          ConditionExpression: 'attribute_not_exists(eventTimestamp) OR eventTimestamp <= :ts',
          ExpressionAttributeValues: { ':ts': eventTimestamp },
        }),
      );
      return true;
    } catch (error) {
      // A later follow/unfollow of this recipient is already recorded: this one is stale.
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      return false;
    }
  }

  async optedOut(clientId: string, recipients: readonly string[]): Promise<Set<string>> {
    const unique = [...new Set(recipients)];
    if (unique.length > this.#partitionReadAbove) {
      const all = await this.#wholePartition(clientId);
      if (all) return new Set(unique.filter((r) => all.has(r)));
    }
    const result = new Set<string>();
    const chunks: string[][] = [];
    for (let i = 0; i < unique.length; i += 100) chunks.push(unique.slice(i, i + 100));
    // A few BatchGetItem calls at once: a page of 500 recipients is one round trip, not five.
    for (let i = 0; i < chunks.length; i += OPT_OUT_READS_AT_ONCE)
      await Promise.all(
        chunks.slice(i, i + OPT_OUT_READS_AT_ONCE).map((chunk) => this.#readChunk(clientId, chunk, result)),
      );
    return result;
  }

  /** The client's opted-out recipients, if its partition is small enough to read in one Query. */
  async #wholePartition(clientId: string): Promise<Set<string> | undefined> {
    const seen = this.#bigPartitions.get(clientId);
    if (seen !== undefined && this.#now() - seen < this.#bigPartitionMemoryMs) return undefined;
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': optOutPk(clientId) },
        ProjectionExpression: 'sk, optedOut',
        Limit: this.#smallPartitionItems,
      }),
    );
    if (out.LastEvaluatedKey) {
      this.#bigPartitions.set(clientId, this.#now());
      return undefined;
    }
    this.#bigPartitions.delete(clientId);
    return new Set((out.Items ?? []).filter((item) => item.optedOut === true).map((item) => String(item.sk)));
  }

  /** Adds the opted-out recipients of `chunk` (at most 100) to `result`, retrying unprocessed keys. */
  async #readChunk(clientId: string, chunk: readonly string[], result: Set<string>): Promise<void> {
    let keys: Record<string, unknown>[] | undefined = chunk.map((sk) => ({ pk: optOutPk(clientId), sk }));
    for (let attempt = 0; keys && keys.length > 0; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** attempt)));
      const out: BatchGetCommandOutput = await this.#doc.send(
        new BatchGetCommand({
          RequestItems: { [this.#tableName]: { Keys: keys, ProjectionExpression: 'sk, optedOut' } },
        }),
      );
      for (const item of out.Responses?.[this.#tableName] ?? [])
        if (item.optedOut === true) result.add(item.sk);
      keys = out.UnprocessedKeys?.[this.#tableName]?.Keys;
    }
  }
}

function optOutPk(clientId: string): string {
  return `OPTOUT#${clientId}`;
}

export function makeDynamoOptOutStore(
  doc: DynamoDBDocumentClient,
  tableName: string,
  options: OptOutStoreOptions = {},
): OptOutStore {
  return new DynamoOptOutStore(doc, tableName, options);
}
