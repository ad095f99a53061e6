/**
 * Twilio in the stack: the brokers and the status function get the same public URL of
 * `/providers/twilio/calls/status` (the API's, or `-c twilioCallbackUrl` behind a custom domain),
 * since Twilio signs the URL it was given; the status function reads the clients' auth tokens only
 * under the telephony-secret prefix; bad settings are refused by name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '#cdk/app.ts';

const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

function synth(context: Record<string, unknown>) {
  const outdir = mkdtempSync(join(tmpdir(), 'switchboard-twilio-'));
  outdirs.push(outdir);
  const built = buildApp(
    new App({
      outdir,
      context: {
        stage: 'dev',
        telephonyApiUrl: 'https://api.telephony.test',
        'aws:cdk:bundling-stacks': [],
        ...context,
      },
    }),
  );
  built.app.synth();
  return Template.fromStack(built.stack);
}

/** TWILIO_CALLBACK_URL of the broker container and of the call-status function. */
function callbackUrls(template: Template): { broker: unknown; callStatus: unknown } {
  const [taskDefinition] = Object.values(template.findResources('AWS::ECS::TaskDefinition'));
  const env = taskDefinition!.Properties.ContainerDefinitions[0].Environment as {
    Name: string;
    Value: unknown;
  }[];
  const functions = Object.values(template.findResources('AWS::Lambda::Function')).filter(
    (f) => f.Properties.Environment?.Variables?.TELEPHONY_PROVIDER !== undefined,
  );
  expect(functions).toHaveLength(1);
  return {
    broker: env.find((e) => e.Name === 'TWILIO_CALLBACK_URL')?.Value,
    callStatus: functions[0]!.Properties.Environment.Variables.TWILIO_CALLBACK_URL,
  };
}

describe('Twilio callbacks in the stack', () => {
  it("gives the brokers and the status function the API's Twilio route by default", () => {
    const { broker, callStatus } = callbackUrls(synth({}));
    expect(JSON.stringify(broker)).toContain('/providers/twilio/calls/status');
    expect(callStatus).toEqual(broker);
  });

  it('uses -c twilioCallbackUrl for both behind a custom domain', () => {
    const url = 'https://calls.example.com/providers/twilio/calls/status';
    expect(callbackUrls(synth({ twilioCallbackUrl: url }))).toEqual({ broker: url, callStatus: url });
  });

  it('refuses a callback URL that is not the route, and "twilio" as the HTTP provider name', () => {
    expect(() => synth({ twilioCallbackUrl: 'http://calls.example.com/x' })).toThrow(/-c twilioCallbackUrl/);
    expect(() => synth({ telephonyProvider: 'twilio' })).toThrow(/-c telephonyProvider/);
  });
});
