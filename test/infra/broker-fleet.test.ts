/**
 * The broker fleet construct in a stack built here (the lead wires it into SwitchboardStack):
 * synthesised offline without Docker, asserted on its template, and checked by cdk-nag.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Aspects, type CfnResource, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as sns from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKER_STOP_TIMEOUT_SECONDS, BrokerFleet } from '#cdk/constructs/broker-fleet.ts';
import { StatefulResources } from '#cdk/constructs/stateful.ts';
import { brokerV8Flags } from '#shared/broker/runtime.ts';
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
let fleet: BrokerFleet;
let stateful: StatefulResources;
let template: Template;
let resources: Record<string, { Type: string; Properties: Json }>;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'switchboard-fleet-cdk-'));
  // The template only: the Lambda bundles (esbuild) are built and checked in webhooks.test.ts.
  const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
  stack = new Stack(app, 'FleetTest');
  stateful = new StatefulResources(stack, 'Stateful', { stage: 'test', retain: false });
  const alarmTopic = new sns.Topic(stack, 'Alarms', { enforceSSL: true });
  fleet = new BrokerFleet(stack, 'Fleet', {
    stage: 'test',
    stateful,
    retain: false,
    telephonyApiUrl: 'https://telephony.example.com',
    callStatusCallbackUrl: 'https://api.example.com/providers/example/calls/status',
    twilioCallbackUrl: 'https://api.example.com/providers/twilio/calls/status',
    maxBrokers: 25,
    alarmTopic,
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
const propsOf = (construct: IConstruct): Json => resources[idOf(construct)]!.Properties;
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const mentions = (s: Statement, construct: IConstruct): boolean =>
  JSON.stringify(s.Resource).includes(`"${idOf(construct)}"`);
/** The broker container's environment, by name. */
function brokerEnv(): Record<string, unknown> {
  const [container] = propsOf(fleet.taskDefinition).ContainerDefinitions as Json[];
  return Object.fromEntries(
    (container!.Environment as { Name: string; Value: unknown }[]).map((e) => [e.Name, e.Value]),
  );
}

function statementsOf(roleId: string): Statement[] {
  return Object.values(resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy')
    .filter((r) => JSON.stringify(r.Properties.Roles).includes(`"${roleId}"`))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

describe('the broker service', () => {
  it('is a Fargate service whose count the job manager owns, and rolls with room for protected brokers', () => {
    // No DesiredCount: CloudFormation would re-apply it on every service update (a new image).
    expect(propsOf(fleet.service)).not.toHaveProperty('DesiredCount');
    expect(propsOf(fleet.service)).toMatchObject({
      LaunchType: 'FARGATE',
      DeploymentConfiguration: {
        MinimumHealthyPercent: 100,
        MaximumPercent: 200,
        DeploymentCircuitBreaker: { Enable: true, Rollback: true },
      },
      NetworkConfiguration: { AwsvpcConfiguration: { AssignPublicIp: 'ENABLED' } },
    });
  });

  it('runs arm64 brokers with a 120 s stop timeout, the token as a secret, and the image version', () => {
    const task = propsOf(fleet.taskDefinition);
    expect(task.RuntimePlatform).toEqual({ CpuArchitecture: 'ARM64', OperatingSystemFamily: 'LINUX' });
    const [container] = task.ContainerDefinitions as Json[];
    expect(container).toMatchObject({
      StopTimeout: BROKER_STOP_TIMEOUT_SECONDS,
      ReadonlyRootFilesystem: true,
    });
    expect(BROKER_STOP_TIMEOUT_SECONDS).toBe(120);
    const env = Object.fromEntries(
      (container!.Environment as { Name: string; Value: unknown }[]).map((e) => [e.Name, e.Value]),
    );
    expect(Object.keys(env)).toEqual(
      expect.arrayContaining([
        'CONTROL_TABLE',
        'TASKS_TABLE',
        'TELEPHONY_API_URL',
        'CALL_STATUS_CALLBACK_URL',
      ]),
    );
    expect(env.BROKER_VERSION).toBe(fleet.brokerVersion);
    // The heap bench/message-throughput.ts measures the broker's memory under.
    expect(task).toMatchObject({ Cpu: '1024', Memory: '2048' });
    expect(env.NODE_OPTIONS).toBe('--enable-source-maps --max-semi-space-size=16 --max-old-space-size=128');
    expect(env.NODE_OPTIONS).toBe(['--enable-source-maps', ...brokerV8Flags()].join(' '));
    expect(JSON.stringify(env)).not.toContain('TOKEN');
    expect((container!.Secrets as { Name: string }[]).map((s) => s.Name)).toEqual(['TELEPHONY_API_TOKEN']);
  });

  it('lets the broker task touch only its tables, the channels it sends through and its own cluster’s task protection', () => {
    const statements = statementsOf(idOf(fleet.taskDefinition.taskRole));
    const actions = statements.flatMap(actionsOf);
    expect(actions).toEqual(expect.arrayContaining(['ecs:UpdateTaskProtection', 'ecs:GetTaskProtection']));
    expect(actions.filter((a) => !a.startsWith('dynamodb:') && !a.startsWith('ecs:')).sort()).toEqual([
      'kms:Decrypt',
      'kms:DescribeKey',
    ]);
    expect(actions).not.toContain('dynamodb:Scan');
    // Only multicast batch records ({jobId}#batch) and claim pages ({clientId}#claims) may be deleted; tasks never are.
    const deletes = statements.filter((s) => actionsOf(s).includes('dynamodb:DeleteItem'));
    expect(deletes).toEqual([
      expect.objectContaining({
        Action: 'dynamodb:DeleteItem',
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['*#batch', '*#claims'] } },
      }),
    ]);
    expect(mentions(deletes[0]!, stateful.tables.tasks)).toBe(true);
    const protection = statements.find((s) => actionsOf(s).includes('ecs:UpdateTaskProtection'))!;
    expect(JSON.stringify(protection.Resource)).toContain(':task/');
    expect(JSON.stringify(protection.Resource)).toContain(idOf(fleet.cluster));
    expect(JSON.stringify(statements)).not.toContain(idOf(fleet.telephonyToken));
  });

  it('reads LINE channels (access tokens) to send message jobs, and can decrypt them only through DynamoDB', () => {
    const statements = statementsOf(idOf(fleet.taskDefinition.taskRole));
    expect(statements.filter((s) => mentions(s, stateful.tables.channels)).flatMap(actionsOf)).toEqual([
      'dynamodb:GetItem',
    ]);
    const keyStatements = statements.filter((s) => mentions(s, stateful.secretsKey));
    expect(keyStatements.flatMap(actionsOf).sort()).toEqual(['kms:Decrypt', 'kms:DescribeKey']);
    for (const s of keyStatements) {
      expect(Object.keys(s.Condition?.StringEquals as Json).sort()).toEqual([
        'kms:CallerAccount',
        'kms:ViaService',
      ]);
    }
    expect(brokerEnv()).toMatchObject({
      CHANNELS_TABLE: { Ref: idOf(stateful.tables.channels) },
      LINE_API_URL: 'https://api.line.me',
    });
  });

  it('admits no inbound traffic and lets only HTTPS out', () => {
    const sg = propsOf(fleet.securityGroup);
    expect(sg.SecurityGroupIngress).toBeUndefined();
    expect(sg.SecurityGroupEgress).toEqual([
      expect.objectContaining({ IpProtocol: 'tcp', FromPort: 443, ToPort: 443 }),
    ]);
    template.resourceCountIs('AWS::EC2::NatGateway', 0);
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', { VpcEndpointType: 'Gateway' });
  });

  it('enables Container Insights on the cluster', () => {
    expect(propsOf(fleet.cluster).ClusterSettings).toEqual([{ Name: 'containerInsights', Value: 'enabled' }]);
  });
});

describe('the job manager', () => {
  it('runs every minute from EventBridge with the broker service, version and maximum in its environment', () => {
    expect(propsOf(fleet.schedule)).toMatchObject({ ScheduleExpression: 'rate(1 minute)', State: 'ENABLED' });
    const fn = propsOf(fleet.jobManager);
    expect(fn).toMatchObject({
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: functions['job-manager'].timeoutSeconds,
    });
    const env = (fn.Environment as { Variables: Json }).Variables;
    expect(env).toMatchObject({ MAX_BROKERS: '25', BROKER_VERSION: fleet.brokerVersion });
    expect(Object.keys(env)).toEqual(
      expect.arrayContaining(['CONTROL_TABLE', 'TASKS_TABLE', 'BROKER_CLUSTER', 'BROKER_SERVICE']),
    );
  });

  it('may update and describe this service only, read task definitions, and only read the tasks table', () => {
    const statements = statementsOf(idOf(fleet.jobManager.role!));
    const ecsStatements = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('ecs:')));
    expect(ecsStatements).toEqual([
      expect.objectContaining({
        Action: ['ecs:UpdateService', 'ecs:DescribeServices'],
        Resource: { Ref: idOf(fleet.service) },
      }),
      expect.objectContaining({ Action: 'ecs:DescribeTaskDefinition', Resource: '*' }),
    ]);
    const tasksWrites = statements.filter(
      (s) =>
        JSON.stringify(s.Resource).includes('StatefulTasks') &&
        actionsOf(s).some((a) => ['dynamodb:PutItem', 'dynamodb:UpdateItem'].includes(a)),
    );
    expect(tasksWrites).toEqual([]);
  });
});

describe('alarms', () => {
  it('watch job manager errors, a stopped schedule and missing brokers, and notify the topic', () => {
    for (const alarm of Object.values(fleet.alarms)) {
      expect(propsOf(alarm).AlarmActions).toEqual([{ Ref: expect.stringMatching(/^Alarms/) }]);
    }
    expect(propsOf(fleet.alarms.jobManagerNotRunning).TreatMissingData).toBe('breaching');
  });
});

describe('synthesis', () => {
  it('stages the broker image without Docker, with only what the image needs', () => {
    const asset = readdirSync(outdir).find(
      (f) => f.startsWith('asset.') && existsSync(join(outdir, f, 'worker', 'Dockerfile')),
    );
    expect(asset).toBeDefined();
    const staged = readdirSync(join(outdir, asset!)).sort();
    expect(staged).toEqual(['package-lock.json', 'package.json', 'shared', 'worker']);
  });

  it('passes cdk-nag (AwsSolutions) with every suppression reasoned', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
    expect(warnings.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
  });
});
