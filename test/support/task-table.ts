/** Reading a job's tasks straight from the tasks table, as integration tests check what was written. */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys, OUTSTANDING_INDEX, type Task } from '#shared/jobs/model.ts';
import { FINAL_TASK_STATES } from '#shared/jobs/task-lifecycle.ts';
import { endedTaskExpiry, TASK_SHARDS } from '#shared/resources.ts';

/**
 * The retention invariant, checked on every read of a job's tasks: a task in a final state carries
 * the TTL of the write that ended it (`updatedAt` + the retention), a task still open carries none
 * (DynamoDB's TTL would delete work not done yet).
 */
function checkRetention(task: Task & { expiresAt?: number }): void {
  const ended = FINAL_TASK_STATES.includes(task.state);
  const expected = ended ? endedTaskExpiry(task.updatedAt) : undefined;
  if (task.expiresAt !== expected)
    throw new Error(
      `task ${task.taskId} (${task.state}) has expiresAt ${task.expiresAt}, expected ${expected}: ` +
        'every write that ends a task sets its TTL, and only those',
    );
}

/** Every task of `jobId` (every shard, every page, consistent reads), sorted by row; checks their TTL. */
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
  for (const task of all) checkRetention(task);
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
