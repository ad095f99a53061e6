/**
 * The broker fleet: the brokers as the tasks of one Fargate service (task protection works only
 * for service tasks), the job manager Lambda that sizes that service every minute, and the
 * fleet's alarms.
 *
 * Network: a VPC of two AZs with public subnets only, brokers with a public IP and a security
 * group that admits nothing from outside (only the nudge port, from the Lambdas that nudge). No
 * NAT gateway: brokers only make outbound calls (DynamoDB, the telephony provider, the LINE
 * Messaging API, ECR and CloudWatch Logs), and a NAT gateway per AZ would cost
 * more than the whole fleet at rest (~$65/month before traffic, against $0.005/hour per broker's
 * public IPv4). DynamoDB traffic takes a free gateway endpoint and never leaves AWS's network.
 *
 * Deploys roll with protection: `minHealthyPercent` 100 and `maxHealthyPercent` 200 start the new
 * version's brokers beside the old ones; ECS then stops old brokers only once unprotected, and the
 * work list's `desiredVersion` (the image's hash, given to brokers and job manager alike) tells
 * old brokers to drain: no new calls, in-flight calls end, protection and lease released, exit.
 * The service has no desired count in the template: CloudFormation re-applies a template's count on
 * every service update (a new image), which would stop the brokers the job manager asked for. It
 * starts with ECS's default of one and the job manager's next run (within a minute) sets it. The
 * job manager reads the version to serve from the service's primary deployment, which names the
 * new task definition as soon as a deploy starts rolling (`shared/adapters/ecs-service.ts`).
 */
import { CfnOutput, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { DockerImageAsset, Platform } from 'aws-cdk-lib/aws-ecr-assets';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { IgnoreMode } from 'aws-cdk-lib/core';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { BROKER_TASK_SIZE, brokerV8Flags } from '#shared/broker/runtime.ts';
import { functions } from '#shared/functions.ts';
import { DEFAULT_LINE_API_URL } from '#shared/line/messaging-client.ts';
import { resourceName, TASKS_BY_RECIPIENT_INDEX, tableSpec } from '#shared/resources.ts';
import { REPO_ROOT, SwitchboardFunction } from './function.ts';
import type { StatefulResources } from './stateful.ts';

/**
 * The port of the broker's nudge server: call-ended notices from the call-status route, job
 * changes (pause / cancel of a message job) from the operator API.
 */
export const BROKER_HTTP_PORT = 8080;
/** Fargate's longest SIGTERM-to-SIGKILL wait; brokers are built to finish within it. */
export const BROKER_STOP_TIMEOUT_SECONDS = 120;

// Get/query/transactions on the broker's tables; no Scan, no DeleteItem (tasks are never deleted:
// only a settled multicast's record and a done claim page are, see BATCH_RECORD_KEYS).
const BROKER_TABLE_ACTIONS = [
  'dynamodb:GetItem',
  'dynamodb:BatchGetItem',
  'dynamodb:Query',
  'dynamodb:ConditionCheckItem',
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DescribeTable',
];
/**
 * The partition keys of multicast batch records in the tasks table (`{jobId}#batch`, see
 * shared/adapters/dynamo-message-tasks.ts): the broker deletes a record once every member settled.
 * A task's partition is `{jobId}#{shard}` with a numeric shard, so this never matches a task.
 */
const BATCH_RECORD_KEYS = '*#batch';
/** The partition keys of claim pages (`{clientId}#claims`, shared/adapters/dynamo-claim-pages.ts). */
const CLAIM_PAGE_KEYS = '*#claims';

export interface BrokerFleetProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  /** Keep log groups and the telephony secret when the stack is deleted (production: yes). */
  readonly retain: boolean;
  /** The telephony provider's API base URL. */
  readonly telephonyApiUrl: string;
  /** Amazon Connect instances the brokers may place calls through (ids); none by default. */
  readonly connectInstanceIds?: readonly string[];
  /** Where the provider posts call status (the HTTP API's call-status route). */
  readonly callStatusCallbackUrl: string;
  /** The public URL of Twilio's status route (`/providers/twilio/calls/status`). */
  readonly twilioCallbackUrl: string;
  /** Most brokers the job manager may ask for. Default 10. */
  readonly maxBrokers?: number;
  /** Broker size. Defaults: `BROKER_TASK_SIZE` (1 vCPU, 2 GiB: a message job at 2,000/s takes about one vCPU). */
  readonly cpu?: number;
  readonly memoryMiB?: number;
  /** Alarms notify this topic. */
  readonly alarmTopic?: sns.ITopic;
}

export class BrokerFleet extends Construct {
  readonly vpc: ec2.Vpc;
  readonly cluster: ecs.Cluster;
  readonly taskDefinition: ecs.FargateTaskDefinition;
  readonly container: ecs.ContainerDefinition;
  readonly service: ecs.FargateService;
  readonly securityGroup: ec2.SecurityGroup;
  /** The telephony API token; set its value after the first deploy (`aws secretsmanager put-secret-value`). */
  readonly telephonyToken: secretsmanager.Secret;
  readonly jobManager: SwitchboardFunction;
  readonly schedule: events.Rule;
  /** The broker version: the image's content hash. */
  readonly brokerVersion: string;
  readonly alarms: {
    readonly jobManagerErrors: cloudwatch.Alarm;
    readonly jobManagerNotRunning: cloudwatch.Alarm;
    readonly brokersMissing: cloudwatch.Alarm;
  };

  constructor(scope: Construct, id: string, props: BrokerFleetProps) {
    super(scope, id);
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;

    const network = this.network(removalPolicy);
    this.vpc = network.vpc;
    this.securityGroup = network.securityGroup;

    const { cluster, image, telephonyToken } = this.clusterAndImage(props.stage, removalPolicy);
    this.cluster = cluster;
    this.brokerVersion = image.assetHash;
    this.telephonyToken = telephonyToken;

    const task = this.brokerTask(props, image, removalPolicy);
    this.taskDefinition = task.taskDefinition;
    this.container = task.container;

    this.service = this.brokerService(props.stage);

    const { jobManager, schedule } = this.jobManagerEveryMinute(props, removalPolicy);
    this.jobManager = jobManager;
    this.schedule = schedule;

    this.alarms = this.fleetAlarms(props.stage, props.alarmTopic);

    this.suppressWithReasons();
  }

  /**
   * A VPC of two AZs, public subnets only, no NAT (see the file's docblock), and the brokers'
   * security group: HTTPS out, nothing in until {@link allowNudgesFrom}.
   */
  private network(removalPolicy: RemovalPolicy): { vpc: ec2.Vpc; securityGroup: ec2.SecurityGroup } {
    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'brokers', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 }],
      gatewayEndpoints: { DynamoDb: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB } },
      flowLogs: {
        rejected: {
          destination: ec2.FlowLogDestination.toCloudWatchLogs(
            new logs.LogGroup(this, 'FlowLogs', { retention: logs.RetentionDays.ONE_MONTH, removalPolicy }),
          ),
          trafficType: ec2.FlowLogTrafficType.REJECT,
        },
      },
    });
    const securityGroup = new ec2.SecurityGroup(this, 'BrokerSecurityGroup', {
      vpc,
      description: 'Switchboard brokers: HTTPS out only; no inbound unless allowNudgesFrom is called',
      allowAllOutbound: false,
    });
    securityGroup.addEgressRule(
      ec2.Peer.anyIpv4(),
      ec2.Port.tcp(443),
      'DynamoDB, telephony API, LINE Messaging API, ECR, logs',
    );
    return { vpc, securityGroup };
  }

  /** The cluster, the broker's image (its hash is the broker version) and the telephony token's secret. */
  private clusterAndImage(
    stage: string,
    removalPolicy: RemovalPolicy,
  ): { cluster: ecs.Cluster; image: DockerImageAsset; telephonyToken: secretsmanager.Secret } {
    const cluster = new ecs.Cluster(this, 'Cluster', {
      vpc: this.vpc,
      clusterName: resourceName(stage, 'brokers'),
      containerInsightsV2: ecs.ContainerInsights.ENABLED,
    });

    // The build context is the repository (the broker imports shared/), staged at synth without
    // Docker; only what the image needs is copied, so unrelated edits do not change the hash.
    const image = new DockerImageAsset(this, 'BrokerImage', {
      directory: REPO_ROOT,
      file: 'worker/Dockerfile',
      platform: Platform.LINUX_ARM64,
      ignoreMode: IgnoreMode.DOCKER,
      exclude: [
        '*',
        '!package.json',
        '!package-lock.json',
        '!worker/**',
        '!shared/**',
        '**/*.test.ts',
        '**/node_modules',
      ],
    });
    const telephonyToken = new secretsmanager.Secret(this, 'TelephonyApiToken', {
      description: `Switchboard ${stage}: the telephony provider's API token, read by brokers`,
      removalPolicy,
    });
    new CfnOutput(this, 'TelephonyApiTokenSecretArn', {
      key: 'TelephonyApiTokenSecretArn',
      description:
        "Put the telephony provider's API token here (aws secretsmanager put-secret-value); brokers started after read it",
      value: telephonyToken.secretArn,
    });
    return { cluster, image, telephonyToken };
  }

  /** The broker's task definition and container, its task role granted what a broker does. */
  private brokerTask(
    props: BrokerFleetProps,
    image: DockerImageAsset,
    removalPolicy: RemovalPolicy,
  ): { taskDefinition: ecs.FargateTaskDefinition; container: ecs.ContainerDefinition } {
    const { tables } = props.stateful;
    const taskRole = new iam.Role(this, 'BrokerTaskRole', {
      assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      description:
        'Switchboard broker: its two tables, the LINE channels it sends through (read) and its own task protection',
    });
    const memoryMiB = props.memoryMiB ?? BROKER_TASK_SIZE.memoryMiB;
    const taskDefinition = new ecs.FargateTaskDefinition(this, 'BrokerTask', {
      cpu: props.cpu ?? BROKER_TASK_SIZE.cpu,
      memoryLimitMiB: memoryMiB,
      runtimePlatform: {
        cpuArchitecture: ecs.CpuArchitecture.ARM64,
        operatingSystemFamily: ecs.OperatingSystemFamily.LINUX,
      },
      taskRole,
    });
    const brokerLogs = new logs.LogGroup(this, 'BrokerLogs', {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy,
    });
    const container = taskDefinition.addContainer('broker', {
      image: ecs.ContainerImage.fromDockerImageAsset(image),
      essential: true,
      stopTimeout: Duration.seconds(BROKER_STOP_TIMEOUT_SECONDS),
      readonlyRootFilesystem: true,
      logging: ecs.LogDrivers.awsLogs({ logGroup: brokerLogs, streamPrefix: 'broker' }),
      environment: {
        CONTROL_TABLE: tables.control.tableName,
        TASKS_TABLE: tables.tasks.tableName,
        // Message jobs: the channel's access token is read here; sends go to the Messaging API.
        [tableSpec('channels').envVar]: tables.channels.tableName,
        LINE_API_URL: DEFAULT_LINE_API_URL,
        TELEPHONY_API_URL: props.telephonyApiUrl,
        CALL_STATUS_CALLBACK_URL: props.callStatusCallbackUrl,
        TWILIO_CALLBACK_URL: props.twilioCallbackUrl,
        BROKER_VERSION: this.brokerVersion,
        BROKER_HTTP_HOST: '0.0.0.0',
        BROKER_HTTP_PORT: String(BROKER_HTTP_PORT),
        NODE_OPTIONS: ['--enable-source-maps', ...brokerV8Flags(memoryMiB)].join(' '),
      },
      // Injected by the agent from Secrets Manager (execution role), never written in the template.
      secrets: { TELEPHONY_API_TOKEN: ecs.Secret.fromSecretsManager(this.telephonyToken) },
      portMappings: [{ containerPort: BROKER_HTTP_PORT, protocol: ecs.Protocol.TCP }],
    });

    this.grantBrokerTaskRole(taskRole, props);
    return { taskDefinition, container };
  }

  /**
   * Email jobs: the brokers send through SES v2 under `configurationSet` (its events reach
   * email-events), from any identity verified in the account (clients' From addresses are settings,
   * known only at run time), and sign one-click unsubscribe links with the route's keys.
   */
  sendEmail(options: {
    readonly configurationSetName: string;
    readonly unsubscribe: {
      signerEnvironment(): Record<string, string>;
      grantSigning(grantee: iam.IGrantable): void;
    };
  }): void {
    const stack = Stack.of(this);
    const taskRole = this.taskDefinition.taskRole;
    this.container.addEnvironment('SES_CONFIGURATION_SET', options.configurationSetName);
    for (const [name, value] of Object.entries(options.unsubscribe.signerEnvironment()))
      this.container.addEnvironment(name, value);
    options.unsubscribe.grantSigning(taskRole);
    const arn = (resource: string) => stack.formatArn({ service: 'ses', resource, resourceName: undefined });
    taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['ses:SendEmail', 'ses:SendBulkEmail'],
        resources: [arn('identity/*'), arn(`configuration-set/${options.configurationSetName}`)],
      }),
    );
    // The account's sending rate and quota (GetAccount has no resource).
    taskRole.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['ses:GetAccount'], resources: ['*'] }));
    NagSuppressions.addResourceSuppressions(
      taskRole,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            "Email is sent from each client's verified From identity, a setting known only at run time (identity/*, this account and region); GetAccount has no resource. The configuration set is named.",
          appliesTo: [
            `Resource::arn:<AWS::Partition>:ses:<AWS::Region>:<AWS::AccountId>:identity/*`,
            'Resource::*',
          ],
        },
      ],
      true,
    );
  }

  /**
   * SMS jobs: the brokers send through End User Messaging SMS under `configurationSetName` (its
   * events reach sms-events), from any origination identity of the account in the region (phone
   * numbers, sender IDs, pools: clients' identities are settings, known only at run time).
   * `SendTextMessage` authorizes the identity and the configuration set (Service Authorization
   * Reference, "Actions defined by AWS End User Messaging SMS and Voice V2").
   */
  sendSms(options: { readonly configurationSetName: string }): void {
    const stack = Stack.of(this);
    const taskRole = this.taskDefinition.taskRole;
    this.container.addEnvironment('SMS_CONFIGURATION_SET', options.configurationSetName);
    const arn = (resource: string) =>
      `arn:${stack.partition}:sms-voice:${stack.region}:${stack.account}:${resource}`;
    const identities = ['phone-number/*', 'sender-id/*', 'pool/*'];
    taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['sms-voice:SendTextMessage'],
        resources: [...identities.map(arn), arn(`configuration-set/${options.configurationSetName}`)],
      }),
    );
    NagSuppressions.addResourceSuppressions(
      taskRole,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            "Texts are sent from each client's origination identity (a number, sender ID or pool), a setting known only at run time: this account and region only. The configuration set is named.",
          appliesTo: identities.map(
            (resource) =>
              `Resource::arn:<AWS::Partition>:sms-voice:<AWS::Region>:<AWS::AccountId>:${resource}`,
          ),
        },
      ],
      true,
    );
  }

  /**
   * The broker's task role: its two tables (no Scan, no DeleteItem but a settled multicast's record),
   * the LINE channels it sends through (read), Amazon Connect contacts, its own task protection.
   */
  private grantBrokerTaskRole(taskRole: iam.Role, props: BrokerFleetProps): void {
    const stack = Stack.of(this);
    const { tables } = props.stateful;
    for (const [table, indexes] of [
      [tables.control, []],
      // Not byRecipient: a broker reads no person's history.
      [
        tables.tasks,
        tableSpec('tasks')
          .globalIndexes.map((i) => i.name)
          .filter((n) => n !== TASKS_BY_RECIPIENT_INDEX),
      ],
    ] as const) {
      taskRole.addToPolicy(
        new iam.PolicyStatement({ actions: BROKER_TABLE_ACTIONS, resources: [table.tableArn] }),
      );
      if (indexes.length > 0) {
        taskRole.addToPolicy(
          new iam.PolicyStatement({
            actions: ['dynamodb:Query'],
            resources: indexes.map((name) => `${table.tableArn}/index/${name}`),
          }),
        );
      }
    }
    // A message's end on a claim page is a PartiQL UPDATE (BatchExecuteStatement): the tasks table only.
    taskRole.addToPolicy(
      new iam.PolicyStatement({ actions: ['dynamodb:PartiQLUpdate'], resources: [tables.tasks.tableArn] }),
    );
    // A settled multicast's record and a done claim page, and nothing else of the tasks table, may be deleted.
    taskRole.addToPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:DeleteItem'],
        resources: [tables.tasks.tableArn],
        conditions: {
          'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [BATCH_RECORD_KEYS, CLAIM_PAGE_KEYS] },
        },
      }),
    );
    // Message jobs send through the client's LINE channel: the broker reads the channel (its access
    // token) by id, never writes it. The channels table is under the secrets key, whose policy names
    // each role that may decrypt (here, and in SwitchboardFunction.bindTable for the Lambdas), only
    // through DynamoDB in this account: the role decrypts channel items it reads, never arbitrary
    // ciphertext. The role's own policy says the same.
    const channels = tables.channels;
    taskRole.addToPolicy(
      new iam.PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [channels.tableArn] }),
    );
    if (channels.encryptionKey) {
      props.stateful.allowSecretsKeyUse(taskRole, 'read');
      taskRole.addToPolicy(
        new iam.PolicyStatement({
          actions: ['kms:Decrypt', 'kms:DescribeKey'],
          resources: [channels.encryptionKey.keyArn],
          conditions: {
            StringEquals: {
              'kms:ViaService': `dynamodb.${stack.region}.${stack.urlSuffix}`,
              'kms:CallerAccount': stack.account,
            },
          },
        }),
      );
    }

    // Amazon Connect: contacts of the configured instances only.
    const connectInstanceIds = props.connectInstanceIds ?? [];
    if (connectInstanceIds.length > 0) {
      taskRole.addToPolicy(
        new iam.PolicyStatement({
          actions: ['connect:StartOutboundVoiceContact', 'connect:DescribeContact', 'connect:StopContact'],
          resources: connectInstanceIds.map((id) =>
            stack.formatArn({ service: 'connect', resource: 'instance', resourceName: `${id}/contact/*` }),
          ),
        }),
      );
    }

    // The agent calls UpdateTaskProtection with the task role's credentials, for this task only;
    // the pattern names this cluster's tasks (the task id is known only at run time).
    const taskArnPattern = stack.formatArn({
      service: 'ecs',
      resource: 'task',
      resourceName: `${this.cluster.clusterName}/*`,
    });
    taskRole.addToPolicy(
      new iam.PolicyStatement({
        actions: ['ecs:UpdateTaskProtection', 'ecs:GetTaskProtection'],
        resources: [taskArnPattern],
      }),
    );
  }

  /** The brokers' Fargate service, rolled with protection; its desired count is the job manager's. */
  private brokerService(stage: string): ecs.FargateService {
    return new ecs.FargateService(this, 'Brokers', {
      cluster: this.cluster,
      serviceName: resourceName(stage, 'brokers'),
      taskDefinition: this.taskDefinition,
      // No desiredCount: the job manager owns it (see the file's docblock).
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
      circuitBreaker: { enable: true, rollback: true },
      assignPublicIp: true,
      vpcSubnets: { subnetType: ec2.SubnetType.PUBLIC },
      securityGroups: [this.securityGroup],
      propagateTags: ecs.PropagatedTagSource.SERVICE,
      enableECSManagedTags: true,
    });
  }

  /** The job manager Lambda that sizes the service, and the rule that runs it every minute. */
  private jobManagerEveryMinute(
    props: BrokerFleetProps,
    removalPolicy: RemovalPolicy,
  ): { jobManager: SwitchboardFunction; schedule: events.Rule } {
    const { tables } = props.stateful;
    const maxBrokers = props.maxBrokers ?? 10;
    const jobManager = new SwitchboardFunction(this, 'JobManager', {
      spec: functions['job-manager'],
      environment: {
        BROKER_CLUSTER: this.cluster.clusterName,
        BROKER_SERVICE: this.service.serviceName,
        BROKER_VERSION: this.brokerVersion,
        MAX_BROKERS: String(maxBrokers),
      },
      logRemovalPolicy: removalPolicy,
      // One run at a time, whatever retries or a late schedule do, through the run lease in the
      // control table (`shared/fleet/run-lease.ts`): a run that finds another one holding it logs
      // that and returns; the next minute's run makes good what it missed. Not reserved
      // concurrency: reserving even 1 unit fails a deploy into an account whose concurrency quota
      // is at most 100 (Lambda keeps 100 unreserved). Runs are idempotent besides (the work list is
      // written conditionally on updatedAt). No async retry, no event older than a minute.
      invocation: { asyncRetryAttempts: 0, maxEventAge: Duration.minutes(1) },
    })
      .bindTable(tables.control, 'readwrite', tableSpec('control').envVar, { indexes: ['byStatus'] })
      // Before it completes a job, it closes the claim pages a stopped broker left done (and only those).
      .bindTable(tables.tasks, 'readwrite', tableSpec('tasks').envVar, {
        indexes: ['outstanding'],
        writes: { actions: ['dynamodb:DeleteItem'], leadingKeys: [CLAIM_PAGE_KEYS] },
      });
    jobManager.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['ecs:UpdateService', 'ecs:DescribeServices'],
        resources: [this.service.serviceArn],
      }),
    );
    // The primary deployment's task definition, read for its BROKER_VERSION.
    jobManager.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['ecs:DescribeTaskDefinition'], resources: ['*'] }),
    );
    NagSuppressions.addResourceSuppressions(
      jobManager.role!,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            'ecs:DescribeTaskDefinition supports no resource-level permission (Service Authorization Reference), so AWS requires Resource "*"; it reads task definitions only, to learn the version of the broker service\'s primary deployment.',
          appliesTo: ['Resource::*'],
        },
      ],
      true,
    );
    const schedule = new events.Rule(this, 'EveryMinute', {
      description: 'Switchboard: run the job manager every minute',
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [
        // A missed run is made good by the next one: retry briefly, never pile runs up.
        new targets.LambdaFunction(jobManager, { retryAttempts: 2, maxEventAge: Duration.minutes(1) }),
      ],
    });
    return { jobManager, schedule };
  }

  /** The job manager failing or not running, and brokers wanted but not running; they notify `alarmTopic`. */
  private fleetAlarms(stage: string, alarmTopic: sns.ITopic | undefined): BrokerFleet['alarms'] {
    const name = (suffix: string) => resourceName(stage, suffix);
    const period = Duration.minutes(5);
    const alarms = {
      jobManagerErrors: this.jobManager
        .metricErrors({ period, statistic: 'Sum' })
        .createAlarm(this, 'JobManagerErrorsAlarm', {
          alarmName: name('job-manager-errors'),
          alarmDescription:
            'The job manager failed a run: jobs may not start or complete, brokers may not scale.',
          threshold: 0,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      jobManagerNotRunning: this.jobManager
        .metricInvocations({ period, statistic: 'Sum' })
        .createAlarm(this, 'JobManagerNotRunningAlarm', {
          alarmName: name('job-manager-not-running'),
          alarmDescription: 'The job manager has not run for 10 minutes: is the schedule disabled?',
          threshold: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
          evaluationPeriods: 2,
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        }),
      brokersMissing: new cloudwatch.MathExpression({
        expression: 'desired - running',
        label: 'brokers wanted but not running',
        period,
        usingMetrics: {
          desired: this.containerInsightsMetric('DesiredTaskCount', period),
          running: this.containerInsightsMetric('RunningTaskCount', period),
        },
      }).createAlarm(this, 'BrokersMissingAlarm', {
        alarmName: name('brokers-missing'),
        alarmDescription:
          'Fewer brokers run than the job manager asked for, for 15 minutes: image, quota or start-up failure (see the service events).',
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    };
    if (alarmTopic) {
      const notify = new actions.SnsAction(alarmTopic);
      for (const alarm of Object.values(alarms)) alarm.addAlarmAction(notify);
    }
    return alarms;
  }

  /**
   * Lets `peer` (the call-status or the operator API Lambda's security group) reach the brokers'
   * nudge port.
   */
  allowNudgesFrom(peer: ec2.IPeer, description = 'call-ended nudges'): void {
    this.securityGroup.addIngressRule(peer, ec2.Port.tcp(BROKER_HTTP_PORT), description);
  }

  /** A Container Insights metric of the broker service (tasks desired, running; CPU). */
  containerInsightsMetric(metricName: string, period: Duration): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: 'ECS/ContainerInsights',
      metricName,
      dimensionsMap: { ClusterName: this.cluster.clusterName, ServiceName: this.service.serviceName },
      statistic: 'Average',
      period,
    });
  }

  private suppressWithReasons(): void {
    NagSuppressions.addResourceSuppressions(
      this.taskDefinition,
      [
        {
          id: 'AwsSolutions-ECS2',
          reason:
            'The environment holds table names, URLs and the version, none secret; the telephony token comes from Secrets Manager through `secrets`, LINE access tokens from the KMS-encrypted channels table at run time.',
        },
      ],
      true,
    );
    NagSuppressions.addResourceSuppressions(
      this.taskDefinition.taskRole,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            "Task protection is set by the ECS agent for the calling task, whose id exists only at run time: the resource is this cluster's tasks (task/{cluster}/*), the narrowest ARN IAM allows.",
          appliesTo: [
            {
              regex: '/^Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task\\/.*\\/\\*$/g',
            },
          ],
        },
        {
          id: 'AwsSolutions-IAM5',
          reason:
            "Amazon Connect contacts are created by the call itself (their ids exist only once placed): the resource is the configured instances' contacts (instance/{id}/contact/*), the narrowest ARN IAM allows.",
          appliesTo: [
            {
              regex:
                '/^Resource::arn:<AWS::Partition>:connect:<AWS::Region>:<AWS::AccountId>:instance\\/[0-9a-f-]+\\/contact\\/\\*$/g',
            },
          ],
        },
      ],
      true,
    );
    NagSuppressions.addResourceSuppressions(
      this.taskDefinition.obtainExecutionRole(),
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            'The execution role pulls the image: ecr:GetAuthorizationToken supports no resource-level permission, so AWS requires Resource "*" for it; the pull itself, the logs and the secret are each granted on their ARN.',
          appliesTo: ['Resource::*'],
        },
      ],
      true,
    );
    NagSuppressions.addResourceSuppressions(this.telephonyToken, [
      {
        id: 'AwsSolutions-SMG4',
        reason:
          "The token is issued by the telephony provider; it is rotated in the provider's console and then put here, which no rotation Lambda can do.",
      },
    ]);
  }
}
