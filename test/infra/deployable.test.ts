/**
 * What CloudFormation and IAM would do with the deployed template that the local cloud cannot show
 * (issue "Deployable for real"): the call-status role against the calls a settle makes, the broker
 * service's desired count, dead-letter alarms, FIFO throughput, the job manager's run lease, and
 * settings a real stage must not leave as placeholders.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '#cdk/app.ts';
import { type CfnTemplate, checkConformance } from '#local/iam/policy.ts';
import type { RecordedCall } from '#local/iam/recorder.ts';
import { JOB_MANAGER_RUN, runLeaseMs } from '#shared/fleet/run-lease.ts';
import { functions } from '#shared/functions.ts';
import { keys } from '#shared/jobs/model.ts';

type Json = Record<string, unknown>;
let template: Template;
let resources: Record<string, { Type: string; Properties: Json }>;

const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

function synth(context: Record<string, unknown>) {
  const outdir = mkdtempSync(join(tmpdir(), 'switchboard-deployable-'));
  outdirs.push(outdir);
  const built = buildApp(new App({ outdir, context: { 'aws:cdk:bundling-stacks': [], ...context } }));
  built.app.synth();
  return Template.fromStack(built.stack);
}

const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

beforeAll(() => {
  template = synth({ stage: 'dev', telephonyApiUrl: 'https://api.telephony.test' });
  resources = template.toJSON().Resources;
});

describe('finding 1: call-status may settle a call', () => {
  it("allows every call a final callback's settle makes (lease slot and job counts in the control table)", () => {
    const calls = readFileSync(new URL('../fixtures/iam/call-status-settle.jsonl', import.meta.url), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as RecordedCall);
    expect(
      calls.some((c) => c.via === 'DynamoDB.TransactWriteItems' && c.action === 'dynamodb:UpdateItem'),
    ).toBe(true);
    const report = checkConformance(template.toJSON() as CfnTemplate, calls);
    expect(report.denied.map((d) => `${d.request.action} ${d.request.resource}`)).toEqual([]);
  });

  it('still may not write anything else of the control table (jobs, settings, opt-outs)', () => {
    const write = (pk: string, action = 'dynamodb:UpdateItem'): RecordedCall => ({
      principal: 'call-status',
      via: 'test',
      action,
      resource: 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control',
      context: { 'dynamodb:LeadingKeys': [pk] },
    });
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      write('OPTOUT#acme'),
      write('FLEET'),
      write('CLIENT#acme', 'dynamodb:PutItem'),
      write('LEASE#acme', 'dynamodb:DeleteItem'),
    ]);
    expect(report.denied).toHaveLength(4);
  });

  it('may add a suppression entry (a call outcome asking to opt out), but not delete or replace one', () => {
    const write = (action: string): RecordedCall => ({
      principal: 'call-status',
      via: 'test',
      action,
      resource: 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control',
      context: { 'dynamodb:LeadingKeys': ['SUPPRESS#acme'] },
    });
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      write('dynamodb:UpdateItem'),
      write('dynamodb:DeleteItem'),
      write('dynamodb:PutItem'),
    ]);
    expect(report.denied.map((d) => d.request.action)).toEqual(['dynamodb:DeleteItem', 'dynamodb:PutItem']);
  });
});

describe('finding 3: a deploy never resets the broker fleet, and the new version is known at once', () => {
  it('has no DesiredCount on the broker service (the job manager owns it)', () => {
    const services = ofType('AWS::ECS::Service');
    expect(services).toHaveLength(1);
    expect(services[0]![1].Properties).not.toHaveProperty('DesiredCount');
  });

  it("lets the job manager read the service's primary deployment and its task definition", () => {
    const statements = ofType('AWS::IAM::Policy').flatMap(
      ([, p]) => (p.Properties.PolicyDocument as { Statement: { Action: string | string[] }[] }).Statement,
    );
    const actions = statements.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
    expect(actions).toEqual(expect.arrayContaining(['ecs:DescribeServices', 'ecs:DescribeTaskDefinition']));
  });
});

describe('finding 4: no secret is frozen into a function at deploy time', () => {
  it('resolves no secret into any function environment and keeps no Secrets Manager callback secret', () => {
    for (const [id, fn] of ofType('AWS::Lambda::Function')) {
      expect(JSON.stringify(fn.Properties.Environment ?? {}), id).not.toMatch(
        /resolve:secretsmanager|SecretString|TELEPHONY_CALLBACK_SECRET/,
      );
    }
  });

  it('lets call-status read its callback secret item (TELEPHONY#…) of the channels table, and no LINE channel', () => {
    const call = (pk: string): RecordedCall => ({
      principal: 'call-status',
      via: 'test',
      action: 'dynamodb:GetItem',
      resource: 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-channels',
      context: { 'dynamodb:LeadingKeys': [pk] },
    });
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      call('TELEPHONY#default'),
      call('1656000001'),
    ]);
    expect(report.denied.map((d) => `${d.request.action} ${JSON.stringify(d.request.context)}`)).toEqual([
      'dynamodb:GetItem {"dynamodb:LeadingKeys":["1656000001"]}',
    ]);
  });
});

describe('finding 5: a real stage refuses placeholder settings', () => {
  it('fails synth for a non-local stage without -c telephonyApiUrl, or with a placeholder', () => {
    expect(() => synth({ stage: 'dev' })).toThrow(/telephonyApiUrl.*required/);
    expect(() => synth({ stage: 'prod', telephonyApiUrl: 'https://telephony.example.com' })).toThrow(
      /real https URL/,
    );
    expect(() => synth({ stage: 'dev', telephonyApiUrl: 'http://api.telephony.test' })).toThrow(
      /real https URL/,
    );
  });

  it('synthesizes the local stage (npm test, npm run synth) with the placeholder', () => {
    expect(() => synth({ stage: 'local' })).not.toThrow();
  });
});

describe('finding 6: every dead-letter queue has an alarm', () => {
  it('alarms on the visible messages of each queue that is some queue’s DLQ', () => {
    const dlqIds = ofType('AWS::SQS::Queue').flatMap(([, q]) => {
      const target = (q.Properties.RedrivePolicy as { deadLetterTargetArn?: { 'Fn::GetAtt': [string] } })
        ?.deadLetterTargetArn;
      return target ? [target['Fn::GetAtt'][0]] : [];
    });
    expect(dlqIds.length).toBeGreaterThanOrEqual(2);
    const alarmed = ofType('AWS::CloudWatch::Alarm')
      .filter(([, a]) => a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible')
      .flatMap(([, a]) =>
        (a.Properties.Dimensions as { Name: string; Value: { 'Fn::GetAtt': [string, string] } }[]).map(
          (d) => d.Value['Fn::GetAtt'][0],
        ),
      );
    for (const dlq of dlqIds) expect(alarmed, dlq).toContain(dlq);
  });
});

describe('finding 7: the webhook FIFO queue is in high-throughput mode', () => {
  it('scopes deduplication and throughput to the message group', () => {
    template.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: 'switchboard-dev-webhook-events.fifo',
      DeduplicationScope: 'messageGroup',
      FifoThroughputLimit: 'perMessageGroupId',
    });
  });
});

describe('finding 8: the job manager never runs twice at once', () => {
  const jobManagerId = () =>
    ofType('AWS::Lambda::Function').find(
      ([, f]) => f.Properties.Description === 'Switchboard job-manager',
    )![0];

  it('no async retries and a one-minute event age; one run at a time by its run lease, not reserved concurrency', () => {
    const id = jobManagerId();
    template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: id },
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 60,
    });
    // Overlap is kept out by the run lease (issue 35 #1; test/integration/fleet/job-manager.test.ts
    // "the run lease"): it lasts longer than a run may (the function's timeout, and a margin), so a
    // run Lambda stops at its timeout cannot overlap the next; and less than the schedule's minute,
    // so such a run's lease has expired when the next minute's run comes.
    const timeout = resources[id]!.Properties.Timeout as number;
    expect(timeout).toBe(functions['job-manager'].timeoutSeconds);
    expect(runLeaseMs(timeout)).toBeGreaterThan(timeout * 1000);
    expect(runLeaseMs(timeout)).toBeLessThanOrEqual(60_000);
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      Targets: Match.arrayWith([Match.objectLike({ Arn: { 'Fn::GetAtt': [id, 'Arn'] } })]),
    });
  });

  it('may take, renew and release its run lease in the control table (RUN#job-manager)', () => {
    const call = (action: string): RecordedCall => ({
      principal: 'job-manager',
      via: 'test',
      action,
      resource: 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control',
      context: { 'dynamodb:LeadingKeys': [keys.runLease(JOB_MANAGER_RUN).pk] },
    });
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      call('dynamodb:GetItem'),
      call('dynamodb:PutItem'),
      call('dynamodb:UpdateItem'),
    ]);
    expect(report.denied).toEqual([]);
  });

  it('reserves no concurrency on any function: the stack deploys into an account whose quota is 10', () => {
    // Lambda keeps 100 units of the account's concurrency unreserved: any reservation fails to
    // create where the quota is at most 100 (new accounts often start at 10 or 50).
    for (const [id, f] of ofType('AWS::Lambda::Function'))
      expect(f.Properties.ReservedConcurrentExecutions, id).toBeUndefined();
  });
});

describe('also worth fixing', () => {
  it('has no TTL on the control table, whose lease expiresAt is in milliseconds', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'switchboard-dev-control',
      TimeToLiveSpecification: Match.absent(),
    });
  });

  it("lets browsers upload to the bucket from the console's origin, and the configured ones", () => {
    // The console is served by the HTTP API: its origin is the API's, in the stack's region.
    const [, bucket] = ofType('AWS::S3::Bucket').find(([, b]) => b.Properties.CorsConfiguration)!;
    const cors = bucket.Properties.CorsConfiguration as {
      CorsRules: { AllowedMethods: string[]; AllowedOrigins: unknown[] }[];
    };
    const [rule] = cors.CorsRules;
    expect(rule?.AllowedMethods).toEqual(['PUT', 'GET']);
    expect(JSON.stringify(rule?.AllowedOrigins)).toContain('https://*.execute-api.');
    const withOrigin = synth({
      stage: 'dev',
      telephonyApiUrl: 'https://api.telephony.test',
      uploadOrigins: 'https://console.acme.test',
    });
    withOrigin.hasResourceProperties('AWS::S3::Bucket', {
      CorsConfiguration: {
        CorsRules: [
          Match.objectLike({
            AllowedMethods: ['PUT', 'GET'],
            AllowedOrigins: Match.arrayWith(['https://console.acme.test']),
          }),
        ],
      },
    });
    expect(() =>
      synth({ stage: 'dev', telephonyApiUrl: 'https://api.telephony.test', uploadOrigins: '*' }),
    ).toThrow(/uploadOrigins/);
  });

  it('keeps queues with the stack in prod; outputs the uploads bucket', () => {
    const prod = synth({ stage: 'prod', telephonyApiUrl: 'https://api.telephony.test' }).toJSON();
    const queues = Object.values(
      prod.Resources as Record<string, { Type: string; DeletionPolicy?: string }>,
    ).filter((r) => r.Type === 'AWS::SQS::Queue');
    expect(queues.map((q) => q.DeletionPolicy)).toEqual(queues.map(() => 'Retain'));
    expect(Object.keys(template.toJSON().Outputs)).toEqual(
      expect.arrayContaining([
        'UploadsBucketName',
        'TelephonyApiTokenSecretArn',
        'ChannelAdminRoleArn',
        'IngestDlqRedriveCommand',
      ]),
    );
  });
});
