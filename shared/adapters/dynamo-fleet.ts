/**
 * DynamoDB adapter of the job manager's {@link FleetStore}: jobs through the control table's
 * `byStatus` index, tasks through the tasks table and its `outstanding` index, each client's
 * profile, lease (`LEASE#{clientId}`: token, expiry and `inFlight` set) and ready hint
 * (`FLEETHINT#{clientId}`) in batches of 100 keys, the fleet's work list as a head item and, when
 * long, shard items (`shared/fleet/work-list.ts`).
 *
 * "Does this job have an open task?" reads the job's {@link TASK_SHARDS} partitions one after
 * the other with a filter on the state and stops at the first open task. While a job has many open
 * tasks the first page of the first shard answers (one Query, not 16); the whole job is read only
 * in its last minutes, when nearly every task is final — a few reads of the job per job, instead of a counter every broker would have to
 * update on every task (a hot item at 1,000 writes/s per client).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  BatchWriteCommand,
  type DynamoDBDocumentClient,
  PutCommand,
  QueryCommand,
  type QueryCommandInput,
  UpdateCommand,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { ClientProfile, ClientState, FleetStore, JobRef } from '#shared/fleet/ports.ts';
import type { LeaseState, ReadyHint } from '#shared/fleet/ready-hints.ts';
import { FLEET_WORK_KEY, type FleetWork, splitFleetWork } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys, OUTSTANDING_INDEX, storedJob } from '#shared/jobs/model.ts';
import { OPEN_TASK_STATES } from '#shared/jobs/task-lifecycle.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { settleDonePages } from './dynamo-claim-pages.ts';
import { STATE_NAME, stateIn } from './task-state-conditions.ts';

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
    return this.#jobsListed('scheduled', {
      KeyConditionExpression: 'statusKey = :s AND dueKey <= :due',
      ExpressionAttributeValues: { ':due': `${iso(now)}${HIGH}` },
    });
  }

  async runningJobs(): Promise<Job[]> {
    return this.#jobsListed('running', { KeyConditionExpression: 'statusKey = :s' });
  }

  /** The jobs of `status` the byStatus index lists, its partitions read side by side. */
  async #jobsListed(
    status: 'scheduled' | 'running',
    query: { KeyConditionExpression: string; ExpressionAttributeValues?: Record<string, unknown> },
  ): Promise<Job[]> {
    const pages = await Promise.all(
      keys.jobStatusPartitions(status).map((partition) =>
        this.#queryAll({
          TableName: this.#controlTable,
          IndexName: 'byStatus',
          KeyConditionExpression: query.KeyConditionExpression,
          ExpressionAttributeValues: { ...query.ExpressionAttributeValues, ':s': partition },
        }),
      ),
    );
    return (pages.flat() as unknown as Job[]).map(storedJob);
  }

  startJob(job: JobRef, now: number): Promise<boolean> {
    return this.#transition(job, 'scheduled', 'running', now);
  }

  /** A job LINE refused the message of (`failureReason` recorded while it ran) ends `failed` instead. */
  async completeJob(job: JobRef, now: number): Promise<boolean> {
    if (await this.#transition(job, 'running', 'completed', now)) return true;
    return this.#transition(job, 'running', 'failed', now);
  }

  async hasOpenTask(jobId: string): Promise<boolean> {
    for (const shard of shards) {
      let start: Item | undefined;
      do {
        const out = await this.#doc.send(
          new QueryCommand({ ...openTaskQuery(this.#tasksTable, jobId, shard), ExclusiveStartKey: start }),
        );
        if ((out.Items ?? []).length > 0) return true;
        start = out.LastEvaluatedKey;
      } while (start);
    }
    return false;
  }

  async settleClaimPages(clientId: string, jobId: string): Promise<void> {
    await settleDonePages(
      { doc: this.#doc, tasksTable: this.#tasksTable, controlTable: this.#controlTable },
      clientId,
      jobId,
    );
  }

  async nextReadyAt(clientId: string, jobIds: readonly string[], until: number): Promise<number | undefined> {
    const wanted = new Set(jobIds);
    const earliest = await Promise.all(
      shards.map(async (shard) => {
        let start: Item | undefined;
        do {
          const out = await this.#doc.send(
            new QueryCommand({
              ...readyTaskQuery(this.#tasksTable, clientId, shard, until),
              ExclusiveStartKey: start,
            }),
          );
          // Ascending by readyAt: the shard's first entry of a wanted job is its earliest.
          const hit = (out.Items ?? []).find((item) => wanted.has(item.jobId as string));
          if (hit) return Date.parse(String(hit.openSk).slice(0, String(hit.openSk).indexOf('#')));
          start = out.LastEvaluatedKey;
        } while (start);
        return undefined;
      }),
    );
    const found = earliest.filter((at): at is number => at !== undefined && Number.isFinite(at));
    return found.length > 0 ? Math.min(...found) : undefined;
  }

  async clientStates(
    clientIds: readonly string[],
    options: { readonly hintsOf?: readonly string[] } = {},
  ): Promise<Map<string, ClientState>> {
    const states = new Map<string, { profile?: ClientProfile; lease?: LeaseState; hint?: ReadyHint }>(
      clientIds.map((id) => [id, {}]),
    );
    // Leases consistently (a lease just taken must not read as free), profiles and hints not (a
    // hint a run old is harmless: its marks are compared with what is read now).
    const leases = clientIds.map((id) => keys.lease(id));
    const rest = [...clientIds.map((id) => keys.client(id)), ...(options.hintsOf ?? clientIds).map(hintKey)];
    await Promise.all([
      this.#batchGet(leases, true, (item) => {
        const state = states.get(String(item.pk).slice('LEASE#'.length));
        if (state) state.lease = leaseState(item);
      }),
      this.#batchGet(rest, false, (item) => {
        const pk = String(item.pk);
        if (pk.startsWith(HINT_PREFIX)) {
          const state = states.get(pk.slice(HINT_PREFIX.length));
          if (state) state.hint = parseHint(item);
        } else {
          const state = states.get(pk.slice('CLIENT#'.length));
          if (state) state.profile = clientProfile(item);
        }
      }),
    ]);
    return new Map(
      [...states].map(([id, s]) => [id, { profile: s.profile, lease: s.lease, hint: s.hint }] as const),
    );
  }

  async putReadyHints(hints: readonly ReadyHint[]): Promise<void> {
    const requests = hints.map((hint) => ({ PutRequest: { Item: { ...hintKey(hint.clientId), ...hint } } }));
    await forEachChunk(requests, 25, BATCH_CONCURRENCY, async (chunk) => {
      let left: typeof chunk | undefined = chunk;
      for (let attempt = 0; left && left.length > 0; attempt++) {
        if (attempt > 0) await backoff(attempt);
        const out = await this.#doc.send(
          new BatchWriteCommand({ RequestItems: { [this.#controlTable]: left } }),
        );
        left = out.UnprocessedItems?.[this.#controlTable] as typeof chunk | undefined;
      }
    });
  }

  async putFleetWork(work: FleetWork): Promise<boolean> {
    const { head, shards: parts } = splitFleetWork(work);
    // Shards first, the head last: a reader that sees the new head finds its shards written. A
    // shard refused (a newer run wrote it) means this run is superseded: its head is not written.
    const written = await Promise.all(parts.map((shard) => this.#putIfNotOlder(shard, shard.updatedAt)));
    if (written.includes(false)) return false;
    return this.#putIfNotOlder(head, head.updatedAt);
  }

  async #putIfNotOlder(item: object, updatedAt: number): Promise<boolean> {
    try {
      await this.#doc.send(
        new PutCommand({
          TableName: this.#controlTable,
          Item: item as Item,
          ConditionExpression: 'attribute_not_exists(pk) OR updatedAt <= :at',
          ExpressionAttributeValues: { ':at': updatedAt },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /** Reads `keys` in BatchGetItems of 100 (a few at once), retrying what DynamoDB leaves unprocessed. */
  async #batchGet(all: readonly Item[], consistent: boolean, onItem: (item: Item) => void): Promise<void> {
    await forEachChunk(all, 100, BATCH_CONCURRENCY, async (chunk) => {
      let left: Item[] | undefined = [...chunk];
      for (let attempt = 0; left && left.length > 0; attempt++) {
        if (attempt > 0) await backoff(attempt);
        const out = await this.#doc.send(
          new BatchGetCommand({
            RequestItems: { [this.#controlTable]: { Keys: left, ConsistentRead: consistent } },
          }),
        );
        for (const item of out.Responses?.[this.#controlTable] ?? []) onItem(item);
        left = out.UnprocessedKeys?.[this.#controlTable]?.Keys as Item[] | undefined;
      }
    });
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

  async #transition(
    job: JobRef,
    from: 'scheduled' | 'running',
    to: 'running' | 'completed' | 'failed',
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

/**
 * Each move's condition: a job is started only once its time has come (even if it was rescheduled
 * meanwhile); a running job completes unless LINE refused its message (`failureReason`, recorded by
 * its broker), and then fails with that reason.
 */
const CONDITIONS = {
  running: '#status = :from AND startAt <= :now',
  completed: '#status = :from AND attribute_not_exists(failureReason)',
  failed: '#status = :from AND attribute_exists(failureReason)',
} as const;

/** The conditional update that moves a job from `from` to `to`, with its status index keys. */
function transitionUpdate(
  controlTable: string,
  job: JobRef,
  from: 'scheduled' | 'running',
  to: 'running' | 'completed' | 'failed',
  now: number,
): UpdateCommandInput {
  const index = keys.jobStatusIndex({ status: to, startAt: job.startAt, jobId: job.jobId });
  // A job ends only as read: a task opened again since (`reopened`) is work the read did not see.
  const asRead = to === 'running' ? undefined : job.reopened;
  return {
    TableName: controlTable,
    Key: keys.job(job.clientId, job.jobId),
    UpdateExpression: index
      ? 'SET #status = :to, updatedAt = :now, statusKey = :statusKey, dueKey = :dueKey'
      : 'SET #status = :to, updatedAt = :now REMOVE statusKey, dueKey',
    ConditionExpression:
      to === 'running'
        ? CONDITIONS[to]
        : `${CONDITIONS[to]} AND ${asRead === undefined ? 'attribute_not_exists(reopened)' : 'reopened = :reopened'}`,
    ExpressionAttributeNames: { '#status': 'status' },
    ExpressionAttributeValues: {
      ':from': from,
      ':to': to,
      ':now': now,
      ...(index ? { ':statusKey': index.statusKey, ':dueKey': index.dueKey } : {}),
      ...(asRead === undefined ? {} : { ':reopened': asRead }),
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

const HINT_PREFIX = 'FLEETHINT#';
/** The control-table key of a client's ready hint. */
const hintKey = (clientId: string) => ({ pk: `${HINT_PREFIX}${clientId}`, sk: 'HINT' });
/** BatchGetItems / BatchWriteItems in flight at once. */
const BATCH_CONCURRENCY = 16;

function clientProfile(item: Item): ClientProfile {
  const { pk: _pk, sk: _sk, paused, ...settings } = item;
  return { settings: settings as unknown as ClientSettings, paused: paused === true };
}

function leaseState(item: Item): LeaseState {
  // DynamoDB drops a string set with its last member: absent means none in flight.
  const inFlight = item.inFlight instanceof Set ? item.inFlight.size : 0;
  return { token: Number(item.token ?? 0), expiresAt: Number(item.expiresAt ?? 0), inFlight };
}

function parseHint(item: Item): ReadyHint | undefined {
  const { pk: _pk, sk: _sk, ...hint } = item;
  if (typeof hint.clientId !== 'string' || typeof hint.checkedAt !== 'number') return undefined;
  return hint as unknown as ReadyHint;
}

/** Runs `fn` over chunks of `size`, `limit` chunks at a time. */
async function forEachChunk<T>(
  items: readonly T[],
  size: number,
  limit: number,
  fn: (chunk: T[]) => Promise<void>,
): Promise<void> {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  let next = 0;
  const worker = async () => {
    while (next < chunks.length) await fn(chunks[next++] as T[]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, chunks.length) }, worker));
}

const backoff = (attempt: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.min(1_000, 25 * 2 ** attempt) * Math.random()));

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
    ProjectionExpression: 'jobId, openSk',
    ExpressionAttributeValues: {
      ':pk': keys.openShardPk(clientId, shard),
      ':ready': `${iso(readyBy)}${HIGH}`,
    },
    // Small pages: the first entry is nearly always of a running job, and all shards are read
    // at once (pages of 1,000 read the whole index of a big job at every run).
    Limit: 25,
  };
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
