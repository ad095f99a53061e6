/**
 * A `message` job's tasks in DynamoDB, for the message pipeline running in the broker that holds
 * the client's lease: the {@link TaskSource} that claims pages of tasks, the {@link ReportSink}
 * that writes their outcomes, and the {@link BatchLedger} of multicasts.
 *
 * Claim = `TransactWriteItems` of up to {@link CLAIMS_PER_TRANSACTION} task updates and a
 * `ConditionCheck` that the lease passes the fence. The job's status is read (≤ `jobCacheMs` old)
 * rather than checked in the transaction: the reporter moves the job's counts in its own
 * transactions, and the two would conflict on the job item at every page. Claiming is not sending:
 * a pause stops sends in the broker (job watch, nudge), whatever was claimed goes back. A claimed
 * task is `in-flight` and stays in the `outstanding` index, re-sorted to when its hold ends
 * (`readyAt` = now + `holdMs`), with the lease token that claimed it (`claimToken`):
 * - a broker taking the client over reclaims at once every task an older token left in flight
 *   (its sends may or may not have reached LINE), with the SAME attempt, so its retry key is the
 *   same and LINE answers 409 to anything already delivered;
 * - the first claim of a task makes attempt 1 and records when it started (`startedAt`, from which
 *   LINE's 24-hour retry-key window counts); a reclaim changes neither.
 *
 * Outcomes are written in transactions too, with the job's counts moved in the same transaction
 * (exact counts, one count write per hundred messages): delivered → `completed`, failed → `failed`
 * with its reason, an opted-out recipient → `cancelled` (`opted-out`), released → `retry-wait` with
 * the same attempt (a job cancelled meanwhile → `cancelled`: the sweep may have passed already).
 * A task released after a request that may have reached LINE keeps `maybeSent`; if its recipient
 * has opted out by the next claim, nothing more is sent and its reason says it may have been
 * delivered (an opt-out is never overridden to find out).
 *
 * A multicast is recorded (`{jobId}#batch` / retry key, with its members) before its first
 * request. A member reclaimed later comes back with every still-unsettled member, under the
 * recorded key, so the resend is the same request and not a new one to the same people.
 */
import { randomUUID } from 'node:crypto';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { attemptKey } from '#shared/ids.ts';
import { JOB_CANCELLED_REASON } from '#shared/jobs/cancel.ts';
import { type Job, keys } from '#shared/jobs/model.ts';
import type {
  BatchLedger,
  ClaimedTask,
  MulticastBatch,
  ReportSink,
  TaskOutcome,
  TaskSource,
} from '#shared/messaging/ports.ts';
import type { MessageTemplate } from '#shared/messaging/template.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { leaseFenceCheck } from './dynamo-leases.ts';

/** Task updates per claim transaction (+ the lease check: 100 items, the service's limit). */
export const CLAIMS_PER_TRANSACTION = 99;
/** Outcome updates per transaction (+ the job's counts). */
export const OUTCOMES_PER_TRANSACTION = 99;
/** How long a claim holds a task before the same lease holder may claim it again. Default 15 min. */
export const DEFAULT_HOLD_MS = 15 * 60_000;
/** The reason of a task whose recipient unfollowed the channel after the list was uploaded. */
export const OPTED_OUT_REASON = 'the recipient opted out (unfollowed the channel)';
/** The same, for a task whose attempt may have reached LINE before the opt-out (a resend was not tried). */
export const OPTED_OUT_MAYBE_SENT_REASON =
  'the recipient opted out (unfollowed the channel) after an attempt whose answer was lost: it may have been delivered';
/** A multicast record outlives LINE's 24-hour retry-key window, then TTL removes it. */
const BATCH_TTL_SECONDS = 25 * 3600;
const AFTER_INSTANT = '#~';
const MAX_TRIES = 8;
/** Index items read per shard per page, at most. */
const MAX_SHARD_READ = 1_000;

/** The lease a session claims under; `token()` is undefined once it is lost. */
export interface MessageClaimLease {
  readonly clientId: string;
  readonly owner: string;
  token(): number | undefined;
}

export interface DynamoMessageTasksOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  readonly clock: Clock;
  /** The recipients of `recipients` who opted out (unfollowed); none when absent. */
  readonly optedOut?: (clientId: string, recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  readonly holdMs?: number;
  /** How long a job's status is trusted when choosing tasks (the claim re-checks it), ms. Default 1,000. */
  readonly jobCacheMs?: number;
}

/** A lease holder's view of its client's message tasks. */
export interface MessageSession {
  readonly source: TaskSource;
  readonly report: ReportSink;
  readonly batches: BatchLedger;
  /** True once a claim was refused by the lease fence: the lease is gone. */
  fenced(): boolean;
  /** The jobs this session has claimed from (for the status watch). */
  jobs(): readonly string[];
  /** Outcomes written so far in this session, by kind. */
  written(): { delivered: number; failed: number; skipped: number; released: number };
}

export interface DynamoMessageTasks {
  /**
   * A session for the lease holder. `accept` narrows the running message jobs it claims from
   * (e.g. those inside their calling hours now).
   */
  session(lease: MessageClaimLease, accept?: (job: Job) => boolean): MessageSession;
  /** The job as stored now (strongly consistent). */
  getJob(clientId: string, jobId: string): Promise<Job | undefined>;
  /** Whether the client has a `message` task ready to claim now (any running message job). */
  hasClaimable(clientId: string): Promise<boolean>;
}

class ReportRetryError extends Error {
  override name = 'ReportRetryError';
}

type Item = Record<string, unknown>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const iso = (ms: number) => new Date(ms).toISOString();
const openSkOf = (readyAt: number, jobId: string, taskId: string) => `${iso(readyAt)}#${jobId}#${taskId}`;
const batchPk = (jobId: string) => `${jobId}#batch`;

/** A task's template variables: its own columns, and `name` for the list's name column (氏名, お名前…). */
function variablesOf(item: Item): Record<string, string> {
  const variables = (item.variables as Record<string, string> | undefined) ?? {};
  return typeof item.name === 'string' && !Object.hasOwn(variables, 'name')
    ? { name: item.name, ...variables }
    : variables;
}

function cancellationCodes(error: TransactionCanceledException): (string | undefined)[] {
  return (error.CancellationReasons ?? []).map((r) => r.Code);
}

/** The message side of the tasks table. */
export function makeDynamoMessageTasks(
  doc: DynamoDBDocumentClient,
  options: DynamoMessageTasksOptions,
): DynamoMessageTasks {
  const { controlTable, tasksTable, clock } = options;
  const holdMs = options.holdMs ?? DEFAULT_HOLD_MS;
  const jobCacheMs = options.jobCacheMs ?? 1_000;
  const jobCache = new Map<string, { job: Job | undefined; at: number }>();
  // One template object per job, so the pipeline compiles it once and can group its tasks.
  const templates = new Map<string, MessageTemplate>();

  async function getJob(clientId: string, jobId: string): Promise<Job | undefined> {
    const out = await doc.send(
      new GetCommand({ TableName: controlTable, Key: keys.job(clientId, jobId), ConsistentRead: true }),
    );
    const job = out.Item as Job | undefined;
    jobCache.set(`${clientId}/${jobId}`, { job, at: clock.now() });
    return job;
  }

  async function cachedJob(clientId: string, jobId: string): Promise<Job | undefined> {
    const hit = jobCache.get(`${clientId}/${jobId}`);
    if (hit && clock.now() - hit.at < jobCacheMs) return hit.job;
    return getJob(clientId, jobId);
  }

  const isRunningMessageJob = (job: Job | undefined): job is Job =>
    job?.status === 'running' && job.channel === 'message' && job.message !== undefined;

  function templateOf(job: Job): MessageTemplate {
    let template = templates.get(job.jobId);
    if (!template) {
      template = job.message!;
      templates.set(job.jobId, template);
    }
    return template;
  }

  /** Index entries of one shard with `openSk` in [lower, upper]. */
  async function readShard(
    clientId: string,
    shard: number,
    range: { lower?: string; upper: string },
    wanted: (item: Item) => Promise<boolean>,
    limit: number,
    maxRead = MAX_SHARD_READ,
  ): Promise<Item[]> {
    const found: Item[] = [];
    let startKey: Item | undefined;
    let read = 0;
    do {
      const out = await doc.send(
        new QueryCommand({
          TableName: tasksTable,
          IndexName: 'outstanding',
          KeyConditionExpression:
            range.lower === undefined
              ? 'openPk = :pk AND openSk <= :upper'
              : 'openPk = :pk AND openSk BETWEEN :lower AND :upper',
          ExpressionAttributeValues: {
            ':pk': `${clientId}#${shard}`,
            ':upper': range.upper,
            ...(range.lower === undefined ? {} : { ':lower': range.lower }),
          },
          Limit: Math.min(MAX_SHARD_READ, Math.max(limit * 2, 20)),
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        read++;
        if (found.length < limit && (await wanted(item))) found.push(item);
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey && found.length < limit && read < maxRead);
    return found;
  }

  async function getItems(keyList: readonly Item[]): Promise<Item[]> {
    const items: Item[] = [];
    for (let i = 0; i < keyList.length; i += 100) {
      let pending: Item[] | undefined = keyList.slice(i, i + 100) as Item[];
      for (let attempt = 0; pending && pending.length > 0; attempt++) {
        if (attempt > 0) await sleep(Math.min(1_000, 25 * 2 ** attempt));
        const out: BatchGetCommandOutput = await doc.send(
          new BatchGetCommand({ RequestItems: { [tasksTable]: { Keys: pending, ConsistentRead: true } } }),
        );
        items.push(...(out.Responses?.[tasksTable] ?? []));
        pending = out.UnprocessedKeys?.[tasksTable]?.Keys as Item[] | undefined;
      }
    }
    return items;
  }

  async function transact(items: NonNullable<TransactWriteCommandInput['TransactItems']>) {
    // One token until DynamoDB says the transaction was cancelled (it applied nothing): a retry
    // after a timeout or a lost answer is then the same request, answered as done if it was.
    let token = randomUUID();
    for (let tryNo = 1; ; tryNo++) {
      try {
        await doc.send(new TransactWriteCommand({ TransactItems: items, ClientRequestToken: token }));
        return undefined;
      } catch (error) {
        if (!(error instanceof TransactionCanceledException)) {
          if (tryNo >= MAX_TRIES) throw error;
          await sleep(Math.min(2_000, 50 * 2 ** tryNo));
          continue;
        }
        token = randomUUID();
        const codes = cancellationCodes(error);
        if (!codes.includes('ConditionalCheckFailed') && tryNo < MAX_TRIES) {
          // A conflict with a concurrent write, or throttling: no answer yet.
          await sleep(Math.min(1_000, 20 * 2 ** tryNo));
          continue;
        }
        return codes;
      }
    }
  }

  function session(lease: MessageClaimLease, accept: (job: Job) => boolean = () => true): MessageSession {
    const { clientId } = lease;
    /** Tasks claimed in this session and not yet written back. */
    const held = new Set<string>();
    const jobsSeen = new Set<string>();
    /** Recorded multicasts of this session: members not yet settled. */
    const openBatches = new Map<string, { jobId: string; left: number }>();
    /** Recorded multicasts read back from the table, by retry key. */
    const knownBatches = new Map<string, { jobId: string; attempt: number; taskIds: string[] } | null>();
    let adoptQueue: Item[] | undefined;
    let batchByTask = new Map<string, string>();
    let wasFenced = false;
    const written = { delivered: 0, failed: 0, skipped: 0, released: 0 };

    /** May this session claim the task as the index shows it? */
    async function claimable(item: Item, token: number, now: number): Promise<boolean> {
      if (item.channel !== 'message' || held.has(String(item.taskId))) return false;
      const state = item.state;
      const reclaim =
        state === 'in-flight' && (Number(item.claimToken ?? 0) < token || Number(item.readyAt) <= now);
      if (state !== 'pending' && state !== 'retry-wait' && !reclaim) return false;
      const job = await cachedJob(clientId, String(item.jobId));
      return isRunningMessageJob(job) && accept(job);
    }

    async function batchOf(jobId: string, retryKey: string) {
      if (!knownBatches.has(retryKey)) {
        const out = await doc.send(
          new GetCommand({
            TableName: tasksTable,
            Key: { pk: batchPk(jobId), sk: retryKey },
            ConsistentRead: true,
          }),
        );
        knownBatches.set(
          retryKey,
          out.Item
            ? { jobId, attempt: Number(out.Item.attempt), taskIds: out.Item.taskIds as string[] }
            : null,
        );
      }
      return knownBatches.get(retryKey) ?? undefined;
    }

    /** The recorded batches of `jobIds`, for tasks a dead holder left in flight. */
    async function loadBatches(jobIds: Iterable<string>): Promise<Map<string, string>> {
      const byTask = new Map<string, string>();
      for (const jobId of jobIds) {
        let startKey: Item | undefined;
        do {
          const out = await doc.send(
            new QueryCommand({
              TableName: tasksTable,
              KeyConditionExpression: 'pk = :pk',
              ExpressionAttributeValues: { ':pk': batchPk(jobId) },
              ...(startKey ? { ExclusiveStartKey: startKey } : {}),
            }),
          );
          for (const item of out.Items ?? []) {
            const retryKey = String(item.sk);
            const taskIds = item.taskIds as string[];
            knownBatches.set(retryKey, { jobId, attempt: Number(item.attempt), taskIds });
            for (const taskId of taskIds) byTask.set(taskId, retryKey);
          }
          startKey = out.LastEvaluatedKey;
        } while (startKey);
      }
      return byTask;
    }

    /** Adds every still-unsettled member of a recorded batch that a candidate belongs to. */
    async function withBatchMembers(
      candidates: Item[],
      batchOfTask: (item: Item) => string | undefined,
      token: number,
      now: number,
    ): Promise<{ item: Item; batchKey?: string }[]> {
      const out: { item: Item; batchKey?: string }[] = [];
      const taken = new Set<string>();
      for (const item of candidates) {
        const taskId = String(item.taskId);
        if (taken.has(taskId)) continue;
        const retryKey = batchOfTask(item);
        const batch = retryKey ? await batchOf(String(item.jobId), retryKey) : undefined;
        if (!retryKey || !batch) {
          taken.add(taskId);
          out.push({ item });
          continue;
        }
        const members = await getItems(
          batch.taskIds.filter((id) => !taken.has(id)).map((id) => keys.task(batch.jobId, id)),
        );
        for (const member of members) {
          const id = String(member.taskId);
          if (Number(member.attempts) !== batch.attempt) continue;
          if (!(await claimable(member, token, now))) continue;
          taken.add(id);
          out.push({ item: member, batchKey: retryKey });
        }
      }
      return out;
    }

    /** Claims `chosen` (one job) in transactions; returns the claimed ones. */
    async function claim(jobId: string, chosen: { item: Item; batchKey?: string }[], token: number) {
      const claimed: { item: Item; batchKey?: string; startedAt: number; attempt: number }[] = [];
      for (let i = 0; i < chosen.length && !wasFenced; i += CLAIMS_PER_TRANSACTION) {
        let group = chosen.slice(i, i + CLAIMS_PER_TRANSACTION);
        while (group.length > 0) {
          const now = clock.now();
          const holdUntil = now + holdMs;
          const items: NonNullable<TransactWriteCommandInput['TransactItems']> = [
            leaseFenceCheck(controlTable, { clientId, owner: lease.owner, token, now }),
            ...group.map(({ item }) => ({
              Update: {
                TableName: tasksTable,
                Key: keys.task(jobId, String(item.taskId)),
                UpdateExpression:
                  'SET #state = :inFlight, attempts = :attempts, startedAt = if_not_exists(startedAt, :now), ' +
                  'claimToken = :token, readyAt = :holdUntil, openSk = :openSk, updatedAt = :now',
                ConditionExpression:
                  '#state = :seenState AND attempts = :seenAttempts AND readyAt = :seenReadyAt',
                ExpressionAttributeNames: { '#state': 'state' },
                ExpressionAttributeValues: {
                  ':inFlight': 'in-flight',
                  ':attempts': Math.max(1, Number(item.attempts)),
                  ':now': now,
                  ':token': token,
                  ':holdUntil': holdUntil,
                  ':openSk': openSkOf(holdUntil, jobId, String(item.taskId)),
                  ':seenState': item.state,
                  ':seenAttempts': Number(item.attempts),
                  ':seenReadyAt': Number(item.readyAt),
                },
              },
            })),
          ];
          const codes = await transact(items);
          if (codes === undefined) {
            for (const c of group) {
              const startedAt = c.item.startedAt === undefined ? now : Number(c.item.startedAt);
              claimed.push({ ...c, startedAt, attempt: Math.max(1, Number(c.item.attempts)) });
            }
            break;
          }
          if (codes[0] === 'ConditionalCheckFailed') {
            wasFenced = true;
            break;
          }
          // Tasks that moved on since the index read: drop them, claim the rest.
          const moved = new Set(
            codes.flatMap((code, j) => (j >= 1 && code === 'ConditionalCheckFailed' ? [j - 1] : [])),
          );
          if (moved.size === 0) throw new Error(`message task claim cancelled: ${codes.join(', ')}`);
          group = group.filter((_, j) => !moved.has(j));
        }
      }
      return claimed;
    }

    const source: TaskSource = {
      async nextPage(limit) {
        const token = lease.token();
        if (token === undefined || wasFenced) return [];
        const now = clock.now();
        let candidates: Item[] = [];
        if (adoptQueue === undefined) {
          // Tasks an earlier holder left in flight: in the index up to their hold's end. Read once,
          // whole (at most what one holder can have out), then handed out a page at a time.
          const lower = iso(now);
          const upper = `${iso(now + holdMs)}${AFTER_INSTANT}`;
          const left = await Promise.all(
            Array.from({ length: TASK_SHARDS }, (_, shard) =>
              readShard(
                clientId,
                shard,
                { lower, upper },
                async (item) =>
                  item.state === 'in-flight' &&
                  Number(item.claimToken ?? 0) < token &&
                  (await claimable(item, token, now)),
                Number.POSITIVE_INFINITY,
                Number.POSITIVE_INFINITY,
              ),
            ),
          );
          adoptQueue = left.flat();
          if (adoptQueue.length > 0) {
            batchByTask = await loadBatches(new Set(adoptQueue.map((c) => String(c.jobId))));
          }
        }
        if (adoptQueue.length > 0) candidates = adoptQueue.splice(0, limit);
        if (candidates.length === 0) {
          const perShard = Math.ceil(limit / TASK_SHARDS);
          const upper = `${iso(now)}${AFTER_INSTANT}`;
          const ready = await Promise.all(
            Array.from({ length: TASK_SHARDS }, (_, shard) =>
              readShard(clientId, shard, { upper }, (item) => claimable(item, token, now), perShard),
            ),
          );
          candidates = ready.flat().slice(0, limit);
        }
        if (candidates.length === 0) return [];
        const chosen = await withBatchMembers(
          candidates,
          (item) => (item.batchKey as string | undefined) ?? batchByTask.get(String(item.taskId)),
          token,
          now,
        );
        const byJob = new Map<string, { item: Item; batchKey?: string }[]>();
        for (const c of chosen) {
          const jobId = String(c.item.jobId);
          byJob.set(jobId, [...(byJob.get(jobId) ?? []), c]);
        }
        const page: ClaimedTask[] = [];
        for (const [jobId, group] of byJob) {
          const job = await cachedJob(clientId, jobId);
          if (!isRunningMessageJob(job) || !accept(job)) continue;
          // Opt-outs are read while the claim is written: each takes a round trip or more.
          const [claimed, optedOut] = await Promise.all([
            claim(jobId, group, token),
            options.optedOut
              ? options.optedOut(
                  clientId,
                  group.map((c) => String(c.item.recipient)),
                )
              : new Set<string>(),
          ]);
          if (claimed.length === 0) continue;
          jobsSeen.add(jobId);
          const template = templateOf(job);
          for (const c of claimed) {
            const taskId = String(c.item.taskId);
            held.add(taskId);
            const recipient = String(c.item.recipient);
            page.push({
              jobId,
              taskId,
              recipient,
              variables: variablesOf(c.item),
              template,
              attempt: c.attempt,
              attemptStartedAt: c.startedAt,
              ...(optedOut.has(recipient) ? { optedOut: true } : {}),
              ...(c.item.state === 'in-flight' || c.item.maybeSent === true ? { maybeSent: true } : {}),
              ...(c.batchKey ? { batch: { retryKey: c.batchKey } } : {}),
            });
          }
        }
        return page;
      },
    };

    /** The task update for an outcome, and what it adds to the job's counts. */
    function outcomeUpdate(outcome: TaskOutcome, token: number, cancelled: boolean) {
      const names: Record<string, string> = { '#state': 'state' };
      const values: Record<string, unknown> = {
        ':attempt': outcome.attempt,
        ':lastResult': outcome.lastResult,
        ':now': outcome.at,
        ':inFlight': 'in-flight',
      };
      const set = ['#state = :state', 'lastResult = :lastResult', 'updatedAt = :now'];
      const remove: string[] = ['claimToken'];
      let condition = '#state IN (:inFlight, :retryWait) AND attempts = :attempt';
      values[':retryWait'] = 'retry-wait';
      let count: 'completed' | 'failed' | 'cancelled' | undefined;
      const multicastKey =
        outcome.retryKey && outcome.retryKey !== attemptKey(outcome.jobId, outcome.taskId, outcome.attempt)
          ? outcome.retryKey
          : undefined;
      if (outcome.requestId) {
        set.push('requestId = :requestId');
        values[':requestId'] = outcome.requestId;
      }
      if (outcome.kind === 'released' && !cancelled) {
        const readyAt = outcome.at + (outcome.retryAfterMs ?? 0);
        values[':state'] = 'retry-wait';
        set.push('readyAt = :readyAt', 'openSk = :openSk');
        values[':readyAt'] = readyAt;
        values[':openSk'] = openSkOf(readyAt, outcome.jobId, outcome.taskId);
        if (multicastKey) {
          set.push('batchKey = :batchKey');
          values[':batchKey'] = multicastKey;
        }
        if (outcome.maybeSent) {
          set.push('maybeSent = :maybeSent');
          values[':maybeSent'] = true;
        }
        // Only the claim's own holder gives a task back: a newer holder may have reclaimed it.
        condition = '#state = :inFlight AND attempts = :attempt AND claimToken = :token';
        values[':token'] = token;
        delete values[':retryWait'];
      } else {
        remove.push('openPk', 'openSk', 'batchKey', 'maybeSent');
        if (outcome.kind === 'delivered') {
          values[':state'] = 'completed';
          count = 'completed';
          remove.push('reason');
        } else if (outcome.kind === 'failed') {
          values[':state'] = 'failed';
          set.push('reason = :reason');
          values[':reason'] = outcome.reason ?? outcome.lastResult;
          count = 'failed';
        } else {
          values[':state'] = 'cancelled';
          set.push('reason = :reason');
          values[':reason'] =
            outcome.kind !== 'skipped'
              ? JOB_CANCELLED_REASON
              : outcome.maybeSent
                ? OPTED_OUT_MAYBE_SENT_REASON
                : OPTED_OUT_REASON;
          count = 'cancelled';
        }
        if (multicastKey) {
          set.push('sentWith = :sentWith');
          values[':sentWith'] = multicastKey;
        }
      }
      return {
        count,
        update: {
          Update: {
            TableName: tasksTable,
            Key: keys.task(outcome.jobId, outcome.taskId),
            UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
            ConditionExpression: condition,
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
          },
        },
      };
    }

    /** Writes one job's outcomes (≤ OUTCOMES_PER_TRANSACTION) and its counts in one transaction. */
    async function writeGroup(jobId: string, outcomes: TaskOutcome[], token: number): Promise<TaskOutcome[]> {
      let left = outcomes;
      let cancelledJob = false;
      for (let tryNo = 1; left.length > 0; tryNo++) {
        if (tryNo > MAX_TRIES) throw new ReportRetryError(`outcomes of job ${jobId} not written`);
        const updates = left.map((o) => outcomeUpdate(o, token, cancelledJob));
        const counts = { completed: 0, failed: 0, cancelled: 0 };
        for (const u of updates) if (u.count) counts[u.count]++;
        const releases = left.some((o) => o.kind === 'released') && !cancelledJob;
        const jobUpdate = {
          Update: {
            TableName: controlTable,
            Key: keys.job(clientId, jobId),
            UpdateExpression:
              'ADD #counts.#completed :completed, #counts.#failed :failed, #counts.#cancelled :cancelled',
            ConditionExpression: releases
              ? 'attribute_exists(#counts) AND #status <> :cancelledStatus'
              : 'attribute_exists(#counts)',
            ExpressionAttributeNames: {
              '#counts': 'counts',
              '#completed': 'completed',
              '#failed': 'failed',
              '#cancelled': 'cancelled',
              ...(releases ? { '#status': 'status' } : {}),
            },
            ExpressionAttributeValues: {
              ':completed': counts.completed,
              ':failed': counts.failed,
              ':cancelled': counts.cancelled,
              ...(releases ? { ':cancelledStatus': 'cancelled' } : {}),
            },
          },
        };
        const codes = await transact([jobUpdate, ...updates.map((u) => u.update)]);
        if (codes === undefined) return left;
        if (codes[0] === 'ConditionalCheckFailed') {
          if (!releases) throw new ReportRetryError(`job ${jobId} has no counts to move`);
          // Cancelled while these were out: they end cancelled, not waiting for a claim that never comes.
          cancelledJob = true;
          continue;
        }
        // Outcomes for tasks that moved on (a newer holder settled them): nothing to write.
        const stale = new Set(
          codes.flatMap((code, j) => (j >= 1 && code === 'ConditionalCheckFailed' ? [j - 1] : [])),
        );
        if (stale.size === 0) throw new ReportRetryError(`outcome write cancelled: ${codes.join(', ')}`);
        left = left.filter((_, j) => !stale.has(j));
      }
      return left;
    }

    const report: ReportSink = {
      async write(outcomes) {
        const token = lease.token() ?? -1;
        const byJob = new Map<string, TaskOutcome[]>();
        for (const o of outcomes) byJob.set(o.jobId, [...(byJob.get(o.jobId) ?? []), o]);
        for (const [jobId, list] of byJob) {
          for (let i = 0; i < list.length; i += OUTCOMES_PER_TRANSACTION) {
            const chunk = list.slice(i, i + OUTCOMES_PER_TRANSACTION);
            await writeGroup(jobId, chunk, token);
            for (const o of chunk) {
              held.delete(o.taskId);
              written[o.kind]++;
              const batch = o.retryKey ? openBatches.get(o.retryKey) : undefined;
              if (!batch) continue;
              if (o.kind === 'released') openBatches.delete(o.retryKey!);
              else if (--batch.left === 0) {
                openBatches.delete(o.retryKey!);
                // Every member settled: the record has done its job.
                await doc
                  .send(
                    new DeleteCommand({
                      TableName: tasksTable,
                      Key: { pk: batchPk(jobId), sk: o.retryKey! },
                    }),
                  )
                  .catch(() => undefined);
              }
            }
          }
        }
      },
    };

    const batches: BatchLedger = {
      async record(batch: MulticastBatch) {
        await doc.send(
          new PutCommand({
            TableName: tasksTable,
            Item: {
              pk: batchPk(batch.jobId),
              sk: batch.retryKey,
              attempt: batch.attempt,
              taskIds: [...batch.taskIds],
              expiresAt: Math.floor(clock.now() / 1000) + BATCH_TTL_SECONDS,
            },
          }),
        );
        openBatches.set(batch.retryKey, { jobId: batch.jobId, left: batch.taskIds.length });
      },
    };

    return {
      source,
      report,
      batches,
      fenced: () => wasFenced,
      jobs: () => [...jobsSeen],
      written: () => ({ ...written }),
    };
  }

  async function hasClaimable(clientId: string): Promise<boolean> {
    const now = clock.now();
    const upper = `${iso(now)}${AFTER_INSTANT}`;
    for (let shard = 0; shard < TASK_SHARDS; shard++) {
      const found = await readShard(
        clientId,
        shard,
        { upper },
        async (item) =>
          item.channel === 'message' && isRunningMessageJob(await cachedJob(clientId, String(item.jobId))),
        1,
      );
      if (found.length > 0) return true;
    }
    return false;
  }

  return { session, getJob, hasClaimable };
}
