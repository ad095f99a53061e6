/**
 * The Lambda functions' settings, shared by `cdk/` (what is deployed) and `local/` (how the local
 * cloud invokes the same handlers): entry module, timeout, memory and, for queue consumers, the
 * event source mapping.
 */
import type { QueueId, TableId } from './resources.ts';

export type FunctionId =
  | 'webhook-receiver'
  | 'webhook-processor'
  | 'job-manager'
  | 'call-status'
  | 'connect-events'
  | 'connect-opt-outs'
  | 'jobs-api'
  | 'channels-api'
  | 'ingest'
  | 'console'
  | 'unsubscribe'
  | 'email-events'
  | 'sms-events'
  | 'sms-inbound';

export interface FunctionSpec {
  readonly id: FunctionId | OutcomeFunctionId;
  /** The module exporting `handler`, relative to the repository root. */
  readonly entry: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** For SQS consumers: the queue and the event source mapping's settings. */
  readonly queueSource?: {
    readonly queue: QueueId;
    readonly batchSize: number;
    readonly maxBatchingWindowSeconds?: number;
    /** Lambda's maximum concurrency for the mapping (2-1000). */
    readonly maxConcurrency: number;
  };
}

export const functions: Readonly<Record<FunctionId, FunctionSpec>> = {
  'webhook-receiver': {
    id: 'webhook-receiver',
    entry: 'lambdas/webhook-receiver/main.ts',
    // LINE waits 2 s; the timeout only bounds a stuck invocation.
    timeoutSeconds: 10,
    memoryMb: 512,
  },
  'webhook-processor': {
    id: 'webhook-processor',
    entry: 'lambdas/webhook-processor/main.ts',
    // The queue's visibility timeout (60 s) is six times this, as AWS advises for SQS sources.
    timeoutSeconds: 10,
    memoryMb: 512,
    queueSource: { queue: 'webhook-events', batchSize: 10, maxConcurrency: 20 },
  },
  'job-manager': {
    id: 'job-manager',
    entry: 'lambdas/job-manager/main.ts',
    // Runs every minute: it must end well within one, so two runs rarely overlap (they may).
    timeoutSeconds: 50,
    memoryMb: 512,
  },
  'call-status': {
    id: 'call-status',
    entry: 'lambdas/call-status/main.ts',
    // Provider callbacks: a few DynamoDB writes and a best-effort nudge to the broker.
    timeoutSeconds: 10,
    memoryMb: 512,
  },
  'connect-events': {
    id: 'connect-events',
    entry: 'lambdas/connect-events/main.ts',
    // The EventBridge rule's target (Amazon Connect contact events): a few DynamoDB reads and writes.
    timeoutSeconds: 10,
    memoryMb: 512,
  },
  'connect-opt-outs': {
    id: 'connect-opt-outs',
    entry: 'lambdas/connect-opt-outs/main.ts',
    // A contact's end: one GetContactAttributes, and for an opt-out a task read and a suppression write.
    timeoutSeconds: 10,
    memoryMb: 256,
  },
  'jobs-api': {
    id: 'jobs-api',
    entry: 'lambdas/jobs-api/main.ts',
    // API Gateway gives up at 30 s; a report larger than a response is written to S3 in that time.
    timeoutSeconds: 29,
    memoryMb: 1024,
  },
  'channels-api': {
    id: 'channels-api',
    entry: 'lambdas/channels-api/main.ts',
    // A GetItem, a Query or a conditional PutItem per request.
    timeoutSeconds: 10,
    memoryMb: 512,
  },
  ingest: {
    id: 'ingest',
    entry: 'lambdas/ingest/main.ts',
    // A run pauses about a minute before this and continues in the next; the ingest queue's
    // visibility timeout (90 min) is six times it, as AWS advises for SQS sources.
    timeoutSeconds: 900,
    memoryMb: 1024,
    // One list per run: a run uses its whole time on one file.
    queueSource: { queue: 'ingest', batchSize: 1, maxConcurrency: 10 },
  },
  console: {
    id: 'console',
    entry: 'lambdas/console/main.ts',
    // Static files from memory: the page, its scripts and its font.
    timeoutSeconds: 5,
    memoryMb: 256,
  },
  unsubscribe: {
    id: 'unsubscribe',
    entry: 'lambdas/unsubscribe/main.ts',
    // An email's one-click link: a token checked in memory and one UpdateItem (the key is read at
    // cold start, from Secrets Manager).
    timeoutSeconds: 10,
    memoryMb: 256,
  },
  'email-events': {
    id: 'email-events',
    entry: 'lambdas/email-events/main.ts',
    // SES's sending events, from the EventBridge rule's queue in batches: an UpdateItem an event, and
    // one more for a permanent bounce or a complaint. A batch of 200 fills in 2 s at 100 events/s
    // (50 emails/s); at 1,000 emails/s it is 10 invocations a second, not 2,000.
    timeoutSeconds: 30,
    memoryMb: 256,
    queueSource: { queue: 'ses-events', batchSize: 200, maxBatchingWindowSeconds: 2, maxConcurrency: 5 },
  },
  'sms-events': {
    id: 'sms-events',
    entry: 'lambdas/sms-events/main.ts',
    // End User Messaging SMS's delivery events, SNS → the sms-events queue → here in batches, as
    // email-events: an UpdateItem an event (two or three events a text).
    timeoutSeconds: 30,
    memoryMb: 256,
    queueSource: { queue: 'sms-events', batchSize: 200, maxBatchingWindowSeconds: 2, maxConcurrency: 5 },
  },
  'sms-inbound': {
    id: 'sms-inbound',
    entry: 'lambdas/sms-inbound/main.ts',
    // Customers' texts back (two-way SMS), SNS → the sms-inbound queue → here: rare next to sends; an
    // opt-out is a cached clients lookup and an UpdateItem per client.
    timeoutSeconds: 30,
    memoryMb: 256,
    queueSource: { queue: 'sms-inbound', batchSize: 50, maxBatchingWindowSeconds: 1, maxConcurrency: 2 },
  },
};

/**
 * Lambda's synchronous invocation payload limit, the request (the whole event, a binary body
 * base64-encoded) and the response (the handler's result as JSON) each: 6 MB ("For synchronous
 * invocations, the maximum payload size is 6 MB", Lambda API reference, Invoke). An HTTP API in front
 * cannot pass more: the local API Gateway stand-in refuses both as AWS does (`local/api-gateway.ts`).
 */
export const LAMBDA_PAYLOAD_MAX_BYTES = 6 * 1024 * 1024;

/**
 * Outcome webhooks' two functions: `outcome-events` reads the tasks and control tables' DynamoDB
 * streams (filtered by the event source mappings to task ends and job records, so other changes
 * never invoke it) and queues deliveries; `outcome-webhooks` POSTs them, one queue message per POST.
 */
export type OutcomeFunctionId = 'outcome-events' | 'outcome-webhooks';

/** A DynamoDB stream source: the table and the event source mapping's settings and filters. */
export interface StreamSource {
  readonly table: TableId;
  readonly batchSize: number;
  readonly maxBatchingWindowSeconds: number;
  /** Lambda event filter patterns (ORed): only matching records invoke the function. */
  readonly filters: readonly Record<string, unknown>[];
}

/**
 * What a stream mapping does with a batch the function fails (docs/outcome-webhooks.md, "A stream
 * that cannot stall"): split it in two and retry each half (`BisectBatchOnFunctionError`; a split
 * consumes no retry), retry a batch at most `retryAttempts` times, never a record older than
 * `maxRecordAgeSeconds`, then send the batch's description (shard, sequence range — not the records)
 * to the on-failure queue (alarmed) and go on with the shard. Lambda's defaults retry until the
 * record expires: one bad record held its shard, and the outcome webhooks behind it, up to a day.
 * The record age leaves 18 of DynamoDB Streams' 24 hours to re-read what failed from the stream.
 */
export const STREAM_FAILURE_HANDLING = {
  bisectBatchOnError: true,
  retryAttempts: 10,
  maxRecordAgeSeconds: 6 * 3600,
} as const;

/** The on-failure queue's id (`switchboard-{stage}-outcome-events-failures`): standard, as Lambda requires. */
export const STREAM_FAILURES_QUEUE = 'outcome-events-failures';

const FINAL_STATES = ['completed', 'failed', 'cancelled', 'expired'];

export const outcomeFunctions: Readonly<
  Record<OutcomeFunctionId, FunctionSpec & { readonly streamSources?: readonly StreamSource[] }>
> = {
  'outcome-events': {
    id: 'outcome-events',
    entry: 'lambdas/outcome-events/main.ts',
    // A batch of stream records: a cached settings read per client and a few SendMessageBatch calls.
    timeoutSeconds: 30,
    memoryMb: 512,
    streamSources: [
      {
        table: 'tasks',
        // Up to 1,000 task ends per invocation: a campaign's million ends are ~1,000 invocations.
        batchSize: 1000,
        maxBatchingWindowSeconds: 1,
        filters: [
          {
            eventName: ['MODIFY'],
            dynamodb: {
              NewImage: { state: { S: FINAL_STATES } },
              OldImage: { state: { S: [{ 'anything-but': FINAL_STATES }] } },
            },
          },
        ],
      },
      {
        table: 'control',
        batchSize: 100,
        maxBatchingWindowSeconds: 1,
        // Job records only (counts change often; the function keeps status changes).
        filters: [
          { eventName: ['INSERT', 'MODIFY'], dynamodb: { Keys: { sk: { S: [{ prefix: 'JOB#' }] } } } },
        ],
      },
    ],
  },
  'outcome-webhooks': {
    id: 'outcome-webhooks',
    entry: 'lambdas/outcome-webhooks/main.ts',
    // Ten POSTs at once, each given up after 10 s; the queue's visibility (60 s) is six times this.
    timeoutSeconds: 10,
    memoryMb: 256,
    queueSource: { queue: 'outcome-webhooks', batchSize: 10, maxConcurrency: 20 },
  },
};
