import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '#cdk/app.ts';
import type { SwitchboardStack } from '#cdk/stack.ts';

let stack: SwitchboardStack;
// Synthesized into folders removed afterwards (an App without outdir leaves one in /tmp per run).
const outdirs: string[] = [];
const outdir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-stack-'));
  outdirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});
let template: Template;

beforeAll(() => {
  // The template only: the Lambda bundles (esbuild) are built and checked in webhooks.test.ts.
  const built = buildApp(
    new App({
      outdir: outdir(),
      context: {
        stage: 'prod',
        telephonyApiUrl: 'https://api.telephony.test',
        'aws:cdk:bundling-stacks': [],
      },
    }),
  );
  stack = built.stack;
  built.app.synth();
  template = Template.fromStack(stack);
});

describe('the stack passes cdk-nag (AwsSolutions)', () => {
  it('has no unsuppressed errors or warnings', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
    expect(warnings.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
  });
});

describe('stateful resources', () => {
  it('creates the four tables from the shared specs, with PITR where it fits and TTL', () => {
    template.resourceCountIs('AWS::DynamoDB::Table', 4);
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'switchboard-prod-channels',
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS', KMSMasterKeyId: Match.anyValue() },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'switchboard-prod-tasks',
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: [
        Match.objectLike({
          IndexName: 'outstanding',
          KeySchema: [
            { AttributeName: 'openPk', KeyType: 'HASH' },
            { AttributeName: 'openSk', KeyType: 'RANGE' },
          ],
        }),
      ],
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      // Multicast batch records expire (tasks carry no expiresAt, so they never do).
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
    });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'switchboard-prod-events',
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
    });
  });

  it('creates SSE queues with DLQs and redrive, FIFO for webhook events', () => {
    template.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: 'switchboard-prod-webhook-events.fifo',
      FifoQueue: true,
      SqsManagedSseEnabled: true,
      RedrivePolicy: { deadLetterTargetArn: Match.anyValue(), maxReceiveCount: 12 },
    });
    template.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: 'switchboard-prod-webhook-events-dlq.fifo',
      FifoQueue: true,
    });
    template.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: 'switchboard-prod-ingest',
      RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }),
    });
    template.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: 'switchboard-prod-outcome-webhooks',
      RedrivePolicy: Match.objectLike({ maxReceiveCount: Match.anyValue() }),
    });
    // Every queue refuses plain HTTP: webhook events, ingest and outcome webhooks, each with its DLQ.
    const policies = template.findResources('AWS::SQS::QueuePolicy');
    expect(Object.keys(policies).length).toBe(6);
  });

  it('blocks public access to the upload bucket and enforces SSL', () => {
    template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      LoggingConfiguration: Match.objectLike({ LogFilePrefix: 'uploads/' }),
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });
});

describe('the nag check itself', () => {
  it('flags a resource that breaks a rule (so a clean result means something)', async () => {
    const { Aspects, Stack } = await import('aws-cdk-lib');
    const sqs = await import('aws-cdk-lib/aws-sqs');
    const { AwsSolutionsChecks } = await import('cdk-nag');
    const app = new App({ outdir: outdir(), context: { 'aws:cdk:bundling-stacks': [] } });
    const bad = new Stack(app, 'Bad');
    new sqs.Queue(bad, 'NoDlqNoSsl', { encryption: sqs.QueueEncryption.UNENCRYPTED });
    Aspects.of(app).add(new AwsSolutionsChecks());
    app.synth();
    const ids = Annotations.fromStack(bad)
      .findError('*', Match.stringLikeRegexp('AwsSolutions-.*'))
      .map((e) => String(e.entry.data).split(':')[0]);
    expect(ids).toEqual(expect.arrayContaining(['AwsSolutions-SQS3', 'AwsSolutions-SQS4']));
  });
});
