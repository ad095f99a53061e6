/**
 * One broker process, wired: configuration from the environment (read once), the DynamoDB
 * adapters, the telephony provider over HTTP, ECS task protection, the nudge server, and the
 * {@link Broker} loop. `main.ts` runs it as a process; tests may run it in-process.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeConnectClient, makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { makeDynamoCallLinks } from '#shared/adapters/dynamo-call-links.ts';
import { makeDynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { makeDynamoCallbackSecretStore } from '#shared/adapters/dynamo-callback-secrets.ts';
import { makeDynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { makeDynamoJobSeries } from '#shared/adapters/dynamo-job-series.ts';
import { makeDynamoFleetWorkReader, makeDynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { makeDynamoMessageTasks } from '#shared/adapters/dynamo-message-tasks.ts';
import { makeDynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { makeDynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { makeEcsAgentProtection } from '#shared/adapters/ecs-agent.ts';
import { makeLogger } from '#shared/adapters/powertools.ts';
import { makeTelephonyProviders } from '#shared/adapters/telephony-providers.ts';
import { TWILIO_LOOKUP_SETTLE_MS } from '#shared/adapters/twilio-telephony.ts';
import { Broker, type BrokerDeps, type BrokerSettings, type StopReason } from '#shared/broker/broker.ts';
import { BrokerMetrics } from '#shared/broker/broker-metrics.ts';
import {
  DEFAULT_JOB_SERIES_SETTINGS,
  JobSeriesRecorder,
  JobSeriesSampler,
} from '#shared/broker/job-series.ts';
import type { CallLinkStore } from '#shared/broker/ports.ts';
import { DEFAULT_SERVE_SETTINGS } from '#shared/broker/serve-client.ts';
import { DEFAULT_MESSAGE_SETTINGS } from '#shared/broker/serve-messages.ts';
import { TaskProtectionKeeper } from '#shared/broker/task-protection.ts';
import { type HttpSend, type HttpSendOptions, makeHttpSend } from '#shared/campaign/http-send.ts';
import type { SendPort } from '#shared/campaign/ports.ts';
import { ChannelClients } from '#shared/channels/clients.ts';
import { clockFromEnv, getNumberFromEnv, getStringFromEnv } from '#shared/config.ts';
import {
  DEFAULT_LINE_API_URL,
  type MessageQuota,
  makeMessagingClient,
} from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import { type Clock, systemTimers, type Timers } from '#shared/pacing/clock.ts';
import { suppressionReasons } from '#shared/suppressions/model.ts';
import { ClientTelephonySecrets } from '#shared/telephony/callback-secrets.ts';
import type { TelephonyProviders } from '#shared/telephony/port.ts';
import { type BrokerHttpHandlers, type BrokerHttpServer, startBrokerHttpServer } from './http.ts';

export interface BrokerConfig {
  readonly controlTable: string;
  readonly tasksTable: string;
  readonly telephonyApiUrl: string;
  readonly telephonyApiToken: string;
  /** The public call-status route, e.g. `https://api.example/providers/acme/calls/status`. */
  readonly callStatusCallbackUrl: string;
  /** The public URL of Twilio's status route (default: the call-status route's, provider `twilio`). */
  readonly twilioCallbackUrl: string;
  /** Twilio's REST API (`https://api.twilio.com` unless set: the local emulator). */
  readonly twilioApiUrl: string | undefined;
  /** How long after an ambiguous Twilio create the broker waits before looking for the call. */
  readonly twilioLookupSettleMs?: number;
  /** Absent outside ECS: protection is then a logged no-op. */
  readonly ecsAgentUri: string | undefined;
  readonly version: string;
  readonly brokerId: string;
  readonly httpHost: string;
  readonly httpPort: number;
  /** How the call-status route reaches this broker; found from the ECS task metadata when unset. */
  readonly advertiseUrl: string | undefined;
  readonly leaseMs: number;
  readonly idleWaitMs: number;
  readonly stopGraceMs: number;
  readonly reconcileMarginMs: number;
  readonly defaultMaxCallSeconds: number;
  readonly holdMs: number;
  /** Where message claims are recorded (`BROKER_CLAIM_RECORDS`: `page`, the default, or `task`). */
  readonly claimRecords: 'page' | 'task';
  readonly recheckMs: number;
  /** The LINE channels (access tokens) message jobs send through; without it only calls are served. */
  readonly channelsTable: string | undefined;
  readonly lineApiUrl: string;
  /** A channel's push requests per second (LINE: 2,000). */
  readonly messageRatePerSecond: number;
  /** A channel's multicast requests per second, its own bucket (LINE: 200). Default LINE's. */
  readonly multicastRatePerSecond?: number;
  readonly messageConcurrency: number;
  /** Claimed messages held ahead of the senders. Default 2,000. */
  readonly messageQueueCapacity?: number;
  /** Length of a window of each job's series (the console's chart), seconds. Default 10. */
  readonly jobSeriesSeconds?: number;
  /** Days a job's series is kept before TTL removes it. Default 14. */
  readonly jobSeriesRetentionDays?: number;
}

/** Reads the broker's configuration from the environment; throws `ConfigError` on a missing value. */
export function readBrokerConfig(env: NodeJS.ProcessEnv = process.env): BrokerConfig {
  const optional = (name: string) => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  return {
    controlTable: getStringFromEnv('CONTROL_TABLE', env),
    tasksTable: getStringFromEnv('TASKS_TABLE', env),
    telephonyApiUrl: getStringFromEnv('TELEPHONY_API_URL', env),
    telephonyApiToken: getStringFromEnv('TELEPHONY_API_TOKEN', env),
    callStatusCallbackUrl: getStringFromEnv('CALL_STATUS_CALLBACK_URL', env),
    twilioCallbackUrl:
      optional('TWILIO_CALLBACK_URL') ??
      getStringFromEnv('CALL_STATUS_CALLBACK_URL', env).replace(
        /\/providers\/[^/]+\/calls\/status$/,
        '/providers/twilio/calls/status',
      ),
    twilioApiUrl: optional('TWILIO_API_URL'),
    twilioLookupSettleMs: getNumberFromEnv('TWILIO_LOOKUP_SETTLE_MS', TWILIO_LOOKUP_SETTLE_MS, env),
    ecsAgentUri: optional('ECS_AGENT_URI'),
    version: getStringFromEnv('BROKER_VERSION', env),
    brokerId: optional('BROKER_ID') ?? `broker-${randomUUID()}`,
    httpHost: optional('BROKER_HTTP_HOST') ?? '127.0.0.1',
    httpPort: getNumberFromEnv('BROKER_HTTP_PORT', 0, env),
    advertiseUrl: optional('BROKER_ADVERTISE_URL'),
    leaseMs: getNumberFromEnv('LEASE_MS', 30_000, env),
    idleWaitMs: getNumberFromEnv('BROKER_IDLE_WAIT_MS', 2_000, env),
    stopGraceMs: getNumberFromEnv('BROKER_STOP_GRACE_MS', 100_000, env),
    reconcileMarginMs: getNumberFromEnv('RECONCILE_MARGIN_MS', DEFAULT_SERVE_SETTINGS.reconcileMarginMs, env),
    defaultMaxCallSeconds: getNumberFromEnv(
      'DEFAULT_MAX_CALL_SECONDS',
      DEFAULT_SERVE_SETTINGS.defaultMaxCallSeconds,
      env,
    ),
    holdMs: getNumberFromEnv('BROKER_HOLD_MS', DEFAULT_SERVE_SETTINGS.holdMs, env),
    claimRecords: claimRecordsOf(optional('BROKER_CLAIM_RECORDS')),
    recheckMs: getNumberFromEnv('BROKER_RECHECK_MS', DEFAULT_SERVE_SETTINGS.recheckMs, env),
    channelsTable: optional('CHANNELS_TABLE'),
    lineApiUrl: optional('LINE_API_URL') ?? DEFAULT_LINE_API_URL,
    messageRatePerSecond: getNumberFromEnv(
      'LINE_RATE_PER_SECOND',
      DEFAULT_MESSAGE_SETTINGS.messageRatePerSecond,
      env,
    ),
    multicastRatePerSecond: getNumberFromEnv(
      'LINE_MULTICAST_RATE_PER_SECOND',
      DEFAULT_MESSAGE_SETTINGS.multicastRatePerSecond,
      env,
    ),
    messageConcurrency: getNumberFromEnv(
      'MESSAGE_CONCURRENCY',
      DEFAULT_MESSAGE_SETTINGS.messageConcurrency,
      env,
    ),
    messageQueueCapacity: getNumberFromEnv(
      'MESSAGE_QUEUE_CAPACITY',
      DEFAULT_MESSAGE_SETTINGS.messageQueueCapacity,
      env,
    ),
    jobSeriesSeconds: getNumberFromEnv('JOB_SERIES_SECONDS', DEFAULT_JOB_SERIES_SETTINGS.windowSeconds, env),
    jobSeriesRetentionDays: getNumberFromEnv('JOB_SERIES_RETENTION_DAYS', 14, env),
  };
}

export interface RunningBroker {
  readonly broker: Broker;
  readonly brokerId: string;
  readonly version: string;
  /** The nudge server as bound. */
  readonly httpUrl: string;
  /** What the lease item advertises to the call-status route. */
  readonly endpoint: string;
  /** Resolves once the broker has stopped and its server is closed. */
  readonly done: Promise<void>;
  stop(reason: StopReason): void;
}

/**
 * DynamoDB with bounded requests, like every other client the broker builds (telephony, LINE,
 * ECS agent): without a timeout a request on a dead connection waits forever, and the lease
 * release on the way out must fit in Fargate's 120 s after SIGTERM with the stop grace. The
 * lease keeper bounds its release wait as well; this ends the request itself (the SDK retries).
 */
const DYNAMODB_REQUEST_TIMEOUT_MS = 10_000;
const DYNAMODB_CONNECTION_TIMEOUT_MS = 3_000;

function makeBrokerDynamoClient(): DynamoDBClient {
  return makeDynamoClient({
    requestHandler: {
      connectionTimeout: DYNAMODB_CONNECTION_TIMEOUT_MS,
      requestTimeout: DYNAMODB_REQUEST_TIMEOUT_MS,
      throwOnRequestTimeout: true,
    },
  });
}

export class BrokerStartError extends Error {
  override name = 'BrokerStartError';
}

/**
 * The URL the lease advertises to the call-status route and the operator API: `BROKER_ADVERTISE_URL`
 * when set; in a Fargate task (awsvpc) the task's private address from the task metadata endpoint,
 * asked up to `tries` times with backoff; else the server's own URL. Never a wildcard address: a
 * lease naming `http://0.0.0.0:8080` would send every nudge nowhere, so a broker that cannot learn
 * its address fails to start (ECS starts another) instead.
 */
export async function advertisedEndpoint(
  config: Pick<BrokerConfig, 'advertiseUrl' | 'httpHost'>,
  server: { readonly url: string; readonly port: number },
  env: NodeJS.ProcessEnv,
  deps: { fetch?: typeof fetch; sleep?: (ms: number) => Promise<void>; tries?: number } = {},
): Promise<string> {
  if (config.advertiseUrl) return config.advertiseUrl;
  const uri = env.ECS_CONTAINER_METADATA_URI_V4;
  if (uri) {
    const get = deps.fetch ?? fetch;
    const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    const tries = deps.tries ?? 5;
    let last = 'no answer';
    for (let attempt = 1; attempt <= tries; attempt++) {
      try {
        const response = await get(uri, { signal: AbortSignal.timeout(2_000) });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        const body = (await response.json()) as { Networks?: { IPv4Addresses?: string[] }[] };
        const address = body.Networks?.[0]?.IPv4Addresses?.[0];
        if (address) return `http://${address}:${server.port}`;
        last = 'no IPv4 address in Networks';
      } catch (error) {
        last = (error as Error).message;
      }
      if (attempt < tries) await sleep(200 * 2 ** (attempt - 1));
    }
    throw new BrokerStartError(
      `the ECS task metadata endpoint gave no private address after ${tries} tries (${last})`,
    );
  }
  if (config.httpHost === '0.0.0.0' || config.httpHost === '::') {
    throw new BrokerStartError(
      `the broker listens on every address (BROKER_HTTP_HOST=${config.httpHost}) and has no ECS task metadata to learn its own: set BROKER_ADVERTISE_URL`,
    );
  }
  return server.url;
}

/**
 * What message jobs need: their tasks (claims fenced by the lease; opt-outs checked at claim) and a
 * send port per channel over a keep-alive agent sized to the senders, kept for the process's life
 * (the transport `bench/message-throughput` measures; a new access token gets a new one).
 */
function messageSide(
  config: BrokerConfig,
  doc: DynamoDBDocumentClient,
  clock: Clock,
  logger: Logger,
  makeSend: (options: HttpSendOptions) => HttpSend,
) {
  const channels = makeDynamoChannelStore(doc, config.channelsTable!);
  const optOuts = makeDynamoOptOutStore(doc, config.controlTable);
  const suppressions = makeDynamoSuppressionStore(doc, config.controlTable);
  // The channel changed (a new access token): the old sockets go with the old token.
  const senders = new ChannelClients<HttpSend>({
    create: (channel) => {
      logger.info('messaging client ready', { channelId: channel.channelId });
      return makeSend({
        channelAccessToken: channel.accessToken,
        baseUrl: config.lineApiUrl,
        maxSockets: config.messageConcurrency,
        timeoutMs: 10_000,
        clock,
      });
    },
    close: (http) => http.close(),
  });
  /**
   * The client's message channel, only if it is the client's own: a client's settings naming
   * another client's channel (`PUT /clients` checks only the id's form: the channel may be
   * registered later) must not send through that client's LINE account. Read each round.
   */
  const ownChannel = async (channelId: string, clientId: string) => {
    const channel = await channels.get(channelId);
    if (!channel) throw new Error(`the client's message channel ${channelId} does not exist`);
    if (channel.clientId !== clientId)
      throw new Error(
        `the message channel ${channelId} is not client ${clientId}'s: nothing is sent through it`,
      );
    return channel;
  };
  return {
    store: makeDynamoMessageTasks(doc, {
      controlTable: config.controlTable,
      tasksTable: config.tasksTable,
      clock,
      optedOut: (clientId, recipients) => optOuts.optedOut(clientId, recipients),
      suppressed: suppressionReasons(suppressions),
      claimRecords: config.claimRecords,
    }),
    async sendFor(channelId: string, clientId: string): Promise<SendPort> {
      return senders.for(await ownChannel(channelId, clientId)).send;
    },
    async readQuota(channelId: string, clientId: string): Promise<MessageQuota> {
      const channel = await ownChannel(channelId, clientId);
      return makeMessagingClient({
        channelAccessToken: channel.accessToken,
        baseUrl: config.lineApiUrl,
        timeoutMs: 10_000,
      }).quota();
    },
    settings: {
      ...DEFAULT_MESSAGE_SETTINGS,
      messageRatePerSecond: config.messageRatePerSecond,
      multicastRatePerSecond:
        config.multicastRatePerSecond ?? DEFAULT_MESSAGE_SETTINGS.multicastRatePerSecond,
      messageConcurrency: config.messageConcurrency,
      messageQueueCapacity: config.messageQueueCapacity ?? DEFAULT_MESSAGE_SETTINGS.messageQueueCapacity,
    },
    /** Closes every channel's sockets. */
    close(): void {
      senders.close();
    },
  };
}

/** Each client's stored telephony secret (none without the channels table). */
function clientSecrets(
  config: BrokerConfig,
  doc: DynamoDBDocumentClient,
  clock: Clock,
): (clientId: string) => Promise<string | undefined> {
  if (!config.channelsTable) return async () => undefined;
  const secrets = new ClientTelephonySecrets({
    store: makeDynamoCallbackSecretStore(doc, config.channelsTable),
    clock,
  });
  return (clientId) => secrets.current(clientId);
}

/** How often the broker publishes its per-client figures: CloudWatch's high resolution. */
const METRICS_FLUSH_MS = 1_000;

/** What the process runs on: given by a test, else the real ones. */
interface ProcessPorts {
  readonly doc: DynamoDBDocumentClient;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly timers: Timers;
}

/** Starts a broker with `config`; its loop runs until {@link RunningBroker.stop} or a drain. */
export async function startBrokerProcess(
  config: BrokerConfig,
  deps: {
    doc?: DynamoDBDocumentClient;
    logger?: Logger;
    clock?: Clock;
    timers?: Timers;
    /** The LINE transport (default {@link makeHttpSend}); the bench passes its baseline. */
    makeSend?: (options: HttpSendOptions) => HttpSend;
  } = {},
): Promise<RunningBroker> {
  const logger = deps.logger ?? makeLogger('broker');
  // The system's time (the local cloud may shift it: `npm start -- --at`).
  const clock = deps.clock ?? clockFromEnv();
  const timers = deps.timers ?? systemTimers;
  const doc = deps.doc ?? makeDocumentClient(makeBrokerDynamoClient());
  const ports: ProcessPorts = { doc, logger, clock, timers };
  let broker: Broker | undefined;
  const server = await startBrokerHttpServer(
    nudgeHandlers(config, logger, () => broker),
    {
      host: config.httpHost,
      port: config.httpPort,
    },
  );
  const endpoint = await advertisedEndpointOrStop(config, server);
  const series = jobSeries(config, ports);
  const metrics = new BrokerMetrics(logger, series);
  // The second that ended, for every client served: high-resolution metrics, one record each; and
  // each job's series window once it ended (written in the background, never awaited here).
  const flushEverySecond = setInterval(() => {
    metrics.flush();
    series.flush();
  }, METRICS_FLUSH_MS);
  flushEverySecond.unref();
  const protection = taskProtection(config, ports, metrics);
  const messages = config.channelsTable
    ? messageSide(config, doc, clock, logger, deps.makeSend ?? makeHttpSend)
    : undefined;
  broker = new Broker(brokerDeps(config, ports, { endpoint, messages, protection, metrics }));
  const running = broker;
  const done = running.run().finally(() => {
    clearInterval(flushEverySecond);
    metrics.flush();
    series.flush();
    messages?.close();
    return Promise.all([server.stop(), seriesWritten(series)]).then(() => {});
  });
  return {
    broker: running,
    brokerId: config.brokerId,
    version: config.version,
    httpUrl: server.url,
    endpoint,
    done,
    stop: (reason) => running.stop(reason),
  };
}

/** The last series samples, waited for at most {@link SERIES_EXIT_WAIT_MS}: a chart never holds up an exit. */
const SERIES_EXIT_WAIT_MS = 5_000;

function seriesWritten(series: JobSeriesRecorder): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, SERIES_EXIT_WAIT_MS);
    timer.unref();
    void series.settled().then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Each served job's series, sampled every `jobSeriesSeconds` into the tasks table (the console's chart). */
function jobSeries(config: BrokerConfig, ports: ProcessPorts): JobSeriesRecorder {
  const sampler = new JobSeriesSampler(config.brokerId, ports.clock, {
    ...DEFAULT_JOB_SERIES_SETTINGS,
    windowSeconds: config.jobSeriesSeconds ?? DEFAULT_JOB_SERIES_SETTINGS.windowSeconds,
  });
  const store = makeDynamoJobSeries(ports.doc, config.tasksTable, {
    ...(config.jobSeriesRetentionDays === undefined ? {} : { retentionDays: config.jobSeriesRetentionDays }),
  });
  return new JobSeriesRecorder({ sampler, store, logger: ports.logger });
}

/** The nudge server's routes, answered by the broker once there is one. */
function nudgeHandlers(
  config: BrokerConfig,
  logger: Logger,
  current: () => Broker | undefined,
): BrokerHttpHandlers {
  return {
    callEnded: (ended) => current()?.callEnded(ended) ?? Promise.resolve(),
    jobChanged: (changed) => current()?.jobChanged(changed.clientId, changed.jobId) ?? Promise.resolve(),
    health: () => {
      const broker = current();
      return {
        brokerId: config.brokerId,
        version: config.version,
        clientId: broker?.clientId ?? null,
        inFlight: broker?.inFlight ?? 0,
        stopping: broker?.stopReason ?? null,
      };
    },
    onError: (error) => logger.warn('call-ended nudge not handled', { error }),
  };
}

/** {@link advertisedEndpoint}; a broker that cannot learn it closes its server before failing. */
async function advertisedEndpointOrStop(config: BrokerConfig, server: BrokerHttpServer): Promise<string> {
  try {
    return await advertisedEndpoint(config, server, process.env);
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/** ECS task protection through the agent (a logged no-op outside ECS); a failure is counted. */
function taskProtection(
  config: BrokerConfig,
  ports: ProcessPorts,
  metrics: BrokerMetrics,
): TaskProtectionKeeper {
  const { clock, timers, logger } = ports;
  return new TaskProtectionKeeper({
    port: makeEcsAgentProtection({
      agentUri: config.ecsAgentUri,
      onNoAgent: () => logger.info('no ECS agent (ECS_AGENT_URI unset): task protection is off'),
    }),
    clock,
    timers,
    logger,
    onFailure: () => metrics.protectionFailed(),
  });
}

/** The broker's ports over DynamoDB and the providers, and its settings from `config`. */
function brokerDeps(
  config: BrokerConfig,
  ports: ProcessPorts,
  parts: {
    readonly endpoint: string;
    readonly messages: BrokerDeps['messages'];
    readonly protection: TaskProtectionKeeper;
    readonly metrics: BrokerMetrics;
  },
): BrokerDeps {
  const { doc, clock, timers, logger } = ports;
  const { messages, protection, metrics } = parts;
  const callLinks = makeDynamoCallLinks(doc, config.tasksTable);
  return {
    ...(messages ? { messages } : {}),
    leases: makeDynamoLeaseStore(doc, config.controlTable, { endpoint: parts.endpoint }),
    tasks: makeDynamoBrokerTaskStore(doc, {
      controlTable: config.controlTable,
      tasksTable: config.tasksTable,
      now: () => clock.now(),
    }),
    providers: telephonyProviders(config, ports, callLinks),
    callLinks,
    fleet: makeDynamoFleetWorkReader(doc, config.controlTable),
    protection,
    metrics,
    clock,
    timers,
    logger,
    settings: brokerSettings(config),
  };
}

/** The telephony providers clients may use: the HTTP provider, Amazon Connect, Twilio. */
function telephonyProviders(
  config: BrokerConfig,
  ports: ProcessPorts,
  links: CallLinkStore,
): TelephonyProviders {
  return makeTelephonyProviders({
    http: { baseUrl: config.telephonyApiUrl, apiToken: config.telephonyApiToken },
    connect: (region) => makeConnectClient(region === undefined ? {} : { region }),
    clientSecret: clientSecrets(config, ports.doc, ports.clock),
    twilio: {
      callbackUrl: config.twilioCallbackUrl,
      ...(config.twilioApiUrl ? { apiUrl: config.twilioApiUrl } : {}),
      ...(config.twilioLookupSettleMs === undefined ? {} : { lookupSettleMs: config.twilioLookupSettleMs }),
    },
    links,
    clock: ports.clock,
  });
}

function brokerSettings(config: BrokerConfig): BrokerSettings {
  return {
    ...DEFAULT_SERVE_SETTINGS,
    callbackUrl: config.callStatusCallbackUrl,
    brokerId: config.brokerId,
    version: config.version,
    leaseMs: config.leaseMs,
    idleWaitMs: config.idleWaitMs,
    stopGraceMs: config.stopGraceMs,
    noWorkBackoffMs: 30_000,
    reconcileMarginMs: config.reconcileMarginMs,
    defaultMaxCallSeconds: config.defaultMaxCallSeconds,
    holdMs: config.holdMs,
    recheckMs: config.recheckMs,
  };
}

/** `BROKER_CLAIM_RECORDS`: `page` (default) or `task`; anything else is refused at start. */
function claimRecordsOf(value: string | undefined): 'page' | 'task' {
  if (value === undefined || value === 'page' || value === 'task') return value ?? 'page';
  throw new Error(`BROKER_CLAIM_RECORDS must be "page" or "task", not ${JSON.stringify(value)}`);
}
