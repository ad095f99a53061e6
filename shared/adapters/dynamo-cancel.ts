/**
 * The sweeps' side of DynamoDB ({@link TaskCanceller}; the cancel and expire sweeps of
 * `shared/jobs/cancel.ts`): a shard's tasks the sweep may end,
 * page by page (the base table, strongly consistent, filtered to `pending`/`retry-wait`/`in-flight`
 * — a claimed message stays in flight, in the `outstanding` index, with `readyAt` = the end of its
 * claim's hold; a call in flight has its `startedAt`), and their end.
 *
 * Ending = `TransactWriteItems` of up to {@link TASKS_PER_TRANSACTION} task updates, each
 * conditional on the task still as read — still waiting, or still in flight with the `readyAt`
 * read, so a broker's write-back or a new claim since wins — (→ `cancelled` or `expired` by the
 * lifecycle's `sweepMove`, reason, out of the `outstanding` index, claim token dropped), plus one
 * `ADD counts.{cancelled|expired} :n` on the job. The
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
import { type Chunk, isChunk, membersEndedApart, membersInChunkState } from '#shared/jobs/chunks.ts';
import { keys } from '#shared/jobs/model.ts';
import type { SweepEnding, SweptTask, TaskCanceller } from '#shared/jobs/ports.ts';
import { OPEN_TASK_STATES, sweepMove } from '#shared/jobs/task-lifecycle.ts';
import { endedTaskExpiry } from '#shared/resources.ts';
import {
  claimHolds,
  claimKey,
  countEnd,
  type EndCounts,
  type EndState,
  jobCountsUpdate,
  noEnds,
  settleDonePages,
} from './dynamo-claim-pages.ts';
import { AdapterError } from './errors.ts';
import { moveFrom, STATE_NAME, stateIn, stateValue } from './task-state-conditions.ts';

/** Task updates per transaction: with the job's count, 25 items (the oldest service limit). */
export const TASKS_PER_TRANSACTION = 24;
/** Items a page's query reads (before the state filter). */
const PAGE_ITEMS = 500;
const MAX_TRIES = 8;

export class CancelSweepWriteError extends AdapterError {}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface DynamoTaskCancellerOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  /** Items read per page (tests use small pages). Default 500. */
  readonly pageItems?: number;
}

/** A {@link TaskCanceller} over the tasks and control tables. */
export class DynamoTaskCanceller implements TaskCanceller {
  readonly #doc: DynamoDBDocumentClient;
  readonly #controlTable: string;
  readonly #tasksTable: string;
  readonly #pageItems: number;

  constructor(doc: DynamoDBDocumentClient, options: DynamoTaskCancellerOptions) {
    this.#doc = doc;
    this.#controlTable = options.controlTable;
    this.#tasksTable = options.tasksTable;
    this.#pageItems = options.pageItems ?? PAGE_ITEMS;
  }

  async sweepPage(jobId: string, shard: number, cursor: string | undefined, clientId?: string) {
    const pk = keys.taskShardPk(jobId, shard);
    const open = stateIn(OPEN_TASK_STATES);
    const out: QueryCommandOutput = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tasksTable,
        KeyConditionExpression: 'pk = :pk',
        FilterExpression: open.condition,
        ExpressionAttributeNames: { ...STATE_NAME, '#channel': 'channel', '#except': 'except' },
        ExpressionAttributeValues: { ':pk': pk, ...open.values },
        ProjectionExpression: 'taskId, #state, #channel, readyAt, startedAt, members, #except',
        ConsistentRead: true,
        Limit: this.#pageItems,
        ...(cursor === undefined ? {} : { ExclusiveStartKey: { pk, sk: cursor } }),
      }),
    );
    const last = out.LastEvaluatedKey?.sk;
    return {
      tasks: await this.#withClaimPages(clientId, jobId, (out.Items ?? []).map(sweptTask)),
      ...(typeof last === 'string' ? { next: last } : {}),
    };
  }

  async settleClaimPages(clientId: string, jobId: string): Promise<void> {
    await settleDonePages(
      { doc: this.#doc, tasksTable: this.#tasksTable, controlTable: this.#controlTable },
      clientId,
      jobId,
    );
  }

  async endTasks(
    clientId: string,
    jobId: string,
    tasks: readonly SweptTask[],
    ending: SweepEnding,
    now: number,
  ) {
    let ended = 0;
    for (let i = 0; i < tasks.length; i += TASKS_PER_TRANSACTION) {
      ended += await this.#endGroup(clientId, jobId, tasks.slice(i, i + TASKS_PER_TRANSACTION), ending, now);
    }
    return ended;
  }

  /** Ends `group` in one transaction with the job's count; returns how many it ended. */
  async #endGroup(
    clientId: string,
    jobId: string,
    group: readonly SweptTask[],
    ending: SweepEnding,
    now: number,
  ): Promise<number> {
    let left = [...group];
    for (let tryNo = 1; left.length > 0; tryNo++) {
      try {
        const counts = sweptEnds(left, ending);
        await this.#doc.send(
          new TransactWriteCommand({
            TransactItems: [
              ...left.map((task) => this.#taskEnd(jobId, task, ending, now)),
              jobCountsUpdate(this.#controlTable, clientId, jobId, counts, false, now),
            ],
          }),
        );
        return counts.completed + counts.failed + counts.cancelled + counts.expired;
      } catch (error) {
        if (!(error instanceof TransactionCanceledException)) throw error;
        const codes = (error.CancellationReasons ?? []).map((r) => r.Code);
        if (codes[left.length] === 'ConditionalCheckFailed') {
          throw new CancelSweepWriteError(`job ${jobId} of ${clientId} is gone or has no counts`, {
            cause: error,
          });
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

  /**
   * Waiting messages listed on an open claim page of the client are in flight with its broker,
   * held until the page's hold ends (read once a page of tasks, only when it holds a waiting message).
   */
  async #withClaimPages(
    clientId: string | undefined,
    jobId: string,
    tasks: SweptTask[],
  ): Promise<SweptTask[]> {
    const waitingMessage = (t: SweptTask) => t.channel === 'message' && t.state !== 'in-flight';
    if (clientId === undefined || !tasks.some(waitingMessage)) return tasks;
    const holds = await claimHolds(this.#doc, this.#tasksTable, clientId);
    return tasks.map((t) => {
      const holdUntil = waitingMessage(t) ? holds.get(claimKey(jobId, t.taskId)) : undefined;
      return holdUntil === undefined
        ? t
        : { ...t, state: 'in-flight', readyAt: holdUntil, storedState: t.state };
    });
  }

  /** The task's move to the sweep's end, conditional on it still being as the page read it. */
  #taskEnd(jobId: string, task: SweptTask, ending: SweepEnding, now: number) {
    const to = stateValue(ending.state);
    const stored = task.storedState ?? task.state;
    const from = moveFrom(sweepMove(ending.state, stored));
    const common = {
      ...to.values,
      ...from.values,
      ':reason': ending.reason,
      ':now': now,
      ':expiresAt': endedTaskExpiry(now),
    };
    let condition: { ConditionExpression: string; ExpressionAttributeValues: Record<string, unknown> };
    if (stored === 'in-flight') {
      // Its broker's write (or a claim, a new start) since the page was read moves readyAt (a
      // message) or startedAt (a call) or the state.
      const seen = task.channel === 'message' ? 'readyAt' : 'startedAt';
      condition = {
        ConditionExpression: `${from.condition} AND ${seen} = :seen`,
        ExpressionAttributeValues: {
          ...common,
          ':seen': task.channel === 'message' ? task.readyAt : (task.startedAt ?? -1),
        },
      };
    } else {
      condition = { ConditionExpression: from.condition, ExpressionAttributeValues: common };
    }
    if (task.members) {
      // A chunk: counted as read, so only while no other member ended apart since.
      condition = {
        ConditionExpression: `${condition.ConditionExpression} AND (attribute_not_exists(#except) OR size(#except) = :apart)`,
        ExpressionAttributeValues: {
          ...condition.ExpressionAttributeValues,
          ':apart': task.members.exceptSize,
        },
      };
    }
    return {
      Update: {
        TableName: this.#tasksTable,
        Key: keys.task(jobId, task.taskId),
        UpdateExpression: `SET #state = ${to.placeholder}, reason = :reason, updatedAt = :now, expiresAt = :expiresAt REMOVE openPk, openSk, claimToken`,
        ...condition,
        ExpressionAttributeNames: { ...STATE_NAME, ...(task.members ? { '#except': 'except' } : {}) },
      },
    };
  }
}

/** A swept item as the sweep sees it: a chunk with its members' share. */
function sweptTask(item: Record<string, unknown>): SweptTask {
  const { members: _members, except: _except, ...task } = item;
  if (!isChunk(item)) return task as SweptTask;
  const chunk = item as unknown as Chunk;
  const apart = membersEndedApart(chunk).map((end) => ({
    state: end.state,
    ...(end.reason === undefined ? {} : { reason: end.reason }),
  }));
  return {
    ...(task as SweptTask),
    members: {
      inState: membersInChunkState(chunk),
      apart,
      exceptSize: Object.keys(chunk.except ?? {}).length,
    },
  };
}

/** What ending `tasks` moves the job's counts by: a chunk's members all, those apart by their own end. */
function sweptEnds(tasks: readonly SweptTask[], ending: SweepEnding): EndCounts {
  const counts = noEnds();
  for (const task of tasks) {
    countEnd(counts, ending.state, ending.reason, task.members?.inState ?? 1);
    for (const apart of task.members?.apart ?? []) countEnd(counts, apart.state as EndState, apart.reason);
  }
  return counts;
}
