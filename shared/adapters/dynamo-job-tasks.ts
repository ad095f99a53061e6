import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  BatchWriteCommand,
  type BatchWriteCommandOutput,
  DeleteCommand,
  type DynamoDBDocumentClient,
  QueryCommand,
  type QueryCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import {
  CHUNK_ID_PREFIX,
  type Chunk,
  chunkMembers,
  isChunk,
  memberCountOf,
  memberTasks,
} from '#shared/jobs/chunks.ts';
import { keys, type Task } from '#shared/jobs/model.ts';
import type { TaskStore } from '#shared/jobs/ports.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { AdapterError } from './errors.ts';

export class UnprocessedWritesError extends AdapterError {}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Full-jitter backoff: 25 ms doubling, at most 2 s. */
function backoffMs(attempt: number): number {
  return Math.random() * Math.min(2_000, 25 * 2 ** attempt);
}

/** The task records of an item (without keys and index attributes): a chunk's, one per member. */
export function tasksOf(item: Record<string, unknown>): Task[] {
  const {
    pk: _pk,
    sk: _sk,
    openPk: _openPk,
    openSk: _openSk,
    recipientPk: _recipientPk,
    recipientSk: _recipientSk,
    memberCount: _count,
    ...task
  } = item;
  return isChunk(task) ? memberTasks(task as unknown as Chunk) : [task as unknown as Task];
}

/**
 * The item of a task: its keys, the record, its person's index entry (a person's history) and its
 * outstanding-index entry while it may start.
 */
export function taskItem(task: Task): Record<string, unknown> {
  return {
    ...keys.task(task.jobId, task.taskId),
    ...task,
    ...keys.recipientIndex(task),
    ...keys.outstandingIndex(task),
  };
}

/** The item of a chunk: its keys, the record, its member count (read with its index entry) and its index entry. */
export function chunkItem(chunk: Chunk): Record<string, unknown> {
  return {
    ...keys.task(chunk.jobId, chunk.taskId),
    ...chunk,
    memberCount: memberCountOf(chunk),
    ...keys.outstandingIndex(chunk),
  };
}

export interface DynamoTaskStoreOptions {
  /** BatchWriteItem calls in flight at once. */
  readonly concurrency?: number;
  /** Calls per batch before giving up on unprocessed items. */
  readonly maxAttempts?: number;
}

/**
 * The job's tasks and chunks in the tasks table: written 25 a batch, `concurrency` batches at once,
 * unprocessed items retried with backoff; read shard by shard.
 */
export class DynamoTaskStore implements TaskStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #concurrency: number;
  readonly #maxAttempts: number;

  constructor(doc: DynamoDBDocumentClient, tableName: string, options: DynamoTaskStoreOptions = {}) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#concurrency = options.concurrency ?? 8;
    this.#maxAttempts = options.maxAttempts ?? 12;
  }

  put(tasks: readonly Task[]): Promise<void> {
    return this.#writeAll(tasks.map(taskItem));
  }

  putChunks(chunks: readonly Chunk[]): Promise<void> {
    return this.#writeAll(chunks.map(chunkItem));
  }

  async storedRows(jobId: string, recipients: readonly string[]): Promise<Map<string, number>> {
    const rows = new Map<string, number>();
    let pending: Record<string, unknown>[] | undefined = recipients.map((r) =>
      keys.task(jobId, recipientTaskId(jobId, r)),
    );
    for (let attempt = 0; pending && pending.length > 0; attempt++) {
      if (attempt > 0) await sleep(backoffMs(attempt));
      const out: BatchGetCommandOutput = await this.#doc.send(
        new BatchGetCommand({
          RequestItems: {
            [this.#tableName]: {
              Keys: pending,
              ProjectionExpression: 'recipient, #row, reach',
              ExpressionAttributeNames: { '#row': 'row' },
              ConsistentRead: true,
            },
          },
        }),
      );
      // A fallback job's task moved on has another channel's recipient: its row's are in `reach`.
      for (const item of out.Responses?.[this.#tableName] ?? []) {
        rows.set(item.recipient as string, item.row as number);
        for (const id of Object.values((item.reach ?? {}) as Record<string, string>))
          rows.set(id, item.row as number);
      }
      pending = out.UnprocessedKeys?.[this.#tableName]?.Keys;
    }
    return rows;
  }

  async *shard(jobId: string, shard: number): AsyncIterable<Task> {
    let start: Record<string, unknown> | undefined;
    do {
      const out: QueryCommandOutput = await this.#doc.send(
        new QueryCommand({
          TableName: this.#tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': keys.taskShardPk(jobId, shard) },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? []) yield* tasksOf(item);
      start = out.LastEvaluatedKey;
    } while (start);
  }

  /** Every recipient held in the job's chunks, with its row (strongly consistent, the shards side by side). */
  async chunkedRows(jobId: string): Promise<Map<string, number>> {
    const rows = new Map<string, number>();
    await Promise.all(
      Array.from({ length: TASK_SHARDS }, async (_, shard) => {
        for await (const item of this.#chunksOfShard(jobId, shard)) {
          // A recipient in two chunks (a crashed run's page read again differently) is its first row's.
          for (const m of chunkMembers(item))
            if ((rows.get(m.recipient) ?? Number.POSITIVE_INFINITY) > m.row) rows.set(m.recipient, m.row);
        }
      }),
    );
    return rows;
  }

  /**
   * Deletes these chunks where they exist and are pending: a delete each (rare: a cut emptied when a
   * step is repeated), conditional, so one a cancel sweep ended meanwhile stays as the job's counts
   * have it.
   */
  async deleteChunks(jobId: string, taskIds: readonly string[]): Promise<void> {
    await Promise.all(
      taskIds.map(async (taskId) => {
        try {
          await this.#doc.send(
            new DeleteCommand({
              TableName: this.#tableName,
              Key: keys.task(jobId, taskId),
              ConditionExpression: '#state = :pending',
              ExpressionAttributeNames: { '#state': 'state' },
              ExpressionAttributeValues: { ':pending': 'pending' },
            }),
          );
        } catch (error) {
          if (!(error instanceof ConditionalCheckFailedException)) throw error;
        }
      }),
    );
  }

  /** The members and rows of each chunk of one shard, in pages. */
  async *#chunksOfShard(jobId: string, shard: number): AsyncIterable<Pick<Chunk, 'members' | 'rows'>> {
    let start: Record<string, unknown> | undefined;
    do {
      const out: QueryCommandOutput = await this.#doc.send(
        new QueryCommand({
          TableName: this.#tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :chunk)',
          ExpressionAttributeValues: {
            ':pk': keys.taskShardPk(jobId, shard),
            ':chunk': CHUNK_ID_PREFIX,
          },
          ProjectionExpression: 'members, #rows',
          ExpressionAttributeNames: { '#rows': 'rows' },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      yield* (out.Items ?? []) as Pick<Chunk, 'members' | 'rows'>[];
      start = out.LastEvaluatedKey;
    } while (start);
  }

  /** Writes items 25 a batch, `concurrency` batches at once. */
  async #writeAll(items: readonly Record<string, unknown>[]): Promise<void> {
    const batches: Record<string, unknown>[][] = [];
    for (let i = 0; i < items.length; i += 25) batches.push(items.slice(i, i + 25));
    let next = 0;
    const worker = async () => {
      while (next < batches.length) await this.#writeBatch(batches[next++]!);
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, batches.length) }, worker));
  }

  /** One batch, its unprocessed items written again with backoff, `maxAttempts` calls at most. */
  async #writeBatch(items: readonly Record<string, unknown>[]): Promise<void> {
    let requests = items.map((Item) => ({ PutRequest: { Item } }));
    for (let attempt = 0; requests.length > 0; attempt++) {
      if (attempt >= this.#maxAttempts) {
        throw new UnprocessedWritesError(
          `${requests.length} tasks still unprocessed after ${this.#maxAttempts} attempts`,
        );
      }
      if (attempt > 0) await sleep(backoffMs(attempt));
      const out: BatchWriteCommandOutput = await this.#doc.send(
        new BatchWriteCommand({ RequestItems: { [this.#tableName]: requests } }),
      );
      requests = (out.UnprocessedItems?.[this.#tableName] ?? []) as typeof requests;
    }
  }
}
