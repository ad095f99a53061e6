/**
 * The jobs part of the local cloud for integration tests: the operator API behind the API Gateway
 * stand-in, the ingest poller and the S3 notifier, plus a request helper and a bounded poll.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll } from 'vitest';
import { type ApiGatewayServer, startApiGateway } from '#local/api-gateway.ts';
import { createQueueWithDlq, LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { type JobsLocal, startJobsLocal } from '#local/jobs-wiring.ts';
import { makeSignedFetch } from '#local/operator-client.ts';
import { queueSpec, resourceName } from '#shared/resources.ts';
import { routes } from '#shared/routes.ts';
import type { TestCloud } from './cloud.ts';
import { eventually } from './wait.ts';

/** Client settings valid for every test. */
export const CLIENT = {
  maxConcurrentCalls: 5,
  callsPerSecond: 2,
  timeZone: 'Asia/Tokyo',
  callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
  defaultRegion: 'JP',
};

export interface JobsHarness {
  readonly jobs: () => JobsLocal;
  readonly api: () => ApiGatewayServer;
  /** The file's own ingest queue. */
  readonly ingestQueueUrl: () => string;
  /** The file's own uploads bucket. */
  readonly uploadsBucket: () => string;
  call(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
    // biome-ignore lint/suspicious/noExplicitAny: the JSON of any route, read by the tests' assertions
  ): Promise<{ status: number; location?: string | undefined; body: any }>;
}

/** Starts the jobs wiring for the file's tests (beforeAll) and stops it after (afterAll). */
/** `env`: more of the Lambdas' environment (`INGEST_MAX_CHUNKED_LIST_BYTES: '1'` for a suite that wants a task a recipient). */
export function useJobsApi(cloud: TestCloud, options: { env?: Record<string, string> } = {}): JobsHarness {
  let jobs: JobsLocal | undefined;
  let api: ApiGatewayServer | undefined;
  let ingestQueueUrl: string | undefined;
  let uploadsBucket: string | undefined;
  const signedFetch = makeSignedFetch({ region: cloud.info.region, credentials: LOCAL_CREDENTIALS });
  beforeAll(async () => {
    // The file's own ingest queue and uploads bucket: a suite running beside it never takes (and
    // counts) its messages, and its notifier never forwards the other suite's uploads.
    // Named as a stage of their own (switchboard-{stage}-ingest, …), as deployed resources are, so
    // the IAM conformance check knows them.
    const stage = `t${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const ingest = await createQueueWithDlq(cloud.sqs, stage, queueSpec('ingest'));
    ingestQueueUrl = ingest.url;
    uploadsBucket = resourceName(stage, 'uploads');
    await cloud.s3.send(new CreateBucketCommand({ Bucket: uploadsBucket }));
    const info = {
      ...cloud.info,
      queues: { ...cloud.info.queues, ingest },
      bucketNames: { ...cloud.info.bucketNames, uploads: uploadsBucket },
    };
    Object.assign(process.env, cloud.env, {
      INGEST_QUEUE_URL: ingest.url,
      UPLOAD_BUCKET: uploadsBucket,
      LOG_LEVEL: 'warn',
      POWERTOOLS_METRICS_DISABLED: 'true',
      ...options.env,
    });
    jobs = await startJobsLocal({ cloud: info, notifyIntervalMs: 100 });
    api = await startApiGateway({ routes, functions: { ...jobs.httpFunctions } });
  });
  afterAll(async () => {
    await api?.stop();
    await jobs?.stop();
  });
  return {
    jobs: () => jobs!,
    api: () => api!,
    ingestQueueUrl: () => ingestQueueUrl!,
    uploadsBucket: () => uploadsBucket!,
    async call(method, path, body, headers = {}) {
      // A report's 303 is answered as it is: the presigned URL must be fetched without the signature.
      const response = await signedFetch(method, new URL(`${api!.url}${path}`), {
        redirect: 'manual',
        headers: { 'content-type': 'application/json', ...headers },
        ...(body === undefined
          ? {}
          : { body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body) }),
      });
      const text = await response.text();
      return {
        status: response.status,
        location: response.headers.get('location') ?? undefined,
        body: response.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text,
      };
    },
  };
}

export { eventually } from './wait.ts';

/**
 * Posts `csv` inline as a new job of `clientId` (`query`: the options, `name=…&…`) and waits for
 * its ingest to make it `scheduled`; returns its id.
 */
export async function scheduledInlineJob(
  harness: JobsHarness,
  clientId: string,
  query: string,
  csv: string | Uint8Array,
): Promise<string> {
  const created = await harness.call('POST', `/clients/${clientId}/jobs?${query}`, csv, {
    'content-type': 'text/csv',
  });
  if (created.status !== 201)
    throw new Error(`job not created: ${created.status} ${JSON.stringify(created.body)}`);
  const { jobId } = created.body as { jobId: string };
  await eventually(async () => {
    const { body } = await harness.call('GET', `/clients/${clientId}/jobs/${jobId}`);
    return body.status === 'scheduled' ? body : undefined;
  }, 'the ingest');
  return jobId;
}
