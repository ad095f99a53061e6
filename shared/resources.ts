/**
 * The one source of truth for Switchboard's stateful resources: table keys and indexes, queue
 * attributes and buckets. `cdk/` turns these specs into CloudFormation; `local/` creates the very
 * same resources in DynamoDB Local and fauxqs. Names come from {@link resourceName}, so a stage
 * prefix is applied the same way in both places.
 *
 * Access patterns (who reads what, and with which key):
 *
 * | pattern                                        | table   | key / index                                         |
 * |------------------------------------------------|---------|-----------------------------------------------------|
 * | client settings by id                          | control | pk=CLIENT#{clientId}, sk=PROFILE                    |
 * | a client's jobs, newest first, paged           | control | pk=CLIENT#{clientId}, sk begins_with JOB# (ULIDs)   |
 * | a job by id                                    | control | pk=CLIENT#{clientId}, sk=JOB#{jobId}                |
 * | jobs due / running (job manager, every minute) | control | GSI byStatus: statusKey=JOBSTATUS#{status}#{shard}, |
 * |                                                |         |   dueKey={startAt}#{jobId} (16 shards, side by side)|
 * | every client, by id (administrators' list)     | control | GSI byStatus: statusKey=CLIENTS, dueKey={clientId}  |
 * | a client's lease (owner, expiry, fencing)      | control | pk=LEASE#{clientId}, sk=LEASE                       |
 * | the fleet's work list (brokers, job manager)   | control | pk=FLEET, sk=WORK; long: sk=WORK#{shard} too        |
 * | the job manager's run lease (one at a time)    | control | pk=RUN#job-manager, sk=LEASE                        |
 * | a client's ready hint (job manager only)       | control | pk=FLEETHINT#{clientId}, sk=HINT (BatchGetItem)     |
 * | a LINE channel (secrets, mode, rules)          | channels| channelId (own KMS key: only its readers decrypt)   |
 * | a client's channels (channels API, console)    | channels| GSI byClient: clientId, channelId                   |
 * | is a recipient opted out                       | control | pk=OPTOUT#{clientId}, sk={recipient}                |
 * | a task by job + task id                        | tasks   | pk={jobId}#{shard}, sk={taskId}                     |
 * | a job's report (every row)                     | tasks   | pk={jobId}#{shard} for each shard, in parallel      |
 * | next N outstanding tasks of client X           | tasks   | GSI outstanding: openPk={clientId}#{shard},         |
 * |                                                |         |   openSk={readyAt}#{jobId}#{taskId} (sparse)        |
 * | webhook event / callback already processed     | events  | pk=EVENT#{id}, TTL expiresAt                        |
 * | a job's series after a time (the console chart)| tasks   | pk={jobId}#series, sk > {iso}#…, TTL expiresAt      |
 *
 * Why shards: one partition takes about 1,000 writes/s. A job of 1,000,000 tasks is spread over
 * {@link TASK_SHARDS} partitions by a hash of the task id, both in the table and in the sparse
 * `outstanding` index, so ingest can write 16,000 tasks/s. The broker's "next N outstanding tasks"
 * is one Query per shard partition, all sent at once (one round trip), each already ordered by when
 * its tasks are ready, merged in memory. One index partition per client would cap the client at
 * about 1,000 index writes/s, and a message campaign at LINE's 2,000 requests/s rewrites a task's
 * index entry at its claim and at its outcome. A started call leaves the index (the attributes are
 * removed); a claimed message stays in it, re-sorted to the end of its hold, so a broker taking the
 * client over finds what a dead holder left in flight.
 */

import { MAX_DELIVERY_ATTEMPTS } from './outcomes/backoff.ts';

/** Partitions a job's tasks are spread over (table and outstanding index). */
export const TASK_SHARDS = 16;

/**
 * Partitions of the byStatus index that list scheduled and running jobs, each by a hash of the job
 * id. One partition would take every running job's change of counts (the index projects them) at
 * about 1,000 writes/s, and the job manager would read its pages one after another; shards spread
 * the writes and are read side by side.
 */
export const JOB_STATUS_SHARDS = 16;

/**
 * Days an ended task (completed, failed, cancelled, expired) is kept for its job's report, then
 * DynamoDB's TTL deletes it (free of write units, within about two days of `expiresAt`). Every
 * write that ends a task sets `expiresAt` in the same update, so the retention costs nothing.
 */
export const ENDED_TASK_RETENTION_DAYS = 90;

/** `expiresAt` (epoch seconds, the tasks table's TTL attribute) of a task ending at `now` (ms). */
export function endedTaskExpiry(now: number): number {
  return Math.floor(now / 1000) + ENDED_TASK_RETENTION_DAYS * 86_400;
}

export type KeyType = 'S' | 'N';

export interface KeySpec {
  readonly name: string;
  readonly type: KeyType;
}

export interface IndexSpec {
  readonly name: string;
  readonly partitionKey: KeySpec;
  readonly sortKey?: KeySpec;
  /**
   * `keys-only`: the index holds the table's and its own keys, nothing else, so a table write that
   * changes no index key writes nothing to it. Absent: every attribute (`ALL`).
   */
  readonly projection?: 'keys-only';
}

export interface TableSpec {
  /** Logical id: stable, used for the physical name and the env variable. */
  readonly id: TableId;
  readonly partitionKey: KeySpec;
  readonly sortKey?: KeySpec;
  readonly globalIndexes: readonly IndexSpec[];
  /** Attribute holding an epoch-seconds expiry, when items expire on their own. */
  readonly ttlAttribute?: string;
  readonly pointInTimeRecovery: boolean;
  /**
   * `customer-managed`: encrypted with a KMS key of its own, so only roles granted that key can
   * read it (channel secrets and access tokens); otherwise an AWS-managed key.
   */
  readonly encryption: 'aws-managed' | 'customer-managed';
  /** The environment variable handlers read the table name from. */
  readonly envVar: string;
  /** A DynamoDB stream of the table's changes (outcome webhooks read task ends and job statuses). */
  readonly stream?: 'NEW_AND_OLD_IMAGES';
}

export interface QueueSpec {
  readonly id: QueueId;
  readonly fifo: boolean;
  /** Seconds a received message stays invisible; must cover the consumer's timeout. */
  readonly visibilityTimeoutSeconds: number;
  readonly retentionSeconds: number;
  /** Receives before a message moves to the dead-letter queue. */
  readonly maxReceiveCount: number;
  readonly contentBasedDeduplication?: boolean;
  /**
   * FIFO high throughput: deduplication and the throughput quota per message group rather than per
   * queue. A standard FIFO queue takes 300 API calls/s per action, below the HTTP API's throttle.
   */
  readonly highThroughput?: boolean;
  readonly envVar: string;
}

export interface BucketSpec {
  readonly id: BucketId;
  readonly envVar: string;
  /** Days after which objects under `incoming/` and `uploads/` expire. */
  readonly expireUploadsAfterDays: number;
}

/** The channels table's index of a client's channels. */
export const CHANNELS_BY_CLIENT_INDEX = 'byClient';

/** The tasks table's index of an identifier's tasks, newest job first (a person's history: `docs/people.md`). */
export const TASKS_BY_RECIPIENT_INDEX = 'byRecipient';

export type TableId = 'control' | 'tasks' | 'events' | 'channels';
export type QueueId =
  | 'webhook-events'
  | 'ingest'
  | 'outcome-webhooks'
  | 'ses-events'
  | 'sms-events'
  | 'sms-inbound';
export type BucketId = 'uploads';

export const tables: readonly TableSpec[] = [
  {
    id: 'control',
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    globalIndexes: [
      {
        name: 'byStatus',
        partitionKey: { name: 'statusKey', type: 'S' },
        sortKey: { name: 'dueKey', type: 'S' },
      },
    ],
    // No TTL: nothing in this table expires on its own. A lease's `expiresAt` is epoch
    // milliseconds, read by the lease code only; under a TTL on that name DynamoDB would take it
    // for seconds (harmless only because such values are far in the future or decades past).
    pointInTimeRecovery: true,
    encryption: 'aws-managed',
    envVar: 'CONTROL_TABLE',
    stream: 'NEW_AND_OLD_IMAGES',
  },
  {
    id: 'tasks',
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    globalIndexes: [
      {
        name: 'outstanding',
        partitionKey: { name: 'openPk', type: 'S' },
        sortKey: { name: 'openSk', type: 'S' },
      },
      {
        // Written once, when the task is: keys only, so no later write of the task touches it.
        name: TASKS_BY_RECIPIENT_INDEX,
        partitionKey: { name: 'recipientPk', type: 'S' },
        sortKey: { name: 'recipientSk', type: 'S' },
        projection: 'keys-only',
      },
    ],
    ttlAttribute: 'expiresAt', // ended tasks (ENDED_TASK_RETENTION_DAYS), multicast records ({jobId}#batch), job series ({jobId}#series)
    pointInTimeRecovery: true,
    encryption: 'aws-managed',
    envVar: 'TASKS_TABLE',
    stream: 'NEW_AND_OLD_IMAGES',
  },
  {
    id: 'events',
    partitionKey: { name: 'pk', type: 'S' },
    globalIndexes: [],
    ttlAttribute: 'expiresAt',
    // Idempotency records live for days and can be rebuilt from nothing: a restore is not needed.
    pointInTimeRecovery: false,
    encryption: 'aws-managed',
    envVar: 'EVENTS_TABLE',
  },
  {
    // LINE channels: secrets and access tokens, under a KMS key only the Lambdas that need them
    // may use. Kept apart from `control` so reading a job never means being able to read secrets.
    id: 'channels',
    partitionKey: { name: 'channelId', type: 'S' },
    // A client's channels, for the channels API (the console's channel list).
    globalIndexes: [
      {
        name: CHANNELS_BY_CLIENT_INDEX,
        partitionKey: { name: 'clientId', type: 'S' },
        sortKey: { name: 'channelId', type: 'S' },
      },
    ],
    pointInTimeRecovery: true,
    encryption: 'customer-managed',
    envVar: 'CHANNELS_TABLE',
  },
];

export const queues: readonly QueueSpec[] = [
  {
    // Webhook events, grouped per source (user/group/room) so each conversation stays in order.
    id: 'webhook-events',
    fifo: true,
    visibilityTimeoutSeconds: 60,
    retentionSeconds: 4 * 24 * 3600,
    maxReceiveCount: 12,
    // Dedupe ids (webhookEventIds) always travel in the same group (the conversation), so a
    // per-group deduplication scope drops redeliveries just as a per-queue one would.
    highThroughput: true,
    envVar: 'WEBHOOK_EVENTS_QUEUE_URL',
  },
  {
    // Upload notifications and ingest continuations (a cursor into a large file).
    id: 'ingest',
    fifo: false,
    visibilityTimeoutSeconds: 6 * 60 * 15,
    retentionSeconds: 4 * 24 * 3600,
    maxReceiveCount: 5,
    envVar: 'INGEST_QUEUE_URL',
  },
  {
    // Outcome webhook deliveries (shared/outcomes/): the worker hides a failed one for its backoff
    // delay, so the receive count is the attempt; after 24 h of attempts SQS moves it to the DLQ.
    id: 'outcome-webhooks',
    fifo: false,
    visibilityTimeoutSeconds: 60,
    retentionSeconds: 4 * 24 * 3600,
    maxReceiveCount: MAX_DELIVERY_ATTEMPTS,
    envVar: 'OUTCOME_WEBHOOKS_QUEUE_URL',
  },
  {
    // SES's sending events of the stack's configuration set (the EventBridge rule's target), read by
    // email-events in batches: an invocation a batch, not an event. Hidden for six times the
    // function's timeout, as Lambda advises; a record failing five receives goes to the DLQ.
    id: 'ses-events',
    fifo: false,
    visibilityTimeoutSeconds: 6 * 30,
    retentionSeconds: 4 * 24 * 3600,
    maxReceiveCount: 5,
    envVar: 'SES_EVENTS_QUEUE_URL',
  },
  {
    // End User Messaging SMS's delivery events (the configuration set's SNS topic, raw message
    // delivery), read by sms-events in batches; hidden for six times the function's timeout.
    id: 'sms-events',
    fifo: false,
    visibilityTimeoutSeconds: 6 * 30,
    retentionSeconds: 4 * 24 * 3600,
    maxReceiveCount: 5,
    envVar: 'SMS_EVENTS_QUEUE_URL',
  },
  {
    // Customers' texts back to the clients' numbers (two-way SMS's SNS topic, raw message delivery),
    // read by sms-inbound: an opt-out keyword puts the number on the clients' suppression lists.
    id: 'sms-inbound',
    fifo: false,
    visibilityTimeoutSeconds: 6 * 30,
    retentionSeconds: 4 * 24 * 3600,
    maxReceiveCount: 5,
    envVar: 'SMS_INBOUND_QUEUE_URL',
  },
];

export const buckets: readonly BucketSpec[] = [
  { id: 'uploads', envVar: 'UPLOAD_BUCKET', expireUploadsAfterDays: 30 },
];

/**
 * Objects of the uploads bucket that start an ingest: S3's notification filters, deployed by the
 * CDK app and played by the local notifier. S3 matches suffixes case-sensitively, so both the
 * usual spellings of the extension are listed (a list saved as `LIST.CSV` is a list too).
 */
export const UPLOAD_NOTIFICATIONS = {
  prefixes: ['uploads/', 'incoming/'],
  suffixes: ['.csv', '.CSV'],
} as const;

/** Physical name of a resource: `switchboard-{stage}-{id}`, with `.fifo` kept last for FIFO queues. */
export function resourceName(stage: string, id: string, opts: { fifo?: boolean } = {}): string {
  if (!/^[a-z0-9-]{1,20}$/.test(stage)) {
    throw new Error(`stage must be 1-20 lower-case letters, digits or '-', got ${JSON.stringify(stage)}`);
  }
  return `switchboard-${stage}-${id}${opts.fifo ? '.fifo' : ''}`;
}

/** The dead-letter queue's logical id for a queue. */
export function dlqId(id: QueueId): string {
  return `${id}-dlq`;
}

export function queueName(stage: string, spec: QueueSpec): string {
  return resourceName(stage, spec.id, { fifo: spec.fifo });
}

export function dlqName(stage: string, spec: QueueSpec): string {
  return resourceName(stage, dlqId(spec.id), { fifo: spec.fifo });
}

export function tableSpec(id: TableId): TableSpec {
  const spec = tables.find((t) => t.id === id);
  if (!spec) throw new Error(`unknown table ${id}`);
  return spec;
}

export function queueSpec(id: QueueId): QueueSpec {
  const spec = queues.find((q) => q.id === id);
  if (!spec) throw new Error(`unknown queue ${id}`);
  return spec;
}

/**
 * The uploads bucket's CORS rule: browsers (the console) PUT lists straight to a presigned URL,
 * and read large reports from one.
 * The signature, not CORS, is what admits a PUT; the rule only lets a browser page send it.
 * Origins may hold one `*`, as S3's `AllowedOrigin` does.
 */
export const UPLOAD_CORS = {
  // PUT a list; GET a large report, which the API answers with a presigned URL.
  allowedMethods: ['PUT', 'GET'],
  allowedHeaders: ['content-type', 'content-md5', 'x-amz-*'],
  exposedHeaders: ['etag'],
  maxAgeSeconds: 3000,
} as const;

/** The console's origin in AWS: the HTTP API's own endpoint, in the stack's region. */
export function consoleOriginPattern(region: string): string {
  return `https://*.execute-api.${region}.amazonaws.com`;
}
