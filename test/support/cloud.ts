/** Helpers for tests that run against the local cloud started by the global setup. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import { cloudEnv, LOCAL_CREDENTIALS, type LocalCloudInfo } from '#local/cloud.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';

export interface TestCloud {
  readonly info: LocalCloudInfo;
  readonly ddb: DynamoDBClient;
  readonly doc: ReturnType<typeof makeDocumentClient>;
  readonly sqs: SQSClient;
  readonly s3: S3Client;
  readonly env: Record<string, string>;
}

/**
 * Clients for the local cloud of this test's worker (the global setup starts one per worker for
 * the integration project, `VITEST_POOL_ID` numbers the workers from 1); fails fast when the
 * global setup did not start any.
 */
export function testCloud(): TestCloud {
  const clouds = inject('clouds') ?? [];
  const worker = Math.max(1, Number(process.env.VITEST_POOL_ID) || 1);
  const info = clouds[(worker - 1) % Math.max(1, clouds.length)];
  if (!info?.dynamoEndpoint)
    throw new Error('the local cloud is not running: run this test through its vitest project');
  const base = { region: info.region, credentials: LOCAL_CREDENTIALS };
  const ddb = new DynamoDBClient({ ...base, endpoint: info.dynamoEndpoint });
  return {
    info,
    ddb,
    doc: makeDocumentClient(ddb),
    sqs: new SQSClient({ ...base, endpoint: info.sqsEndpoint }),
    s3: new S3Client({ ...base, endpoint: info.s3Endpoint, forcePathStyle: true }),
    env: cloudEnv(info),
  };
}

/** A name unique to this test run, so suites running side by side never share state. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}
