/**
 * The tasks table as the re-time sweep sees it (`shared/jobs/retime.ts`): pages of a job shard's
 * waiting tasks, and the conditional move of one earlier (`advanceTask`).
 */
import { type DynamoDBDocumentClient, QueryCommand, type QueryCommandOutput } from '@aws-sdk/lib-dynamodb';
import { keys } from '#shared/jobs/model.ts';
import type { RetimedTask, TaskRetimer } from '#shared/jobs/retime.ts';
import { WAITING_STATES } from '#shared/jobs/task-lifecycle.ts';
import { advanceTask } from './dynamo-task-deferral.ts';
import { STATE_NAME, stateIn } from './task-state-conditions.ts';

const PAGE_ITEMS = 500;

export function makeDynamoTaskRetimer(
  doc: DynamoDBDocumentClient,
  tasksTable: string,
  options: { readonly pageItems?: number } = {},
): TaskRetimer {
  const pageItems = options.pageItems ?? PAGE_ITEMS;
  return {
    async retimePage(clientId, jobId, shard, cursor) {
      const pk = keys.taskShardPk(jobId, shard);
      const waiting = stateIn(WAITING_STATES);
      const out: QueryCommandOutput = await doc.send(
        new QueryCommand({
          TableName: tasksTable,
          KeyConditionExpression: 'pk = :pk',
          FilterExpression: waiting.condition,
          // `timeZone` is one of DynamoDB's reserved words.
          ExpressionAttributeNames: { ...STATE_NAME, '#timeZone': 'timeZone' },
          ExpressionAttributeValues: { ':pk': pk, ...waiting.values },
          ProjectionExpression: 'taskId, #state, readyAt, attempts, #timeZone, notBefore',
          Limit: pageItems,
          ...(cursor === undefined ? {} : { ExclusiveStartKey: { pk, sk: cursor } }),
        }),
      );
      const last = out.LastEvaluatedKey?.sk;
      const tasks = (out.Items ?? []).map((item) => ({ ...item, clientId, jobId }) as RetimedTask);
      return { tasks, ...(typeof last === 'string' ? { next: last } : {}) };
    },

    advance(task, readyAt, now) {
      return advanceTask(doc, tasksTable, task, readyAt, now);
    },
  };
}
