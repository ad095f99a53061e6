/**
 * The broker's side of tasks in DynamoDB: find the next outstanding tasks of a client (the sparse
 * `outstanding` index, shard by shard), start one in a transaction fenced by the client's lease,
 * record its call id, and settle it once. Writing tasks in the first place is ingest's job.
 *
 * Start = one `TransactWriteItems`: the lease item passes `leaseFence` (dynamo-leases.ts) (and records
 * the call in its `inFlight` set), the job is `running`, and the task is still
 * `pending`/`retry-wait` with the attempts seen → `in-flight`, attempts + 1, out of the index.
 * Settle = one `TransactWriteItems`: the task is still in flight on that attempt → its end state
 * (a retry goes back into the index at its new readyAt), and the call leaves the lease's set.
 */
import { randomUUID } from 'node:crypto';
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { BrokerTaskStore, Fence, StartResult, TaskRef } from '#shared/broker/ports.ts';
import { JOB_CANCELLED_REASON } from '#shared/jobs/cancel.ts';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { leaseFence } from './dynamo-leases.ts';

export interface DynamoBrokerTaskStoreOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  /** How long a job's status is trusted when filtering the index, ms (the start re-checks it). Default 5,000. */
  readonly jobCacheMs?: number;
  readonly now?: () => number;
}

const OUTSTANDING_INDEX = 'outstanding';
/** Sorts after every `{readyAt}#{jobId}#{taskId}` of the same instant (ULIDs and ids are ASCII < '~'). */
const AFTER_INSTANT = '#~';
/** Most index pages read per shard to find tasks of running jobs. */
const MAX_PAGES = 5;
const CONFLICT_RETRIES = 3;

function strip<T>(item: Record<string, unknown> | undefined, drop: readonly string[]): T | undefined {
  if (!item) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) if (!drop.includes(k)) out[k] = v;
  return out as T;
}

const taskOf = (item: Record<string, unknown> | undefined) =>
  strip<Task>(item, ['pk', 'sk', 'openPk', 'openSk']);

/** The lease's in-flight set member of a task. */
export function inFlightMember(ref: TaskRef): string {
  return `${ref.jobId}|${ref.taskId}`;
}

function refOfMember(member: string): TaskRef | undefined {
  const bar = member.indexOf('|');
  if (bar <= 0) return undefined;
  return { jobId: member.slice(0, bar), taskId: member.slice(bar + 1) };
}

function cancellationCodes(error: TransactionCanceledException): (string | undefined)[] {
  return (error.CancellationReasons ?? []).map((r) => r.Code);
}

/** A {@link BrokerTaskStore} over the control and tasks tables. */
export function makeDynamoBrokerTaskStore(
  doc: DynamoDBDocumentClient,
  options: DynamoBrokerTaskStoreOptions,
): BrokerTaskStore {
  const { controlTable, tasksTable } = options;
  const jobCacheMs = options.jobCacheMs ?? 5_000;
  const clockNow = options.now ?? Date.now;
  const jobs = new Map<string, { job: Job | undefined; at: number }>();

  async function getJob(clientId: string, jobId: string): Promise<Job | undefined> {
    const out = await doc.send(
      new GetCommand({ TableName: controlTable, Key: keys.job(clientId, jobId), ConsistentRead: true }),
    );
    const job = strip<Job>(out.Item, ['pk', 'sk', 'statusKey', 'dueKey']);
    jobs.set(`${clientId}/${jobId}`, { job, at: clockNow() });
    return job;
  }

  async function isRunning(clientId: string, jobId: string): Promise<boolean> {
    const cached = jobs.get(`${clientId}/${jobId}`);
    const job = cached && clockNow() - cached.at < jobCacheMs ? cached.job : await getJob(clientId, jobId);
    // A message job's tasks are the message pipeline's (serve-messages.ts), not calls to start.
    return job?.status === 'running' && job.channel !== 'message';
  }

  /** Tasks of running jobs from one shard's index partition, earliest first. */
  async function fromShard(
    clientId: string,
    shard: number,
    upper: string | undefined,
    limit: number,
  ): Promise<{ task: Task; openSk: string }[]> {
    const found: { task: Task; openSk: string }[] = [];
    let startKey: Record<string, unknown> | undefined;
    for (let page = 0; page < MAX_PAGES && found.length < limit; page++) {
      const out = await doc.send(
        new QueryCommand({
          TableName: tasksTable,
          IndexName: OUTSTANDING_INDEX,
          KeyConditionExpression: upper === undefined ? 'openPk = :pk' : 'openPk = :pk AND openSk <= :upper',
          ExpressionAttributeValues: {
            ':pk': `${clientId}#${shard}`,
            ...(upper === undefined ? {} : { ':upper': upper }),
          },
          Limit: Math.max(limit, 10),
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const task = taskOf(item)!;
        if (await isRunning(clientId, task.jobId)) found.push({ task, openSk: String(item.openSk) });
        if (found.length >= limit) break;
      }
      startKey = out.LastEvaluatedKey;
      if (!startKey) break;
    }
    return found;
  }

  async function acrossShards(clientId: string, upper: string | undefined, limit: number) {
    const shards = await Promise.all(
      Array.from({ length: TASK_SHARDS }, (_, shard) => fromShard(clientId, shard, upper, limit)),
    );
    return shards
      .flat()
      .sort((a, b) => (a.openSk < b.openSk ? -1 : a.openSk > b.openSk ? 1 : 0))
      .slice(0, limit);
  }

  async function transact(input: ConstructorParameters<typeof TransactWriteCommand>[0]) {
    for (let tryNo = 1; ; tryNo++) {
      try {
        // Idempotent for the SDK's own retries (a timeout, a lost answer): a start or a settle that
        // went through is answered as done, not refused as if another writer had won. A cancelled
        // transaction applied nothing, so the next try here is a new request with a new token.
        await doc.send(new TransactWriteCommand({ ...input, ClientRequestToken: randomUUID() }));
        return undefined;
      } catch (error) {
        if (!(error instanceof TransactionCanceledException)) throw error;
        const codes = cancellationCodes(error);
        // A conflict with a concurrent write (a renewal, a callback) is no answer: try again.
        if (codes.includes('TransactionConflict') && !codes.includes('ConditionalCheckFailed')) {
          if (tryNo < CONFLICT_RETRIES) continue;
        }
        return codes;
      }
    }
  }

  const store: BrokerTaskStore = {
    async getClient(clientId) {
      const out = await doc.send(new GetCommand({ TableName: controlTable, Key: keys.client(clientId) }));
      return strip<ClientSettings>(out.Item, ['pk', 'sk']);
    },

    getJob,

    async getTask(ref) {
      const out = await doc.send(
        new GetCommand({
          TableName: tasksTable,
          Key: keys.task(ref.jobId, ref.taskId),
          ConsistentRead: true,
        }),
      );
      return taskOf(out.Item);
    },

    async outstanding(clientId, now, limit) {
      const upper = `${new Date(now).toISOString()}${AFTER_INSTANT}`;
      return (await acrossShards(clientId, upper, limit)).map((f) => f.task);
    },

    async nextReadyAt(clientId) {
      const [first] = await acrossShards(clientId, undefined, 1);
      return first?.task.readyAt;
    },

    async start(task: Task, fence: Fence): Promise<StartResult> {
      const startedAt = fence.now;
      const fenced = leaseFence(fence);
      const codes = await transact({
        TransactItems: [
          {
            Update: {
              TableName: controlTable,
              Key: keys.lease(fence.clientId),
              UpdateExpression: 'ADD #inFlight :member',
              ConditionExpression: fenced.ConditionExpression,
              ExpressionAttributeNames: { ...fenced.ExpressionAttributeNames, '#inFlight': 'inFlight' },
              ExpressionAttributeValues: {
                ...fenced.ExpressionAttributeValues,
                ':member': new Set([inFlightMember(task)]),
              },
            },
          },
          {
            ConditionCheck: {
              TableName: controlTable,
              Key: keys.job(task.clientId, task.jobId),
              ConditionExpression: '#status = :running',
              ExpressionAttributeNames: { '#status': 'status' },
              ExpressionAttributeValues: { ':running': 'running' },
            },
          },
          {
            Update: {
              TableName: tasksTable,
              Key: keys.task(task.jobId, task.taskId),
              UpdateExpression:
                'SET #state = :inFlight, attempts = :attempts, startedAt = :now, updatedAt = :now ' +
                'REMOVE openPk, openSk, callId',
              ConditionExpression: '#state IN (:pending, :retryWait) AND attempts = :seen',
              ExpressionAttributeNames: { '#state': 'state' },
              ExpressionAttributeValues: {
                ':inFlight': 'in-flight',
                ':pending': 'pending',
                ':retryWait': 'retry-wait',
                ':attempts': task.attempts + 1,
                ':seen': task.attempts,
                ':now': startedAt,
              },
            },
          },
        ],
      });
      if (codes === undefined) {
        const { callId: _callId, ...rest } = task;
        return {
          kind: 'started',
          task: { ...rest, state: 'in-flight', attempts: task.attempts + 1, startedAt, updatedAt: startedAt },
        };
      }
      if (codes[0] === 'ConditionalCheckFailed') return { kind: 'fenced' };
      if (codes.includes('ConditionalCheckFailed')) return { kind: 'gone' };
      throw new Error(`task start cancelled: ${codes.join(', ')}`);
    },

    async recordCallId(ref, attempt, callId, now) {
      try {
        await doc.send(
          new UpdateCommand({
            TableName: tasksTable,
            Key: keys.task(ref.jobId, ref.taskId),
            UpdateExpression: 'SET callId = :callId, updatedAt = :now',
            ConditionExpression: '#state = :inFlight AND attempts = :attempt',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: {
              ':callId': callId,
              ':now': now,
              ':inFlight': 'in-flight',
              ':attempt': attempt,
            },
          }),
        );
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
    },

    async settle(request) {
      const { task, attempt, settlement, callId, now } = request;
      const set = ['#state = :state', 'lastResult = :lastResult', 'updatedAt = :now'];
      const remove: string[] = [];
      const values: Record<string, unknown> = {
        ':state': settlement.state,
        ':lastResult': settlement.lastResult,
        ':now': now,
        ':inFlight': 'in-flight',
        ':attempt': attempt,
      };
      if (callId !== undefined) {
        set.push('callId = :callId');
        values[':callId'] = callId;
      }
      if (settlement.state === 'failed' || settlement.state === 'cancelled') {
        set.push('reason = :reason');
        values[':reason'] = settlement.reason;
      } else remove.push('reason');
      if (settlement.state === 'retry-wait') {
        const index = keys.outstandingIndex({ ...task, state: 'retry-wait', readyAt: settlement.readyAt })!;
        set.push('readyAt = :readyAt', 'openPk = :openPk', 'openSk = :openSk');
        values[':readyAt'] = settlement.readyAt;
        values[':openPk'] = index.openPk;
        values[':openSk'] = index.openSk;
      }
      const taskUpdate = {
        Update: {
          TableName: tasksTable,
          Key: keys.task(task.jobId, task.taskId),
          UpdateExpression: `SET ${set.join(', ')}${remove.length ? ` REMOVE ${remove.join(', ')}` : ''}`,
          ConditionExpression: '#state = :inFlight AND attempts = :attempt',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: values,
        },
      };
      // A retry is written only while the job is not cancelled: the cancel sweep may already have
      // passed this task's shard, and a retry written after it would wait for ever. An end moves
      // the job's counts in the same transaction, so they are exact (the job manager trusts them).
      const final = settlement.state !== 'retry-wait';
      const jobItem = final
        ? {
            Update: {
              TableName: controlTable,
              Key: keys.job(task.clientId, task.jobId),
              UpdateExpression: 'ADD #counts.#state :one',
              ConditionExpression: 'attribute_exists(#counts)',
              ExpressionAttributeNames: { '#counts': 'counts', '#state': settlement.state },
              ExpressionAttributeValues: { ':one': 1 },
            },
          }
        : {
            ConditionCheck: {
              TableName: controlTable,
              Key: keys.job(task.clientId, task.jobId),
              ConditionExpression: 'attribute_not_exists(#status) OR #status <> :cancelled',
              ExpressionAttributeNames: { '#status': 'status' },
              ExpressionAttributeValues: { ':cancelled': 'cancelled' },
            },
          };
      const leaseUpdate = {
        Update: {
          TableName: controlTable,
          Key: keys.lease(task.clientId),
          UpdateExpression: 'DELETE #inFlight :member',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeNames: { '#inFlight': 'inFlight' },
          ExpressionAttributeValues: { ':member': new Set([inFlightMember(task)]) },
        },
      };
      // Tried with the lease's in-flight set and the job, then without what is not there: a lease
      // item already gone (the set does not matter then), a job without counts (written by hand).
      let withLease = true;
      let withJob = true;
      for (;;) {
        const items = [taskUpdate, ...(withLease ? [leaseUpdate] : []), ...(withJob ? [jobItem] : [])];
        const codes = await transact({ TransactItems: items });
        if (codes === undefined) return true;
        if (codes[0] === 'ConditionalCheckFailed') return false;
        const leaseFailed = withLease && codes[1] === 'ConditionalCheckFailed';
        const jobFailed = withJob && codes[items.length - 1] === 'ConditionalCheckFailed';
        if (jobFailed && !final) {
          return store.settle({
            ...request,
            settlement: {
              state: 'cancelled',
              lastResult: settlement.lastResult,
              reason: JOB_CANCELLED_REASON,
            },
          });
        }
        if (!leaseFailed && !jobFailed) throw new Error(`task settle cancelled: ${codes.join(', ')}`);
        if (leaseFailed) withLease = false;
        if (jobFailed) withJob = false;
      }
    },

    async inFlight(clientId) {
      const out = await doc.send(
        new GetCommand({ TableName: controlTable, Key: keys.lease(clientId), ConsistentRead: true }),
      );
      const members = out.Item?.inFlight;
      if (!(members instanceof Set)) return [];
      return [...members].flatMap((m) => {
        const ref = typeof m === 'string' ? refOfMember(m) : undefined;
        return ref ? [ref] : [];
      });
    },

    async forgetInFlight(clientId, ref) {
      await doc
        .send(
          new UpdateCommand({
            TableName: controlTable,
            Key: keys.lease(clientId),
            UpdateExpression: 'DELETE #inFlight :member',
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeNames: { '#inFlight': 'inFlight' },
            ExpressionAttributeValues: { ':member': new Set([inFlightMember(ref)]) },
          }),
        )
        .catch((error: unknown) => {
          if (!(error instanceof ConditionalCheckFailedException)) throw error;
        });
    },
  };
  return store;
}
