/**
 * DynamoDB adapter of the {@link OptOutStore}: opt-outs in the control table (the latest follow or
 * unfollow per recipient), read by the webhook processor, the ingest, the message claims and the
 * operator API's lookup.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  type DynamoDBDocumentClient,
  PutCommand,
  QueryCommand,
} from '@aws-sdk/lib-dynamodb';
import { ValidationError } from '#shared/jobs/errors.ts';
import type { OptOutReader, OptOutRecord } from '#shared/jobs/ports.ts';
import type { OptOutStore } from '#shared/webhooks/ports.ts';
import { type SmallPartitionOptions, SmallPartitions } from './small-partitions.ts';

/** BatchGetItem calls of one opt-out lookup in flight at once. */
const OPT_OUT_READS_AT_ONCE = 5;

/**
 * How a lookup of many recipients reads the client's opt-out partition: whole, in one Query, when
 * it is small (`small-partitions.ts`).
 */
export type OptOutStoreOptions = SmallPartitionOptions;

/** Opt-outs in the control table (pk=OPTOUT#{clientId}, sk=recipient), the latest event per recipient. */
export class DynamoOptOutStore implements OptOutStore, OptOutReader {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #partitions: SmallPartitions;

  constructor(doc: DynamoDBDocumentClient, tableName: string, options: OptOutStoreOptions = {}) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#partitions = new SmallPartitions(doc, tableName, options);
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
    const all = await this.#partitions.whole(optOutPk(clientId), unique.length, 'sk, optedOut');
    if (all) {
      const optedOut = new Set(all.filter((item) => item.optedOut === true).map((item) => String(item.sk)));
      return new Set(unique.filter((r) => optedOut.has(r)));
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

  /** Adds the opted-out recipients of `chunk` (at most 100) to `result`. */
  async #readChunk(clientId: string, chunk: readonly string[], result: Set<string>): Promise<void> {
    for (const item of await this.#getItems(clientId, chunk, 'sk, optedOut'))
      if (item.optedOut === true) result.add(String(item.sk));
  }

  /** The items of `chunk` (at most 100 recipients) that exist, retrying unprocessed keys. */
  async #getItems(
    clientId: string,
    chunk: readonly string[],
    projection: string,
  ): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    let keys: Record<string, unknown>[] | undefined = chunk.map((sk) => ({ pk: optOutPk(clientId), sk }));
    for (let attempt = 0; keys && keys.length > 0; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** attempt)));
      const out: BatchGetCommandOutput = await this.#doc.send(
        new BatchGetCommand({
          RequestItems: { [this.#tableName]: { Keys: keys, ProjectionExpression: projection } },
        }),
      );
      items.push(...(out.Responses?.[this.#tableName] ?? []));
      keys = out.UnprocessedKeys?.[this.#tableName]?.Keys;
    }
    return items;
  }

  async records(clientId: string, recipients: readonly string[]): Promise<readonly OptOutRecord[]> {
    const unique = [...new Set(recipients)];
    if (unique.length > 100) throw new RangeError('at most 100 recipients at once');
    if (unique.length === 0) return [];
    const items = await this.#getItems(clientId, unique, 'sk, optedOut, eventTimestamp');
    return items.map(toRecord);
  }

  /**
   * A page of opted-out recipients: a Query of the client's partition that keeps only opt-outs
   * (a follow that opted back in is kept as a record too), continued until the page is full or
   * {@link PAGE_QUERIES} Queries were read, so a partition of mostly opt-ins costs bounded reads.
   */
  async page(
    clientId: string,
    page: { readonly limit: number; readonly next?: string },
  ): Promise<{ readonly records: readonly OptOutRecord[]; readonly next?: string }> {
    const pk = optOutPk(clientId);
    const records: OptOutRecord[] = [];
    let start = page.next === undefined ? undefined : { pk, sk: decodePageToken(page.next) };
    for (let query = 0; query < PAGE_QUERIES && records.length < page.limit; query++) {
      const out = await this.#doc.send(
        new QueryCommand({
          TableName: this.#tableName,
          KeyConditionExpression: 'pk = :pk',
          FilterExpression: 'optedOut = :yes',
          ExpressionAttributeValues: { ':pk': pk, ':yes': true },
          ProjectionExpression: 'sk, optedOut, eventTimestamp',
          Limit: page.limit - records.length,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      records.push(...(out.Items ?? []).map(toRecord));
      start = out.LastEvaluatedKey as { pk: string; sk: string } | undefined;
      if (!start) break;
    }
    return { records, ...(start ? { next: Buffer.from(start.sk, 'utf8').toString('base64url') } : {}) };
  }
}

/** Queries one page of opt-outs may take before it answers with what it found. */
const PAGE_QUERIES = 10;

function toRecord(item: Record<string, unknown>): OptOutRecord {
  return {
    recipient: String(item.sk),
    optedOut: item.optedOut === true,
    eventAt: Number(item.eventTimestamp),
  };
}

function decodePageToken(token: string): string {
  const sk = Buffer.from(token, 'base64url').toString('utf8');
  if (sk === '' || Buffer.from(sk, 'utf8').toString('base64url') !== token)
    throw new ValidationError('invalid opt-out query', { next: ['is not a token this API returned'] });
  return sk;
}

function optOutPk(clientId: string): string {
  return `OPTOUT#${clientId}`;
}
