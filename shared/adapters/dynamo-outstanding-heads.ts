/**
 * The head of a client's `outstanding` index, for an operator asking why a job starts nothing
 * (`shared/jobs/waiting.ts`): the first few waiting tasks of each of the client's shards (one page
 * each, {@link TASK_SHARDS} Queries in parallel, never a job's whole task list), and of those the
 * first of the job asked about. A job whose first task is further back than every shard's head is
 * not found: its `waiting` then says nothing rather than a guess.
 */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys, OUTSTANDING_INDEX } from '#shared/jobs/model.ts';
import type { NextTaskOfJob, OutstandingHeadReader } from '#shared/jobs/ports.ts';
import { TASK_SHARDS } from '#shared/resources.ts';

/** Waiting tasks read from the head of each shard. */
const HEAD_PER_SHARD = 10;

export class DynamoOutstandingHeads implements OutstandingHeadReader {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tasksTable: string;

  constructor(doc: DynamoDBDocumentClient, tasksTable: string) {
    this.#doc = doc;
    this.#tasksTable = tasksTable;
  }

  async nextOf(clientId: string, jobId: string): Promise<NextTaskOfJob | undefined> {
    const heads = await Promise.all(
      Array.from({ length: TASK_SHARDS }, (_, shard) => this.#head(clientId, shard)),
    );
    let next: NextTaskOfJob | undefined;
    for (const item of heads.flat()) {
      if (item.jobId !== jobId || typeof item.readyAt !== 'number') continue;
      if (next && next.readyAt <= item.readyAt) continue;
      next = {
        readyAt: item.readyAt,
        ...(typeof item.reason === 'string' ? { reason: item.reason } : {}),
        ...(typeof item.timeZone === 'string' ? { timeZone: item.timeZone } : {}),
      };
    }
    return next;
  }

  async #head(clientId: string, shard: number): Promise<Record<string, unknown>[]> {
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tasksTable,
        IndexName: OUTSTANDING_INDEX,
        KeyConditionExpression: 'openPk = :pk',
        ExpressionAttributeValues: { ':pk': keys.openShardPk(clientId, shard) },
        ProjectionExpression: '#job, #ready, #reason, #zone',
        ExpressionAttributeNames: {
          '#job': 'jobId',
          '#ready': 'readyAt',
          '#reason': 'reason',
          '#zone': 'timeZone',
        },
        Limit: HEAD_PER_SHARD,
      }),
    );
    return out.Items ?? [];
  }
}
