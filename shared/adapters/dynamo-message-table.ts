/**
 * The reads and writes every part of a message session shares (dynamo-message-tasks.ts): the
 * `outstanding` index read shard by shard, strongly consistent batch reads, transactions retried
 * under one client request token, and the job's status and template through a short cache.
 */
import { randomUUID } from 'node:crypto';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  type DynamoDBDocumentClient,
  QueryCommand,
  TransactWriteCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import {
  contentOf,
  type Job,
  type JobChannel,
  jobHasEnded,
  keys,
  OUTSTANDING_INDEX,
} from '#shared/jobs/model.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { JobCache } from './dynamo-job-cache.ts';

export type Item = Record<string, unknown>;
export type TransactItems = NonNullable<TransactWriteCommandInput['TransactItems']>;

export const MAX_TRIES = 8;
/** Index items read per shard per page, at most. */
const MAX_SHARD_READ = 1_000;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const iso = (ms: number) => new Date(ms).toISOString();

/**
 * A job whose message tasks may be claimed at `now`: running, a LINE job with its message or an
 * email job with its email, not past its end.
 */
export function isRunningMessageJob(job: Job | undefined, now: number): job is Job {
  return job?.status === 'running' && contentOf(job) !== undefined && !jobHasEnded(job, now);
}

export interface MessageTableOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  readonly clock: Clock;
  readonly holdMs: number;
  readonly jobCacheMs: number;
}

export class MessageTaskTable {
  readonly doc: DynamoDBDocumentClient;
  readonly controlTable: string;
  readonly tasksTable: string;
  readonly clock: Clock;
  /** How long a claim holds a task. */
  readonly holdMs: number;
  readonly jobs: JobCache;
  // One template object per job, so the pipeline compiles it once and can group its tasks.
  readonly #templates = new Map<string, MessageTemplate>();

  constructor(doc: DynamoDBDocumentClient, options: MessageTableOptions) {
    this.doc = doc;
    this.controlTable = options.controlTable;
    this.tasksTable = options.tasksTable;
    this.clock = options.clock;
    this.holdMs = options.holdMs;
    this.jobs = new JobCache(doc, options.controlTable, () => options.clock.now(), options.jobCacheMs);
  }

  /**
   * The job's content on `channel` (its own by default; a fallback job's tasks carry the content of
   * the channel each is on), one object per job and channel: tasks of one job share it.
   */
  templateOf(job: Job, channel: JobChannel = job.channel): MessageTemplate {
    const key = `${job.jobId}#${channel}`;
    let template = this.#templates.get(key);
    if (!template) {
      // An email job's tasks carry its email: the pipeline's transport reads it as such.
      template = contentOf(job, channel) as MessageTemplate;
      this.#templates.set(key, template);
    }
    return template;
  }

  /**
   * Index entries of one shard with `openSk` in [lower, upper] that are `wanted`, up to `limit`,
   * reading at most `maxRead`; only `attributes` of each when given (a reader that reads the chosen
   * items again need not parse the rest).
   */
  async readShard<T = Item>(
    clientId: string,
    shard: number,
    range: { lower?: string; upper: string },
    wanted: (entry: T) => Promise<boolean>,
    limit: number,
    options: {
      /** What each entry is read as (default: the item as it is). */
      readonly readAs?: (item: Item) => T;
      readonly maxRead?: number;
      readonly attributes?: readonly string[];
      /** Entries a Query reads at most (default twice `limit`, at least 20). */
      readonly pageLimit?: number;
      /** Entries the first Query reads at most, when fewer than `pageLimit` (a read that expects few to pass over). */
      readonly firstPageLimit?: number;
    } = {},
  ): Promise<T[]> {
    const readAs = options.readAs ?? ((item: Item) => item as T);
    const maxRead = options.maxRead ?? MAX_SHARD_READ;
    const names = options.attributes?.map((name, i) => [`#a${i}`, name] as const);
    const found: T[] = [];
    let startKey: Item | undefined;
    let read = 0;
    const pageLimit = options.pageLimit ?? Math.min(MAX_SHARD_READ, Math.max(limit * 2, 20));
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tasksTable,
          IndexName: OUTSTANDING_INDEX,
          KeyConditionExpression:
            range.lower === undefined
              ? 'openPk = :pk AND openSk <= :upper'
              : 'openPk = :pk AND openSk BETWEEN :lower AND :upper',
          ExpressionAttributeValues: {
            ':pk': keys.openShardPk(clientId, shard),
            ':upper': range.upper,
            ...(range.lower === undefined ? {} : { ':lower': range.lower }),
          },
          ...(names
            ? {
                ProjectionExpression: names.map(([alias]) => alias).join(', '),
                ExpressionAttributeNames: Object.fromEntries(names),
              }
            : {}),
          Limit: read === 0 ? Math.min(pageLimit, options.firstPageLimit ?? pageLimit) : pageLimit,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        read++;
        if (found.length >= limit) continue;
        const entry = readAs(item);
        if (await wanted(entry)) found.push(entry);
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey && found.length < limit && read < maxRead);
    return found;
  }

  /** The task items of `keyList`, strongly consistent, unprocessed keys retried. */
  getItems(keyList: readonly Item[]): Promise<Item[]> {
    return getItemsConsistent(this.doc, this.tasksTable, keyList);
  }

  /**
   * Writes `items` in one transaction: undefined when it was applied, else the cancellation codes
   * of a transaction refused by a condition (or still conflicting after {@link MAX_TRIES}).
   */
  transact(items: TransactItems): Promise<(string | undefined)[] | undefined> {
    return transactWrite(this.doc, items);
  }
}

/** The items of `keyList` in `table`, strongly consistent, 100 a request, unprocessed keys retried. */
export async function getItemsConsistent(
  doc: DynamoDBDocumentClient,
  table: string,
  keyList: readonly Item[],
): Promise<Item[]> {
  const items: Item[] = [];
  for (let i = 0; i < keyList.length; i += 100) {
    let pending: Item[] | undefined = keyList.slice(i, i + 100) as Item[];
    for (let attempt = 0; pending && pending.length > 0; attempt++) {
      if (attempt > 0) await sleep(Math.min(1_000, 25 * 2 ** attempt));
      const out: BatchGetCommandOutput = await doc.send(
        new BatchGetCommand({ RequestItems: { [table]: { Keys: pending, ConsistentRead: true } } }),
      );
      items.push(...(out.Responses?.[table] ?? []));
      pending = out.UnprocessedKeys?.[table]?.Keys as Item[] | undefined;
    }
  }
  return items;
}

/**
 * Writes `items` in one transaction: undefined when it was applied, else the cancellation codes
 * of a transaction refused by a condition (or still conflicting after {@link MAX_TRIES}).
 */
export async function transactWrite(
  doc: DynamoDBDocumentClient,
  items: TransactItems,
): Promise<(string | undefined)[] | undefined> {
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
      const codes = (error.CancellationReasons ?? []).map((r) => r.Code);
      if (!codes.includes('ConditionalCheckFailed') && tryNo < MAX_TRIES) {
        // A conflict with a concurrent write, or throttling: no answer yet.
        await sleep(Math.min(1_000, 20 * 2 ** tryNo));
        continue;
      }
      return codes;
    }
  }
}

/** The indexes (after the first `skip` items) of a cancelled transaction's items whose condition failed. */
export function failedConditions(codes: readonly (string | undefined)[], skip = 1): Set<number> {
  return new Set(
    codes.flatMap((code, j) => (j >= skip && code === 'ConditionalCheckFailed' ? [j - skip] : [])),
  );
}
