/**
 * Published on-demand prices, us-east-1, used by the cost and scale benches. Each carries where it
 * was read and when (docs/cost.md lists the same sources); a price change is one edit here.
 */
export interface Price {
  /** US dollars per `unit`. */
  readonly usd: number;
  readonly unit: string;
  readonly source: string;
}

/** Read on 2026-11-25 (see docs/cost.md for the quotes). */
export const PRICES = {
  dynamoWrite: {
    usd: 0.625 / 1e6,
    unit: 'write request unit (on-demand)',
    source: 'https://airbyte.com/data-engineering-resources/dynamodb-pricing',
  },
  dynamoRead: {
    usd: 0.125 / 1e6,
    unit: 'read request unit (on-demand)',
    source: 'https://airbyte.com/data-engineering-resources/dynamodb-pricing',
  },
  sqsStandard: {
    usd: 0.4 / 1e6,
    unit: 'SQS standard request (64 KB chunk)',
    source: 'https://cloudburn.io/blog/amazon-sqs-pricing',
  },
  sqsFifo: {
    usd: 0.5 / 1e6,
    unit: 'SQS FIFO request (64 KB chunk)',
    source: 'https://cloudburn.io/blog/amazon-sqs-pricing',
  },
  lambdaRequest: {
    usd: 0.2 / 1e6,
    unit: 'Lambda request',
    source: 'https://cloudchipr.com/blog/aws-lambda-pricing',
  },
  lambdaGbSecondArm: {
    usd: 0.0000133334,
    unit: 'Lambda GB-second, arm64 (first 7.5 billion GB-s a month)',
    source: 'https://cloudchipr.com/blog/aws-lambda-pricing',
  },
  fargateVcpuHourArm: {
    usd: 0.03238,
    unit: 'Fargate vCPU-hour, Linux/ARM',
    source: 'https://www.vantage.sh/blog/fargate-pricing',
  },
  fargateGbHourArm: {
    usd: 0.00356,
    unit: 'Fargate GB-hour, Linux/ARM',
    source: 'https://www.vantage.sh/blog/fargate-pricing',
  },
  s3Put: {
    usd: 0.005 / 1000,
    unit: 'S3 Standard PUT/COPY/POST/LIST request',
    source: 'https://c3x.dev/blog/s3-request-fees-explained',
  },
  s3Get: {
    usd: 0.0004 / 1000,
    unit: 'S3 Standard GET/HEAD request',
    source: 'https://c3x.dev/blog/s3-request-fees-explained',
  },
} as const satisfies Record<string, Price>;

/** S3 operations billed at the PUT/COPY/POST/LIST rate; every other S3 request at the GET rate. */
export const S3_TIER1 = /^(Put|Copy|Post|List|CreateMultipartUpload|UploadPart|CompleteMultipartUpload)/;
