/**
 * The cancel sweep's side of DynamoDB ({@link TaskCanceller}): a shard's tasks the sweep may end,
 * page by page (the base table, strongly consistent, filtered to `pending`/`retry-wait`/`in-flight`
 * — a claimed message stays in flight, in the `outstanding` index, with `readyAt` = the end of its
 * claim's hold; a call in flight has its `startedAt`), and their end.
 *
 * Ending = `TransactWriteItems` of up to {@link TASKS_PER_TRANSACTION} task updates, each
 * conditional on the task still as read — still waiting, or still in flight with the `readyAt`
 * read, so a broker's write-back or a new claim since wins — (→ `cancelled`, reason, out of the
 * `outstanding` index, claim token dropped), plus one `ADD counts.cancelled :n` on the job. The
 * count moves with the tasks or not at all; a task that moved on meanwhile (a page done twice, a
 * broker's write) is dropped from the transaction and not counted.
 */
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  QueryCommand,
  type QueryCommandOutput,
  TransactWriteCommand,
} from '@aws-sdk/lib-dynamodb';
import { keys } from '#shared/jobs/model.ts';
import type { SweptTask, TaskCanceller } from '#shared/jobs/ports.ts';

/** Task updates per transaction: with the job's count, 25 items (the oldest service limit). */
export const TASKS_PER_TRANSACTION = 24;
/** Items a page's query reads (before the state filter). */
const PAGE_ITEMS = 500;
const MAX_TRIES = 8;

export class CancelSweepWriteError extends Error {
  override name = 'CancelSweepWriteError';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface DynamoTaskCancellerOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  /** Items read per page (tests use small pages). Default 500. */
  readonly pageItems?: number;
}

/** A {@link TaskCanceller} over the tasks and control tables. */
export function makeDynamoTaskCanceller(
  doc: DynamoDBDocumentClient,
  options: DynamoTaskCancellerOptions,
): TaskCanceller {
  const { controlTable, tasksTable } = options;
  const pageItems = options.pageItems ?? PAGE_ITEMS;

  /** Ends `tasks` in one transaction; returns how many it ended. */
  async function cancelGroup(
    clientId: string,
    jobId: string,
    group: readonly SweptTask[],
    reason: string,
    now: number,
  ): Promise<number> {
    let left = [...group];
    for (let tryNo = 1; left.length > 0; tryNo++) {
      try {
        await doc.send(
          new TransactWriteCommand({
            TransactItems: [
              ...left.map((task) => ({
                Update: {
                  TableName: tasksTable,
                  Key: keys.task(jobId, task.taskId),
                  UpdateExpression:
                    'SET #state = :cancelled, reason = :reason, updatedAt = :now REMOVE openPk, openSk, claimToken',
                  ...(task.state === 'in-flight'
                    ? {
                        // Its broker's write (or a claim, a new start) since the page was read moves
                        // readyAt (a message) or startedAt (a call) or the state.
                        ConditionExpression:
                          task.channel === 'message'
                            ? '#state = :inFlight AND readyAt = :seen'
                            : '#state = :inFlight AND startedAt = :seen',
                        ExpressionAttributeValues: {
                          ':cancelled': 'cancelled',
                          ':reason': reason,
                          ':now': now,
                          ':inFlight': 'in-flight',
                          ':seen': task.channel === 'message' ? task.readyAt : (task.startedAt ?? -1),
                        },
                      }
                    : {
                        ConditionExpression: '#state IN (:pending, :retryWait)',
                        ExpressionAttributeValues: {
                          ':cancelled': 'cancelled',
                          ':reason': reason,
                          ':now': now,
                          ':pending': 'pending',
                          ':retryWait': 'retry-wait',
                        },
                      }),
                  ExpressionAttributeNames: { '#state': 'state' },
                },
              })),
              {
                Update: {
                  TableName: controlTable,
                  Key: keys.job(clientId, jobId),
                  UpdateExpression: 'ADD #counts.#cancelled :n SET updatedAt = :now',
                  ConditionExpression: 'attribute_exists(#counts)',
                  ExpressionAttributeNames: { '#counts': 'counts', '#cancelled': 'cancelled' },
                  ExpressionAttributeValues: { ':n': left.length, ':now': now },
                },
              },
            ],
          }),
        );
        return left.length;
      } catch (error) {
        if (!(error instanceof TransactionCanceledException)) throw error;
        const codes = (error.CancellationReasons ?? []).map((r) => r.Code);
        if (codes[left.length] === 'ConditionalCheckFailed') {
          throw new CancelSweepWriteError(`job ${jobId} of ${clientId} is gone or has no counts`);
        }
        const moved = left.filter((_, i) => codes[i] === 'ConditionalCheckFailed');
        if (moved.length > 0) {
          // Those tasks started, settled or were ended by another sweep: not ours to end or count.
          left = left.filter((_, i) => codes[i] !== 'ConditionalCheckFailed');
          continue;
        }
        if (tryNo >= MAX_TRIES) throw error;
        // A conflict with a concurrent write (a settle's count on the job): back off and retry.
        await sleep(Math.random() * Math.min(1_000, 25 * 2 ** tryNo));
      }
    }
    return 0;
  }

  return {
    async sweepPage(jobId, shard, cursor) {
      const pk = `${jobId}#${shard}`;
      const out: QueryCommandOutput = await doc.send(
        new QueryCommand({
          TableName: tasksTable,
          KeyConditionExpression: 'pk = :pk',
          FilterExpression: '#state IN (:pending, :retryWait, :inFlight)',
          ExpressionAttributeNames: { '#state': 'state', '#channel': 'channel' },
          ExpressionAttributeValues: {
            ':pk': pk,
            ':pending': 'pending',
            ':retryWait': 'retry-wait',
            ':inFlight': 'in-flight',
          },
          ProjectionExpression: 'taskId, #state, #channel, readyAt, startedAt',
          ConsistentRead: true,
          Limit: pageItems,
          ...(cursor === undefined ? {} : { ExclusiveStartKey: { pk, sk: cursor } }),
        }),
      );
      const last = out.LastEvaluatedKey?.sk;
      return {
        tasks: (out.Items ?? []) as SweptTask[],
        ...(typeof last === 'string' ? { next: last } : {}),
      };
    },

    async cancelTasks(clientId, jobId, tasks, reason, now) {
      let ended = 0;
      for (let i = 0; i < tasks.length; i += TASKS_PER_TRANSACTION) {
        ended += await cancelGroup(clientId, jobId, tasks.slice(i, i + TASKS_PER_TRANSACTION), reason, now);
      }
      return ended;
    },
  };
}
