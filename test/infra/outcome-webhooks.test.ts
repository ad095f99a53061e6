/**
 * Outcome webhooks as deployed: the producer on the tasks and control streams (filtered, so only
 * task ends and job records invoke it), the delivery worker on its queue, the dead-letter alarm to
 * the alarm topic, secrets reachable only as OUTCOMEWEBHOOK# items, and cdk-nag.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CfnResource } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '#cdk/constructs/function.ts';
import { type CfnTemplate, checkConformance } from '#local/iam/policy.ts';
import type { RecordedCall } from '#local/iam/recorder.ts';
import { outcomeFunctions, STREAM_FAILURE_HANDLING } from '#shared/functions.ts';
import { synthesizer } from '../support/synth.ts';

type Json = Record<string, unknown>;
interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Json;
}

const synthesize = synthesizer('outcome-webhooks', {
  stage: 'dev',
  telephonyApiUrl: 'https://api.telephony.test',
});
const { stack, template } = synthesize({});
const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Json }>;
const outcomes = stack.outcomeWebhooks;

const idOf = (construct: IConstruct): string =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnResource);
const propsOf = (construct: IConstruct): Json => resources[idOf(construct)]!.Properties;
const ofType = (type: string) => Object.values(resources).filter((r) => r.Type === type);
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);

function statementsOf(roleId: string): Statement[] {
  return ofType('AWS::IAM::Policy')
    .filter((r) => JSON.stringify(r.Properties.Roles).includes(`"${roleId}"`))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

const CHANNELS = 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-channels';
const channelsCall = (principal: string, action: string, pk: string): RecordedCall => ({
  principal,
  via: 'test',
  action,
  resource: CHANNELS,
  context: { 'dynamodb:LeadingKeys': [pk] },
});
/** The calls of `calls` the template denies, as `action pk`. */
function denied(calls: RecordedCall[]): string[] {
  const report = checkConformance(template.toJSON() as CfnTemplate, calls);
  expect(report.unknownPrincipals).toEqual([]);
  return report.denied.map(
    (d) => `${d.request.action} ${(d.call.context?.['dynamodb:LeadingKeys'] as string[] | undefined)?.[0]}`,
  );
}

describe('the outcome webhook functions', () => {
  it('exist with their specs, and get every environment variable their main.ts requires at start', () => {
    for (const fn of [outcomes.events, outcomes.deliveries]) {
      const spec = outcomeFunctions[fn.spec.id as keyof typeof outcomeFunctions];
      expect(propsOf(fn)).toMatchObject({
        Description: `Switchboard ${spec.id}`,
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        Timeout: spec.timeoutSeconds,
        MemorySize: spec.memoryMb,
      });
      const source = readFileSync(join(REPO_ROOT, spec.entry), 'utf8');
      const required = [...source.matchAll(/getStringFromEnv\('([A-Z_]+)'\)/g)].map((m) => m[1]!);
      expect(required.length).toBeGreaterThan(0);
      const env = (propsOf(fn).Environment as { Variables: Json }).Variables;
      expect(Object.keys(env)).toEqual(expect.arrayContaining(required));
    }
  });

  it('map the tasks and control streams to outcome-events with the shared filters, so other changes never invoke it', () => {
    const sources = outcomeFunctions['outcome-events'].streamSources ?? [];
    expect(sources.map((s) => s.table)).toEqual(['tasks', 'control']);
    const mappings = ofType('AWS::Lambda::EventSourceMapping').filter(
      (m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify({ Ref: idOf(outcomes.events) }),
    );
    expect(mappings).toHaveLength(sources.length);
    for (const source of sources) {
      const table = idOf(stack.stateful.tables[source.table]);
      const mapping = mappings.find(
        (m) =>
          JSON.stringify(m.Properties.EventSourceArn) ===
          JSON.stringify({ 'Fn::GetAtt': [table, 'StreamArn'] }),
      );
      expect(mapping, source.table).toBeDefined();
      expect(mapping!.Properties).toMatchObject({
        BatchSize: source.batchSize,
        MaximumBatchingWindowInSeconds: source.maxBatchingWindowSeconds,
        StartingPosition: 'TRIM_HORIZON',
      });
      const filters = (mapping!.Properties.FilterCriteria as { Filters: { Pattern: string }[] }).Filters;
      expect(filters.map((f) => JSON.parse(f.Pattern))).toEqual(source.filters);
    }
  });

  it('cannot stall a shard: bisect on error, bounded retries and record age, then the on-failure queue (issue 35 #4)', () => {
    const mappings = ofType('AWS::Lambda::EventSourceMapping').filter(
      (m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify({ Ref: idOf(outcomes.events) }),
    );
    expect(mappings).toHaveLength(2);
    for (const mapping of mappings) {
      expect(mapping.Properties).toMatchObject({
        BisectBatchOnFunctionError: true,
        MaximumRetryAttempts: STREAM_FAILURE_HANDLING.retryAttempts,
        MaximumRecordAgeInSeconds: STREAM_FAILURE_HANDLING.maxRecordAgeSeconds,
        DestinationConfig: {
          OnFailure: { Destination: { 'Fn::GetAtt': [idOf(outcomes.streamFailures), 'Arn'] } },
        },
      });
      // The handler queues a batch's deliveries as one and fails whole: no partial batch response.
      expect(mapping.Properties.FunctionResponseTypes).toBeUndefined();
    }
    // Bounded (Lambda's -1 is "until the record expires"), and leaving most of the stream's 24 h to redrive.
    expect(STREAM_FAILURE_HANDLING.retryAttempts).toBeGreaterThan(0);
    expect(STREAM_FAILURE_HANDLING.maxRecordAgeSeconds).toBeGreaterThanOrEqual(60);
    expect(STREAM_FAILURE_HANDLING.maxRecordAgeSeconds).toBeLessThanOrEqual(12 * 3600);
  });

  it('the on-failure queue is a standard queue, encrypted, TLS only, kept 14 days, and the producer may send to it', () => {
    expect(propsOf(outcomes.streamFailures)).toMatchObject({
      QueueName: 'switchboard-dev-outcome-events-failures',
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 24 * 3600,
    });
    expect(propsOf(outcomes.streamFailures).FifoQueue).toBeUndefined();
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: idOf(outcomes.streamFailures) }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
    const sends = statementsOf(idOf(outcomes.events.role!)).filter(
      (st) =>
        actionsOf(st).includes('sqs:SendMessage') &&
        JSON.stringify(st.Resource).includes(idOf(outcomes.streamFailures)),
    );
    expect(sends).toHaveLength(1);
  });

  it("the operations construct alarms on the on-failure queue's first message, to the alarm topic", () => {
    expect(propsOf(stack.operations.alarms.streamFailures)).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [
        { Name: 'QueueName', Value: { 'Fn::GetAtt': [idOf(outcomes.streamFailures), 'QueueName'] } },
      ],
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      AlarmActions: [{ Ref: idOf(stack.webhooks.alarmTopic) }],
    });
  });

  it('consume the delivery queue in outcome-webhooks, reporting partial batch failures', () => {
    const queue = stack.stateful.queues['outcome-webhooks'];
    const source = outcomeFunctions['outcome-webhooks'].queueSource!;
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: idOf(outcomes.deliveries) },
      EventSourceArn: { 'Fn::GetAtt': [idOf(queue.queue), 'Arn'] },
      BatchSize: source.batchSize,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: source.maxConcurrency },
    });
  });
});

describe('the dead-letter queue', () => {
  it('alarms on its first message and notifies the alarm topic', () => {
    const dlq = stack.stateful.queues['outcome-webhooks'].deadLetterQueue;
    expect(propsOf(outcomes.alarms.deadLetters)).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [idOf(dlq), 'QueueName'] } }],
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      AlarmActions: [{ Ref: idOf(stack.webhooks.alarmTopic) }],
    });
  });

  it('has a redrive command output', () => {
    template.hasOutput('OutcomeWebhooksDlqRedriveCommand', Match.anyValue());
  });
});

describe('outcome webhook secrets in the channels table', () => {
  it("the worker's channels grant is GetItem on OUTCOMEWEBHOOK#* items only", () => {
    const channels = idOf(stack.stateful.tables.channels);
    const onChannels = statementsOf(idOf(outcomes.deliveries.role!)).filter((s) =>
      JSON.stringify(s.Resource).includes(`"${channels}"`),
    );
    expect(onChannels).toHaveLength(1);
    expect(actionsOf(onChannels[0]!)).toEqual(['dynamodb:GetItem']);
    expect(onChannels[0]!.Condition).toEqual({
      'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['OUTCOMEWEBHOOK#*'] },
    });
    expect(
      denied([
        channelsCall('outcome-webhooks', 'dynamodb:GetItem', 'OUTCOMEWEBHOOK#acme'),
        channelsCall('outcome-webhooks', 'dynamodb:GetItem', '1656000001'),
        channelsCall('outcome-webhooks', 'dynamodb:GetItem', 'TELEPHONY#default'),
        channelsCall('outcome-webhooks', 'dynamodb:PutItem', 'OUTCOMEWEBHOOK#acme'),
      ]),
    ).toEqual([
      'dynamodb:GetItem 1656000001',
      'dynamodb:GetItem TELEPHONY#default',
      'dynamodb:PutItem OUTCOMEWEBHOOK#acme',
    ]);
  });

  it('the producer never reaches the channels table', () => {
    const channels = idOf(stack.stateful.tables.channels);
    const statements = statementsOf(idOf(outcomes.events.role!));
    expect(statements.filter((s) => JSON.stringify(s.Resource).includes(`"${channels}"`))).toEqual([]);
  });

  it('the jobs API puts OUTCOMEWEBHOOK# items, reads none, and touches no channel', () => {
    expect(
      denied([
        channelsCall('jobs-api', 'dynamodb:PutItem', 'OUTCOMEWEBHOOK#acme'),
        channelsCall('jobs-api', 'dynamodb:GetItem', 'OUTCOMEWEBHOOK#acme'),
        channelsCall('jobs-api', 'dynamodb:PutItem', '1656000001'),
        channelsCall('jobs-api', 'dynamodb:DeleteItem', 'OUTCOMEWEBHOOK#acme'),
      ]),
    ).toEqual([
      'dynamodb:GetItem OUTCOMEWEBHOOK#acme',
      'dynamodb:PutItem 1656000001',
      'dynamodb:DeleteItem OUTCOMEWEBHOOK#acme',
    ]);
  });
});

describe('cdk-nag', () => {
  it('has no unsuppressed errors or warnings', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
    expect(warnings.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
  });
});
