/**
 * Call and message lists becoming jobs: the operator API's Lambda (behind the IAM-authorised
 * routes of the HTTP API), the ingest Lambda on the ingest queue, and the uploads bucket's
 * notification that feeds that queue (`s3:ObjectCreated:*` under `uploads/` and `incoming/`,
 * `.csv` only). Each function gets only the tables, key prefixes and queue actions it uses.
 *
 * Bucket layout (all in the uploads bucket):
 * - `uploads/{clientId}/{jobId}.csv`, `incoming/{clientId}/….csv` (+ sidecar `.json`): lists;
 * - `state/{clientId}/{jobId}/filter-*.bin`: duplicate-filter snapshots of paused ingests;
 * - `reports/{clientId}/{jobId}/…`: validation report pages and large job reports.
 */
import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3n from 'aws-cdk-lib/aws-s3-notifications';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { buckets, tableSpec } from '#shared/resources.ts';
import { SwitchboardFunction } from './function.ts';
import type { StatefulResources } from './stateful.ts';

export interface JobsProps {
  readonly stateful: StatefulResources;
  /** Keep log groups when the stack is deleted (production: yes). */
  readonly retain: boolean;
}

/** The S3 prefixes whose `.csv` objects start an ingest. */
export const UPLOAD_PREFIXES = ['uploads/', 'incoming/'] as const;

export class Jobs extends Construct {
  /** The operator API's function: pass it to the HTTP API as `handlers['jobs-api']`. */
  readonly api: SwitchboardFunction;
  readonly ingest: SwitchboardFunction;

  constructor(scope: Construct, id: string, props: JobsProps) {
    super(scope, id);
    const logRemovalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const { tables, queues } = props.stateful;
    const bucket = props.stateful.buckets.uploads;
    const bucketEnv = buckets.find((b) => b.id === 'uploads')!.envVar;
    const ingestQueue = queues.ingest;
    const control = tableSpec('control');
    const tasks = tableSpec('tasks');

    // Settings and jobs read and written; tasks only read (the report). A cancel queues the sweep
    // that ends the job's waiting tasks on the ingest queue (the ingest runs it).
    this.api = new SwitchboardFunction(this, 'Api', { spec: functions['jobs-api'], logRemovalPolicy })
      .bindTable(tables.control, 'readwrite', control.envVar)
      .bindTable(tables.tasks, 'read', tasks.envVar)
      .bindQueue(ingestQueue.queue, 'send', ingestQueue.spec.envVar);
    this.api.addEnvironment(bucketEnv, bucket.bucketName);
    // Presigned PUTs are signed with this role: it may put lists under uploads/ only.
    this.allow(this.api, ['s3:PutObject'], bucket, ['uploads/*']);
    this.allow(this.api, ['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload'], bucket, ['reports/*']);
    this.allowList(this.api, bucket, ['reports/*']);

    this.ingest = new SwitchboardFunction(this, 'Ingest', { spec: functions.ingest, logRemovalPolicy })
      .bindTable(tables.control, 'readwrite', control.envVar)
      .bindTable(tables.tasks, 'readwrite', tasks.envVar);
    this.ingest.consumeQueue(ingestQueue.queue, ingestQueue.spec);
    // Continuations of a paused ingest or a cancel sweep go back on the queue it consumes.
    ingestQueue.queue.grantSendMessages(this.ingest);
    this.ingest.addEnvironment(bucketEnv, bucket.bucketName);
    this.allow(this.ingest, ['s3:GetObject'], bucket, ['uploads/*', 'incoming/*']);
    this.allow(this.ingest, ['s3:GetObject', 's3:PutObject'], bucket, ['state/*']);
    this.allow(this.ingest, ['s3:PutObject'], bucket, ['reports/*']);

    for (const prefix of UPLOAD_PREFIXES) {
      bucket.addEventNotification(s3.EventType.OBJECT_CREATED, new s3n.SqsDestination(ingestQueue.queue), {
        prefix,
        suffix: '.csv',
      });
    }

    // CDK configures bucket notifications through a singleton Lambda of its own.
    const notificationsHandler = Stack.of(this)
      .node.findAll()
      .find((c) => c.node.id.startsWith('BucketNotificationsHandler'));
    if (notificationsHandler) {
      NagSuppressions.addResourceSuppressions(
        notificationsHandler,
        [
          {
            id: 'AwsSolutions-IAM4',
            reason:
              "CDK's own BucketNotificationsHandler (it sets the uploads bucket's notification at deploy time) uses AWSLambdaBasicExecutionRole; CDK creates it and offers no way to give it another role.",
            appliesTo: [
              'Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole',
            ],
          },
        ],
        true,
      );
    }

    for (const fn of [this.api, this.ingest]) {
      NagSuppressions.addResourceSuppressions(
        fn.role!,
        [
          {
            id: 'AwsSolutions-IAM5',
            reason:
              'Object-level S3 permissions are scoped to key prefixes of the uploads bucket (uploads/*, incoming/*, state/*, reports/*): objects are per client and job, created at run time, so they cannot be named in advance.',
            appliesTo: [
              { regex: '/^Resource::<.*Bucket.*\\.Arn>\\/(uploads|incoming|state|reports)\\/\\*$/g' },
            ],
          },
        ],
        true,
      );
    }
  }

  private allow(
    fn: SwitchboardFunction,
    actions: string[],
    bucket: s3.IBucket,
    prefixes: readonly string[],
  ): void {
    fn.addToRolePolicy(
      new iam.PolicyStatement({ actions, resources: prefixes.map((prefix) => bucket.arnForObjects(prefix)) }),
    );
  }

  private allowList(fn: SwitchboardFunction, bucket: s3.IBucket, prefixes: readonly string[]): void {
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [bucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': [...prefixes] } },
      }),
    );
  }
}
