/**
 * The broker's side of tasks in DynamoDB: find the next outstanding tasks of a client (the sparse
 * `outstanding` index, shard by shard), start one in a transaction fenced by the client's lease,
 * record its call id, and settle it once. Writing tasks in the first place is ingest's job.
 *
 * Start = one `TransactWriteItems`: the lease item passes `leaseFence` (dynamo-leases.ts) (and records
 * the call in its `inFlight` set), the job is `running` and not past its end (`endAt > now`, the
 * condition of `jobHasEnded`), and the task is still
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
  type TransactWriteCommandInput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type {
  BrokerTaskStore,
  Fence,
  SettleRequest,
  StartLimits,
  StartResult,
  TaskRef,
} from '#shared/broker/ports.ts';
import {
  type CapSlot,
  cappedReason,
  cappedWaitingReason,
  overCapMove,
} from '#shared/contact-limits/model.ts';
import {
  type ClientSettings,
  type Job,
  jobHasEnded,
  keys,
  OUTSTANDING_INDEX,
  resultAttribute,
  type Task,
} from '#shared/jobs/model.ts';
import { callSettlementOfCancelledJob, TASK_MOVES } from '#shared/jobs/task-lifecycle.ts';
import { endedTaskExpiry, TASK_SHARDS } from '#shared/resources.ts';
import { endCappedTask, personCapItems } from './dynamo-contact-caps.ts';
import { JobCache } from './dynamo-job-cache.ts';
import { leaseFence } from './dynamo-leases.ts';
import { readPersonOf } from './dynamo-people.ts';
import { PersonSuppressions } from './dynamo-person-suppressions.ts';
import { endPersonSuppressedTask, endSuppressedTask } from './dynamo-suppressed-tasks.ts';
import { suppressionConditionCheck } from './dynamo-suppressions.ts';
import { deferTask } from './dynamo-task-deferral.ts';
import { ReadingsAhead } from './readings-ahead.ts';
import { moveFrom, STATE_NAME, stateValue } from './task-state-conditions.ts';

export interface DynamoBrokerTaskStoreOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  /** How long a job's status is trusted when filtering the index, ms (the start re-checks it). Default 5,000. */
  readonly jobCacheMs?: number;
  readonly now?: () => number;
}

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
  strip<Task>(item, ['pk', 'sk', 'openPk', 'openSk', 'recipientPk', 'recipientSk']);

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

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** A {@link BrokerTaskStore} over the control and tasks tables. */
export class DynamoBrokerTaskStore implements BrokerTaskStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #controlTable: string;
  readonly #tasksTable: string;
  readonly #jobs: JobCache;
  readonly #now: () => number;
  readonly #persons: PersonSuppressions;
  /** Each start's person-wide reading, begun when the task before it was taken. */
  readonly #ahead: ReadingsAhead<Task, string | undefined>;

  constructor(doc: DynamoDBDocumentClient, options: DynamoBrokerTaskStoreOptions) {
    this.#doc = doc;
    this.#controlTable = options.controlTable;
    this.#tasksTable = options.tasksTable;
    this.#now = options.now ?? Date.now;
    this.#jobs = new JobCache(doc, options.controlTable, this.#now, options.jobCacheMs ?? 5_000);
    this.#persons = new PersonSuppressions(doc, options.controlTable, this.#now);
    this.#ahead = new ReadingsAhead((task) => this.#personReason(task), this.#now);
  }

  async getClient(clientId: string) {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#controlTable, Key: keys.client(clientId) }),
    );
    return strip<ClientSettings>(out.Item, ['pk', 'sk']);
  }

  getJob(clientId: string, jobId: string): Promise<Job | undefined> {
    return this.#jobs.get(clientId, jobId);
  }

  async getTask(ref: TaskRef) {
    const out = await this.#doc.send(
      new GetCommand({
        TableName: this.#tasksTable,
        Key: keys.task(ref.jobId, ref.taskId),
        ConsistentRead: true,
      }),
    );
    return taskOf(out.Item);
  }

  async outstanding(clientId: string, now: number, limit: number) {
    const upper = keys.openSkAfter(now);
    return (await this.#acrossShards(clientId, upper, limit)).map((f) => f.task);
  }

  defer(task: Task, readyAt: number, now: number) {
    return deferTask(this.#doc, this.#tasksTable, task, readyAt, now);
  }

  async nextReadyAt(clientId: string) {
    const [first] = await this.#acrossShards(clientId, undefined, 1);
    return first?.task.readyAt;
  }

  /** Resolves once the reading is made (the broker does not wait for it). */
  prepare(task: Task): Promise<void> {
    return this.#ahead.prepare(task);
  }

  async start(task: Task, fence: Fence, limits?: StartLimits): Promise<StartResult> {
    const throughPerson = await this.#suppressedThroughPerson(
      task,
      fence.now,
      await this.#ahead.reading(task),
    );
    if (throughPerson) return throughPerson;
    let starting = task;
    for (let tryNo = 1; ; tryNo++) {
      const result = await this.#startAs(starting, fence, limits);
      if (result.kind !== 'relinked') return result;
      // The recipient was linked (or unlinked) since its person was read: count under the person it
      // is now, after reading that person's entries (another of its identifiers may be suppressed).
      if (tryNo >= CONFLICT_RETRIES) throw new Error("task start: the recipient's person kept changing");
      const person = await readPersonOf(this.#doc, this.#controlTable, task.clientId, task.recipient);
      const { person: _stale, ...rest } = task;
      starting = person === task.recipient ? rest : { ...rest, person };
      const relinked = await this.#suppressedThroughPerson(
        starting,
        fence.now,
        await this.#personReason(starting),
      );
      if (relinked) return relinked;
    }
  }

  /**
   * A task whose person has another identifier suppressed person-wide (`reason`, as read) ends
   * suppressed before its start (`dynamo-person-suppressions.ts`); undefined when it may go on.
   */
  async #suppressedThroughPerson(
    task: Task,
    now: number,
    reason: string | undefined,
  ): Promise<StartResult | undefined> {
    if (reason === undefined) return undefined;
    const tables = { controlTable: this.#controlTable, tasksTable: this.#tasksTable };
    const ended = await endPersonSuppressedTask(this.#doc, tables, task, reason, now);
    return ended.kind === 'ended' ? { kind: 'suppressed', reason } : { kind: 'gone' };
  }

  /** Why another identifier of the task's person keeps it from a contact, if one does. */
  async #personReason(task: Task): Promise<string | undefined> {
    const hints = new Map(task.person === undefined ? [] : [[task.recipient, task.person]]);
    const reasons = await this.#persons.reasons(task.clientId, [task.recipient], hints);
    return reasons.get(task.recipient);
  }

  /**
   * One try of a start, under the task's person as it was read. Items: lease, job, task, the
   * suppression check, then under contact limits the person's link check and the counters.
   */
  async #startAs(
    task: Task,
    fence: Fence,
    limits?: StartLimits,
  ): Promise<StartResult | { kind: 'relinked' }> {
    const startedAt = fence.now;
    // The suppression list is checked in the start itself (docs/suppression-list.md): an entry
    // written before this transaction refuses it, one written after it finds the call started.
    const slots = limits?.slots ?? [];
    const tables = { controlTable: this.#controlTable, tasksTable: this.#tasksTable };
    const codes = await this.#transact([
      this.#leaseAdd(task, fence),
      this.#jobRunning(task, startedAt),
      this.#taskStart(task, startedAt),
      suppressionConditionCheck(this.#controlTable, task.clientId, task.recipient),
      ...personCapItems(tables, task, slots),
    ]);
    if (codes === undefined) {
      const { callId: _callId, ...rest } = task;
      return {
        kind: 'started',
        task: { ...rest, state: 'in-flight', attempts: task.attempts + 1, startedAt, updatedAt: startedAt },
      };
    }
    if (codes[0] === 'ConditionalCheckFailed') return { kind: 'fenced' };
    const earlier = codes.slice(0, 4).includes('ConditionalCheckFailed');
    if (codes[4] === 'ConditionalCheckFailed' && !earlier) return { kind: 'relinked' };
    const capped = slots.findIndex((_, i) => codes[5 + i] === 'ConditionalCheckFailed');
    if (capped >= 0 && !earlier) return this.#overCap(task, slots[capped]!, limits?.jobEndAt, startedAt);
    const suppressed = codes[3] === 'ConditionalCheckFailed';
    if (suppressed && !codes.slice(1, 3).includes('ConditionalCheckFailed')) {
      const ended = await endSuppressedTask(this.#doc, tables, task, startedAt);
      return ended.kind === 'ended' ? { kind: 'suppressed', reason: ended.reason } : { kind: 'gone' };
    }
    if (codes.includes('ConditionalCheckFailed')) return { kind: 'gone' };
    throw new Error(`task start cancelled: ${codes.join(', ')}`);
  }

  /** A start refused by a contact limit: the task waits for the window's end, or ends (`overCapMove`). */
  async #overCap(task: Task, slot: CapSlot, jobEndAt: number | undefined, now: number): Promise<StartResult> {
    const until = slot.window.end;
    if (overCapMove(until, jobEndAt) === 'wait') {
      const reason = cappedWaitingReason(slot.limit, until);
      const waiting = await deferTask(this.#doc, this.#tasksTable, task, until, now, {
        reason,
        notBefore: until,
      });
      return waiting ? { kind: 'capped', until, ended: false } : { kind: 'gone' };
    }
    const reason = cappedReason(slot.limit, until);
    const tables = { controlTable: this.#controlTable, tasksTable: this.#tasksTable };
    const ended = await endCappedTask(this.#doc, tables, task, reason, now);
    return ended ? { kind: 'capped', until, ended: true, reason } : { kind: 'gone' };
  }

  async recordCallId(ref: TaskRef, attempt: number, callId: string, now: number) {
    const inFlight = stateValue('in-flight');
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tasksTable,
          Key: keys.task(ref.jobId, ref.taskId),
          UpdateExpression: 'SET callId = :callId, updatedAt = :now',
          ConditionExpression: `#state = ${inFlight.placeholder} AND attempts = :attempt`,
          ExpressionAttributeNames: STATE_NAME,
          ExpressionAttributeValues: {
            ':callId': callId,
            ':now': now,
            ...inFlight.values,
            ':attempt': attempt,
          },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }

  async settle(request: SettleRequest): Promise<boolean> {
    const { task, settlement } = request;
    const taskUpdate = this.#taskSettle(request);
    // A retry is written only while the job is not cancelled; else it ends cancelled
    // (`callSettlementOfCancelledJob`). An end moves the job's counts in the same transaction, so
    // they are exact (the job manager trusts them).
    // Every attempt's end also counts its result on the job (`Job.results`).
    const final = settlement.state !== 'retry-wait';
    let jobItem = final
      ? this.#jobCount(task, settlement.state, settlement.lastResult)
      : this.#jobResult(task, settlement.lastResult);
    const leaseUpdate = this.#leaseRemove(task);
    // Tried with the lease's in-flight set and the job, then without what is not there: a lease
    // item already gone (the set does not matter then), a job without counts (written by hand).
    let withLease = true;
    let withJob = true;
    let counted = true;
    for (;;) {
      const items = [taskUpdate, ...(withLease ? [leaseUpdate] : []), ...(withJob ? [jobItem] : [])];
      const codes = await this.#transact(items);
      if (codes === undefined) return true;
      if (codes[0] === 'ConditionalCheckFailed') return false;
      const leaseFailed = withLease && codes[1] === 'ConditionalCheckFailed';
      const jobFailed = withJob && codes[items.length - 1] === 'ConditionalCheckFailed';
      if (jobFailed && !final && counted) {
        // Cancelled, or a job without counts (written by hand): the plain check tells them apart.
        jobItem = this.#jobNotCancelled(task);
        counted = false;
        continue;
      }
      if (jobFailed && !final) {
        return this.settle({ ...request, settlement: callSettlementOfCancelledJob(settlement) });
      }
      if (!leaseFailed && !jobFailed) throw new Error(`task settle cancelled: ${codes.join(', ')}`);
      if (leaseFailed) withLease = false;
      if (jobFailed) withJob = false;
    }
  }

  async inFlight(clientId: string) {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#controlTable, Key: keys.lease(clientId), ConsistentRead: true }),
    );
    const members = out.Item?.inFlight;
    if (!(members instanceof Set)) return [];
    return [...members].flatMap((m) => {
      const ref = typeof m === 'string' ? refOfMember(m) : undefined;
      return ref ? [ref] : [];
    });
  }

  async forgetInFlight(clientId: string, ref: TaskRef) {
    await this.#doc
      .send(new UpdateCommand(this.#leaseRemove({ ...ref, clientId }).Update))
      .catch((error: unknown) => {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      });
  }

  /** The lease passes the fence and records the call in its in-flight set. */
  #leaseAdd(task: Task, fence: Fence) {
    const fenced = leaseFence(fence);
    return {
      Update: {
        TableName: this.#controlTable,
        Key: keys.lease(fence.clientId),
        UpdateExpression: 'ADD #inFlight :member',
        ConditionExpression: fenced.ConditionExpression,
        ExpressionAttributeNames: { ...fenced.ExpressionAttributeNames, '#inFlight': 'inFlight' },
        ExpressionAttributeValues: {
          ...fenced.ExpressionAttributeValues,
          ':member': new Set([inFlightMember(task)]),
        },
      },
    };
  }

  /** The call leaves the lease's in-flight set (if the lease item is still there). */
  #leaseRemove(ref: TaskRef & { readonly clientId: string }) {
    return {
      Update: {
        TableName: this.#controlTable,
        Key: keys.lease(ref.clientId),
        UpdateExpression: 'DELETE #inFlight :member',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#inFlight': 'inFlight' },
        ExpressionAttributeValues: { ':member': new Set([inFlightMember(ref)]) },
      },
    };
  }

  /**
   * The start's check: the job is running and has not reached its end at `now` (`jobHasEnded`'s
   * rule, so a broker whose copy of the job is stale still cannot start a call after the end).
   */
  #jobRunning(task: Task, now: number): TransactItem {
    return this.#jobCheck(
      task,
      '#status = :running AND (attribute_not_exists(#endAt) OR #endAt > :now)',
      { ':running': 'running', ':now': now },
      { '#endAt': 'endAt' },
    );
  }

  /** A retry's check: the job is not cancelled (a job item without a status passes). */
  #jobNotCancelled(task: Task): TransactItem {
    return this.#jobCheck(task, 'attribute_not_exists(#status) OR #status <> :cancelled', {
      ':cancelled': 'cancelled',
    });
  }

  #jobCheck(
    task: Task,
    condition: string,
    values: Record<string, string | number>,
    names: Record<string, string> = {},
  ): TransactItem {
    return {
      ConditionCheck: {
        TableName: this.#controlTable,
        Key: keys.job(task.clientId, task.jobId),
        ConditionExpression: condition,
        ExpressionAttributeNames: { '#status': 'status', ...names },
        ExpressionAttributeValues: values,
      },
    };
  }

  /** A task's end on its job: its end state's count and its last attempt's result. */
  #jobCount(task: Task, state: string, result: string): TransactItem {
    return {
      Update: {
        TableName: this.#controlTable,
        Key: keys.job(task.clientId, task.jobId),
        UpdateExpression: 'ADD #counts.#state :one, #result :one',
        ConditionExpression: 'attribute_exists(#counts)',
        ExpressionAttributeNames: {
          '#counts': 'counts',
          '#state': state,
          '#result': resultAttribute(result),
        },
        ExpressionAttributeValues: { ':one': 1 },
      },
    };
  }

  /** A retried attempt's result on its job, while the job is not cancelled. */
  #jobResult(task: Task, result: string): TransactItem {
    return {
      Update: {
        TableName: this.#controlTable,
        Key: keys.job(task.clientId, task.jobId),
        UpdateExpression: 'ADD #result :one',
        ConditionExpression:
          'attribute_exists(#counts) AND (attribute_not_exists(#status) OR #status <> :cancelled)',
        ExpressionAttributeNames: {
          '#counts': 'counts',
          '#status': 'status',
          '#result': resultAttribute(result),
        },
        ExpressionAttributeValues: { ':one': 1, ':cancelled': 'cancelled' },
      },
    };
  }

  /** The task's start: still waiting on the attempts seen → in flight, attempts + 1, out of the index. */
  #taskStart(task: Task, startedAt: number): TransactItem {
    const from = moveFrom(TASK_MOVES.start);
    const to = stateValue('in-flight');
    return {
      Update: {
        TableName: this.#tasksTable,
        Key: keys.task(task.jobId, task.taskId),
        UpdateExpression:
          `SET #state = ${to.placeholder}, attempts = :attempts, startedAt = :now, updatedAt = :now` +
          // The person the start was counted under (read again when its link changed since the ingest).
          (task.person === undefined ? ' ' : ', person = :person ') +
          // A reason a waiting task carried (`capped: waiting until …`) no longer holds.
          `REMOVE openPk, openSk, callId, reason, notBefore${task.person === undefined ? ', person' : ''}`,
        ConditionExpression: `${from.condition} AND attempts = :seen`,
        ExpressionAttributeNames: STATE_NAME,
        ExpressionAttributeValues: {
          ...to.values,
          ...from.values,
          ':attempts': task.attempts + 1,
          ':seen': task.attempts,
          ':now': startedAt,
          ...(task.person === undefined ? {} : { ':person': task.person }),
        },
      },
    };
  }

  /** The attempt's end: still in flight on that attempt → its end state (a retry back in the index). */
  #taskSettle(request: SettleRequest): TransactItem {
    const { task, attempt, settlement, callId, now } = request;
    const from = moveFrom(TASK_MOVES.settleCall);
    const set = ['#state = :state', 'lastResult = :lastResult', 'updatedAt = :now', 'callEndedAt = :now'];
    const remove: string[] = [];
    const values: Record<string, unknown> = {
      ':state': settlement.state,
      ':lastResult': settlement.lastResult,
      ':now': now,
      ...from.values,
      ':attempt': attempt,
    };
    if (callId !== undefined) {
      set.push('callId = :callId');
      values[':callId'] = callId;
    }
    if (settlement.state === 'failed' || settlement.state === 'cancelled' || settlement.state === 'expired') {
      set.push('reason = :reason');
      values[':reason'] = settlement.reason;
    } else remove.push('reason');
    if (settlement.state !== 'retry-wait') {
      set.push('expiresAt = :expiresAt');
      values[':expiresAt'] = endedTaskExpiry(now);
    } else {
      const index = keys.outstandingIndex({ ...task, state: 'retry-wait', readyAt: settlement.readyAt })!;
      set.push('readyAt = :readyAt', 'openPk = :openPk', 'openSk = :openSk');
      values[':readyAt'] = settlement.readyAt;
      values[':openPk'] = index.openPk;
      values[':openSk'] = index.openSk;
      if (settlement.notBefore !== undefined) {
        set.push('notBefore = :notBefore');
        values[':notBefore'] = settlement.notBefore;
      } else remove.push('notBefore');
    }
    return {
      Update: {
        TableName: this.#tasksTable,
        Key: keys.task(task.jobId, task.taskId),
        UpdateExpression: `SET ${set.join(', ')}${remove.length ? ` REMOVE ${remove.join(', ')}` : ''}`,
        ConditionExpression: `${from.condition} AND attempts = :attempt`,
        ExpressionAttributeNames: STATE_NAME,
        ExpressionAttributeValues: values,
      },
    };
  }

  async #isRunningCallJob(clientId: string, jobId: string): Promise<boolean> {
    const job = await this.#jobs.cached(clientId, jobId);
    // A message job's tasks are the message pipeline's (serve-messages.ts), not calls to start;
    // an ended job's wait for the expire sweep (`endAt` never changes, so the cache is exact here).
    return job?.status === 'running' && job.channel === 'call' && !jobHasEnded(job, this.#now());
  }

  /** Tasks of running jobs from one shard's index partition, earliest first. */
  async #fromShard(clientId: string, shard: number, upper: string | undefined, limit: number) {
    const found: { task: Task; openSk: string }[] = [];
    let startKey: Record<string, unknown> | undefined;
    for (let page = 0; page < MAX_PAGES && found.length < limit; page++) {
      const out = await this.#doc.send(
        new QueryCommand({
          TableName: this.#tasksTable,
          IndexName: OUTSTANDING_INDEX,
          KeyConditionExpression: upper === undefined ? 'openPk = :pk' : 'openPk = :pk AND openSk <= :upper',
          ExpressionAttributeValues: {
            ':pk': keys.openShardPk(clientId, shard),
            ...(upper === undefined ? {} : { ':upper': upper }),
          },
          Limit: Math.max(limit, 10),
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const task = taskOf(item)!;
        if (await this.#isRunningCallJob(clientId, task.jobId))
          found.push({ task, openSk: String(item.openSk) });
        if (found.length >= limit) break;
      }
      startKey = out.LastEvaluatedKey;
      if (!startKey) break;
    }
    return found;
  }

  async #acrossShards(clientId: string, upper: string | undefined, limit: number) {
    const shards = await Promise.all(
      Array.from({ length: TASK_SHARDS }, (_, shard) => this.#fromShard(clientId, shard, upper, limit)),
    );
    return shards
      .flat()
      .sort((a, b) => (a.openSk < b.openSk ? -1 : a.openSk > b.openSk ? 1 : 0))
      .slice(0, limit);
  }

  async #transact(items: TransactItem[]) {
    for (let tryNo = 1; ; tryNo++) {
      try {
        // Idempotent for the SDK's own retries (a timeout, a lost answer): a start or a settle that
        // went through is answered as done, not refused as if another writer had won. A cancelled
        // transaction applied nothing, so the next try here is a new request with a new token.
        await this.#doc.send(
          new TransactWriteCommand({ TransactItems: items, ClientRequestToken: randomUUID() }),
        );
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
}
