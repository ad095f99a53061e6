/**
 * Twilio in the stack: the brokers and the status function get the same public URL of
 * `/providers/twilio/calls/status` (the API's, or `-c twilioCallbackUrl` behind a custom domain),
 * since Twilio signs the URL it was given; the status function reads the clients' auth tokens only
 * under the telephony-secret prefix; bad settings are refused by name.
 */
import type { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { synthesizer } from '../support/synth.ts';

const synthesize = synthesizer('twilio', { stage: 'dev', telephonyApiUrl: 'https://api.telephony.test' });
const synth = (context: Record<string, unknown>) => synthesize(context).template;

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
