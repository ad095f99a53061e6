import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { App, CfnResource } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '#cdk/app.ts';
import { REPO_ROOT } from '#cdk/constructs/function.ts';
import type { SwitchboardStack } from '#cdk/stack.ts';
import { type FunctionId, functions } from '#shared/functions.ts';
import { queueSpec } from '#shared/resources.ts';

type Json = Record<string, unknown>;
interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Json;
  Principal?: unknown;
}

let outdir: string;
let stack: SwitchboardStack;
let template: Template;
let resources: Record<string, { Type: string; Properties: Json; Metadata?: Json }>;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'switchboard-cdk-'));
  const built = buildApp(
    new App({ outdir, context: { stage: 'prod', telephonyApiUrl: 'https://api.telephony.test' } }),
  );
  stack = built.stack;
  built.app.synth();
  template = Template.fromStack(stack);
  resources = template.toJSON().Resources;
});

afterAll(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

const idOf = (construct: IConstruct): string =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnResource);
/** The CloudFormation properties of a construct's resource. */
function propsOf(construct: IConstruct): Json {
  const resource = resources[idOf(construct)];
  if (!resource) throw new Error(`no resource for ${construct.node.path}`);
  return resource.Properties;
}
const ref = (construct: IConstruct) => ({ Ref: idOf(construct) });
const arnOf = (construct: IConstruct) => ({ 'Fn::GetAtt': [idOf(construct), 'Arn'] });
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const resourcesOf = (s: Statement): unknown[] => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);
const mentions = (value: unknown, logicalId: string): boolean =>
  JSON.stringify(value).includes(`"${logicalId}"`);

/** Every IAM statement attached to a role, across all of the stack's policies. */
function statementsOf(roleId: string): Statement[] {
  return Object.values(resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy')
    .filter((r) => (r.Properties.Roles as unknown[]).some((role) => mentions(role, roleId)))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

const receiverRole = () => idOf(stack.webhooks.receiver.role!);
const processorRole = () => idOf(stack.webhooks.processor.role!);

describe('the webhook Lambdas', () => {
  it('run Node.js 24 on arm64 with active tracing, timeout and memory from the shared specs', () => {
    for (const fn of [stack.webhooks.receiver, stack.webhooks.processor]) {
      const spec = functions[fn.spec.id as FunctionId];
      expect(propsOf(fn)).toMatchObject({
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        TracingConfig: { Mode: 'Active' },
        Handler: 'index.handler',
        Timeout: spec.timeoutSeconds,
        MemorySize: spec.memoryMb,
        LoggingConfig: { LogGroup: expect.anything() },
        Environment: { Variables: expect.objectContaining({ NODE_OPTIONS: '--enable-source-maps' }) },
      });
    }
  });

  it('log to their own log groups, kept for a month', () => {
    for (const fn of [stack.webhooks.receiver, stack.webhooks.processor]) {
      const logging = propsOf(fn).LoggingConfig as Json;
      const [logGroupId] = JSON.stringify(logging.LogGroup).match(/[A-Za-z0-9]{8,}/) ?? [];
      expect(resources[logGroupId!]).toMatchObject({
        Type: 'AWS::Logs::LogGroup',
        Properties: { RetentionInDays: 30 },
      });
    }
  });

  it('get every environment variable their main.ts requires at start', () => {
    for (const fn of [stack.webhooks.receiver, stack.webhooks.processor]) {
      const source = readFileSync(join(REPO_ROOT, fn.spec.entry), 'utf8');
      const required = [...source.matchAll(/getStringFromEnv\('([A-Z_]+)'\)/g)].map((m) => m[1]!);
      expect(required.length).toBeGreaterThan(0);
      const env = (propsOf(fn).Environment as { Variables: Json }).Variables;
      expect(Object.keys(env)).toEqual(expect.arrayContaining(required));
    }
    const processorEnv = (propsOf(stack.webhooks.processor).Environment as { Variables: Json }).Variables;
    expect(processorEnv.LINE_API_URL).toBe('https://api.line.me');
    expect(processorEnv.EVENTS_TABLE).toEqual(ref(stack.stateful.tables.events));
  });
});

describe('the HTTP API', () => {
  it('routes POST /webhooks/line/{channelId} to the receiver with payload format 2.0, unauthenticated at the gateway', () => {
    const integrations = template.findResources('AWS::ApiGatewayV2::Integration', {
      Properties: {
        IntegrationType: 'AWS_PROXY',
        PayloadFormatVersion: '2.0',
        IntegrationUri: arnOf(stack.webhooks.receiver),
      },
    });
    const [integrationId] = Object.keys(integrations);
    expect(integrationId).toBeDefined();
    template.hasResourceProperties('AWS::ApiGatewayV2::Route', {
      RouteKey: 'POST /webhooks/line/{channelId}',
      AuthorizationType: 'NONE',
      Target: { 'Fn::Join': ['', ['integrations/', { Ref: integrationId }]] },
    });
  });

  it('auto-deploys a throttled $default stage that writes JSON access logs', () => {
    const stage = template.findResources('AWS::ApiGatewayV2::Stage');
    const [props] = Object.values(stage).map((s) => s.Properties as Json);
    if (!props) throw new Error('no stage');
    expect(props).toMatchObject({
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: {
        ThrottlingBurstLimit: expect.any(Number),
        ThrottlingRateLimit: expect.any(Number),
      },
    });
    const format = JSON.parse((props.AccessLogSettings as { Format: string }).Format);
    expect(format).toMatchObject({ requestId: '$context.requestId', status: '$context.status' });
    // Paths can carry credentials (an unsubscribe link's token): the route key is logged, not the path.
    expect(JSON.stringify(format)).not.toContain('$context.path');
  });

  it('alarms on any 5xx and notifies the alarm topic', () => {
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/ApiGateway',
      MetricName: '5xx',
      Dimensions: [{ Name: 'ApiId', Value: ref(stack.api.api) }],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0,
      AlarmActions: [ref(stack.webhooks.alarmTopic)],
    });
  });
});

describe('the webhook-events queue and its consumer', () => {
  it('maps the queue to the processor with the spec batch size and concurrency, reporting partial failures', () => {
    const source = functions['webhook-processor'].queueSource!;
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: ref(stack.webhooks.processor),
      EventSourceArn: arnOf(stack.stateful.queues['webhook-events'].queue),
      BatchSize: source.batchSize,
      ScalingConfig: { MaximumConcurrency: source.maxConcurrency },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('alarms as soon as a message reaches the dead-letter queue', () => {
    const dlq = stack.stateful.queues['webhook-events'].deadLetterQueue;
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [idOf(dlq), 'QueueName'] } }],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0,
      AlarmActions: [ref(stack.webhooks.alarmTopic)],
    });
  });

  it('alarms on receiver and processor errors', () => {
    for (const fn of [stack.webhooks.receiver, stack.webhooks.processor]) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: ref(fn) }],
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: 0,
        AlarmActions: [ref(stack.webhooks.alarmTopic)],
      });
    }
  });

  it('outputs the webhook URL pattern, the queue and DLQ URLs and the exact redrive command', () => {
    const { queue, deadLetterQueue } = stack.stateful.queues['webhook-events'];
    expect(queueSpec('webhook-events').fifo).toBe(true);
    template.hasOutput('WebhookUrl', {
      Value: {
        'Fn::Join': [
          '',
          [{ 'Fn::GetAtt': [idOf(stack.api.api), 'ApiEndpoint'] }, '/webhooks/line/{channelId}'],
        ],
      },
    });
    template.hasOutput('WebhookEventsQueueUrl', { Value: ref(queue) });
    template.hasOutput('WebhookEventsDlqUrl', { Value: ref(deadLetterQueue) });
    template.hasOutput('WebhookEventsDlqRedriveCommand', {
      Value: {
        'Fn::Join': [
          '',
          [
            'aws sqs start-message-move-task --source-arn ',
            arnOf(deadLetterQueue),
            ' --destination-arn ',
            arnOf(queue),
          ],
        ],
      },
    });
    template.hasOutput('AlarmTopicArn', { Value: ref(stack.webhooks.alarmTopic) });
  });
});

describe('least privilege', () => {
  const writeActions = [
    'dynamodb:PutItem',
    'dynamodb:UpdateItem',
    'dynamodb:DeleteItem',
    'dynamodb:BatchWriteItem',
  ];

  it('the receiver can neither write DynamoDB nor touch the events table', () => {
    const statements = statementsOf(receiverRole());
    expect(statements.length).toBeGreaterThan(0);
    const actions = statements.flatMap(actionsOf);
    for (const action of writeActions) expect(actions).not.toContain(action);
    expect(actions.some((a) => a.startsWith('dynamodb:') && a.includes('*'))).toBe(false);
    const eventsId = idOf(stack.stateful.tables.events);
    expect(statements.filter((s) => mentions(s.Resource, eventsId))).toEqual([]);
    // What it may do to the queue: add to it, nothing else.
    const queueId = idOf(stack.stateful.queues['webhook-events'].queue);
    const queueActions = statements.filter((s) => mentions(s.Resource, queueId)).flatMap(actionsOf);
    expect(queueActions.sort()).toEqual(['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage']);
  });

  it('the processor can change a message visibility (its backoff) and write events and opt-outs', () => {
    const statements = statementsOf(processorRole());
    const on = (construct: IConstruct) =>
      statements.filter((s) => mentions(s.Resource, idOf(construct))).flatMap(actionsOf);
    expect(on(stack.stateful.queues['webhook-events'].queue)).toContain('sqs:ChangeMessageVisibility');
    // Idempotency records are put and updated, never deleted (TTL does that).
    const eventWrites = on(stack.stateful.tables.events).filter((a) => writeActions.includes(a));
    expect(eventWrites.sort()).toEqual(['dynamodb:PutItem', 'dynamodb:UpdateItem']);
    // In the control table (leases, jobs, settings too) it may only write opt-out records and the
    // suppression entries of unfollows (added, and taken back by a follow).
    const controlId = idOf(stack.stateful.tables.control);
    const controlWrites = statements.filter(
      (s) => mentions(s.Resource, controlId) && actionsOf(s).some((a) => writeActions.includes(a)),
    );
    expect(controlWrites.flatMap(actionsOf)).toEqual([
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
      'dynamodb:DeleteItem',
    ]);
    expect(controlWrites.map((s) => s.Condition)).toEqual([
      { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['OPTOUT#*', 'SUPPRESS#*'] } },
    ]);
    expect(on(stack.stateful.tables.channels)).not.toContain('dynamodb:PutItem');
    expect(on(stack.stateful.tables.tasks)).toEqual([]);
  });

  it('no statement of either role has a * resource except the X-Ray ones', () => {
    for (const role of [receiverRole(), processorRole()]) {
      const wildcard = statementsOf(role).filter((s) =>
        resourcesOf(s).some((r) => JSON.stringify(r).includes('*')),
      );
      expect(wildcard.flatMap(actionsOf).sort()).toEqual([
        'xray:PutTelemetryRecords',
        'xray:PutTraceSegments',
      ]);
    }
  });

  it('only the receiver, the processor, call-status (its callback secret), the broker task, the channels API, the jobs API and the outcome deliveries (an outcome webhook secret) and the channel admin role may use the secrets key, each named in the key policy, only through DynamoDB', () => {
    const keyId = idOf(stack.stateful.secretsKey);
    const brokerRole = idOf(stack.fleet.taskDefinition.taskRole);
    const callStatusRole = idOf(stack.callStatus.handler.role!);
    const adminRole = idOf(stack.webhooks.channelAdmin);
    const channelsApiRole = idOf(stack.webhooks.channelsApi.role!);
    const jobsApiRole = idOf(stack.jobs.api.role!);
    const deliveriesRole = idOf(stack.outcomeWebhooks.deliveries.role!);
    const grantees = Object.values(resources)
      .filter((r) => r.Type === 'AWS::IAM::Policy')
      .filter((r) =>
        (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement.some(
          (s) =>
            s.Effect === 'Allow' &&
            (mentions(s.Resource, keyId) || resourcesOf(s).includes('*')) &&
            actionsOf(s).some((a) => a === 'kms:Decrypt' || a === 'kms:*'),
        ),
      )
      .flatMap((r) => (r.Properties.Roles as Json[]).map((role) => role.Ref));
    expect(grantees.sort()).toEqual(
      [
        processorRole(),
        receiverRole(),
        brokerRole,
        callStatusRole,
        channelsApiRole,
        jobsApiRole,
        deliveriesRole,
      ].sort(),
    );

    for (const role of [receiverRole(), processorRole(), brokerRole, callStatusRole, deliveriesRole]) {
      const keyStatements = statementsOf(role).filter((s) => mentions(s.Resource, keyId));
      expect(keyStatements.flatMap(actionsOf).sort()).toEqual(['kms:Decrypt', 'kms:DescribeKey']);
      for (const s of keyStatements) {
        expect(JSON.stringify(s.Condition?.StringEquals)).toContain('kms:ViaService');
      }
    }
    // The channels API writes channels (create, replace, rotate) and the jobs API a client's outcome
    // webhook secret: they may encrypt too, through DynamoDB.
    for (const writer of [channelsApiRole, jobsApiRole]) {
      const apiKeyStatements = statementsOf(writer).filter((s) => mentions(s.Resource, keyId));
      expect(apiKeyStatements.flatMap(actionsOf)).toContain('kms:GenerateDataKey');
      for (const s of apiKeyStatements)
        expect(JSON.stringify(s.Condition?.StringEquals)).toContain('kms:ViaService');
    }
    // The key policy: the account administers the key but may not use it; each user is named.
    const keyPolicy = resources[keyId]?.Properties.KeyPolicy as { Statement: Statement[] };
    const useActions = ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:ReEncryptFrom', 'kms:*'];
    const byAccount = keyPolicy.Statement.filter((s) => JSON.stringify(s.Principal).includes(':root'));
    expect(byAccount.flatMap(actionsOf).filter((a) => useActions.includes(a))).toEqual([]);
    const users = keyPolicy.Statement.filter((s) => !JSON.stringify(s.Principal).includes(':root'));
    const named = users.map((s) => JSON.stringify(s.Principal).match(/"Fn::GetAtt":\["([^"]+)"/)?.[1]);
    expect(named.sort()).toEqual(
      [
        receiverRole(),
        processorRole(),
        brokerRole,
        callStatusRole,
        channelsApiRole,
        jobsApiRole,
        deliveriesRole,
        adminRole,
      ].sort(),
    );
    for (const s of users) expect(JSON.stringify(s.Condition?.StringEquals)).toContain('kms:ViaService');
    const writers = users.filter((s) => actionsOf(s).includes('kms:GenerateDataKey'));
    const writerPrincipals = writers.map((s) => JSON.stringify(s.Principal));
    expect(writerPrincipals).toHaveLength(3);
    for (const writer of [adminRole, channelsApiRole, jobsApiRole])
      expect(writerPrincipals.some((p) => p.includes(writer))).toBe(true);
  });
});

describe('the alarm topic', () => {
  it('is encrypted with its own key, refuses plain HTTP, and takes only our alarms', () => {
    const topic = resources[idOf(stack.webhooks.alarmTopic)];
    expect(topic?.Properties.KmsMasterKeyId).toEqual(arnOf(stack.webhooks.alarmTopic.masterKey!));
    template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: 'cloudwatch.amazonaws.com' },
            Action: 'sns:Publish',
          }),
        ]),
      },
    });
    const alarmNames = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => a.Properties.AlarmName as string,
    );
    expect(alarmNames.length).toBeGreaterThanOrEqual(4);
    for (const name of alarmNames) expect(name).toMatch(/^switchboard-prod-/);
  });
});

describe('cdk-nag on the webhook constructs', () => {
  const ours = (path: string) => path.includes('/Webhooks/') || path.includes('/Api/');

  it('has no unsuppressed finding', () => {
    const annotations = Annotations.fromStack(stack);
    const findings = [
      ...annotations.findError('*', Match.stringLikeRegexp('AwsSolutions-.*')),
      ...annotations.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*')),
    ].filter((f) => ours(f.id));
    expect(findings.map((f) => `${f.id}: ${String(f.entry.data).slice(0, 120)}`)).toEqual([]);
  });

  it('suppresses only the X-Ray wildcard and the LINE-signed route, each with a reason', () => {
    const suppressed = [...stack.webhooks.node.findAll(), ...stack.api.node.findAll()]
      .filter((c): c is CfnResource => CfnResource.isCfnResource(c))
      .flatMap((r) => {
        const nag = r.getMetadata('cdk_nag') as { rules_to_suppress?: Json[] } | undefined;
        return (nag?.rules_to_suppress ?? []).map((rule) => ({
          type: r.cfnResourceType,
          id: rule.id,
          appliesTo: rule.applies_to,
          reason: String(rule.reason),
        }));
      });
    for (const s of suppressed) expect(s.reason.length).toBeGreaterThan(60);
    expect(
      new Set(suppressed.map((s) => `${s.type} ${s.id} ${JSON.stringify(s.appliesTo ?? null)}`)),
    ).toEqual(
      new Set([
        'AWS::IAM::Role AwsSolutions-IAM5 ["Resource::*"]',
        'AWS::IAM::Policy AwsSolutions-IAM5 ["Resource::*"]',
        'AWS::ApiGatewayV2::Route AwsSolutions-APIG4 null',
      ]),
    );
  });
});

describe('the bundled handlers', () => {
  const assetDir = (fn: IConstruct): string => {
    const code = propsOf(fn).Code as { S3Key: string };
    return join(outdir, `asset.${code.S3Key.replace(/\.zip$/, '')}`);
  };

  it('are ESM bundles with the createRequire banner and a source map', () => {
    for (const fn of [stack.webhooks.receiver, stack.webhooks.processor]) {
      const dir = assetDir(fn);
      expect(existsSync(join(dir, 'index.mjs.map'))).toBe(true);
      const code = readFileSync(join(dir, 'index.mjs'), 'utf8');
      expect(
        code.startsWith("import { createRequire as __switchboardCreateRequire } from 'node:module';"),
      ).toBe(true);
      // #shared/* subpath imports were resolved into the bundle (this string lives in shared/config.ts).
      expect(code).toContain('missing required environment variable');
    }
    expect(readFileSync(join(assetDir(stack.webhooks.receiver), 'index.mjs'), 'utf8')).toContain(
      'WEBHOOK_EVENTS_QUEUE_URL',
    );
  });

  it('load on their own, away from the repository, and export handler', () => {
    for (const fn of [stack.webhooks.receiver, stack.webhooks.processor]) {
      // Copied out of the repository so no node_modules of ours can be resolved: all must be bundled.
      const alone = mkdtempSync(join(tmpdir(), 'switchboard-asset-'));
      try {
        cpSync(assetDir(fn), alone, { recursive: true });
        const url = pathToFileURL(join(alone, 'index.mjs')).href;
        const run = spawnSync(
          process.execPath,
          [
            '--enable-source-maps',
            '--input-type=module',
            '-e',
            `const m = await import(${JSON.stringify(url)}); process.stdout.write(typeof m.handler);`,
          ],
          {
            cwd: alone,
            encoding: 'utf8',
            env: {
              PATH: process.env.PATH,
              AWS_REGION: 'ap-northeast-1',
              CHANNELS_TABLE: 'channels',
              EVENTS_TABLE: 'events',
              CONTROL_TABLE: 'control',
              WEBHOOK_EVENTS_QUEUE_URL: 'https://sqs.ap-northeast-1.amazonaws.com/000000000000/q.fifo',
            },
          },
        );
        expect(run.stderr).toBe('');
        expect(run.stdout).toBe('function');
      } finally {
        rmSync(alone, { recursive: true, force: true });
      }
    }
  });
});
