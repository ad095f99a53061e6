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
import {
  PinpointSMSVoiceV2Client,
  type PinpointSMSVoiceV2ClientConfig,
} from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { SecretsManagerClient, type SecretsManagerClientConfig } from '@aws-sdk/client-secrets-manager';
import { SESv2Client, type SESv2ClientConfig } from '@aws-sdk/client-sesv2';
import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { withPlugins } from './aws-client-hooks.ts';

/** How long one attempt of an AWS request may take: to connect, and in all. */
export interface RequestBounds {
  readonly connectionTimeout: number;
  readonly requestTimeout: number;
}

/**
 * The broker's sends (SES, End User Messaging SMS): a send on a stalled connection must not hold a
 * sender for good, nor a drain past Fargate's stop timeout. A send that times out is in doubt (it
 * may have gone): never resent blindly (`shared/campaign/unit-sender.ts`).
 */
export const SEND_REQUEST_BOUNDS: RequestBounds = { connectionTimeout: 1_000, requestTimeout: 10_000 };

/**
 * Multiplies every {@link boundedRequests} bound (default 1; unset in AWS). The local cloud runs
 * every function, emulator and the tests' own load in one process on a small machine, where a
 * stall of the event loop is not the service's latency: it lengthens the bounds (`local/stack.ts`).
 */
export const REQUEST_TIMEOUT_SCALE_ENV = 'REQUEST_TIMEOUT_SCALE';

/**
 * An HTTP handler whose `requestTimeout` ends the attempt (the SDK then retries or fails).
 * `@smithy/node-http-handler` 4 only logs a warning when `requestTimeout` passes unless
 * `throwOnRequestTimeout` is set: a request on a stalled connection would otherwise wait for the
 * Lambda's own timeout, well past LINE's 2 s or a callback's budget.
 */
export function boundedRequests(
  bounds: RequestBounds,
  env: NodeJS.ProcessEnv = process.env,
): NodeHttpHandler {
  const scale = Number(env[REQUEST_TIMEOUT_SCALE_ENV] ?? 1);
  const by = Number.isFinite(scale) && scale > 0 ? scale : 1;
  return new NodeHttpHandler({
    connectionTimeout: bounds.connectionTimeout * by,
    requestTimeout: bounds.requestTimeout * by,
    throwOnRequestTimeout: true,
  });
}

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

/**
 * End User Messaging SMS with the SDK's retries off (`maxAttempts: 1`): `SendTextMessage` takes no
 * idempotency key, so a retry of an unanswered text may send it twice (`sms-transport.ts`).
 */
export function makeSmsClient(config: PinpointSMSVoiceV2ClientConfig = {}): PinpointSMSVoiceV2Client {
  return withPlugins(new PinpointSMSVoiceV2Client({ maxAttempts: 1, ...config }));
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
