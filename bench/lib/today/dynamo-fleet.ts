/**
 * TODAY'S DESIGN, KEPT FOR bench/fleet-scale.ts ONLY: shared/adapters/dynamo-fleet.ts as it was at commit 148f9e7 (before
 * issue #16 item 3), so the bench measures it side by side with the design that replaced it. Not
 * used by anything deployed; do not fix or extend it.
 */
/**
 * DynamoDB adapter of the job manager's {@link FleetStore}: jobs through the control table's
 * `byStatus` index, tasks through the tasks table and its `outstanding` index, a client's calls
 * in flight through its lease item (`LEASE#{clientId}`: expiry and `inFlight` set), the fleet's
 * work list as one control-table item.
 *
 * "Does this job have an open task?" reads the job's {@link TASK_SHARDS} partitions in parallel
 * with a filter on the state and stops at the first open task. While a job has many open tasks
 * the first page answers; the whole job is read only in its last minutes, when nearly every task
 * is final — a few reads of the job per job, instead of a counter every broker would have to
 * update on every task (a hot item at 1,000 writes/s per client).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandInput,
  UpdateCommand,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { STATE_NAME, stateIn } from '#shared/adapters/task-state-conditions.ts';
import { FLEET_WORK_KEY, type FleetWork } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys, OUTSTANDING_INDEX } from '#shared/jobs/model.ts';
import { OPEN_TASK_STATES } from '#shared/jobs/task-lifecycle.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import type { ClientProfile, FleetStore, JobRef } from './ports.ts';

export interface DynamoFleetStoreOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
}

/** Sorts after every job and task id suffix, so `<= iso + HIGH` takes the whole millisecond. */
const HIGH = '#\uffff';
const iso = (ms: number) => new Date(ms).toISOString();
const shards = Array.from({ length: TASK_SHARDS }, (_, i) => i);

type Item = Record<string, unknown>;

/** A {@link FleetStore} over the control table and the tasks table. */
export class DynamoFleetStore implements FleetStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #controlTable: string;
  readonly #tasksTable: string;

  constructor(doc: DynamoDBDocumentClient, options: DynamoFleetStoreOptions) {
    this.#doc = doc;
    this.#controlTable = options.controlTable;
    this.#tasksTable = options.tasksTable;
  }

  async dueScheduledJobs(now: number): Promise<Job[]> {
    return this.#listed('scheduled', 'statusKey = :s AND dueKey <= :due', { ':due': `${iso(now)}${HIGH}` });
  }

  async runningJobs(): Promise<Job[]> {
    return this.#listed('running', 'statusKey = :s', {});
  }

  // Today's listing read one byStatus partition page after page; the jobs are now in shards of it
  // (keys.jobStatusIndex), read here one after another, as today's one partition was.
  async #listed(
    status: 'scheduled' | 'running',
    condition: string,
    values: Record<string, unknown>,
  ): Promise<Job[]> {
    const items: Item[] = [];
    for (const partition of keys.jobStatusPartitions(status))
      items.push(
        ...(await this.#queryAll({
          TableName: this.#controlTable,
          IndexName: 'byStatus',
          KeyConditionExpression: condition,
          ExpressionAttributeValues: { ...values, ':s': partition },
        })),
      );
    return items as unknown as Job[];
  }

  startJob(job: JobRef, now: number): Promise<boolean> {
    return this.#transition(job, 'scheduled', 'running', now);
  }

  completeJob(job: JobRef, now: number): Promise<boolean> {
    return this.#transition(job, 'running', 'completed', now);
  }

  hasOpenTask(jobId: string): Promise<boolean> {
    return this.#anyShard(
      (shard) => openTaskQuery(this.#tasksTable, jobId, shard),
      (items) => items.length > 0,
    );
  }

  hasReadyTask(clientId: string, jobIds: readonly string[], readyBy: number): Promise<boolean> {
    const wanted = new Set(jobIds);
    return this.#anyShard(
      (shard) => readyTaskQuery(this.#tasksTable, clientId, shard, readyBy),
      (items) => items.some((item) => wanted.has(item.jobId as string)),
    );
  }

  async hasOrphanedCalls(clientId: string, now: number): Promise<boolean> {
    const out = await this.#doc.send(
      new GetCommand({
        TableName: this.#controlTable,
        Key: keys.lease(clientId),
        ProjectionExpression: '#expiresAt, #inFlight',
        ExpressionAttributeNames: { '#expiresAt': 'expiresAt', '#inFlight': 'inFlight' },
        // Consistent: a lease just taken or renewed must not read as expired (the client would be
        // listed, and a broker started, for nothing: a live lease cannot be taken).
        ConsistentRead: true,
      }),
    );
    const item = out.Item;
    // DynamoDB drops a string set with its last member: present means not empty.
    if (!item || !(item.inFlight instanceof Set) || item.inFlight.size === 0) return false;
    return !(now < Number(item.expiresAt));
  }

  async client(clientId: string): Promise<ClientProfile | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#controlTable, Key: keys.client(clientId) }),
    );
    if (!out.Item) return undefined;
    const { pk: _pk, sk: _sk, paused, ...settings } = out.Item;
    return { settings: settings as ClientSettings, paused: paused === true } satisfies ClientProfile;
  }

  async putFleetWork(work: FleetWork): Promise<boolean> {
    try {
      await this.#doc.send(
        new PutCommand({
          TableName: this.#controlTable,
          Item: work,
          ConditionExpression: 'attribute_not_exists(pk) OR updatedAt <= :at',
          ExpressionAttributeValues: { ':at': work.updatedAt },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  async #queryAll(input: QueryCommandInput): Promise<Item[]> {
    const items: Item[] = [];
    let start: Item | undefined;
    do {
      const out = await this.#doc.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
      items.push(...(out.Items ?? []));
      start = out.LastEvaluatedKey;
    } while (start);
    return items;
  }

  /** Pages through each shard's query until `found` says yes; every shard stops once one has. */
  async #anyShard(
    inputFor: (shard: number) => QueryCommandInput,
    found: (items: readonly Item[]) => boolean,
  ): Promise<boolean> {
    let hit = false;
    await Promise.all(
      shards.map(async (shard) => {
        let start: Item | undefined;
        do {
          const out = await this.#doc.send(
            new QueryCommand({ ...inputFor(shard), ExclusiveStartKey: start }),
          );
          if (found(out.Items ?? [])) hit = true;
          start = out.LastEvaluatedKey;
        } while (start && !hit);
      }),
    );
    return hit;
  }

  async #transition(
    job: JobRef,
    from: 'scheduled' | 'running',
    to: 'running' | 'completed',
    now: number,
  ): Promise<boolean> {
    try {
      await this.#doc.send(new UpdateCommand(transitionUpdate(this.#controlTable, job, from, to, now)));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }
}

/** The conditional update that moves a job from `from` to `to`, with its status index keys. */
function transitionUpdate(
  controlTable: string,
  job: JobRef,
  from: 'scheduled' | 'running',
  to: 'running' | 'completed',
  now: number,
): UpdateCommandInput {
  const index = keys.jobStatusIndex({ status: to, startAt: job.startAt, jobId: job.jobId });
  return {
    TableName: controlTable,
    Key: keys.job(job.clientId, job.jobId),
    UpdateExpression: index
      ? 'SET #status = :to, updatedAt = :now, statusKey = :statusKey, dueKey = :dueKey'
      : 'SET #status = :to, updatedAt = :now REMOVE statusKey, dueKey',
    // A job is started only once its time has come, even if it was rescheduled meanwhile.
    ConditionExpression: from === 'scheduled' ? '#status = :from AND startAt <= :now' : '#status = :from',
    ExpressionAttributeNames: { '#status': 'status' },
    ExpressionAttributeValues: {
      ':from': from,
      ':to': to,
      ':now': now,
      ...(index ? { ':statusKey': index.statusKey, ':dueKey': index.dueKey } : {}),
    },
  };
}

const OPEN = stateIn(OPEN_TASK_STATES);

/** One page of a job's shard, filtered to its open tasks. */
function openTaskQuery(tasksTable: string, jobId: string, shard: number): QueryCommandInput {
  return {
    TableName: tasksTable,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: OPEN.condition,
    ProjectionExpression: 'pk',
    ExpressionAttributeNames: STATE_NAME,
    ExpressionAttributeValues: { ':pk': keys.taskShardPk(jobId, shard), ...OPEN.values },
    // Consistent: an open task just written must never be missed, or the job would
    // complete with work left.
    ConsistentRead: true,
    // Pages of 100: while the job has open tasks the first page finds one, instead of
    // every page reading up to 1 MB of the shard (the whole of it, every minute).
    Limit: 100,
  };
}

/** One page of a client's shard of the outstanding index, up to `readyBy`. */
function readyTaskQuery(
  tasksTable: string,
  clientId: string,
  shard: number,
  readyBy: number,
): QueryCommandInput {
  return {
    TableName: tasksTable,
    IndexName: OUTSTANDING_INDEX,
    KeyConditionExpression: 'openPk = :pk AND openSk <= :ready',
    ProjectionExpression: 'jobId',
    ExpressionAttributeValues: {
      ':pk': keys.openShardPk(clientId, shard),
      ':ready': `${iso(readyBy)}${HIGH}`,
    },
    // Small pages: the first entry is nearly always of a running job, and all shards are read
    // at once (pages of 1,000 read the whole index of a big job at every run).
    Limit: 25,
  };
}

/** A {@link FleetStore} over the control table and the tasks table. */
export function makeDynamoFleetStore(
  doc: DynamoDBDocumentClient,
  options: DynamoFleetStoreOptions,
): FleetStore {
  return new DynamoFleetStore(doc, options);
}

/**
 * Sets the work list's desired version now (the local fleet's `onDeploy`: on AWS the deployment
 * sets it). `updatedAt` moves too, so a job manager run that
 * began before the deploy (and read the old version) cannot write its older list over this one.
 */
export function publishDesiredVersion(
  doc: DynamoDBDocumentClient,
  controlTable: string,
  now: () => number = Date.now,
): (version: string) => Promise<void> {
  return async (version) => {
    await doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: FLEET_WORK_KEY,
        UpdateExpression: 'SET desiredVersion = :v, updatedAt = :at, clients = if_not_exists(clients, :none)',
        ExpressionAttributeValues: { ':v': version, ':at': now(), ':none': [] },
      }),
    );
  };
}
