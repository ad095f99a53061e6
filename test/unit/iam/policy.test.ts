import { describe, expect, it } from 'vitest';
import {
  type CfnTemplate,
  checkConformance,
  decide,
  type ResolvedStatement,
  wildcardMatch,
} from '#local/iam/policy.ts';
import type { RecordedCall } from '#local/iam/recorder.ts';
import { iamRequestsOf, normaliseName } from '#local/iam/requests.ts';

const S = (value: string) => ({ S: value });

describe('what IAM is asked for an SDK call', () => {
  it('authorizes a transaction item by item, each with its own action and partition key', () => {
    const requests = iamRequestsOf('DynamoDBClient', 'TransactWriteItemsCommand', {
      TransactItems: [
        {
          ConditionCheck: { TableName: 'switchboard-it-control', Key: { pk: S('LEASE#a'), sk: S('LEASE') } },
        },
        { Update: { TableName: 'switchboard-it-tasks', Key: { pk: S('job#3'), sk: S('t1') } } },
        { Put: { TableName: 'switchboard-it-events', Item: { pk: S('EVENT#x') } } },
      ],
    });
    expect(
      requests.map((r) => [r.action, r.resource.split('table/')[1], r.context['dynamodb:LeadingKeys']]),
    ).toEqual([
      ['dynamodb:ConditionCheckItem', 'switchboard-STAGE-control', ['LEASE#a']],
      ['dynamodb:UpdateItem', 'switchboard-STAGE-tasks', ['job#3']],
      ['dynamodb:PutItem', 'switchboard-STAGE-events', ['EVENT#x']],
    ]);
  });

  it('maps batches, index queries, SQS batches and multipart parts to the actions IAM checks', () => {
    const [batch] = iamRequestsOf('DynamoDBClient', 'BatchWriteItemCommand', {
      RequestItems: { 'switchboard-x-tasks': [{ PutRequest: { Item: { pk: S('j#1') } } }] },
    });
    expect(batch).toMatchObject({
      action: 'dynamodb:BatchWriteItem',
      context: { 'dynamodb:LeadingKeys': ['j#1'] },
    });
    const [query] = iamRequestsOf('DynamoDBClient', 'QueryCommand', {
      TableName: 'switchboard-x-control',
      IndexName: 'byStatus',
      KeyConditionExpression: 'statusKey = :clients',
      ExpressionAttributeValues: { ':clients': S('CLIENTS') },
    });
    expect(query!.resource).toMatch(/table\/switchboard-STAGE-control\/index\/byStatus$/);
    // The index's partition key value is the leading key AWS evaluates.
    expect(query!.context).toEqual({ 'dynamodb:LeadingKeys': ['CLIENTS'] });
    const [send] = iamRequestsOf('SQSClient', 'SendMessageBatchCommand', {
      QueueUrl: 'http://127.0.0.1:4566/000000000000/switchboard-x-webhook-events.fifo',
    });
    expect(send).toMatchObject({
      action: 'sqs:SendMessage',
      resource: expect.stringMatching(/webhook-events\.fifo$/),
    });
    const [part] = iamRequestsOf('S3Client', 'UploadPartCommand', {
      Bucket: 'switchboard-x-uploads',
      Key: 'reports/a',
    });
    expect(part).toMatchObject({
      action: 's3:PutObject',
      resource: 'arn:aws:s3:::switchboard-STAGE-uploads/reports/a',
    });
  });

  it('normalises stage names on both sides, whatever the stage', () => {
    expect(normaliseName('switchboard-prod-ingest-dlq')).toBe('switchboard-STAGE-ingest-dlq');
    expect(normaliseName('switchboard-it-9-webhook-events.fifo')).toBe(
      'switchboard-STAGE-webhook-events.fifo',
    );
    expect(normaliseName('someone-else')).toBe('someone-else');
  });
});

const allow = (actions: string[], resources: string[], conditions: ResolvedStatement['conditions'] = []) =>
  ({ effect: 'Allow', actions, resources, principals: [], conditions, source: 'test' }) as ResolvedStatement;
const table = 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control';

describe('IAM decisions', () => {
  it('matches wildcards in actions (any case) and resources', () => {
    expect(wildcardMatch('dynamodb:Get*', 'DynamoDB:GetItem', true)).toBe(true);
    expect(wildcardMatch(`${table}/index/*`, `${table}/index/byStatus`)).toBe(true);
    expect(wildcardMatch(table, `${table}/index/byStatus`)).toBe(false);
  });

  it('holds dynamodb:LeadingKeys for every key; an explicit Deny wins', () => {
    const leases = allow(
      ['dynamodb:UpdateItem'],
      [table],
      [{ operator: 'ForAllValues:StringLike', key: 'dynamodb:LeadingKeys', values: ['LEASE#*'] }],
    );
    const request = (keys: string[]) => ({
      action: 'dynamodb:UpdateItem',
      resource: table,
      context: { 'dynamodb:LeadingKeys': keys },
    });
    expect(decide([leases], request(['LEASE#a'])).allowed).toBe(true);
    expect(decide([leases], request(['LEASE#a', 'CLIENT#a'])).allowed).toBe(false);
    const deny = { ...allow(['dynamodb:*'], ['*']), effect: 'Deny' } as ResolvedStatement;
    expect(decide([leases, deny], request(['LEASE#a']))).toMatchObject({
      allowed: false,
      reason: /explicitly denied/,
    });
  });

  it('does not allow through a condition it cannot evaluate', () => {
    const odd = allow(
      ['dynamodb:GetItem'],
      [table],
      [{ operator: 'NumericLessThan', key: 'aws:EpochTime', values: ['1'] }],
    );
    expect(decide([odd], { action: 'dynamodb:GetItem', resource: table, context: {} })).toMatchObject({
      allowed: false,
      reason: /could not be evaluated/,
    });
  });
});

describe('what IAM is asked for an SES v2 call', () => {
  const grant = allow(
    ['ses:SendEmail', 'ses:SendBulkEmail'],
    [
      'arn:aws:ses:REGION:ACCOUNT:identity/*',
      'arn:aws:ses:REGION:ACCOUNT:configuration-set/switchboard-STAGE-email',
    ],
  );

  it("asks for the send on the From address's domain identity and on the configuration set", () => {
    const requests = iamRequestsOf('SESv2Client', 'SendBulkEmailCommand', {
      FromEmailAddress: '"ショップ" <news@shop.example.jp>',
      ConfigurationSetName: 'switchboard-prod-email',
    });
    expect(requests.map((r) => [r.action, r.resource])).toEqual([
      ['ses:SendBulkEmail', 'arn:aws:ses:REGION:ACCOUNT:identity/shop.example.jp'],
      ['ses:SendBulkEmail', 'arn:aws:ses:REGION:ACCOUNT:configuration-set/switchboard-STAGE-email'],
    ]);
    expect(requests.every((r) => decide([grant], r).allowed)).toBe(true);
  });

  it('refuses a send naming another configuration set, and GetAccount without its own grant', () => {
    const [, other] = iamRequestsOf('SESv2Client', 'SendEmailCommand', {
      FromEmailAddress: 'news@shop.example.jp',
      ConfigurationSetName: 'someone-elses',
    });
    expect(decide([grant], other!).allowed).toBe(false);
    const [account] = iamRequestsOf('SESv2Client', 'GetAccountCommand', {});
    expect(account).toEqual({ action: 'ses:GetAccount', resource: '*', context: {} });
    expect(decide([grant], account!).allowed).toBe(false);
  });
});

describe('the region a call goes to', () => {
  const start = (region?: string) =>
    iamRequestsOf(
      'ConnectClient',
      'StartOutboundVoiceContactCommand',
      { InstanceId: '11111111-2222-3333-4444-555555555555' },
      ...(region === undefined ? [] : [region]),
    )[0]!;
  const stackRegionOnly = allow(
    ['connect:StartOutboundVoiceContact'],
    ['arn:aws:connect:REGION:ACCOUNT:instance/11111111-2222-3333-4444-555555555555/contact/*'],
  );

  it("is the deployment's own unless named: a grant of the stack's region allows it", () => {
    expect(start().resource).toBe(
      'arn:aws:connect:REGION:ACCOUNT:instance/11111111-2222-3333-4444-555555555555/contact/*',
    );
    expect(decide([stackRegionOnly], start()).allowed).toBe(true);
  });

  it("stays in the ARN when it is another: a grant of the stack's region does not allow it", () => {
    expect(start('eu-west-2').resource).toMatch(/^arn:aws:connect:eu-west-2:/);
    expect(decide([stackRegionOnly], start('eu-west-2')).allowed).toBe(false);
  });
});

describe('conformance of recorded calls against a template', () => {
  const template: CfnTemplate = {
    Resources: {
      Fn: {
        Type: 'AWS::Lambda::Function',
        Properties: { Description: 'Switchboard reader', Role: { 'Fn::GetAtt': ['FnRole', 'Arn'] } },
      },
      FnRole: { Type: 'AWS::IAM::Role', Properties: {} },
      Channels: {
        Type: 'AWS::DynamoDB::Table',
        Properties: {
          TableName: 'switchboard-prod-channels',
          SSESpecification: { KMSMasterKeyId: { 'Fn::GetAtt': ['Key', 'Arn'] } },
        },
      },
      Key: {
        Type: 'AWS::KMS::Key',
        Properties: {
          KeyPolicy: {
            Statement: [
              {
                Effect: 'Allow',
                Principal: {
                  AWS: {
                    'Fn::Join': [
                      '',
                      ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':root'],
                    ],
                  },
                },
                Action: ['kms:Describe*', 'kms:Create*'],
                Resource: '*',
              },
              {
                Effect: 'Allow',
                Principal: { AWS: { 'Fn::GetAtt': ['FnRole', 'Arn'] } },
                Action: 'kms:Decrypt',
                Resource: '*',
              },
            ],
          },
        },
      },
      Policy: {
        Type: 'AWS::IAM::Policy',
        Properties: {
          Roles: [{ Ref: 'FnRole' }],
          PolicyDocument: {
            Statement: [
              {
                Effect: 'Allow',
                Action: ['dynamodb:GetItem', 'dynamodb:Query'],
                Resource: { 'Fn::GetAtt': ['Channels', 'Arn'] },
              },
            ],
          },
        },
      },
    },
  };
  const call = (action: string, principal = 'reader'): RecordedCall => ({
    principal,
    via: 'test',
    action,
    resource: 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-channels',
    context: {},
  });

  it('allows what the role and the key policy allow, lists what no call used, refuses the rest', () => {
    const report = checkConformance(template, [
      call('dynamodb:GetItem'),
      call('dynamodb:PutItem'),
      call('dynamodb:GetItem', 'stranger'),
    ]);
    expect(report.denied.map((d) => d.request.action)).toEqual(['dynamodb:PutItem']);
    expect(report.unknownPrincipals).toEqual(['stranger']);
    expect(report.unused.get('reader')).toEqual([
      'dynamodb:Query arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-channels',
    ]);
  });

  it('needs the key: a key policy that neither names the role nor delegates Decrypt to IAM refuses the read', () => {
    const keyPolicy = (template.Resources.Key!.Properties!.KeyPolicy as { Statement: unknown[] }).Statement;
    const withoutRole: CfnTemplate = {
      Resources: {
        ...template.Resources,
        Key: { Type: 'AWS::KMS::Key', Properties: { KeyPolicy: { Statement: [keyPolicy[0]] } } },
      },
    };
    const report = checkConformance(withoutRole, [call('dynamodb:GetItem')]);
    expect(report.denied.map((d) => d.request.action)).toEqual(['kms:Decrypt']);
  });
});
