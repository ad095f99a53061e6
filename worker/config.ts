/**
 * The broker's configuration, read once from the environment at start: where its stores and
 * providers are, and the domain's settings, which are handed to the broker as they are. A missing
 * required variable throws `ConfigError`; every other setting has the domain's default, so a
 * deployment names only what differs (the CDK's `BrokerFleet`, the local cloud's `#brokerEnv`).
 */
import { randomUUID } from 'node:crypto';
import { JOB_SERIES_RETENTION_DAYS } from '#shared/adapters/dynamo-job-series.ts';
import type { TelephonyProvidersConfig } from '#shared/adapters/telephony-providers.ts';
import { TWILIO_LOOKUP_SETTLE_MS } from '#shared/adapters/twilio-telephony.ts';
import { type BrokerSettings, DEFAULT_BROKER_SETTINGS } from '#shared/broker/broker.ts';
import { DEFAULT_JOB_SERIES_SETTINGS, type JobSeriesSettings } from '#shared/broker/job-series.ts';
import { DEFAULT_MESSAGE_SETTINGS, type MessageServeSettings } from '#shared/broker/serve-messages.ts';
import {
  DEFAULT_EMAIL_SETTINGS,
  DEFAULT_SMS_SETTINGS,
  type UnkeyedServeSettings,
} from '#shared/broker/serve-unkeyed.ts';
import { ConfigError, getNumberFromEnv, getOptionalStringFromEnv, getStringFromEnv } from '#shared/config.ts';
import { DEFAULT_LINE_API_URL } from '#shared/line/messaging-client.ts';

export interface BrokerConfig {
  readonly controlTable: string;
  readonly tasksTable: string;
  /** The LINE channels (access tokens) message jobs send through; without it only calls are served. */
  readonly channelsTable: string | undefined;
  /** The broker's own settings (lease, calls, idle turns, stop grace): `Broker`'s, as they are. */
  readonly broker: BrokerSettings;
  /** How message jobs are sent: `MessageServer`'s settings, as they are. */
  readonly messages: MessageServeSettings;
  /** Each served job's series (the console's chart), and the days it is kept before TTL removes it. */
  readonly jobSeries: JobSeriesSettings & { readonly retentionDays: number };
  /** The deployment's HTTP provider, and Twilio's API and the public URL of its status route. */
  readonly telephony: Pick<TelephonyProvidersConfig, 'http' | 'twilio'>;
  /** The Messaging API: LINE's unless set (the local stand-in). */
  readonly lineApiUrl: string;
  /**
   * Email jobs through SES, when the deployment has a configuration set (`SES_CONFIGURATION_SET`):
   * its name, this broker's share of the account's sending rate (`SES_RATE_SHARE`, default 1), and
   * how email is served.
   */
  readonly email:
    | {
        readonly configurationSet: string;
        readonly rateShare: number;
        readonly settings: UnkeyedServeSettings;
      }
    | undefined;
  /**
   * SMS jobs through End User Messaging SMS, when the deployment has a configuration set
   * (`SMS_CONFIGURATION_SET`): its name, and how texts are served.
   */
  readonly sms: { readonly configurationSet: string; readonly settings: UnkeyedServeSettings } | undefined;
  /** The ECS agent (`ECS_AGENT_URI`); absent outside ECS: protection is then a logged no-op. */
  readonly ecsAgentUri: string | undefined;
  /** The ECS task metadata endpoint (`ECS_CONTAINER_METADATA_URI_V4`, set by Fargate). */
  readonly ecsMetadataUri: string | undefined;
  readonly httpHost: string;
  readonly httpPort: number;
  /** How the call-status route reaches this broker; found from the ECS task metadata when unset. */
  readonly advertiseUrl: string | undefined;
}

/** The numeric settings of `T`, each by the environment variable that may set it. */
type NumberVariables<T> = { readonly [K in keyof T as T[K] extends number ? K : never]?: string };

/**
 * The broker's settings a deployment or a local drill may set. `DEFAULT_MAX_CALL_SECONDS` is unset
 * in AWS (the CDK does not name it): a job without its own longest call then gets the one default,
 * `DEFAULT_MAX_CALL_SECONDS` of `shared/jobs/model.ts`; the local drills shorten it.
 */
const BROKER_VARIABLES = {
  leaseMs: 'LEASE_MS',
  idleWaitMs: 'BROKER_IDLE_WAIT_MS',
  stopGraceMs: 'BROKER_STOP_GRACE_MS',
  reconcileMarginMs: 'RECONCILE_MARGIN_MS',
  defaultMaxCallSeconds: 'DEFAULT_MAX_CALL_SECONDS',
  recheckMs: 'BROKER_RECHECK_MS',
} as const satisfies NumberVariables<BrokerSettings>;

const MESSAGE_VARIABLES = {
  messageRatePerSecond: 'LINE_RATE_PER_SECOND',
  multicastRatePerSecond: 'LINE_MULTICAST_RATE_PER_SECOND',
  messageConcurrency: 'MESSAGE_CONCURRENCY',
  messageQueueCapacity: 'MESSAGE_QUEUE_CAPACITY',
} as const satisfies NumberVariables<MessageServeSettings>;

/** `defaults`, with each setting named in `variables` read from the environment when set there. */
function withNumbersFromEnv<T extends object>(
  defaults: T,
  variables: NumberVariables<T>,
  env: NodeJS.ProcessEnv,
): T {
  const read = Object.entries(variables).map(([key, name]) => [
    key,
    getNumberFromEnv(name as string, defaults[key as keyof T] as number, env),
  ]);
  return { ...defaults, ...Object.fromEntries(read) };
}

/** Reads the broker's configuration from the environment; throws `ConfigError` on a missing value. */
export function readBrokerConfig(env: NodeJS.ProcessEnv = process.env): BrokerConfig {
  const optional = (name: string) => getOptionalStringFromEnv(name, env);
  const callbackUrl = getStringFromEnv('CALL_STATUS_CALLBACK_URL', env);
  const broker = {
    ...DEFAULT_BROKER_SETTINGS,
    callbackUrl,
    brokerId: optional('BROKER_ID') ?? `broker-${randomUUID()}`,
    version: getStringFromEnv('BROKER_VERSION', env),
  };
  return {
    controlTable: getStringFromEnv('CONTROL_TABLE', env),
    tasksTable: getStringFromEnv('TASKS_TABLE', env),
    channelsTable: optional('CHANNELS_TABLE'),
    broker: withNumbersFromEnv(broker, BROKER_VARIABLES, env),
    messages: withNumbersFromEnv(DEFAULT_MESSAGE_SETTINGS, MESSAGE_VARIABLES, env),
    jobSeries: {
      ...DEFAULT_JOB_SERIES_SETTINGS,
      windowSeconds: getNumberFromEnv('JOB_SERIES_SECONDS', DEFAULT_JOB_SERIES_SETTINGS.windowSeconds, env),
      retentionDays: getNumberFromEnv('JOB_SERIES_RETENTION_DAYS', JOB_SERIES_RETENTION_DAYS, env),
    },
    telephony: readTelephony(callbackUrl, env),
    lineApiUrl: optional('LINE_API_URL') ?? DEFAULT_LINE_API_URL,
    email: readEmail(env),
    sms: readSms(env),
    ecsAgentUri: optional('ECS_AGENT_URI'),
    ecsMetadataUri: optional('ECS_CONTAINER_METADATA_URI_V4'),
    httpHost: optional('BROKER_HTTP_HOST') ?? '127.0.0.1',
    httpPort: getNumberFromEnv('BROKER_HTTP_PORT', 0, env),
    advertiseUrl: optional('BROKER_ADVERTISE_URL'),
  };
}

const EMAIL_VARIABLES = {
  concurrency: 'EMAIL_CONCURRENCY',
  inDoubtWaitMs: 'EMAIL_IN_DOUBT_WAIT_MS',
} as const satisfies NumberVariables<UnkeyedServeSettings>;

const SMS_VARIABLES = {
  concurrency: 'SMS_CONCURRENCY',
  inDoubtWaitMs: 'SMS_IN_DOUBT_WAIT_MS',
} as const satisfies NumberVariables<UnkeyedServeSettings>;

function readSms(env: NodeJS.ProcessEnv): BrokerConfig['sms'] {
  const configurationSet = getOptionalStringFromEnv('SMS_CONFIGURATION_SET', env);
  if (configurationSet === undefined) return undefined;
  return { configurationSet, settings: withNumbersFromEnv(DEFAULT_SMS_SETTINGS, SMS_VARIABLES, env) };
}

function readEmail(env: NodeJS.ProcessEnv): BrokerConfig['email'] {
  const configurationSet = getOptionalStringFromEnv('SES_CONFIGURATION_SET', env);
  if (configurationSet === undefined) return undefined;
  const rateShare = getNumberFromEnv('SES_RATE_SHARE', 1, env);
  if (!(rateShare > 0 && rateShare <= 1))
    throw new ConfigError(`SES_RATE_SHARE must be in (0, 1], got ${rateShare}`);
  return {
    configurationSet,
    rateShare,
    settings: withNumbersFromEnv(DEFAULT_EMAIL_SETTINGS, EMAIL_VARIABLES, env),
  };
}

/**
 * The deployment's HTTP provider, and Twilio's: its API (`https://api.twilio.com` unless set: the
 * local stand-in), its status route (by default the call-status route's, provider `twilio`), and how
 * long after an ambiguous create the broker waits before looking for the call.
 */
function readTelephony(callbackUrl: string, env: NodeJS.ProcessEnv): BrokerConfig['telephony'] {
  const apiUrl = getOptionalStringFromEnv('TWILIO_API_URL', env);
  return {
    http: {
      baseUrl: getStringFromEnv('TELEPHONY_API_URL', env),
      apiToken: getStringFromEnv('TELEPHONY_API_TOKEN', env),
    },
    twilio: {
      callbackUrl:
        getOptionalStringFromEnv('TWILIO_CALLBACK_URL', env) ??
        callbackUrl.replace(/\/providers\/[^/]+\/calls\/status$/, '/providers/twilio/calls/status'),
      ...(apiUrl ? { apiUrl } : {}),
      lookupSettleMs: getNumberFromEnv('TWILIO_LOOKUP_SETTLE_MS', TWILIO_LOOKUP_SETTLE_MS, env),
    },
  };
}
