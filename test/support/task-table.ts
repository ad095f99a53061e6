/** Reading a job's tasks straight from the tasks table, as integration tests check what was written. */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys, OUTSTANDING_INDEX, type Task } from '#shared/jobs/model.ts';
import { TASK_SHARDS } from '#shared/resources.ts';

/** Every task of `jobId` (every shard, every page, consistent reads), sorted by row. */
export async function readTasks<T extends Task = Task>(
  doc: DynamoDBDocumentClient,
  tasksTable: string,
  jobId: string,
): Promise<T[]> {
  const all: T[] = [];
  for (let shard = 0; shard < TASK_SHARDS; shard++) {
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await doc.send(
        new QueryCommand({
          TableName: tasksTable,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': keys.taskShardPk(jobId, shard) },
          ConsistentRead: true,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      all.push(...((out.Items ?? []) as T[]));
      startKey = out.LastEvaluatedKey;
    } while (startKey);
  }
  return all.sort((a, b) => a.row - b.row);
}

/** The job's entries in its client's `outstanding` index, every shard. */
export async function readOutstanding(
  doc: DynamoDBDocumentClient,
  tasksTable: string,
  clientId: string,
  jobId: string,
): Promise<Record<string, unknown>[]> {
  const found: Record<string, unknown>[] = [];
  for (let shard = 0; shard < TASK_SHARDS; shard++) {
    const out = await doc.send(
      new QueryCommand({
        TableName: tasksTable,
        IndexName: OUTSTANDING_INDEX,
        KeyConditionExpression: 'openPk = :pk',
        ExpressionAttributeValues: { ':pk': keys.openShardPk(clientId, shard) },
      }),
    );
    found.push(...(out.Items ?? []).filter((item) => item.jobId === jobId));
  }
  return found;
}
