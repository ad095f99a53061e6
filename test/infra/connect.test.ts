/**
 * Amazon Connect in the stack: with `-c connectInstanceIds`, the EventBridge rule on the instances'
 * contact events targets connect-events, and the brokers may start, describe and stop contacts of
 * those instances only; without it, neither exists. cdk-nag stays clean.
 */
import { Annotations, Match, type Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { synthesizer } from '../support/synth.ts';

const synth = synthesizer('connect', { stage: 'dev', telephonyApiUrl: 'https://api.telephony.test' });

const A = '11111111-2222-4333-8444-555555555555';
const B = '66666666-7777-4888-8999-aaaaaaaaaaaa';

/** Every statement of every IAM policy in the template that grants a `connect:` action. */
function connectStatements(template: Template): { Action: string | string[]; Resource: unknown }[] {
  const policies = template.findResources('AWS::IAM::Policy');
  return Object.values(policies).flatMap((p) =>
    (p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[]).filter(
      (s) => [s.Action].flat().some((a) => a.startsWith('connect:')),
    ),
  );
}

describe('Amazon Connect instances given', () => {
  const { stack, template } = synth({ connectInstanceIds: `${A},${B}` });

  it("routes the instances' contact events to connect-events", () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.connect'],
        'detail-type': ['Amazon Connect Contact Event'],
        detail: {
          instanceArn: [
            { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp(`:instance/${A}$`)])] },
            { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp(`:instance/${B}$`)])] },
          ],
          eventType: ['INITIATED', 'CONNECTED_TO_SYSTEM', 'DISCONNECTED'],
          // Contacts Switchboard started (StartOutboundVoiceContact): no inbound or transferred one.
          initiationMethod: ['API'],
        },
      },
      Targets: [
        Match.objectLike({ RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 3600 } }),
      ],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Principal: 'events.amazonaws.com',
      Action: 'lambda:InvokeFunction',
    });
  });

  it('lets the brokers start, describe and stop contacts of those instances only', () => {
    const statements = connectStatements(template);
    expect(statements).toHaveLength(2);
    const broker = statements.find((s) => [s.Action].flat().includes('connect:StartOutboundVoiceContact'))!;
    expect([broker.Action].flat().sort()).toEqual([
      'connect:DescribeContact',
      'connect:StartOutboundVoiceContact',
      'connect:StopContact',
    ]);
    const resources = JSON.stringify(broker.Resource);
    expect(resources).toContain(`:instance/${A}/contact/*`);
    expect(resources).toContain(`:instance/${B}/contact/*`);
    expect(resources).not.toMatch(/"\*"/);
  });

  it("sends contacts' ends to connect-opt-outs, which may read those instances' contact attributes only", () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.connect'],
        'detail-type': ['Amazon Connect Contact Event'],
        detail: {
          instanceArn: [
            { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp(`:instance/${A}$`)])] },
            { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp(`:instance/${B}$`)])] },
          ],
          eventType: ['DISCONNECTED'],
        },
      },
      Targets: [
        Match.objectLike({ RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 3600 } }),
      ],
    });
    const reads = connectStatements(template).filter((s) =>
      [s.Action].flat().includes('connect:GetContactAttributes'),
    );
    expect(reads).toHaveLength(1);
    expect([reads[0]!.Action].flat()).toEqual(['connect:GetContactAttributes']);
    const resources = JSON.stringify(reads[0]!.Resource);
    expect(resources).toContain(`:instance/${A}/contact/*`);
    expect(resources).toContain(`:instance/${B}/contact/*`);
    expect(resources).not.toMatch(/"\*"/);
    // Outside the VPC (Connect's API has no endpoint there), and writing only suppression entries.
    const fn = Object.values(template.findResources('AWS::Lambda::Function')).find((f) =>
      String(f.Properties.Description ?? '').includes('connect-opt-outs'),
    );
    expect(fn).toBeDefined();
    expect(fn!.Properties.VpcConfig).toBeUndefined();
    const policy = Object.values(template.findResources('AWS::IAM::Policy')).find((p) =>
      JSON.stringify(p.Properties.PolicyDocument).includes('connect:GetContactAttributes'),
    )!;
    const statements = policy.Properties.PolicyDocument.Statement as {
      Action: string | string[];
      Condition?: unknown;
    }[];
    const writes = statements.filter((s) =>
      [s.Action].flat().some((a) => /^dynamodb:(Put|Update|Delete|BatchWrite)/.test(a)),
    );
    expect(writes).toHaveLength(1);
    expect(JSON.stringify(writes[0]!.Condition)).toContain('SUPPRESS#*');
    expect(writes.map((s) => s.Action)).toEqual(['dynamodb:UpdateItem']);
  });

  it('passes cdk-nag', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual([]);
  });
});

describe('no Amazon Connect instance', () => {
  it('has no contact-event rule and no Connect permission', () => {
    const { template } = synth({});
    const contactRules = Object.values(template.findResources('AWS::Events::Rule')).filter((rule) =>
      JSON.stringify(rule.Properties.EventPattern?.source ?? []).includes('aws.connect'),
    );
    expect(contactRules).toEqual([]);
    expect(connectStatements(template)).toEqual([]);
  });

  it('refuses an instance id that is not one, naming the setting', () => {
    expect(() => synth({ connectInstanceIds: 'arn:aws:connect:x' })).toThrow(/-c connectInstanceIds/);
  });
});
