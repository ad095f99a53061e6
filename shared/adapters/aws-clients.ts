/**
 * SDK client construction shared by every Lambda's and the broker's `main.ts`. Endpoints come from
 * the SDK's own `AWS_ENDPOINT_URL_<SERVICE>` variables, so the local cloud is chosen by
 * configuration only. Clients are built once per container and handed to adapters.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

export function makeDocumentClient(client = new DynamoDBClient({})): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true },
  });
}

export function makeSqsClient(): SQSClient {
  return new SQSClient({});
}

/** S3 with path-style addressing when `AWS_S3_FORCE_PATH_STYLE=true` (emulators on 127.0.0.1). */
export function makeS3Client(env: NodeJS.ProcessEnv = process.env): S3Client {
  return new S3Client({ forcePathStyle: env.AWS_S3_FORCE_PATH_STYLE === 'true' });
}
