/**
 * A broker's configuration for tests that run one in-process against the local cloud: the tables,
 * no ECS agent, no advertised address, nowhere to call or send unless the overrides say (each test
 * names its telephony sandbox, LINE sandbox and timings). Every setting not named is production's
 * default, except a shorter idle turn and re-check.
 */
import { JOB_SERIES_RETENTION_DAYS } from '#shared/adapters/dynamo-job-series.ts';
import { DEFAULT_BROKER_SETTINGS } from '#shared/broker/broker.ts';
import { DEFAULT_JOB_SERIES_SETTINGS } from '#shared/broker/job-series.ts';
import { DEFAULT_MESSAGE_SETTINGS } from '#shared/broker/serve-messages.ts';
import type { BrokerConfig } from '#worker/config.ts';

/** Overrides of a broker's configuration: a section (`broker`, `messages`, `telephony`…) in part. */
export type BrokerConfigOverrides = {
  readonly [K in keyof BrokerConfig]?: BrokerConfig[K] extends string | number | undefined
    ? BrokerConfig[K]
    : Partial<BrokerConfig[K]>;
};

export function testBrokerConfig(
  tables: { readonly controlTable: string; readonly tasksTable: string },
  ...overrides: readonly BrokerConfigOverrides[]
): BrokerConfig {
  let config: BrokerConfig = {
    controlTable: tables.controlTable,
    tasksTable: tables.tasksTable,
    channelsTable: undefined,
    broker: {
      ...DEFAULT_BROKER_SETTINGS,
      callbackUrl: 'http://127.0.0.1:9/providers/sandbox/calls/status',
      brokerId: `broker-${Math.random().toString(36).slice(2, 8)}`,
      version: 'v1',
      idleWaitMs: 200,
      recheckMs: 1_000,
    },
    messages: DEFAULT_MESSAGE_SETTINGS,
    jobSeries: { ...DEFAULT_JOB_SERIES_SETTINGS, retentionDays: JOB_SERIES_RETENTION_DAYS },
    telephony: {
      http: { baseUrl: 'http://127.0.0.1:9', apiToken: 'unused' },
      twilio: { callbackUrl: 'http://127.0.0.1:9/providers/twilio/calls/status' },
    },
    lineApiUrl: 'http://127.0.0.1:9',
    email: undefined,
    sms: undefined,
    ecsAgentUri: undefined,
    ecsMetadataUri: undefined,
    httpHost: '127.0.0.1',
    httpPort: 0,
    advertiseUrl: undefined,
  };
  for (const over of overrides) config = withOverrides(config, over);
  return config;
}

/** `config` with `over` laid on it, section by section. */
function withOverrides(config: BrokerConfig, over: BrokerConfigOverrides): BrokerConfig {
  const merged: Record<string, unknown> = { ...config };
  for (const [key, value] of Object.entries(over)) {
    const base = merged[key];
    merged[key] =
      typeof base === 'object' && base !== null && typeof value === 'object' && value !== null
        ? { ...base, ...value }
        : value;
  }
  return merged as unknown as BrokerConfig;
}
