/**
 * DynamoDB adapter of the {@link JobStore} (see the access patterns in `shared/resources.ts`): a
 * job as one control-table item with its `byStatus` index entry while the job manager must look
 * at it; status changes and the ingest's steps are conditional writes.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { IngestCursor } from '#shared/csv/read-list.ts';
import { ValidationError } from '#shared/jobs/errors.ts';
import type { JobStatus } from '#shared/jobs/job-lifecycle.ts';
import { type Job, type JobCounts, keys, RESULT_ATTRIBUTE_PREFIX, storedJob } from '#shared/jobs/model.ts';
import type { IngestClaim, IngestState, JobStore } from '#shared/jobs/ports.ts';

/**
 * Every field of a {@link Job}, the compiler sees to it: a field left out here would be written and
 * never read back (an email or SMS job's content, `ignoreContactLimits` and `maxCallDurationSeconds` were).
 * `results` is read from its attributes, one a result (`resultAttribute`).
 */
const JOB_FIELD_SET: Readonly<Record<Exclude<keyof Job, 'results'>, true>> = {
  clientId: true,
  jobId: true,
  name: true,
  channel: true,
  fallback: true,
  scenarioId: true,
  startAt: true,
  endAt: true,
  callingHours: true,
  restrictedPeriods: true,
  holidays: true,
  timeZoneBy: true,
  maxAttempts: true,
  retryDelaySeconds: true,
  retries: true,
  maxCallDurationSeconds: true,
  ringTimeoutSeconds: true,
  status: true,
  ignoreContactLimits: true,
  counts: true,
  failureReason: true,
  pausedReason: true,
  reportArchive: true,
  reopened: true,
  source: true,
  recipientColumn: true,
  message: true,
  email: true,
  sms: true,
  createdAt: true,
  updatedAt: true,
};
const JOB_FIELDS = Object.keys(JOB_FIELD_SET) as readonly (keyof Job)[];

/** The job record of an item (without keys, index and ingest attributes). */
function toJob(item: Record<string, unknown>): Job {
  const job: Record<string, unknown> = {};
  for (const field of JOB_FIELDS) if (item[field] !== undefined) job[field] = item[field];
  const results = Object.entries(item).flatMap(([name, value]) =>
    name.startsWith(RESULT_ATTRIBUTE_PREFIX)
      ? [[name.slice(RESULT_ATTRIBUTE_PREFIX.length), Number(value)]]
      : [],
  );
  if (results.length > 0) job.results = Object.fromEntries(results);
  return storedJob(job as unknown as Job);
}

function toIngestState(item: Record<string, unknown>): IngestState {
  return {
    step: Number(item.ingestStep ?? 0),
    ...(item.ingestCursor ? { cursor: item.ingestCursor as IngestCursor } : {}),
    ...(typeof item.ingestFilterKey === 'string' ? { filterKey: item.ingestFilterKey } : {}),
    ...(typeof item.ingestETag === 'string' ? { eTag: item.ingestETag } : {}),
    ...(typeof item.ingestSize === 'number' ? { size: item.ingestSize } : {}),
    ...(typeof item.ingestChunked === 'boolean' ? { chunked: item.ingestChunked } : {}),
  };
}

/** SET / REMOVE clauses for the byStatus index entry of a job in `status`. */
function statusIndexUpdate(
  job: Job,
  status: JobStatus,
): { set: string; remove: string; values: Record<string, unknown> } {
  const entry = keys.jobStatusIndex({ status, startAt: job.startAt, jobId: job.jobId });
  return entry
    ? {
        set: ', statusKey = :statusKey, dueKey = :dueKey',
        remove: '',
        values: { ':statusKey': entry.statusKey, ':dueKey': entry.dueKey },
      }
    : { set: '', remove: ' REMOVE statusKey, dueKey', values: {} };
}

function isConditionFailure(error: unknown): boolean {
  return (
    error instanceof ConditionalCheckFailedException ||
    (error as Error)?.name === 'ConditionalCheckFailedException'
  );
}

/** Encodes a page's LastEvaluatedKey as an opaque token; refuses tokens of another client. */
const pageToken = {
  encode: (key: Record<string, unknown>) =>
    Buffer.from(JSON.stringify({ sk: key.sk }), 'utf8').toString('base64url'),
  decode(token: string, pk: string): Record<string, unknown> {
    try {
      const { sk } = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { sk?: unknown };
      if (typeof sk === 'string' && sk.startsWith('JOB#')) return { pk, sk };
    } catch {
      // reported below
    }
    throw new ValidationError('invalid query', { next: ['is not a token this API returned'] });
  },
};

/** Jobs in the control table: status changes and the ingest's steps as conditional updates. */
export class DynamoJobStore implements JobStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #table: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.#table = tableName;
  }

  async create(job: Job) {
    const index = keys.jobStatusIndex(job);
    try {
      await this.#doc.send(
        new PutCommand({
          TableName: this.#table,
          Item: { ...keys.job(job.clientId, job.jobId), ...job, ...index },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return { job, created: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
    const item = await this.#item(job.clientId, job.jobId);
    return { job: toJob(item!), created: false };
  }

  async get(clientId: string, jobId: string) {
    const item = await this.#item(clientId, jobId);
    return item ? toJob(item) : undefined;
  }

  async list(clientId: string, page: Parameters<JobStore['list']>[1]) {
    const { pk, skPrefix } = keys.jobsOf(clientId);
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': pk, ':prefix': skPrefix },
        ScanIndexForward: false,
        Limit: page.limit,
        ...(page.next ? { ExclusiveStartKey: pageToken.decode(page.next, pk) } : {}),
      }),
    );
    const jobs = (out.Items ?? []).map(toJob);
    return { jobs, ...(out.LastEvaluatedKey ? { next: pageToken.encode(out.LastEvaluatedKey) } : {}) };
  }

  async transition(job: Job, to: JobStatus, now: number, reason?: string) {
    const index = statusIndexUpdate(job, to);
    // A pause by Switchboard says why; any other move (an operator's pause, a resume) clears it.
    const why = to === 'paused' && reason !== undefined ? reason : undefined;
    const remove = [index.remove ? 'statusKey, dueKey' : '', why === undefined ? 'pausedReason' : '']
      .filter(Boolean)
      .join(', ');
    const ok = await this.#conditional({
      Key: keys.job(job.clientId, job.jobId),
      UpdateExpression: `SET #status = :to, updatedAt = :now${index.set}${why === undefined ? '' : ', pausedReason = :why'} REMOVE ${remove}`,
      ConditionExpression: '#status = :from',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: {
        ':to': to,
        ':from': job.status,
        ':now': now,
        ...index.values,
        ...(why === undefined ? {} : { ':why': why }),
      },
    });
    if (ok) {
      const { pausedReason: _old, ...rest } = job;
      return {
        ok: true as const,
        job: { ...rest, status: to, updatedAt: now, ...(why === undefined ? {} : { pausedReason: why }) },
      };
    }
    const item = await this.#item(job.clientId, job.jobId);
    return { ok: false as const, ...(item ? { current: item.status as JobStatus } : {}) };
  }

  beginValidation(
    clientId: string,
    jobId: string,
    source: Parameters<JobStore['beginValidation']>[2],
    now: number,
  ) {
    const chunked = source.chunked === undefined ? '' : ', ingestChunked = :chunked';
    return this.#conditional({
      Key: keys.job(clientId, jobId),
      UpdateExpression: `SET #status = :validating, ingestStep = :zero, ingestETag = :etag, ingestSize = :size, updatedAt = :now${chunked}`,
      ConditionExpression: '#status = :uploading',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: {
        ':validating': 'validating',
        ':uploading': 'uploading',
        ':zero': 0,
        ':etag': source.eTag,
        ':size': source.size,
        ':now': now,
        ...(source.chunked === undefined ? {} : { ':chunked': source.chunked }),
      },
    });
  }

  async claimIngest(
    clientId: string,
    jobId: string,
    step: number,
    leaseId: string,
    until: number,
    now: number,
  ): Promise<IngestClaim> {
    try {
      const out = await this.#doc.send(
        new UpdateCommand({
          TableName: this.#table,
          Key: keys.job(clientId, jobId),
          UpdateExpression: 'SET ingestLeaseId = :lease, ingestLeaseUntil = :until',
          ConditionExpression:
            '#status = :validating AND ingestStep = :step AND (attribute_not_exists(ingestLeaseUntil) OR ingestLeaseUntil < :now)',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':lease': leaseId,
            ':until': until,
            ':validating': 'validating',
            ':step': step,
            ':now': now,
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { kind: 'claimed', job: toJob(out.Attributes!), state: toIngestState(out.Attributes!) };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
    return this.#whyNotClaimed(clientId, jobId, step, now);
  }

  /** Why an ingest step could not be claimed: not validating, done already, or held by another. */
  async #whyNotClaimed(clientId: string, jobId: string, step: number, now: number): Promise<IngestClaim> {
    const item = await this.#item(clientId, jobId);
    if (item?.status !== 'validating') {
      return { kind: 'not-validating', ...(item ? { status: item.status as JobStatus } : {}) };
    }
    const state = toIngestState(item);
    if (state.step > step) {
      return {
        kind: 'stale',
        state,
        leased: typeof item.ingestLeaseUntil === 'number' && item.ingestLeaseUntil >= now,
      };
    }
    return { kind: 'busy' };
  }

  async recordReportArchive(clientId: string, jobId: string, key: string) {
    await this.#conditional({
      Key: keys.job(clientId, jobId),
      UpdateExpression: 'SET reportArchive = :key',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeValues: { ':key': key },
    });
  }

  async saveIngestProgress(clientId: string, jobId: string, leaseId: string, counts: JobCounts, now: number) {
    await this.#conditional({
      Key: keys.job(clientId, jobId),
      UpdateExpression: 'SET #counts = :counts, updatedAt = :now',
      ConditionExpression: 'ingestLeaseId = :lease',
      ExpressionAttributeNames: { '#counts': 'counts' },
      ExpressionAttributeValues: { ':counts': counts, ':now': now, ':lease': leaseId },
    });
  }

  advanceIngest(
    clientId: string,
    jobId: string,
    leaseId: string,
    next: Parameters<JobStore['advanceIngest']>[3],
    counts: JobCounts,
    now: number,
  ) {
    return this.#conditional({
      Key: keys.job(clientId, jobId),
      UpdateExpression:
        'SET ingestStep = :next, ingestCursor = :cursor, ingestFilterKey = :filter, #counts = :counts, updatedAt = :now REMOVE ingestLeaseId, ingestLeaseUntil',
      ConditionExpression: '#status = :validating AND ingestLeaseId = :lease AND ingestStep = :prev',
      ExpressionAttributeNames: { '#status': 'status', '#counts': 'counts' },
      ExpressionAttributeValues: {
        ':next': next.step,
        ':prev': next.step - 1,
        ':cursor': next.cursor,
        ':filter': next.filterKey,
        ':counts': counts,
        ':now': now,
        ':validating': 'validating',
        ':lease': leaseId,
      },
    });
  }

  finishIngest(
    job: Job,
    leaseId: string,
    outcome: Parameters<JobStore['finishIngest']>[2],
    counts: JobCounts,
    now: number,
  ) {
    const index = statusIndexUpdate(job, outcome.status);
    const remove = ['ingestLeaseId', 'ingestLeaseUntil', 'ingestCursor', 'ingestFilterKey'];
    if (index.remove) remove.push('statusKey', 'dueKey');
    return this.#conditional({
      Key: keys.job(job.clientId, job.jobId),
      UpdateExpression: `SET #status = :to, #counts = :counts, updatedAt = :now${
        outcome.status === 'failed' ? ', failureReason = :reason' : ''
      }${index.set} REMOVE ${remove.join(', ')}`,
      ConditionExpression: '#status = :validating AND ingestLeaseId = :lease',
      ExpressionAttributeNames: { '#status': 'status', '#counts': 'counts' },
      ExpressionAttributeValues: {
        ':to': outcome.status,
        ':counts': counts,
        ':now': now,
        ':validating': 'validating',
        ':lease': leaseId,
        ...(outcome.status === 'failed' ? { ':reason': outcome.reason } : {}),
        ...index.values,
      },
    });
  }

  async releaseIngest(clientId: string, jobId: string, leaseId: string) {
    await this.#conditional({
      Key: keys.job(clientId, jobId),
      UpdateExpression: 'REMOVE ingestLeaseId, ingestLeaseUntil',
      ConditionExpression: 'ingestLeaseId = :lease',
      ExpressionAttributeValues: { ':lease': leaseId },
    });
  }

  async #item(clientId: string, jobId: string) {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#table, Key: keys.job(clientId, jobId), ConsistentRead: true }),
    );
    return out.Item;
  }

  /** An update that may be refused by its condition: true if it was applied. */
  async #conditional(input: Omit<UpdateCommandInput, 'TableName'>): Promise<boolean> {
    try {
      await this.#doc.send(new UpdateCommand({ ...input, TableName: this.#table }));
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }
}
