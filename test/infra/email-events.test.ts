/**
 * SES's events as deployed (`cdk/constructs/email-events.ts`): the stage's configuration set and its
 * EventBridge destination (the default bus, the seven event types), the rule filtered to that set
 * targeting the ses-events queue with retries and a dead-letter queue (alarmed), email-events reading
 * that queue in batches with partial failures (its own DLQ alarmed), least-privilege IAM (UpdateItem
 * on tasks, suppression entries only on the control table), the configuration set's name as an
 * output, and cdk-nag.
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
import { synthesizer } from '../support/synth.ts';

type Json = Record<string, unknown>;

const synthesize = synthesizer('email-events', {
  stage: 'dev',
  telephonyApiUrl: 'https://api.telephony.test',
});
const { stack, template } = synthesize({});
const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Json }>;
const email = stack.emailEvents;

const idOf = (construct: IConstruct): string =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnResource);
const propsOf = (construct: IConstruct): Json => resources[idOf(construct)]!.Properties;

const SET = 'switchboard-dev-email';
const TASKS = 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-tasks';
const CONTROL = 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control';
const call = (action: string, resource: string, pk: string): RecordedCall => ({
  principal: 'email-events',
  via: 'test',
  action,
  resource,
  context: { 'dynamodb:LeadingKeys': [pk] },
});

describe("SES's configuration set and its events", () => {
  it('names the configuration set by stage and outputs it for the broker', () => {
    expect(email.configurationSetName).toBe(SET);
    template.hasResourceProperties('AWS::SES::ConfigurationSet', { Name: SET });
    template.hasOutput('EmailConfigurationSetName', { Value: SET });
  });

  it('publishes the seven event types that move an email to the default bus', () => {
    const destinations = Object.values(resources).filter(
      (r) => r.Type === 'AWS::SES::ConfigurationSetEventDestination',
    );
    expect(destinations).toHaveLength(1);
    const destination = destinations[0]!.Properties as {
      ConfigurationSetName: unknown;
      EventDestination: { Enabled?: boolean; MatchingEventTypes: string[]; EventBridgeDestination: Json };
    };
    expect(destination.ConfigurationSetName).toEqual({ Ref: idOf(email.configurationSet) });
    expect([...destination.EventDestination.MatchingEventTypes].sort()).toEqual(
      ['bounce', 'complaint', 'delivery', 'deliveryDelay', 'reject', 'renderingFailure', 'send'].sort(),
    );
    expect(JSON.stringify(destination.EventDestination.EventBridgeDestination)).toContain(
      ':event-bus/default',
    );
  });

  it('routes that set’s events, and only those, to the ses-events queue: retried for a day, then the dead-letter queue', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.ses'],
        'detail-type': [
          'Email Sent',
          'Email Delivered',
          'Email Bounced',
          'Email Complaint Received',
          'Email Rejected',
          'Email Delivery Delayed',
          'Email Rendering Failed',
        ],
        detail: { mail: { tags: { 'ses:configuration-set': [SET] } } },
      },
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [idOf(email.queue), 'Arn'] },
          RetryPolicy: { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 24 * 3600 },
          DeadLetterConfig: { Arn: { 'Fn::GetAtt': [idOf(email.deadLetters), 'Arn'] } },
        }),
      ],
    });
    // EventBridge may send to the queue and to the dead-letter queue, for this rule only.
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: idOf(email.queue) }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: 'events.amazonaws.com' },
            Action: Match.arrayWith(['sqs:SendMessage']),
            Condition: { ArnEquals: { 'aws:SourceArn': { 'Fn::GetAtt': [idOf(email.rule), 'Arn'] } } },
          }),
        ]),
      },
    });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: idOf(email.deadLetters) }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: 'events.amazonaws.com' },
            Action: 'sqs:SendMessage',
            Condition: { ArnEquals: { 'aws:SourceArn': { 'Fn::GetAtt': [idOf(email.rule), 'Arn'] } } },
          }),
        ]),
      },
    });
  });

  it('the function reads the queue in batches, reporting each failed record: an invocation a batch, not an event', () => {
    expect(propsOf(email.handler)).toMatchObject({
      Description: 'Switchboard email-events',
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: functions['email-events'].timeoutSeconds,
    });
    expect(propsOf(email.handler).VpcConfig).toBeUndefined();
    expect(propsOf(email.handler).DeadLetterConfig).toBeUndefined();
    const source = functions['email-events'].queueSource!;
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: idOf(email.handler) },
      EventSourceArn: { 'Fn::GetAtt': [idOf(email.queue), 'Arn'] },
      BatchSize: source.batchSize,
      MaximumBatchingWindowInSeconds: source.maxBatchingWindowSeconds,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    // Lambda hides a batch's records for at least the function's timeout.
    expect(propsOf(email.queue)).toMatchObject({
      QueueName: 'switchboard-dev-ses-events',
      VisibilityTimeout: 6 * functions['email-events'].timeoutSeconds,
      SqsManagedSseEnabled: true,
    });
    expect(propsOf(email.queueDeadLettersAlarm)).toMatchObject({
      AlarmName: 'switchboard-dev-ses-events-dlq-messages',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Threshold: 0,
    });
    // What the alarm says to run: SQS's redrive of the queue's own dead letters.
    expect(JSON.stringify(template.toJSON().Outputs.SesEventsDlqRedriveCommand.Value)).toContain(
      'aws sqs start-message-move-task --source-arn ',
    );
  });

  it('the dead-letter queue is encrypted, kept 14 days and alarmed to the alarm topic', () => {
    expect(propsOf(email.deadLetters)).toMatchObject({
      QueueName: 'switchboard-dev-email-events-dlq',
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 24 * 3600,
    });
    const [topicId] = Object.keys(template.findResources('AWS::SNS::Topic'));
    expect(propsOf(email.deadLettersAlarm)).toMatchObject({
      AlarmName: 'switchboard-dev-email-events-dlq-messages',
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Threshold: 0,
      AlarmActions: [{ Ref: topicId }],
    });
  });

  it('gets every environment variable its main.ts requires at start', () => {
    const source = readFileSync(join(REPO_ROOT, functions['email-events'].entry), 'utf8');
    const required = [...source.matchAll(/getStringFromEnv\('([A-Z_]+)'\)/g)].map((m) => m[1]!);
    expect(required.sort()).toEqual(['CONTROL_TABLE', 'TASKS_TABLE']);
    const env = (propsOf(email.handler).Environment as { Variables: Json }).Variables;
    expect(Object.keys(env)).toEqual(expect.arrayContaining(required));
  });

  it('may update task items, write suppression entries, and move a bounced task of a fallback job on; nothing else of either table', () => {
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      call('dynamodb:UpdateItem', TASKS, 'job-1#3'),
      call('dynamodb:UpdateItem', CONTROL, 'SUPPRESS#acme'),
      // A hard bounce: the task read, its job read, and the transaction's task, page and job.
      call('dynamodb:GetItem', TASKS, 'job-1#3'),
      call('dynamodb:GetItem', CONTROL, 'CLIENT#acme'),
      call('dynamodb:ConditionCheckItem', TASKS, 'acme#claims'),
      call('dynamodb:UpdateItem', CONTROL, 'CLIENT#acme'),
      call('dynamodb:PutItem', TASKS, 'job-1#3'),
      call('dynamodb:DeleteItem', TASKS, 'job-1#3'),
      call('dynamodb:GetItem', CONTROL, 'SUPPRESS#acme'),
      call('dynamodb:DeleteItem', CONTROL, 'SUPPRESS#acme'),
      call('dynamodb:PutItem', CONTROL, 'CLIENT#acme'),
      call('dynamodb:GetItem', CONTROL, 'LEASE#acme'),
    ]);
    expect(report.unknownPrincipals).toEqual([]);
    expect(
      report.denied.map(
        (d) => `${d.request.action} ${(d.call.context['dynamodb:LeadingKeys'] as string[])[0]}`,
      ),
    ).toEqual([
      'dynamodb:PutItem job-1#3',
      'dynamodb:DeleteItem job-1#3',
      'dynamodb:GetItem SUPPRESS#acme',
      'dynamodb:DeleteItem SUPPRESS#acme',
      'dynamodb:PutItem CLIENT#acme',
      'dynamodb:GetItem LEASE#acme',
    ]);
  });

  it('passes cdk-nag', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
  });
});
