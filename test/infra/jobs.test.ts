/**
 * The jobs construct in a stack built here, beside the broker fleet whose VPC the operator API
 * runs in: the two Lambdas, the bucket notification to the ingest queue, least-privilege IAM, the
 * network path to the brokers' nudge port, and cdk-nag.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Aspects, type CfnResource, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as sns from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKER_HTTP_PORT, BrokerFleet } from '#cdk/constructs/broker-fleet.ts';
import { Jobs } from '#cdk/constructs/jobs.ts';
import { StatefulResources } from '#cdk/constructs/stateful.ts';
import { functions } from '#shared/functions.ts';

type Json = Record<string, unknown>;
interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Json;
}

let outdir: string;
let stack: Stack;
let jobs: Jobs;
let fleet: BrokerFleet;
let stateful: StatefulResources;
let template: Template;
let resources: Record<string, { Type: string; Properties: Json }>;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'switchboard-jobs-cdk-'));
  // The template only: the Lambda bundles (esbuild) are built and checked in webhooks.test.ts.
  const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
  stack = new Stack(app, 'JobsTest');
  stateful = new StatefulResources(stack, 'Stateful', { stage: 'test', retain: false });
  fleet = new BrokerFleet(stack, 'Fleet', {
    stage: 'test',
    stateful,
    retain: false,
    telephonyApiUrl: 'https://telephony.example.com',
    callStatusCallbackUrl: 'https://api.example.com/providers/example/calls/status',
    twilioCallbackUrl: 'https://api.example.com/providers/twilio/calls/status',
  });
  jobs = new Jobs(stack, 'Jobs', {
    stage: 'test',
    stateful,
    fleet,
    retain: false,
    alarmTopic: sns.Topic.fromTopicArn(stack, 'Alarms', 'arn:aws:sns:us-east-1:123456789012:alarms'),
  });
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  app.synth();
  template = Template.fromStack(stack);
  resources = template.toJSON().Resources;
});

afterAll(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

const idOf = (construct: IConstruct): string =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnResource);
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);

function statementsOf(roleId: string): Statement[] {
  return Object.values(resources)
    .filter(
      (r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(`"${roleId}"`),
    )
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

/** The key prefixes a role may use an S3 action on, read from `arn/prefix*` resources. */
function s3Prefixes(roleId: string, action: string): string[] {
  return statementsOf(roleId)
    .filter((s) => actionsOf(s).includes(action))
    .flatMap((s) => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]))
    .map((r) => JSON.stringify(r).match(/"\/([a-z]+\/\*)"/)?.[1])
    .filter((p): p is string => p !== undefined)
    .sort();
}

describe('jobs infrastructure', () => {
  it('runs the ingest on the ingest queue, one list per invocation, with partial batch failures', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [idOf(stateful.queues.ingest.queue), 'Arn'] },
      FunctionName: { Ref: idOf(jobs.ingest) },
      BatchSize: functions.ingest.queueSource!.batchSize,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: functions.ingest.timeoutSeconds,
    });
  });

  it('sends created .csv and .CSV objects under uploads/ and incoming/ to the ingest queue', () => {
    const notifications = template.findResources('Custom::S3BucketNotifications');
    const config = Object.values(notifications)[0]!.Properties as {
      NotificationConfiguration: {
        QueueConfigurations: { Events: string[]; Filter: Json; QueueArn: unknown }[];
      };
    };
    const queues = config.NotificationConfiguration.QueueConfigurations;
    expect(queues.map((q) => q.Events)).toEqual(Array(4).fill(['s3:ObjectCreated:*']));
    const filter = (prefix: string, suffix: string) =>
      JSON.stringify({
        Key: {
          FilterRules: [
            { Name: 'suffix', Value: suffix },
            { Name: 'prefix', Value: prefix },
          ],
        },
      });
    expect(queues.map((q) => JSON.stringify(q.Filter)).sort()).toEqual(
      [
        filter('incoming/', '.csv'),
        filter('incoming/', '.CSV'),
        filter('uploads/', '.csv'),
        filter('uploads/', '.CSV'),
      ].sort(),
    );
    for (const q of queues)
      expect(q.QueueArn).toEqual({ 'Fn::GetAtt': [idOf(stateful.queues.ingest.queue), 'Arn'] });
  });

  it('gives each function only the key prefixes it uses', () => {
    const api = idOf(jobs.api.role!);
    const ingest = idOf(jobs.ingest.role!);
    expect(s3Prefixes(api, 's3:PutObject')).toEqual(['reports/*', 'uploads/*']);
    expect(s3Prefixes(api, 's3:GetObject')).toEqual(['archives/*', 'reports/*']);
    expect(s3Prefixes(ingest, 's3:GetObject')).toEqual(['incoming/*', 'reports/*', 'state/*', 'uploads/*']);
    expect(s3Prefixes(ingest, 's3:PutObject')).toEqual(['archives/*', 'reports/*', 'state/*']);
    for (const role of [api, ingest]) {
      for (const s of statementsOf(role)) {
        expect(actionsOf(s).some((a) => a.endsWith(':*') || a === '*')).toBe(false);
      }
    }
    // The API never writes tasks; the ingest sends continuations to its own queue.
    const apiTaskWrites = statementsOf(api).filter(
      (s) =>
        actionsOf(s).includes('dynamodb:BatchWriteItem') &&
        JSON.stringify(s.Resource).includes(idOf(stateful.tables.tasks)),
    );
    expect(apiTaskWrites).toEqual([]);
    expect(statementsOf(ingest).some((s) => actionsOf(s).includes('sqs:SendMessage'))).toBe(true);
  });

  it("lets the operator API queue a cancelled job's sweep on the ingest queue, and nothing more of it", () => {
    const queue = stateful.queues.ingest;
    const api = idOf(jobs.api.role!);
    const apiFunction = resources[idOf(jobs.api)]!.Properties as {
      Environment: { Variables: Record<string, unknown> };
    };
    expect(apiFunction.Environment.Variables[queue.spec.envVar]).toEqual({ Ref: idOf(queue.queue) });
    const sqsActions = statementsOf(api)
      .filter((s) => JSON.stringify(s.Resource).includes(idOf(queue.queue)))
      .flatMap(actionsOf);
    expect(sqsActions).toContain('sqs:SendMessage');
    expect(sqsActions).not.toContain('sqs:ReceiveMessage');
    expect(sqsActions).not.toContain('sqs:DeleteMessage');
  });

  it("lets the job manager queue an ended job's expire sweep on the ingest queue, and nothing more of it", () => {
    const queue = stateful.queues.ingest;
    const manager = resources[idOf(fleet.jobManager)]!.Properties as {
      Environment: { Variables: Record<string, unknown> };
    };
    expect(manager.Environment.Variables[queue.spec.envVar]).toEqual({ Ref: idOf(queue.queue) });
    const sqsActions = statementsOf(idOf(fleet.jobManager.role!))
      .filter((s) => JSON.stringify(s.Resource).includes(idOf(queue.queue)))
      .flatMap(actionsOf);
    expect(sqsActions).toContain('sqs:SendMessage');
    expect(sqsActions).not.toContain('sqs:ReceiveMessage');
    expect(sqsActions).not.toContain('sqs:DeleteMessage');
  });

  it('runs the operator API in the brokers’ VPC, allowed into their nudge port', () => {
    const api = resources[idOf(jobs.api)]!.Properties as {
      VpcConfig: { SecurityGroupIds: unknown[]; SubnetIds: unknown[] };
    };
    const apiGroup = { 'Fn::GetAtt': [idOf(jobs.apiSecurityGroup), 'GroupId'] };
    const brokerGroup = { 'Fn::GetAtt': [idOf(fleet.securityGroup), 'GroupId'] };
    expect(api.VpcConfig.SecurityGroupIds).toEqual([apiGroup]);
    expect(api.VpcConfig.SubnetIds).toHaveLength(2);
    for (const subnet of api.VpcConfig.SubnetIds) expect(JSON.stringify(subnet)).toContain('FleetVpc');
    template.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      GroupId: brokerGroup,
      SourceSecurityGroupId: apiGroup,
      IpProtocol: 'tcp',
      FromPort: BROKER_HTTP_PORT,
      ToPort: BROKER_HTTP_PORT,
    });
    template.hasResourceProperties('AWS::EC2::SecurityGroupEgress', {
      GroupId: apiGroup,
      DestinationSecurityGroupId: brokerGroup,
      FromPort: BROKER_HTTP_PORT,
      ToPort: BROKER_HTTP_PORT,
    });
    // Otherwise HTTPS only (DynamoDB, S3, SQS), and the brokers still admit nothing else.
    expect(resources[idOf(jobs.apiSecurityGroup)]!.Properties.SecurityGroupEgress).toEqual([
      expect.objectContaining({ IpProtocol: 'tcp', FromPort: 443, ToPort: 443 }),
    ]);
    const brokerIngress = Object.values(resources).filter(
      (r) =>
        r.Type === 'AWS::EC2::SecurityGroupIngress' &&
        JSON.stringify(r.Properties.GroupId) === JSON.stringify(brokerGroup),
    );
    expect(brokerIngress.map((r) => r.Properties.SourceSecurityGroupId)).toEqual([apiGroup]);
  });

  it('lets Lambda manage the operator API’s network interfaces, without a managed policy', () => {
    const role = idOf(jobs.api.role!);
    const actions = statementsOf(role).flatMap(actionsOf);
    expect(actions).toEqual(
      expect.arrayContaining([
        'ec2:CreateNetworkInterface',
        'ec2:DescribeNetworkInterfaces',
        'ec2:DeleteNetworkInterface',
      ]),
    );
    expect(resources[role]!.Properties.ManagedPolicyArns).toBeUndefined();
  });

  it('reaches S3 and SQS from the VPC without a NAT; only the operator API may send through the SQS endpoint, only to the ingest queue', () => {
    template.resourceCountIs('AWS::EC2::NatGateway', 0);
    const endpoints = Object.values(resources).filter((r) => r.Type === 'AWS::EC2::VPCEndpoint');
    const service = (r: { Properties: Json }) =>
      JSON.stringify(r.Properties.ServiceName).match(/\.(\w+)"\]\]/)?.[1];
    expect(endpoints.map((r) => `${service(r)}:${r.Properties.VpcEndpointType}`).sort()).toEqual([
      'dynamodb:Gateway',
      's3:Gateway',
      'sqs:Interface',
    ]);
    const sqs = resources[idOf(jobs.sqsEndpoint)]!.Properties as {
      PrivateDnsEnabled: boolean;
      PolicyDocument: { Statement: (Statement & { Principal: unknown })[] };
    };
    expect(sqs.PrivateDnsEnabled).toBe(true);
    expect(sqs.PolicyDocument.Statement).toEqual([
      {
        Effect: 'Allow',
        Principal: { AWS: { 'Fn::GetAtt': [idOf(jobs.api.role!), 'Arn'] } },
        Action: 'sqs:SendMessage',
        Resource: { 'Fn::GetAtt': [idOf(stateful.queues.ingest.queue), 'Arn'] },
      },
    ]);
    template.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      SourceSecurityGroupId: { 'Fn::GetAtt': [idOf(jobs.apiSecurityGroup), 'GroupId'] },
      FromPort: 443,
      ToPort: 443,
    });
  });

  it('is cdk-nag clean', () => {
    const annotations = Annotations.fromStack(stack);
    const findings = [
      ...annotations.findError('*', Match.stringLikeRegexp('AwsSolutions-.*')),
      ...annotations.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*')),
    ].map((f) => `${f.id}: ${String(f.entry.data).slice(0, 200)}`);
    expect(findings).toEqual([]);
  });
});
