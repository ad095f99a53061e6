/**
 * A lookup of many recipients in a per-client partition (opt-outs, suppressions): most clients'
 * partitions hold a few hundred items or none, and one Query of the whole partition costs a
 * fraction of the BatchGetItems for a page of 500 recipients (a read unit or less for an empty one,
 * against 250: AWS charges every key that finds nothing; and one round trip against five). A
 * partition found bigger than `maxItems` is
 * looked up key by key for a while before it is tried whole again.
 */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';

export interface SmallPartitionOptions {
  /** A lookup of more keys than this tries the whole partition first. Default 50. */
  readonly readAbove?: number;
  /** Largest partition read whole. Default 1,000. */
  readonly maxItems?: number;
  /** How long a partition, once found too big, is looked up key by key. Default 10 min. */
  readonly bigMemoryMs?: number;
  readonly now?: () => number;
}

export class SmallPartitions {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #readAbove: number;
  readonly #maxItems: number;
  readonly #bigMemoryMs: number;
  readonly #now: () => number;
  /** Partitions too big to read whole, and when that was seen. */
  readonly #big = new Map<string, number>();

  constructor(doc: DynamoDBDocumentClient, tableName: string, options: SmallPartitionOptions = {}) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#readAbove = options.readAbove ?? 50;
    this.#maxItems = options.maxItems ?? 1_000;
    this.#bigMemoryMs = options.bigMemoryMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Every item of partition `pk` (eventually consistent, as the BatchGetItems it replaces), when a
   * lookup of `keys` keys should try it and the partition holds at most `maxItems`; else undefined.
   */
  async whole(pk: string, keys: number, projection?: string): Promise<Record<string, unknown>[] | undefined> {
    if (keys <= this.#readAbove) return undefined;
    const seen = this.#big.get(pk);
    if (seen !== undefined && this.#now() - seen < this.#bigMemoryMs) return undefined;
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': pk },
        ...(projection ? { ProjectionExpression: projection } : {}),
        Limit: this.#maxItems,
      }),
    );
    if (out.LastEvaluatedKey) {
      this.#big.set(pk, this.#now());
      return undefined;
    }
    this.#big.delete(pk);
    return out.Items ?? [];
  }
}
