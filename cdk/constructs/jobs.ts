/**
 * Call and message lists becoming jobs: the operator API's Lambda (behind the IAM-authorised
 * routes of the HTTP API), the ingest Lambda on the ingest queue, and the uploads bucket's
 * notification that feeds that queue (`s3:ObjectCreated:*` under `uploads/` and `incoming/`,
 * `.csv` only). Each function gets only the tables, key prefixes and queue actions it uses.
 *
 * The operator API runs in the brokers' VPC: a pause or cancel of a message job nudges the broker
 * holding the client at its private address (`POST /jobs/changed` on the nudge port) and waits for
 * it. With no NAT, it reaches DynamoDB and S3 through the VPC's free gateway endpoints and SQS (the
 * cancel sweep) through an interface endpoint (about $15/month for two AZs, a quarter of the NAT
 * gateways it replaces), whose policy lets only this function send, only to the ingest queue.
 *
 * Bucket layout (all in the uploads bucket):
 * - `uploads/{clientId}/{jobId}.csv`, `incoming/{clientId}/….csv` (+ sidecar `.json`): lists;
 * - `state/{clientId}/{jobId}/filter-*.bin`: duplicate-filter snapshots of paused ingests;
 * - `reports/{clientId}/{jobId}/…`: validation report pages and large job reports;
 * - `archives/{clientId}/{jobId}/report.csv`: an ended job's final report, kept (its tasks expire).
 */
import { CfnOutput, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3n from 'aws-cdk-lib/aws-s3-notifications';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { OUTCOME_SECRET_KEY_PREFIX } from '#shared/adapters/dynamo-outcome-webhooks.ts';
import { functions } from '#shared/functions.ts';
import {
  buckets,
  resourceName,
  TASKS_BY_RECIPIENT_INDEX,
  tableSpec,
  UPLOAD_NOTIFICATIONS,
} from '#shared/resources.ts';
import { BROKER_HTTP_PORT, type BrokerFleet } from './broker-fleet.ts';
import { SwitchboardFunction } from './function.ts';
import { deadLetterAlarm, type QueuePair, redriveCommandOutput, type StatefulResources } from './stateful.ts';

export interface JobsProps {
  readonly stateful: StatefulResources;
  /** The brokers the operator API nudges: their VPC and nudge port. */
  readonly fleet: BrokerFleet;
  /** Keep log groups when the stack is deleted (production: yes). */
  readonly retain: boolean;
  readonly stage: string;
  /** Where the ingest dead-letter alarm notifies. */
  readonly alarmTopic: sns.ITopic;
}

/** What the parts of {@link Jobs} are built from. */
interface JobsWiring {
  readonly props: JobsProps;
  readonly tables: StatefulResources['tables'];
  readonly ingestQueue: QueuePair;
  readonly bucket: s3.Bucket;
  /** The variable that names the uploads bucket to a function. */
  readonly bucketEnv: string;
  readonly logRemovalPolicy: RemovalPolicy;
}

export class Jobs extends Construct {
  /** The operator API's function: pass it to the HTTP API as `handlers['jobs-api']`. */
  readonly api: SwitchboardFunction;
  readonly ingest: SwitchboardFunction;
  /** The operator API's network interface in the brokers' VPC. */
  readonly apiSecurityGroup: ec2.SecurityGroup;
  /** SQS inside the VPC (no NAT): the operator API queues cancel sweeps through it. */
  readonly sqsEndpoint: ec2.InterfaceVpcEndpoint;
  /** An ingest, continuation or cancel sweep gave up: a job may be stuck in `uploading` or `cancelling`. */
  readonly deadLettersAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: JobsProps) {
    super(scope, id);
    const wiring: JobsWiring = {
      props,
      tables: props.stateful.tables,
      ingestQueue: props.stateful.queues.ingest,
      bucket: props.stateful.buckets.uploads,
      bucketEnv: buckets.find((b) => b.id === 'uploads')!.envVar,
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    };

    this.apiSecurityGroup = this.apiNetwork(props.fleet);
    this.api = this.operatorApi(wiring);
    this.sqsEndpoint = this.vpcEndpoints(props.fleet.vpc, wiring.ingestQueue);
    this.ingest = this.ingestFunction(wiring);
    this.deadLettersAlarm = this.uploadsIntoIngest(wiring);
    this.suppressWithReasons();
  }

  /** The operator API's security group in the brokers' VPC: HTTPS out, and nudges to the brokers. */
  private apiNetwork(fleet: BrokerFleet): ec2.SecurityGroup {
    const { vpc } = fleet;
    const apiSecurityGroup = new ec2.SecurityGroup(this, 'ApiSecurityGroup', {
      vpc,
      description: 'Switchboard jobs API: HTTPS to DynamoDB, S3 and SQS; job-changed nudges to brokers',
      allowAllOutbound: false,
    });
    apiSecurityGroup.addEgressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(443), 'DynamoDB, S3, SQS endpoints');
    apiSecurityGroup.addEgressRule(
      fleet.securityGroup,
      ec2.Port.tcp(BROKER_HTTP_PORT),
      'job-changed nudges to brokers',
    );
    fleet.allowNudgesFrom(apiSecurityGroup, 'job-changed nudges from the jobs API');
    return apiSecurityGroup;
  }

  /** The operator API's function: its tables, the ingest queue and its key prefixes of the uploads bucket. */
  private operatorApi(wiring: JobsWiring): SwitchboardFunction {
    const { tables, ingestQueue, bucket, bucketEnv, logRemovalPolicy } = wiring;
    const { vpc } = wiring.props.fleet;
    // Settings and jobs read and written (leases read: where a client's broker listens); tasks only
    // read (the report). A cancel queues the sweep that ends the job's waiting tasks on the ingest
    // queue (the ingest runs it).
    const api = new SwitchboardFunction(this, 'Api', {
      spec: functions['jobs-api'],
      logRemovalPolicy,
      network: { vpc, subnets: { subnetType: ec2.SubnetType.PUBLIC }, securityGroup: this.apiSecurityGroup },
    })
      // byStatus: its CLIENTS partition is the administrators' list of every client.
      .bindTable(tables.control, 'readwrite', tableSpec('control').envVar, { indexes: ['byStatus'] })
      // The outstanding index's head: why a call job waits (its first waiting task); byRecipient: a
      // person's history.
      .bindTable(tables.tasks, 'read', tableSpec('tasks').envVar, {
        indexes: ['outstanding', TASKS_BY_RECIPIENT_INDEX],
      })
      // A client's outcome webhook secret (settings: outcomeWebhook): put, never read, and only its
      // OUTCOMEWEBHOOK# item under the secrets key, never a LINE channel or a callback secret.
      .bindTable(tables.channels, 'readwrite', tableSpec('channels').envVar, {
        reads: { actions: [] },
        writes: { actions: ['dynamodb:PutItem'], leadingKeys: [`${OUTCOME_SECRET_KEY_PREFIX}*`] },
      })
      .bindQueue(ingestQueue.queue, 'send', ingestQueue.spec.envVar);
    api.addEnvironment(bucketEnv, bucket.bucketName);
    // Presigned PUTs are signed with this role: it may put lists under uploads/ only.
    this.allow(api, ['s3:PutObject'], bucket, ['uploads/*']);
    this.allow(api, ['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload'], bucket, ['reports/*']);
    this.allow(api, ['s3:GetObject'], bucket, ['archives/*']);
    this.allowList(api, bucket, ['reports/*']);
    return api;
  }

  /**
   * The VPC's way to S3 (a gateway endpoint) and to SQS (an interface endpoint only the operator
   * API may send through, only to the ingest queue).
   */
  private vpcEndpoints(vpc: ec2.Vpc, ingestQueue: QueuePair): ec2.InterfaceVpcEndpoint {
    // The VPC's way to S3 (inline uploads, reports) without a NAT: free, and brokers' image layers
    // from ECR (stored in S3) take it too.
    vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });
    const sqsEndpoint = new ec2.InterfaceVpcEndpoint(this, 'SqsEndpoint', {
      vpc,
      service: ec2.InterfaceVpcEndpointAwsService.SQS,
      subnets: { subnetType: ec2.SubnetType.PUBLIC },
      privateDnsEnabled: true,
      open: false,
    });
    sqsEndpoint.connections.allowDefaultPortFrom(this.apiSecurityGroup, 'jobs API: cancel sweeps');
    sqsEndpoint.addToPolicy(
      new iam.PolicyStatement({
        principals: [this.api.role!],
        actions: ['sqs:SendMessage'],
        resources: [ingestQueue.queue.queueArn],
      }),
    );
    return sqsEndpoint;
  }

  /** The ingest function on the ingest queue, and its key prefixes of the uploads bucket. */
  private ingestFunction(wiring: JobsWiring): SwitchboardFunction {
    const { tables, ingestQueue, bucket, bucketEnv, logRemovalPolicy } = wiring;
    const ingest = new SwitchboardFunction(this, 'Ingest', { spec: functions.ingest, logRemovalPolicy })
      .bindTable(tables.control, 'readwrite', tableSpec('control').envVar)
      .bindTable(tables.tasks, 'readwrite', tableSpec('tasks').envVar);
    ingest.consumeQueue(ingestQueue.queue, ingestQueue.spec);
    // Continuations of a paused ingest or a cancel sweep go back on the queue it consumes.
    ingestQueue.queue.grantSendMessages(ingest);
    // The job manager queues the expire sweep of a job past its end (the ingest runs it).
    wiring.props.fleet.jobManager.bindQueue(ingestQueue.queue, 'send', ingestQueue.spec.envVar);
    ingest.addEnvironment(bucketEnv, bucket.bucketName);
    this.allow(ingest, ['s3:GetObject'], bucket, ['uploads/*', 'incoming/*']);
    this.allow(ingest, ['s3:GetObject', 's3:PutObject'], bucket, ['state/*']);
    this.allow(ingest, ['s3:PutObject'], bucket, ['reports/*']);
    // Ended jobs' final reports (report-archive.ts): the validation report's pages read, the
    // archive streamed (multipart when large).
    this.allow(ingest, ['s3:GetObject'], bucket, ['reports/*']);
    this.allowList(ingest, bucket, ['reports/*']);
    this.allow(ingest, ['s3:PutObject', 's3:AbortMultipartUpload'], bucket, ['archives/*']);
    return ingest;
  }

  /**
   * The ingest queue's dead-letter alarm and redrive command, the uploads bucket's output, and its
   * notifications (lists under `uploads/` and `incoming/`) onto the ingest queue.
   */
  private uploadsIntoIngest(wiring: JobsWiring): cloudwatch.Alarm {
    const { props, ingestQueue, bucket } = wiring;
    const deadLettersAlarm = deadLetterAlarm(this, 'IngestDlqAlarm', ingestQueue, {
      alarmName: resourceName(props.stage, 'ingest-dlq-messages'),
      description:
        'An ingest, an ingest continuation or a cancel sweep failed 5 times and is in the dead-letter queue: its job may stay uploading or cancelling. Fix the cause in the ingest logs, then redrive with the stack output IngestDlqRedriveCommand (both are idempotent).',
      topic: props.alarmTopic,
    });
    redriveCommandOutput(this, 'IngestDlqRedriveCommand', 'IngestDlqRedriveCommand', ingestQueue);
    new CfnOutput(this, 'UploadsBucketName', {
      key: 'UploadsBucketName',
      description: 'The uploads bucket: drop lists under incoming/{clientId}/…csv',
      value: bucket.bucketName,
    });

    for (const prefix of UPLOAD_NOTIFICATIONS.prefixes) {
      for (const suffix of UPLOAD_NOTIFICATIONS.suffixes) {
        bucket.addEventNotification(s3.EventType.OBJECT_CREATED, new s3n.SqsDestination(ingestQueue.queue), {
          prefix,
          suffix,
        });
      }
    }
    return deadLettersAlarm;
  }

  /** cdk-nag findings that are accepted, each with its reason. */
  private suppressWithReasons(): void {
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
              'Object-level S3 permissions are scoped to key prefixes of the uploads bucket (uploads/*, incoming/*, state/*, reports/*, archives/*): objects are per client and job, created at run time, so they cannot be named in advance.',
            appliesTo: [
              {
                regex: '/^Resource::<.*Bucket.*\\.Arn>\\/(uploads|incoming|state|reports|archives)\\/\\*$/g',
              },
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
