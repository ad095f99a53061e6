/**
 * Outcome webhooks on the local cloud, wired as deployed: the tasks and control tables' streams
 * feed `outcome-events` through the stream event source mapping stand-in (the same filters as the
 * CDK mappings), and the `outcome-webhooks` queue feeds the delivery worker through the SQS poller.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CreateQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBStreamEvent, SQSEvent } from 'aws-lambda';
import {
  type OutcomeFunctionId,
  outcomeFunctions,
  STREAM_FAILURE_HANDLING,
  STREAM_FAILURES_QUEUE,
} from '#shared/functions.ts';
import { resourceName } from '#shared/resources.ts';
import { LOCAL_CREDENTIALS, type LocalCloud } from './cloud.ts';
import { type StreamFailureRecord, type StreamPoller, startStreamPoller } from './dynamodb-stream-poller.ts';
import type { Handler } from './lambda.ts';
import { type SqsPoller, startSqsPoller } from './sqs-poller.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

/** The environment the local cloud's client API needs to accept `http://127.0.0.1` webhook URLs. */
export const LOCAL_OUTCOME_ENV = { OUTCOME_WEBHOOK_ALLOW_LOOPBACK_HTTP: 'true' } as const;

export interface LocalOutcomeWebhooks {
  readonly streams: readonly StreamPoller[];
  /** The stream mappings' on-failure queue (`switchboard-{stage}-outcome-events-failures`), as deployed. */
  readonly streamFailuresUrl: string;
  readonly deliveries: SqsPoller;
  stop(): Promise<void>;
}

async function loadHandler<E>(id: OutcomeFunctionId): Promise<Handler<E, unknown>> {
  const entry = pathToFileURL(path.join(ROOT, outcomeFunctions[id].entry)).href;
  return ((await import(entry)) as { handler: Handler<E, unknown> }).handler;
}

/** Starts both mappings (after the handlers' environment is set). */
export async function startLocalOutcomeWebhooks(options: {
  readonly cloud: LocalCloud;
  readonly log: (line: string) => void;
  /** Parallel pollers of the delivery queue (Lambda scales with the queue). */
  readonly deliveryConcurrency?: number;
}): Promise<LocalOutcomeWebhooks> {
  const { cloud, log } = options;
  const producerHandler = await loadHandler<DynamoDBStreamEvent>('outcome-events');
  const sqs = new SQSClient({
    region: cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: cloud.sqsEndpoint,
  });
  const { QueueUrl: streamFailuresUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: resourceName(cloud.stage, STREAM_FAILURES_QUEUE) }),
  );
  const streams = startOutcomeStreams(cloud, producerHandler, log, async (record) => {
    log(
      `outcome-events gave a batch up (${record.requestContext.condition}): described on ${streamFailuresUrl}`,
    );
    await sqs.send(
      new SendMessageCommand({ QueueUrl: streamFailuresUrl, MessageBody: JSON.stringify(record) }),
    );
  });
  const deliveries = await startDeliveries(cloud, sqs, log, options.deliveryConcurrency ?? 2);
  return {
    streams,
    streamFailuresUrl: streamFailuresUrl!,
    deliveries,
    stop: async () => {
      await Promise.all(streams.map((s) => s.stop()));
      await deliveries.stop();
      sqs.destroy();
    },
  };
}

/** One stream poller per stream source of `outcome-events`, with the deployed mappings' filters. */
function startOutcomeStreams(
  cloud: LocalCloud,
  handler: Handler<DynamoDBStreamEvent, unknown>,
  log: (line: string) => void,
  onFailure: (record: StreamFailureRecord) => Promise<void>,
): StreamPoller[] {
  const producer = outcomeFunctions['outcome-events'];
  return (producer.streamSources ?? []).map((source) =>
    startStreamPoller({
      endpoint: cloud.dynamoEndpoint,
      region: cloud.region,
      tableName: cloud.tableNames[source.table]!,
      functionName: producer.id,
      handler,
      functionTimeoutMs: producer.timeoutSeconds * 1000,
      batchSize: source.batchSize,
      maxBatchingWindowMs: source.maxBatchingWindowSeconds * 1000,
      filters: source.filters,
      failureHandling: STREAM_FAILURE_HANDLING,
      onFailure,
      onError: (error) => log(`outcome-events (${source.table} stream): ${(error as Error).message}`),
    }),
  );
}

/** The SQS poller that feeds the `outcome-webhooks` queue to the delivery worker. */
async function startDeliveries(
  cloud: LocalCloud,
  sqs: SQSClient,
  log: (line: string) => void,
  concurrency: number,
): Promise<SqsPoller> {
  const worker = outcomeFunctions['outcome-webhooks'];
  const queue = cloud.queues[worker.queueSource!.queue]!;
  const deliveries = startSqsPoller({
    sqs,
    queueUrl: queue.url,
    queueArn: queue.arn,
    functionName: worker.id,
    handler: await loadHandler<SQSEvent>('outcome-webhooks'),
    functionTimeoutMs: worker.timeoutSeconds * 1000,
    batchSize: worker.queueSource!.batchSize,
    concurrency,
    region: cloud.region,
    onError: (error) => log(`outcome-webhooks: ${(error as Error).message}`),
  });
  log(
    `Streams → Lambda outcome-events reads the tasks and control streams; outcome-webhooks polls ${queue.url}`,
  );
  return deliveries;
}
