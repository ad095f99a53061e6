/**
 * SDK client construction shared by every Lambda's and the broker's `main.ts`. Endpoints come from
 * the SDK's own `AWS_ENDPOINT_URL_<SERVICE>` variables, so the local cloud is chosen by
 * configuration only. Clients are built once per container and handed to adapters.
 *
 * Every client is built here, so what must apply to every AWS call (the local cloud's record of
 * calls for the IAM conformance check, tracing) is attached in one place: `aws-client-hooks.ts`.
 */
import { ConnectClient, type ConnectClientConfig } from '@aws-sdk/client-connect';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { ECSClient, type ECSClientConfig } from '@aws-sdk/client-ecs';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { SecretsManagerClient, type SecretsManagerClientConfig } from '@aws-sdk/client-secrets-manager';
import { SESv2Client, type SESv2ClientConfig } from '@aws-sdk/client-sesv2';
import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { withPlugins } from './aws-client-hooks.ts';

export function makeDynamoClient(config: DynamoDBClientConfig = {}): DynamoDBClient {
  return withPlugins(new DynamoDBClient(config));
}

export function makeDocumentClient(client: DynamoDBClient = makeDynamoClient()): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true },
  });
}

export function makeSqsClient(config: SQSClientConfig = {}): SQSClient {
  return withPlugins(new SQSClient(config));
}

/**
 * Amazon Connect with the SDK's retries off (`maxAttempts: 1`): the broker retries a start itself,
 * spaced at the client's line rate, which the SDK's own backoff would not respect.
 */
export function makeConnectClient(config: ConnectClientConfig = {}): ConnectClient {
  return withPlugins(new ConnectClient({ maxAttempts: 1, ...config }));
}

/**
 * Amazon SES v2 with the SDK's retries off (`maxAttempts: 1`): SES takes no idempotency key, so a
 * retry of an unanswered send may send twice; the pipeline decides (`ses-transport.ts`).
 */
export function makeSesClient(config: SESv2ClientConfig = {}): SESv2Client {
  return withPlugins(new SESv2Client({ maxAttempts: 1, ...config }));
}

export function makeEcsClient(config: ECSClientConfig = {}): ECSClient {
  return withPlugins(new ECSClient(config));
}

export function makeSecretsManagerClient(config: SecretsManagerClientConfig = {}): SecretsManagerClient {
  return withPlugins(new SecretsManagerClient(config));
}

/** S3 with path-style addressing when `AWS_S3_FORCE_PATH_STYLE=true` (emulators on 127.0.0.1). */
export function makeS3Client(env: NodeJS.ProcessEnv = process.env, config: S3ClientConfig = {}): S3Client {
  return withPlugins(new S3Client({ forcePathStyle: env.AWS_S3_FORCE_PATH_STYLE === 'true', ...config }));
}

/**
 * The client that signs presigned upload URLs. The SDK's default (`WHEN_SUPPORTED`) writes a
 * checksum of the *empty* body into a presigned PUT (`x-amz-checksum-crc32=AAAAAA==`), and S3
 * refuses any real file sent to that URL with a checksum mismatch; a browser cannot compute the
 * checksum of a file it has not read. `WHEN_REQUIRED` leaves the checksum out of the URL.
 */
export function makeS3PresignClient(
  env: NodeJS.ProcessEnv = process.env,
  config: S3ClientConfig = {},
): S3Client {
  return makeS3Client(env, { ...config, requestChecksumCalculation: 'WHEN_REQUIRED' });
}
