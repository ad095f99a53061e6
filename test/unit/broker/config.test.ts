import { describe, expect, it } from 'vitest';
import { DEFAULT_BROKER_SETTINGS } from '#shared/broker/broker.ts';
import { DEFAULT_MESSAGE_SETTINGS } from '#shared/broker/serve-messages.ts';
import { ConfigError } from '#shared/config.ts';
import { DEFAULT_MAX_CALL_SECONDS } from '#shared/jobs/model.ts';
import { readBrokerConfig } from '#worker/config.ts';

/** What every deployment sets (the CDK's `BrokerFleet`, the local cloud's brokers). */
const REQUIRED = {
  CONTROL_TABLE: 'control',
  TASKS_TABLE: 'tasks',
  TELEPHONY_API_URL: 'https://telephony.example',
  TELEPHONY_API_TOKEN: 'token',
  CALL_STATUS_CALLBACK_URL: 'https://api.example/providers/acme/calls/status',
  BROKER_VERSION: 'v7',
};

describe("the broker's configuration", () => {
  it('refuses to start without a required variable, naming it', () => {
    for (const name of Object.keys(REQUIRED)) {
      const env = { ...REQUIRED, [name]: '' };
      expect(() => readBrokerConfig(env)).toThrow(ConfigError);
      expect(() => readBrokerConfig(env)).toThrow(name);
    }
  });

  it("takes the domain's defaults for everything a deployment does not set, the longest call included", () => {
    const config = readBrokerConfig(REQUIRED);
    expect(config.broker).toMatchObject({ ...DEFAULT_BROKER_SETTINGS, version: 'v7' });
    expect(config.broker.defaultMaxCallSeconds).toBe(DEFAULT_MAX_CALL_SECONDS);
    expect(config.messages).toEqual(DEFAULT_MESSAGE_SETTINGS);
    expect(config.channelsTable).toBeUndefined();
    expect(config.telephony.twilio.callbackUrl).toBe('https://api.example/providers/twilio/calls/status');
  });

  it('lays what the environment sets on the section that uses it', () => {
    const config = readBrokerConfig({
      ...REQUIRED,
      LEASE_MS: '3000',
      DEFAULT_MAX_CALL_SECONDS: '4',
      LINE_RATE_PER_SECOND: '400',
      MESSAGE_CONCURRENCY: '32',
      JOB_SERIES_SECONDS: '1',
    });
    expect(config.broker).toMatchObject({ leaseMs: 3_000, defaultMaxCallSeconds: 4 });
    expect(config.messages).toMatchObject({ messageRatePerSecond: 400, messageConcurrency: 32 });
    expect(config.jobSeries.windowSeconds).toBe(1);
  });
});
