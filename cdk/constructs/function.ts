/**
 * The one construct for Switchboard's Lambda functions: runtime, architecture, tracing, logs,
 * bundling and timeouts are fixed here, once, from the specs the local cloud also runs
 * (`shared/functions.ts`). Access to a table or a queue is given with `bindTable` / `bindQueue`,
 * which set the environment variable and grant IAM in the same call.
 */
import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import type { Construct } from 'constructs';
import type { FunctionSpec } from '#shared/functions.ts';
import type { QueueSpec } from '#shared/resources.ts';
import { allowKeyUseThroughDynamoDb } from './stateful.ts';

/**
 * Where the functions' cold-start times go: one metric a function, from its log group's metric
 * filter (a filter's dimensions can only be fields of the log event, so the function is in the name).
 */
export const INIT_DURATION_NAMESPACE = 'Switchboard/Lambda';
export const initDurationMetricName = (functionId: string) => `InitDuration-${functionId}`;

/** The repository root: spec entries, the lockfile and `package.json` `imports` live there. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

// Bundled ESM has no `require`; a CommonJS dependency that calls it (iconv-lite, parts of the
// SDK) would throw "Dynamic require of ... is not supported" without this shim.
const ESM_REQUIRE_BANNER =
  "import { createRequire as __switchboardCreateRequire } from 'node:module';" +
  'const require = __switchboardCreateRequire(import.meta.url);';

/** How every function is bundled (esbuild through NodejsFunction). */
export const LAMBDA_BUNDLING = {
  format: nodejs.OutputFormat.ESM,
  target: 'node24',
  mainFields: ['module', 'main'],
  banner: ESM_REQUIRE_BANNER,
  minify: true,
  // Class and function names survive minification: an error's `name` is its class's
  // (shared/errors.ts), and logs and stack traces say which.
  keepNames: true,
  sourceMap: true,
  sourcesContent: false,
  // Deploy the SDK version the lockfile pins and the tests ran against, not whichever
  // the runtime happens to ship; a bundled, tree-shaken SDK also loads as fast.
  bundleAwsSDK: true,
} as const satisfies nodejs.BundlingOptions;

// Nothing in Switchboard scans a table (see the access patterns in shared/resources.ts), so
// `read` does not include Scan; index access is granted per index, by name.
const TABLE_READ_ACTIONS = [
  'dynamodb:GetItem',
  'dynamodb:BatchGetItem',
  'dynamodb:Query',
  'dynamodb:ConditionCheckItem',
  'dynamodb:DescribeTable',
];
const TABLE_WRITE_ACTIONS = [
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:BatchWriteItem',
];
// Spelled out rather than `kms:ReEncrypt*` / `kms:GenerateDataKey*`, so no wildcard action
// reaches a key that guards secrets.
const KEY_READ_ACTIONS = ['kms:Decrypt', 'kms:DescribeKey'];
const KEY_WRITE_ACTIONS = [
  'kms:Encrypt',
  'kms:ReEncryptFrom',
  'kms:ReEncryptTo',
  'kms:GenerateDataKey',
  'kms:GenerateDataKeyWithoutPlaintext',
];

// What Lambda needs, with the function's own role, to manage the function's network interfaces in a
// VPC: the EC2 part of AWSLambdaVPCAccessExecutionRole. Describe* take no resource; the others act
// on interfaces Lambda creates and names at run time.
const VPC_INTERFACE_ACTIONS = [
  'ec2:CreateNetworkInterface',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeSubnets',
  'ec2:DeleteNetworkInterface',
  'ec2:AssignPrivateIpAddresses',
  'ec2:UnassignPrivateIpAddresses',
];

export type TableAccess = 'read' | 'readwrite';
export type QueueAccess = 'send' | 'consume';

export interface SwitchboardFunctionProps {
  readonly spec: FunctionSpec;
  /** Plain settings (not resource names: those come from `bindTable` / `bindQueue`). */
  readonly environment?: Record<string, string>;
  /** Days the function's logs are kept. Default: one month. */
  readonly logRetention?: logs.RetentionDays;
  /** What happens to the log group when the stack is deleted. Default: retained. */
  readonly logRemovalPolicy?: RemovalPolicy;
  /**
   * Runs the function in a VPC (to reach private addresses, e.g. a broker's nudge port). Its
   * subnets may be public: the function then reaches only what the VPC's endpoints and private
   * addresses offer, never the internet.
   */
  /**
   * For asynchronous invocations: the retries after an error and the oldest event still run.
   * (No reserved concurrency: any reservation fails a deploy into an account whose concurrency
   * quota is at most 100, as new accounts' often are; a function that must run alone holds a
   * run lease instead, `shared/fleet/run-lease.ts`.)
   */
  readonly invocation?: {
    readonly asyncRetryAttempts?: number;
    readonly maxEventAge?: Duration;
  };
  readonly network?: {
    readonly vpc: ec2.IVpc;
    readonly subnets: ec2.SubnetSelection;
    readonly securityGroup: ec2.ISecurityGroup;
  };
}

/**
 * A Switchboard Lambda: Node.js 24 on arm64, X-Ray active tracing, an explicit log group with a
 * retention, an ESM bundle with source maps, timeout and memory from its spec, and a role of its
 * own that holds only what `bindTable` / `bindQueue` / `consumeQueue` grant (plus its logs and
 * X-Ray).
 */
export class SwitchboardFunction extends nodejs.NodejsFunction {
  readonly spec: FunctionSpec;

  constructor(scope: Construct, id: string, props: SwitchboardFunctionProps) {
    const { spec } = props;
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.RETAIN,
    });
    // An own role instead of the default one: the default attaches the AWS-managed
    // AWSLambdaBasicExecutionRole, which may write to any log group in the account.
    const role = new iam.Role(scope, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Switchboard ${spec.id}: only the tables, queues and key it is bound to`,
    });
    logGroup.grantWrite(role);

    super(scope, id, {
      entry: `${REPO_ROOT}${spec.entry}`,
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}package-lock.json`,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      tracing: lambda.Tracing.ACTIVE,
      // JSON: Lambda's own report of each invocation is then a `platform.report` record a
      // metric filter can read (`initDurationMs`, below) instead of a line of text.
      loggingFormat: lambda.LoggingFormat.JSON,
      timeout: Duration.seconds(spec.timeoutSeconds),
      memorySize: spec.memoryMb,
      role,
      logGroup,
      description: `Switchboard ${spec.id}`,
      environment: { NODE_OPTIONS: '--enable-source-maps', ...props.environment },
      ...(props.invocation?.asyncRetryAttempts === undefined
        ? {}
        : { retryAttempts: props.invocation.asyncRetryAttempts }),
      ...(props.invocation?.maxEventAge === undefined ? {} : { maxEventAge: props.invocation.maxEventAge }),
      ...(props.network
        ? {
            vpc: props.network.vpc,
            vpcSubnets: props.network.subnets,
            securityGroups: [props.network.securityGroup],
            allowPublicSubnet: true,
          }
        : {}),
      bundling: LAMBDA_BUNDLING,
    });
    this.spec = spec;
    new logs.MetricFilter(scope, `${id}InitDuration`, {
      logGroup,
      filterPattern: logs.FilterPattern.all(
        logs.FilterPattern.stringValue('$.type', '=', 'platform.report'),
        logs.FilterPattern.numberValue('$.record.metrics.initDurationMs', '>', 0),
      ),
      metricNamespace: INIT_DURATION_NAMESPACE,
      metricName: initDurationMetricName(spec.id),
      metricValue: '$.record.metrics.initDurationMs',
      unit: cloudwatch.Unit.MILLISECONDS,
    });
    if (props.network) {
      // CDK attaches AWSLambdaVPCAccessExecutionRole only to a role it creates itself; without
      // these, Lambda refuses the VPC configuration. That managed policy would also let the
      // function write to any log group, so only its EC2 part is granted.
      role.addToPolicy(new iam.PolicyStatement({ actions: VPC_INTERFACE_ACTIONS, resources: ['*'] }));
    }

    // Active tracing adds X-Ray's PutTraceSegments/PutTelemetryRecords, which take no resource.
    NagSuppressions.addResourceSuppressions(
      role,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason: `X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions, so AWS requires Resource "*" for them${
            props.network
              ? '; so do the network-interface actions Lambda performs with this role for a function in a VPC (the EC2 part of AWSLambdaVPCAccessExecutionRole: the interfaces are created and named by Lambda at run time)'
              : ''
          }; every other statement of this role names its table, index, queue, key or log group.`,
          appliesTo: ['Resource::*'],
        },
      ],
      true,
    );
  }

  /**
   * The time Lambda took to start this function's environment (its cold starts: the runtime, the
   * bundle's import, the code run at import), from the `initDurationMs` of its reports, ms.
   */
  metricInitDuration(options: { readonly statistic: string; readonly period: Duration }): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: INIT_DURATION_NAMESPACE,
      metricName: initDurationMetricName(this.spec.id),
      statistic: options.statistic,
      period: options.period,
    });
  }

  /**
   * Lets the function use a table: sets `envVar` to the table's name and grants `read`
   * (get, batch-get, query, condition checks) or `readwrite` (also put, update, delete). A table
   * under a customer-managed key also gets the key, usable only through DynamoDB. `writes`
   * narrows what `readwrite` allows: only these write actions, only on items whose partition key
   * matches one of these patterns (`dynamodb:LeadingKeys`, e.g. `OPTOUT#*`). `reads` narrows reads
   * the same way (the call-status function reads its callback secret, never a LINE channel);
   * `reads.actions: []` grants no read at all (the jobs API writes outcome webhook secrets, never
   * reads one).
   */
  bindTable(
    table: dynamodb.ITable,
    access: TableAccess,
    envVar: string,
    options: {
      indexes?: readonly string[];
      writes?: { readonly actions?: readonly string[]; readonly leadingKeys?: readonly string[] };
      reads?: { readonly actions?: readonly string[]; readonly leadingKeys?: readonly string[] };
    } = {},
  ): this {
    this.addEnvironment(envVar, table.tableName);
    const reads = options.reads;
    const readActions = reads?.actions ?? TABLE_READ_ACTIONS;
    if (readActions.length > 0) {
      this.addToRolePolicy(
        new iam.PolicyStatement({
          actions: [...readActions],
          resources: [table.tableArn],
          ...(reads?.leadingKeys
            ? {
                conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...reads.leadingKeys] } },
              }
            : {}),
        }),
      );
    }
    if (access === 'readwrite') {
      const writes = options.writes;
      this.addToRolePolicy(
        new iam.PolicyStatement({
          actions: [...(writes?.actions ?? TABLE_WRITE_ACTIONS)],
          resources: [table.tableArn],
          ...(writes?.leadingKeys
            ? {
                conditions: {
                  'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...writes.leadingKeys] },
                },
              }
            : {}),
        }),
      );
    }
    if (options.indexes?.length) {
      this.addToRolePolicy(
        new iam.PolicyStatement({
          actions: ['dynamodb:Query'],
          resources: options.indexes.map((name) => `${table.tableArn}/index/${name}`),
        }),
      );
    }
    if (table.encryptionKey) {
      // The key policy names the role (it grants no use to the account), and the role's own
      // policy says the same, so neither alone decides who reads secrets.
      allowKeyUseThroughDynamoDb(table.encryptionKey, this.role!, access);
      const stack = Stack.of(this);
      this.addToRolePolicy(
        new iam.PolicyStatement({
          actions: access === 'readwrite' ? [...KEY_READ_ACTIONS, ...KEY_WRITE_ACTIONS] : KEY_READ_ACTIONS,
          resources: [table.encryptionKey.keyArn],
          // The key decrypts table items for this function, never arbitrary ciphertext.
          conditions: {
            StringEquals: {
              'kms:ViaService': `dynamodb.${stack.region}.${stack.urlSuffix}`,
              'kms:CallerAccount': stack.account,
            },
          },
        }),
      );
    }
    return this;
  }

  /**
   * Lets the function use a queue: sets `envVar` to the queue's URL and grants `send`
   * (send, batch send) or `consume` (receive, delete, change visibility).
   */
  bindQueue(queue: sqs.IQueue, access: QueueAccess, envVar: string): this {
    this.addEnvironment(envVar, queue.queueUrl);
    if (access === 'send') queue.grantSendMessages(this);
    else queue.grantConsumeMessages(this);
    return this;
  }

  /**
   * Makes the function the consumer of its spec's queue: binds the queue (`consume`, so the
   * handler can also change a message's visibility to back off) and adds the event source
   * mapping with the spec's batch size and maximum concurrency, reporting partial batch failures.
   */
  consumeQueue(queue: sqs.IQueue, queueSpec: QueueSpec): SqsEventSource {
    const source = this.spec.queueSource;
    if (!source) throw new Error(`${this.spec.id} has no queueSource in shared/functions.ts`);
    if (source.queue !== queueSpec.id) {
      throw new Error(`${this.spec.id} consumes ${source.queue}, not ${queueSpec.id}`);
    }
    // Lambda refuses a mapping whose queue hides messages for less than the function may run.
    if (queueSpec.visibilityTimeoutSeconds < this.spec.timeoutSeconds) {
      throw new Error(
        `${queueSpec.id}'s visibility timeout (${queueSpec.visibilityTimeoutSeconds} s) is shorter than ${this.spec.id}'s timeout (${this.spec.timeoutSeconds} s)`,
      );
    }
    this.bindQueue(queue, 'consume', queueSpec.envVar);
    const eventSource = new SqsEventSource(queue, {
      batchSize: source.batchSize,
      maxConcurrency: source.maxConcurrency,
      reportBatchItemFailures: true,
      ...(source.maxBatchingWindowSeconds !== undefined
        ? { maxBatchingWindow: Duration.seconds(source.maxBatchingWindowSeconds) }
        : {}),
    });
    this.addEventSource(eventSource);
    return eventSource;
  }
}
