import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, type CfnElement } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '#cdk/app.ts';
import type { SwitchboardStack } from '#cdk/stack.ts';
import { CONSOLE_API_PREFIX, routes } from '#shared/routes.ts';

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
          Projection: { ProjectionType: 'ALL' },
        }),
        // A person's history: keys only, so a task's later writes write nothing to it.
        Match.objectLike({
          IndexName: 'byRecipient',
          KeySchema: [
            { AttributeName: 'recipientPk', KeyType: 'HASH' },
            { AttributeName: 'recipientSk', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
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
    // Every queue refuses plain HTTP: webhook events, ingest, outcome webhooks, SES's events and
    // SMS's events and inbound texts, each with its DLQ, the outcome-events stream mappings'
    // on-failure queue, the email-events rule's dead-letter queue and the two SMS subscriptions'.
    const policies = template.findResources('AWS::SQS::QueuePolicy');
    expect(Object.keys(policies).length).toBe(16);
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

describe('sign-in to the console', () => {
  const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
    stack.getLogicalId(construct.node.defaultChild as CfnElement);

  it('has one Cognito user pool of invited operators, and an app client without a secret', () => {
    template.resourceCountIs('AWS::Cognito::UserPool', 1);
    template.hasResourceProperties('AWS::Cognito::UserPool', {
      UserPoolName: 'switchboard-prod-operators',
      AdminCreateUserConfig: { AllowAdminCreateUserOnly: true },
    });
    template.hasResourceProperties('AWS::Cognito::UserPoolClient', {
      UserPoolId: { Ref: logicalId(stack.console.userPool) },
      GenerateSecret: false,
    });
  });

  it("verifies the console's tokens with a JWT authorizer whose issuer is the user pool and audience its app client", () => {
    template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 1);
    template.hasResourceProperties('AWS::ApiGatewayV2::Authorizer', {
      AuthorizerType: 'JWT',
      IdentitySource: ['$request.header.Authorization'],
      JwtConfiguration: {
        Audience: [{ Ref: logicalId(stack.console.appClient) }],
        Issuer: {
          'Fn::Join': [
            '',
            [
              'https://cognito-idp.',
              { Ref: 'AWS::Region' },
              '.amazonaws.com/',
              { Ref: logicalId(stack.console.userPool) },
            ],
          ],
        },
      },
    });
  });

  it('puts every console API route behind the JWT authorizer, every operator route behind IAM, nothing else behind either', () => {
    const [authorizerId] = Object.keys(template.findResources('AWS::ApiGatewayV2::Authorizer'));
    const deployed = Object.values(template.findResources('AWS::ApiGatewayV2::Route')).map(
      (r) => r.Properties as { RouteKey: string; AuthorizationType?: string; AuthorizerId?: unknown },
    );
    const byKey = new Map(deployed.map((r) => [r.RouteKey, r]));
    expect([...byKey.keys()].sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
    const consoleApi = routes.filter((r) => r.path.startsWith(`${CONSOLE_API_PREFIX}/`));
    expect(consoleApi.length).toBeGreaterThan(10);
    for (const route of routes) {
      const key = `${route.method} ${route.path}`;
      const deployedRoute = byKey.get(key)!;
      if (route.path.startsWith(`${CONSOLE_API_PREFIX}/`)) expect(route.auth, key).toBe('jwt');
      if (route.auth === 'jwt') {
        expect(deployedRoute, key).toMatchObject({
          AuthorizationType: 'JWT',
          AuthorizerId: { Ref: authorizerId },
        });
      } else if (route.auth === 'iam') {
        expect(deployedRoute.AuthorizationType, key).toBe('AWS_IAM');
        expect(deployedRoute.AuthorizerId, key).toBeUndefined();
      } else {
        expect(deployedRoute.AuthorizationType ?? 'NONE', key).toBe('NONE');
      }
    }
    // The operator routes (IAM) are the console's, without the prefix.
    const iam = routes
      .filter((r) => r.auth === 'iam')
      .map((r) => `${r.method} ${CONSOLE_API_PREFIX}${r.path}`);
    expect(iam.length).toBeGreaterThan(10);
    for (const key of iam) expect(byKey.get(key)?.AuthorizationType, key).toBe('JWT');
  });

  it("outputs the console's URL (the HTTP API's /console) and its user pool id", () => {
    const { ConsoleUrl } = template.findOutputs('ConsoleUrl');
    expect(ConsoleUrl).toBeDefined();
    const [separator, parts] = (ConsoleUrl!.Value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'];
    expect(separator).toBe('');
    expect(parts.at(-1)).toBe('/console');
    expect(parts).toEqual([{ 'Fn::GetAtt': [logicalId(stack.api.api), 'ApiEndpoint'] }, '/console']);
    template.hasOutput('ConsoleUserPoolId', { Value: { Ref: logicalId(stack.console.userPool) } });
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
