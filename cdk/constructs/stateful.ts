/**
 * Switchboard's stateful resources — tables, queues with their DLQs, the upload bucket — built
 * from the same specs (`shared/resources.ts`) that the local cloud provisions.
 */
import { CfnOutput, Duration, Fn, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import {
  type BucketId,
  buckets,
  consoleOriginPattern,
  dlqName,
  type QueueId,
  type QueueSpec,
  queueName,
  queues,
  resourceName,
  type TableId,
  type TableSpec,
  tables,
  UPLOAD_CORS,
} from '#shared/resources.ts';

/**
 * The secrets key's policy: the account administers the key (through IAM) but may not use it:
 * encrypt and decrypt are granted in the key policy itself, to each role by name, and only through
 * DynamoDB ({@link StatefulResources.allowSecretsKeyUse}). So "who can read channel secrets" is
 * the list in this policy, whatever an IAM policy elsewhere in the account says. The account may
 * create grants only for AWS resources (DynamoDB's grant on the table).
 */
function secretsKeyPolicy(): iam.PolicyDocument {
  const account = new iam.AccountRootPrincipal();
  return new iam.PolicyDocument({
    statements: [
      new iam.PolicyStatement({
        sid: 'AccountAdministersTheKey',
        principals: [account],
        actions: [
          'kms:Describe*',
          'kms:Enable*',
          'kms:List*',
          'kms:Put*',
          'kms:Update*',
          'kms:Revoke*',
          'kms:Disable*',
          'kms:Get*',
          'kms:Delete*',
          'kms:TagResource',
          'kms:UntagResource',
          'kms:ScheduleKeyDeletion',
          'kms:CancelKeyDeletion',
          'kms:RotateKeyOnDemand',
        ],
        resources: ['*'],
      }),
      new iam.PolicyStatement({
        sid: 'GrantsOnlyForAwsResources',
        principals: [account],
        actions: ['kms:CreateGrant'],
        resources: ['*'],
        conditions: { Bool: { 'kms:GrantIsForAWSResource': 'true' } },
      }),
    ],
  });
}

export interface StatefulResourcesProps {
  readonly stage: string;
  /** Keep tables and the bucket when the stack is deleted (production: yes). */
  readonly retain: boolean;
  /** Browser origins that may PUT to presigned upload URLs (CORS); none: no CORS rule. */
  readonly uploadOrigins?: readonly string[];
}

const SECRETS_KEY_READ = ['kms:Decrypt', 'kms:DescribeKey'];
const SECRETS_KEY_WRITE = [
  'kms:Encrypt',
  'kms:ReEncryptFrom',
  'kms:ReEncryptTo',
  'kms:GenerateDataKey',
  'kms:GenerateDataKeyWithoutPlaintext',
];

/**
 * Names `role` in `key`'s policy: it may decrypt (and, for `readwrite`, encrypt) items of the
 * tables under the key, through DynamoDB in this account only. With {@link secretsKeyPolicy} this
 * is the only way to use the key.
 */
export function allowKeyUseThroughDynamoDb(
  key: kms.IKey,
  role: iam.IRole,
  access: 'read' | 'readwrite',
): void {
  const stack = Stack.of(key);
  key.addToResourcePolicy(
    new iam.PolicyStatement({
      principals: [role],
      actions: access === 'readwrite' ? [...SECRETS_KEY_READ, ...SECRETS_KEY_WRITE] : SECRETS_KEY_READ,
      resources: ['*'],
      conditions: {
        StringEquals: {
          'kms:ViaService': `dynamodb.${stack.region}.${stack.urlSuffix}`,
          'kms:CallerAccount': stack.account,
        },
      },
    }),
  );
}

export interface QueuePair {
  readonly spec: QueueSpec;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
}

/** An alarm's name (under the stage's prefix: the alarm topic admits only alarms named so), text and topic. */
export interface AlarmOptions {
  readonly alarmName: string;
  readonly description: string;
  readonly topic: sns.ITopic;
}

/**
 * An alarm on the first occurrence of `metric` (> 0 in one period; no data is no alarm), notifying
 * `topic`: for what is worth a look each time it happens.
 */
export function alarmOnAny(
  scope: Construct,
  id: string,
  metric: cloudwatch.IMetric,
  options: AlarmOptions,
): cloudwatch.Alarm {
  const alarm = new cloudwatch.Alarm(scope, id, {
    metric,
    alarmName: options.alarmName,
    alarmDescription: options.description,
    threshold: 0,
    evaluationPeriods: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  alarm.addAlarmAction(new actions.SnsAction(options.topic));
  return alarm;
}

/**
 * An alarm on the first message in a queue's dead-letter queue (its visible messages, > 0 within a
 * minute), notifying `topic`: every DLQ of the stack has one.
 */
export function deadLetterAlarm(
  scope: Construct,
  id: string,
  pair: Pick<QueuePair, 'deadLetterQueue'>,
  options: AlarmOptions,
): cloudwatch.Alarm {
  const visible = pair.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
    period: Duration.minutes(1),
    statistic: cloudwatch.Stats.MAXIMUM,
  });
  return alarmOnAny(scope, id, visible, options);
}

/** A stack output holding the command that moves a DLQ's messages back to their queue. */
export function redriveCommandOutput(scope: Construct, id: string, key: string, pair: QueuePair): CfnOutput {
  return new CfnOutput(scope, id, {
    key,
    description: `Moves every message of the ${pair.spec.id} DLQ back to its queue`,
    value: Fn.join('', [
      'aws sqs start-message-move-task --source-arn ',
      pair.deadLetterQueue.queueArn,
      ' --destination-arn ',
      pair.queue.queueArn,
    ]),
  });
}

export class StatefulResources extends Construct {
  readonly tables: Record<TableId, dynamodb.Table>;
  readonly queues: Record<QueueId, QueuePair>;
  readonly buckets: Record<BucketId, s3.Bucket>;
  readonly accessLogs: s3.Bucket;
  /** The key of the tables holding secrets: granting it is granting access to the secrets. */
  readonly secretsKey: kms.Key;

  constructor(scope: Construct, id: string, props: StatefulResourcesProps) {
    super(scope, id);
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    this.secretsKey = new kms.Key(this, 'SecretsKey', {
      description: 'Switchboard: encrypts LINE channel secrets, access tokens and callback secrets at rest',
      enableKeyRotation: true,
      removalPolicy,
      policy: secretsKeyPolicy(),
    });

    this.tables = Object.fromEntries(
      tables.map((spec) => [spec.id, this.table(spec, props.stage, removalPolicy)]),
    ) as Record<TableId, dynamodb.Table>;

    this.queues = Object.fromEntries(
      queues.map((spec) => [spec.id, this.queuePair(spec, props.stage, removalPolicy)]),
    ) as Record<QueueId, QueuePair>;

    this.accessLogs = new s3.Bucket(this, 'AccessLogs', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
      lifecycleRules: [{ expiration: Duration.days(365) }],
      removalPolicy,
      autoDeleteObjects: !props.retain,
    });
    NagSuppressions.addResourceSuppressions(this.accessLogs, [
      {
        id: 'AwsSolutions-S1',
        reason: 'This is the access-log bucket itself; logging it into itself would loop.',
      },
    ]);

    this.buckets = Object.fromEntries(
      buckets.map((spec) => [
        spec.id,
        new s3.Bucket(this, `Bucket-${spec.id}`, {
          bucketName: undefined,
          blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
          encryption: s3.BucketEncryption.S3_MANAGED,
          enforceSSL: true,
          versioned: false,
          serverAccessLogsBucket: this.accessLogs,
          serverAccessLogsPrefix: `${spec.id}/`,
          // Browsers upload call lists straight to S3 with the presigned URL the job API returns,
          // from the console (served by the HTTP API, or another origin named in uploadOrigins).
          cors: [
            {
              allowedMethods: UPLOAD_CORS.allowedMethods.map((m) => s3.HttpMethods[m]),
              allowedOrigins: [consoleOriginPattern(Stack.of(this).region), ...(props.uploadOrigins ?? [])],
              allowedHeaders: [...UPLOAD_CORS.allowedHeaders],
              exposedHeaders: [...UPLOAD_CORS.exposedHeaders],
              maxAge: UPLOAD_CORS.maxAgeSeconds,
            },
          ],
          lifecycleRules: [
            { prefix: 'incoming/', expiration: Duration.days(spec.expireUploadsAfterDays) },
            { prefix: 'uploads/', expiration: Duration.days(spec.expireUploadsAfterDays) },
            // Ingest state (cursors' duplicate-filter snapshots) is needed only while a file ingests.
            { prefix: 'state/', expiration: Duration.days(7) },
            { prefix: 'reports/', expiration: Duration.days(spec.expireUploadsAfterDays) },
            { abortIncompleteMultipartUploadAfter: Duration.days(1) },
          ],
          removalPolicy,
          autoDeleteObjects: !props.retain,
        }),
      ]),
    ) as Record<BucketId, s3.Bucket>;
  }

  /** Names `role` in the secrets key's policy (see {@link allowKeyUseThroughDynamoDb}). */
  allowSecretsKeyUse(role: iam.IRole, access: 'read' | 'readwrite'): void {
    allowKeyUseThroughDynamoDb(this.secretsKey, role, access);
  }

  private table(spec: TableSpec, stage: string, removalPolicy: RemovalPolicy): dynamodb.Table {
    const attr = (k: { name: string; type: 'S' | 'N' }) => ({
      name: k.name,
      type: k.type === 'S' ? dynamodb.AttributeType.STRING : dynamodb.AttributeType.NUMBER,
    });
    const table = new dynamodb.Table(this, `Table-${spec.id}`, {
      tableName: resourceName(stage, spec.id),
      partitionKey: attr(spec.partitionKey),
      ...(spec.sortKey ? { sortKey: attr(spec.sortKey) } : {}),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      ...(spec.stream ? { stream: dynamodb.StreamViewType.NEW_AND_OLD_IMAGES } : {}),
      ...(spec.encryption === 'customer-managed'
        ? { encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED, encryptionKey: this.secretsKey }
        : { encryption: dynamodb.TableEncryption.AWS_MANAGED }),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: spec.pointInTimeRecovery },
      ...(spec.ttlAttribute ? { timeToLiveAttribute: spec.ttlAttribute } : {}),
      deletionProtection: removalPolicy === RemovalPolicy.RETAIN,
      removalPolicy,
    });
    for (const index of spec.globalIndexes) {
      table.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: attr(index.partitionKey),
        ...(index.sortKey ? { sortKey: attr(index.sortKey) } : {}),
        ...(index.projection === 'keys-only' ? { projectionType: dynamodb.ProjectionType.KEYS_ONLY } : {}),
      });
    }
    if (!spec.pointInTimeRecovery) {
      NagSuppressions.addResourceSuppressions(table, [
        {
          id: 'AwsSolutions-DDB3',
          reason: `The ${spec.id} table holds short-lived idempotency records (TTL); nothing in it needs restoring.`,
        },
      ]);
    }
    return table;
  }

  private queuePair(spec: QueueSpec, stage: string, removalPolicy: RemovalPolicy): QueuePair {
    const deadLetterQueue = new sqs.Queue(this, `Dlq-${spec.id}`, {
      removalPolicy,
      queueName: dlqName(stage, spec),
      fifo: spec.fifo || undefined,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    const queue = new sqs.Queue(this, `Queue-${spec.id}`, {
      removalPolicy,
      queueName: queueName(stage, spec),
      fifo: spec.fifo || undefined,
      ...(spec.fifo && spec.contentBasedDeduplication ? { contentBasedDeduplication: true } : {}),
      ...(spec.fifo && spec.highThroughput
        ? {
            deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
            fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
          }
        : {}),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(spec.visibilityTimeoutSeconds),
      retentionPeriod: Duration.seconds(spec.retentionSeconds),
      deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: spec.maxReceiveCount },
    });
    return { spec, queue, deadLetterQueue };
  }
}
