/**
 * A broker's configuration for tests that run one in-process against the local cloud: the tables,
 * no ECS agent, no advertised address, nowhere to call or send unless `over` says (each test names
 * its telephony sandbox, LINE sandbox and timings).
 */
import type { BrokerConfig } from '#worker/process.ts';

export function testBrokerConfig(
  tables: { readonly controlTable: string; readonly tasksTable: string },
  over: Partial<BrokerConfig> = {},
): BrokerConfig {
  return {
    controlTable: tables.controlTable,
    tasksTable: tables.tasksTable,
    telephonyApiUrl: 'http://127.0.0.1:9',
    telephonyApiToken: 'unused',
    callStatusCallbackUrl: 'http://127.0.0.1:9/providers/sandbox/calls/status',
    twilioCallbackUrl: 'http://127.0.0.1:9/providers/twilio/calls/status',
    twilioApiUrl: undefined,
    ecsAgentUri: undefined,
    version: 'v1',
    brokerId: `broker-${Math.random().toString(36).slice(2, 8)}`,
    httpHost: '127.0.0.1',
    httpPort: 0,
    advertiseUrl: undefined,
    leaseMs: 30_000,
    claimRecords: 'page',
    idleWaitMs: 200,
    stopGraceMs: 100_000,
    reconcileMarginMs: 30_000,
    defaultMaxCallSeconds: 600,
    holdMs: 60_000,
    recheckMs: 1_000,
    channelsTable: undefined,
    lineApiUrl: 'http://127.0.0.1:9',
    messageRatePerSecond: 2_000,
    messageConcurrency: 128,
    ...over,
  };
}
