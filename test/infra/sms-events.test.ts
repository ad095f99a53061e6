/**
 * End User Messaging SMS's events as deployed (`cdk/constructs/sms-events.ts`,
 * `cdk/constructs/sms-inbound.ts`): the stage's configuration set with an SNS event destination for
 * the text event types that move a task; both topics KMS-encrypted under a rotated key the service
 * may use for this account only, TLS only, publishable by the service only under the confused-deputy
 * conditions; each topic's queue subscribed with raw message delivery (what SNS cannot deliver kept
 * in the subscription's dead-letter queue, alarmed) and read in batches with partial failures, its
 * dead-letter queue alarmed; least-privilege IAM (checked by the same
 * conformance check the recorded calls go through); outputs; cdk-nag.
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
import { functions } from '#shared/functions.ts';
import { SMS_EVENT_TYPES } from '#shared/sms/event-destination.ts';
import { readSmsEvent } from '#shared/sms/sms-events.ts';
import { synthesizer } from '../support/synth.ts';

type Json = Record<string, unknown>;

const synthesize = synthesizer('sms-events', { stage: 'dev', telephonyApiUrl: 'https://api.telephony.test' });
const { stack, template } = synthesize({});
const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Json }>;
const events = stack.smsEvents;
const inbound = stack.smsInbound;

const idOf = (construct: IConstruct): string =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnResource);
const propsOf = (construct: IConstruct): Json => resources[idOf(construct)]!.Properties;

const TASKS = 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-tasks';
const CONTROL = 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control';
const call = (principal: string, action: string, resource: string, pk: string): RecordedCall => ({
  principal,
  via: 'test',
  action,
  resource,
  context: { 'dynamodb:LeadingKeys': [pk] },
});
const denied = (calls: RecordedCall[]) => {
  const report = checkConformance(template.toJSON() as CfnTemplate, calls);
  expect(report.unknownPrincipals).toEqual([]);
  return report.denied.map(
    (d) => `${d.request.action} ${(d.call.context['dynamodb:LeadingKeys'] as string[])[0]}`,
  );
};

describe("End User Messaging SMS's configuration set and its events", () => {
  it('names the configuration set by stage, publishes the text events that move a task to its topic, and outputs the name', () => {
    expect(events.configurationSetName).toBe('switchboard-dev-sms');
    template.hasResourceProperties('AWS::SMSVOICE::ConfigurationSet', {
      ConfigurationSetName: 'switchboard-dev-sms',
      EventDestinations: [
        {
          EventDestinationName: 'switchboard-sms-events',
          Enabled: true,
          MatchingEventTypes: [...SMS_EVENT_TYPES],
          SnsDestination: { TopicArn: { Ref: idOf(events.topic) } },
        },
      ],
    });
    template.hasOutput('SmsConfigurationSetName', { Value: 'switchboard-dev-sms' });
    // Every type it publishes is one the function records; none is a voice or MMS type.
    for (const eventType of SMS_EVENT_TYPES) {
      const record = {
        eventType,
        eventTimestamp: 1,
        messageId: 'm',
        context: { 'sb-client': 'c', 'sb-job': 'j', 'sb-task': 't', 'sb-attempt': '1' },
      };
      expect(readSmsEvent(record), eventType).not.toHaveProperty('ignored');
    }
  });

  it('encrypts both topics with one rotated key the service may use for this account only', () => {
    const keyId = idOf(events.topicsKey);
    expect(propsOf(events.topicsKey)).toMatchObject({ EnableKeyRotation: true });
    for (const topic of [events.topic, inbound.topic])
      expect(propsOf(topic).KmsMasterKeyId).toEqual({ 'Fn::GetAtt': [keyId, 'Arn'] });
    expect(JSON.stringify(propsOf(events.topicsKey).KeyPolicy)).toContain('sms-voice.amazonaws.com');
    template.hasResourceProperties('AWS::KMS::Key', {
      KeyPolicy: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Sid: 'EndUserMessagingSmsPublishes',
            Principal: { Service: 'sms-voice.amazonaws.com' },
            Action: ['kms:GenerateDataKey*', 'kms:Decrypt'],
            Condition: {
              StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
              ArnLike: { 'aws:SourceArn': Match.anyValue() },
            },
          }),
        ]),
      },
    });
  });

  it('lets the service publish the events for this configuration set only, and the inbound texts for this account only; TLS only', () => {
    const statement = (topic: IConstruct) =>
      Object.values(resources)
        .filter((r) => r.Type === 'AWS::SNS::TopicPolicy')
        .filter((r) => JSON.stringify(r.Properties.Topics) === JSON.stringify([{ Ref: idOf(topic) }]))
        .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Json[] }).Statement);
    for (const [topic, arn] of [
      [events.topic, 'configuration-set/switchboard-dev-sms'],
      [inbound.topic, '*'],
    ] as const) {
      const statements = statement(topic);
      const publish = statements.find((s) => s.Sid === 'EndUserMessagingSmsPublishes')!;
      expect(publish).toMatchObject({
        Effect: 'Allow',
        Principal: { Service: 'sms-voice.amazonaws.com' },
        Action: 'sns:Publish',
        Condition: { StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } },
      });
      expect(JSON.stringify((publish.Condition as Json).ArnLike)).toContain(`:sms-voice:`);
      expect(JSON.stringify((publish.Condition as Json).ArnLike)).toContain(`:${arn}"`);
      expect(statements).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            Effect: 'Deny',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        ]),
      );
    }
  });

  it('subscribes each queue to its topic with raw message delivery; the functions read them in batches with partial failures', () => {
    for (const [construct, id] of [
      [events, 'sms-events'],
      [inbound, 'sms-inbound'],
    ] as const) {
      template.hasResourceProperties('AWS::SNS::Subscription', {
        Protocol: 'sqs',
        TopicArn: { Ref: idOf(construct.topic) },
        Endpoint: { 'Fn::GetAtt': [idOf(construct.queue), 'Arn'] },
        RawMessageDelivery: true,
        RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [idOf(construct.undelivered), 'Arn'] } },
      });
      // What SNS cannot deliver (a client-side failure) is kept, encrypted, 14 days, alarmed.
      expect(propsOf(construct.undelivered)).toMatchObject({
        QueueName: `switchboard-dev-${id}-undelivered`,
        SqsManagedSseEnabled: true,
        MessageRetentionPeriod: 14 * 24 * 3600,
      });
      expect(propsOf(construct.undeliveredAlarm)).toMatchObject({
        AlarmName: `switchboard-dev-${id}-undelivered-messages`,
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Threshold: 0,
      });
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: idOf(construct.undelivered) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Allow',
              Principal: { Service: 'sns.amazonaws.com' },
              Action: 'sqs:SendMessage',
              Condition: { ArnEquals: { 'aws:SourceArn': { Ref: idOf(construct.topic) } } },
            }),
          ]),
        },
      });
      const source = functions[id].queueSource!;
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        FunctionName: { Ref: idOf(construct.handler) },
        EventSourceArn: { 'Fn::GetAtt': [idOf(construct.queue), 'Arn'] },
        BatchSize: source.batchSize,
        MaximumBatchingWindowInSeconds: source.maxBatchingWindowSeconds,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      });
      expect(propsOf(construct.handler)).toMatchObject({
        Description: `Switchboard ${id}`,
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        Timeout: functions[id].timeoutSeconds,
      });
      expect(propsOf(construct.queue)).toMatchObject({
        QueueName: `switchboard-dev-${id}`,
        VisibilityTimeout: 6 * functions[id].timeoutSeconds,
        SqsManagedSseEnabled: true,
      });
      expect(propsOf(construct.queueDeadLettersAlarm)).toMatchObject({
        AlarmName: `switchboard-dev-${id}-dlq-messages`,
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Threshold: 0,
      });
      // SNS may send to the queue, for its topic only.
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: idOf(construct.queue) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Allow',
              Principal: { Service: 'sns.amazonaws.com' },
              Action: 'sqs:SendMessage',
              Condition: { ArnEquals: { 'aws:SourceArn': { Ref: idOf(construct.topic) } } },
            }),
          ]),
        },
      });
    }
    template.hasOutput('SmsInboundTopicArn', { Value: { Ref: idOf(inbound.topic) } });
    expect(Object.keys(template.toJSON().Outputs)).toEqual(
      expect.arrayContaining(['SmsEventsDlqRedriveCommand', 'SmsInboundDlqRedriveCommand']),
    );
  });

  it('gives each function every environment variable its main.ts requires at start', () => {
    for (const [construct, id, expected] of [
      [events, 'sms-events', ['TASKS_TABLE']],
      [inbound, 'sms-inbound', ['CONTROL_TABLE']],
    ] as const) {
      const source = readFileSync(join(REPO_ROOT, functions[id].entry), 'utf8');
      const required = [...source.matchAll(/getStringFromEnv\('([A-Z_]+)'\)/g)].map((m) => m[1]!);
      expect(required.sort()).toEqual([...expected]);
      const env = (propsOf(construct.handler).Environment as { Variables: Json }).Variables;
      expect(Object.keys(env)).toEqual(expect.arrayContaining(required));
    }
  });

  it('sms-events may update task items, nothing else', () => {
    expect(
      denied([
        call('sms-events', 'dynamodb:UpdateItem', TASKS, 'job-1#3'),
        call('sms-events', 'dynamodb:GetItem', TASKS, 'job-1#3'),
        call('sms-events', 'dynamodb:PutItem', TASKS, 'job-1#3'),
        call('sms-events', 'dynamodb:UpdateItem', CONTROL, 'SUPPRESS#acme'),
      ]),
    ).toEqual(['dynamodb:GetItem job-1#3', 'dynamodb:PutItem job-1#3', 'dynamodb:UpdateItem SUPPRESS#acme']);
  });

  it("sms-inbound may read the clients' list and write suppression entries, nothing else", () => {
    expect(
      denied([
        call('sms-inbound', 'dynamodb:Query', `${CONTROL}/index/byStatus`, 'CLIENTS'),
        call('sms-inbound', 'dynamodb:UpdateItem', CONTROL, 'SUPPRESS#acme'),
        call('sms-inbound', 'dynamodb:Query', `${CONTROL}/index/byStatus`, 'JOBSTATUS#running#3'),
        call('sms-inbound', 'dynamodb:GetItem', CONTROL, 'CLIENT#acme'),
        call('sms-inbound', 'dynamodb:UpdateItem', CONTROL, 'CLIENT#acme'),
        call('sms-inbound', 'dynamodb:DeleteItem', CONTROL, 'SUPPRESS#acme'),
        call('sms-inbound', 'dynamodb:UpdateItem', TASKS, 'job-1#3'),
      ]),
    ).toEqual([
      'dynamodb:Query JOBSTATUS#running#3',
      'dynamodb:GetItem CLIENT#acme',
      'dynamodb:UpdateItem CLIENT#acme',
      'dynamodb:DeleteItem SUPPRESS#acme',
      'dynamodb:UpdateItem job-1#3',
    ]);
  });

  it("the brokers send texts from the account's identities under the stage's configuration set, nothing else of the service", () => {
    const container = (
      Object.values(resources).find((r) => r.Type === 'AWS::ECS::TaskDefinition')!.Properties
        .ContainerDefinitions as { Environment: { Name: string; Value: unknown }[] }[]
    )[0]!;
    expect(container.Environment).toContainEqual({
      Name: 'SMS_CONFIGURATION_SET',
      Value: 'switchboard-dev-sms',
    });
    const sms = (action: string, resource: string): RecordedCall => ({
      principal: 'broker',
      via: 'test',
      action,
      resource: `arn:aws:sms-voice:REGION:ACCOUNT:${resource}`,
      context: {},
    });
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      sms('sms-voice:SendTextMessage', 'phone-number/phone-0123456789abcdef'),
      sms('sms-voice:SendTextMessage', 'sender-id/SHOP/JP'),
      sms('sms-voice:SendTextMessage', 'pool/pool-0123456789abcdef'),
      sms('sms-voice:SendTextMessage', 'configuration-set/switchboard-STAGE-sms'),
      sms('sms-voice:SendTextMessage', 'configuration-set/someone-elses'),
      sms('sms-voice:PutOptedOutNumber', 'opt-out-list/Default'),
      sms('sms-voice:DeleteOptedOutNumber', 'opt-out-list/Default'),
    ]);
    expect(report.denied.map((d) => `${d.request.action} ${d.request.resource.split(':').at(-1)}`)).toEqual([
      'sms-voice:SendTextMessage configuration-set/someone-elses',
      'sms-voice:PutOptedOutNumber opt-out-list/Default',
      'sms-voice:DeleteOptedOutNumber opt-out-list/Default',
    ]);
  });

  it('passes cdk-nag', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
  });
});
