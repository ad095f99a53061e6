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
  // Email (bench/cost's email scenario; docs/email.md#costs). Read on 2026-11-26.
  eventBridgeEvent: {
    usd: 1 / 1e6,
    unit: 'EventBridge event on the default bus, an AWS opt-in data event (64 KB chunk)',
    // "AWS management events are ingested by the event bus for free" — SES's sending events are
    // data-plane events a configuration set's destination opts into, priced as custom events.
    source: 'https://aws.amazon.com/eventbridge/pricing/',
  },
  cloudWatchLogsGb: {
    usd: 0.5,
    unit: 'CloudWatch Logs GB ingested (Standard; Lambda logs, first tier)',
    source: 'https://www.duckbillgroup.com/?p=9080',
  },
  xrayTrace: {
    usd: 5 / 1e6,
    unit: 'X-Ray trace recorded',
    // Not found in the search corpus: AWS's list price as quoted for years.
    source: 'https://aws.amazon.com/xray/pricing/',
  },
  /** Amazon SES's own price, printed beside ours, never part of Switchboard's figure. */
  sesRecipient: {
    usd: 0.1 / 1000,
    unit: 'SES outbound email recipient (à la carte)',
    // The AWS Price List (AmazonSES, us-east-1) as read by api-evangelist/amazon-ses
    // plans/amazon-ses-plans-pricing.yml: $0.0001 a recipient à la carte; the Essentials plan that
    // new accounts get since 2026-07-21 charges $0.00016 an email up to 10 million.
    source: 'https://aws.amazon.com/ses/pricing/',
  },
} as const satisfies Record<string, Price>;

/**
 * X-Ray's default sampling, which a Lambda with active tracing applies to a request that arrives
 * without a trace header (an EventBridge event from SES has none): the first request each second,
 * then 5 % (https://docs.aws.amazon.com/xray/latest/devguide/xray-console-sampling.html). At a
 * campaign's event rate the reservoir is negligible: 5 % of invocations are traced.
 */
export const XRAY_SAMPLED_SHARE = 0.05;

/**
 * The records Lambda itself writes for each invocation in the JSON log format every Switchboard
 * function uses (its Init Duration metric reads `platform.report`): `platform.start` (request id,
 * version, trace header: about 200 bytes), `platform.runtimeDone` (status, duration, produced bytes,
 * its spans and the trace header: about 450) and `platform.report` (duration, billed duration, memory
 * size and used, `initDurationMs` on a cold start, the trace header: about 380), plus CloudWatch's 26
 * bytes of metadata per log event (3 × 26). The text format's START/END/REPORT lines were about 380
 * bytes; the record shapes are Lambda's telemetry schema
 * (https://docs.aws.amazon.com/lambda/latest/dg/telemetry-schema-reference.html).
 */
export const LAMBDA_PLATFORM_LOG_BYTES = 200 + 450 + 380 + 3 * 26;
/** CloudWatch Logs' metadata counted with each log event ingested. */
export const LOG_EVENT_OVERHEAD_BYTES = 26;

/** S3 operations billed at the PUT/COPY/POST/LIST rate; every other S3 request at the GET rate. */
export const S3_TIER1 = /^(Put|Copy|Post|List|CreateMultipartUpload|UploadPart|CompleteMultipartUpload)/;
