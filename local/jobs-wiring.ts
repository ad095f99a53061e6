/**
 * The jobs part of the local cloud: the operator API's handler (for the API Gateway stand-in),
 * the ingest Lambda polling the ingest queue, and the S3 notifier that stands in for the bucket
 * notification. The handlers are the deployed modules (`main.ts`), configured by environment; so
 * a pause or cancel of a message job nudges the local broker holding the client exactly as in AWS:
 * through the endpoint its lease advertises (`http://127.0.0.1:{port}` here).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, SQSEvent } from 'aws-lambda';
import { type FunctionId, functions } from '#shared/functions.ts';
import type { HttpFunction } from './api-gateway.ts';
import { cloudEnv, LOCAL_CREDENTIALS, type LocalCloudInfo } from './cloud.ts';
import type { Handler } from './lambda.ts';
import { type S3Notifier, startS3Notifier } from './s3-notifier.ts';
import { type SqsPoller, startSqsPoller } from './sqs-poller.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

export interface JobsLocalOptions {
  readonly cloud: LocalCloudInfo;
  /** Parallel ingest invocations (Lambda's maximum concurrency for the mapping). */
  readonly ingestConcurrency?: number;
  /** The notifier's poll interval. */
  readonly notifyIntervalMs?: number;
  readonly log?: (line: string) => void;
}

export interface JobsLocal {
  /** Add these to the API Gateway stand-in's `functions`. */
  readonly httpFunctions: { readonly 'jobs-api': HttpFunction };
  readonly ingest: SqsPoller;
  readonly notifier: S3Notifier;
  stop(): Promise<void>;
}

async function loadHandler<E, R>(id: FunctionId): Promise<Handler<E, R>> {
  const module = (await import(pathToFileURL(path.join(ROOT, functions[id].entry)).href)) as {
    handler: Handler<E, R>;
  };
  return module.handler;
}

/**
 * Starts the ingest poller and the S3 notifier and loads the operator API's handler. Handlers
 * read their configuration at import: variables not set yet are taken from the cloud.
 */
export async function startJobsLocal(options: JobsLocalOptions): Promise<JobsLocal> {
  const { cloud } = options;
  const log = options.log ?? (() => {});
  for (const [name, value] of Object.entries(cloudEnv(cloud))) process.env[name] ??= value;

  const base = { region: cloud.region, credentials: LOCAL_CREDENTIALS };
  const sqs = new SQSClient({ ...base, endpoint: cloud.sqsEndpoint });
  const s3 = new S3Client({ ...base, endpoint: cloud.s3Endpoint, forcePathStyle: true });
  const apiSpec = functions['jobs-api'];
  const ingestSpec = functions.ingest;
  const queue = cloud.queues[ingestSpec.queueSource!.queue]!;
  const bucket = cloud.bucketNames.uploads!;

  const api = await loadHandler<APIGatewayProxyEventV2, APIGatewayProxyResultV2>('jobs-api');
  const ingest = startSqsPoller({
    sqs,
    queueUrl: queue.url,
    queueArn: queue.arn,
    functionName: ingestSpec.id,
    handler: await loadHandler<SQSEvent, unknown>('ingest'),
    functionTimeoutMs: ingestSpec.timeoutSeconds * 1000,
    batchSize: ingestSpec.queueSource!.batchSize,
    maxBatchingWindowMs: (ingestSpec.queueSource!.maxBatchingWindowSeconds ?? 0) * 1000,
    concurrency: options.ingestConcurrency ?? 2,
    region: cloud.region,
    onError: (error) => log(`ingest: ${(error as Error).message}`),
  });
  log(`SQS → Lambda    ingest polls ${queue.url}`);
  const notifier = await startS3Notifier({
    s3,
    sqs,
    bucket,
    queueUrl: queue.url,
    region: cloud.region,
    ...(options.notifyIntervalMs ? { intervalMs: options.notifyIntervalMs } : {}),
    onError: (error) => log(`s3 notifier: ${(error as Error).message}`),
  });
  log(`S3 → SQS        notifier watches s3://${bucket}/uploads/ and /incoming/ (*.csv)`);
  return {
    httpFunctions: { 'jobs-api': { handler: api, timeoutMs: apiSpec.timeoutSeconds * 1000 } },
    ingest,
    notifier,
    stop: async () => {
      await notifier.stop();
      await ingest.stop();
      sqs.destroy();
      s3.destroy();
    },
  };
}
