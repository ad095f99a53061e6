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

/** A job shard's waiting tasks read a page at a time, each moved earlier by a conditional update. */
export class DynamoTaskRetimer implements TaskRetimer {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tasksTable: string;
  readonly #pageItems: number;

  constructor(
    doc: DynamoDBDocumentClient,
    tasksTable: string,
    options: { readonly pageItems?: number } = {},
  ) {
    this.#doc = doc;
    this.#tasksTable = tasksTable;
    this.#pageItems = options.pageItems ?? PAGE_ITEMS;
  }

  async retimePage(
    clientId: string,
    jobId: string,
    shard: number,
    cursor: string | undefined,
  ): Promise<{ readonly tasks: readonly RetimedTask[]; readonly next?: string }> {
    const pk = keys.taskShardPk(jobId, shard);
    const waiting = stateIn(WAITING_STATES);
    const out: QueryCommandOutput = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tasksTable,
        KeyConditionExpression: 'pk = :pk',
        FilterExpression: waiting.condition,
        // `timeZone` is one of DynamoDB's reserved words.
        ExpressionAttributeNames: { ...STATE_NAME, '#timeZone': 'timeZone' },
        ExpressionAttributeValues: { ':pk': pk, ...waiting.values },
        ProjectionExpression: 'taskId, #state, readyAt, attempts, #timeZone, notBefore',
        Limit: this.#pageItems,
        ...(cursor === undefined ? {} : { ExclusiveStartKey: { pk, sk: cursor } }),
      }),
    );
    const last = out.LastEvaluatedKey?.sk;
    const tasks = (out.Items ?? []).map((item) => ({ ...item, clientId, jobId }) as RetimedTask);
    return { tasks, ...(typeof last === 'string' ? { next: last } : {}) };
  }

  advance(task: RetimedTask, readyAt: number, now: number): Promise<boolean> {
    return advanceTask(this.#doc, this.#tasksTable, task, readyAt, now);
  }
}
