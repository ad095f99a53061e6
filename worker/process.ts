/**
 * One broker process, wired: the DynamoDB adapters, the telephony providers, the LINE channels, ECS
 * task protection, the nudge server, the figures it publishes, and the {@link Broker} loop, all from
 * one {@link BrokerConfig} (`readBrokerConfig`). `main.ts` runs it as a process; tests may run it
 * in-process.
 */
import type { PinpointSMSVoiceV2Client } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import type { SESv2Client } from '@aws-sdk/client-sesv2';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  boundedRequests,
  makeConnectClient,
  makeDocumentClient,
  makeDynamoClient,
} from '#shared/adapters/aws-clients.ts';
import { DynamoCallLinks } from '#shared/adapters/dynamo-call-links.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoCallbackSecretStore } from '#shared/adapters/dynamo-callback-secrets.ts';
import { DynamoJobSeries } from '#shared/adapters/dynamo-job-series.ts';
import { DynamoFleetWorkReader, DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { makeEcsAgentProtection } from '#shared/adapters/ecs-agent.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { makeTelephonyProviders } from '#shared/adapters/telephony-providers.ts';
import { Broker, type BrokerDeps, type StopReason } from '#shared/broker/broker.ts';
import { JobSeriesRecorder, JobSeriesSampler } from '#shared/broker/job-series.ts';
import { TaskProtectionKeeper } from '#shared/broker/task-protection.ts';
import { type HttpSend, type HttpSendOptions, PooledHttpSend } from '#shared/campaign/http-send.ts';
import { clockFromEnv } from '#shared/config.ts';
import type { Logger } from '#shared/log.ts';
import { type Clock, systemTimers, type Timers } from '#shared/pacing/clock.ts';
import { ClientTelephonySecrets } from '#shared/telephony/callback-secrets.ts';
import type { TelephonyProviders } from '#shared/telephony/port.ts';
import { advertisedEndpoint } from './advertise.ts';
import type { BrokerConfig } from './config.ts';
import { emailSide } from './email-side.ts';
import { BrokerFigures } from './figures.ts';
import { startNudgeServer } from './http.ts';
import { messageSide } from './message-side.ts';
import { smsSide } from './sms-side.ts';

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
const DYNAMODB_REQUEST_BOUNDS = { connectionTimeout: 3_000, requestTimeout: 10_000 };

/** What the process runs on: given by a test, else the real ones. */
interface ProcessPorts {
  readonly doc: DynamoDBDocumentClient;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly timers: Timers;
}

/** What a broker process may be given instead of the real ones (tests, benches). */
type ProcessDeps = Partial<ProcessPorts> & {
  /** The LINE transport (default {@link PooledHttpSend}); the bench passes its baseline. */
  makeSend?: (options: HttpSendOptions) => HttpSend;
  /** The SES client of email jobs (default one from the environment, no retries: `makeSesClient`). */
  ses?: SESv2Client;
  /** The SMS client (a test's own, pointed at its stand-in); the default reads the environment. */
  sms?: PinpointSMSVoiceV2Client;
};

/** The ports given, else the real ones. */
function processPorts(deps: ProcessDeps): ProcessPorts {
  return {
    logger: deps.logger ?? new PowertoolsLog('broker'),
    // The system's time (the local cloud may shift it: `npm start -- --at`).
    clock: deps.clock ?? clockFromEnv(),
    timers: deps.timers ?? systemTimers,
    doc:
      deps.doc ??
      makeDocumentClient(makeDynamoClient({ requestHandler: boundedRequests(DYNAMODB_REQUEST_BOUNDS) })),
  };
}

/** The message sides the deployment has: LINE (with a channels table), and then email and SMS. */
function messageSides(config: BrokerConfig, ports: ProcessPorts, deps: ProcessDeps) {
  const messages = config.channelsTable
    ? messageSide(
        config,
        config.channelsTable,
        ports,
        deps.makeSend ?? ((options) => new PooledHttpSend(options)),
      )
    : undefined;
  const email = messages ? emailSide(config, ports, deps.ses) : undefined;
  const sms = messages ? smsSide(config, ports, deps.sms) : undefined;
  return { messages, email, sms };
}

/** Starts a broker with `config`; its loop runs until {@link RunningBroker.stop} or a drain. */
export async function startBrokerProcess(
  config: BrokerConfig,
  deps: ProcessDeps = {},
): Promise<RunningBroker> {
  const ports = processPorts(deps);
  let broker: Broker | undefined;
  const server = await startNudgeServer(config, ports.logger, () => broker);
  const endpoint = await advertisedEndpoint(config, server, config.ecsMetadataUri).catch(async (error) => {
    await server.stop(); // a broker that cannot learn its address closes its server before failing
    throw error;
  });
  const figures = new BrokerFigures(jobSeries(config, ports), ports.logger);
  const { messages, email, sms } = messageSides(config, ports, deps);
  broker = new Broker({
    ...(messages ? { messages } : {}),
    ...(email ? { email } : {}),
    ...(sms ? { sms } : {}),
    ...callSide(config, ports, endpoint),
    protection: taskProtection(config, ports, figures),
    metrics: figures.metrics,
    clock: ports.clock,
    timers: ports.timers,
    logger: ports.logger,
    settings: config.broker,
  });
  const running = broker;
  const done = running.run().finally(() => {
    const published = figures.close();
    messages?.close();
    return Promise.all([server.stop(), published, email?.close()]).then(() => {});
  });
  return {
    broker: running,
    brokerId: config.broker.brokerId,
    version: config.broker.version,
    httpUrl: server.url,
    endpoint,
    done,
    stop: (reason) => running.stop(reason),
  };
}

/** Each served job's series, sampled every `jobSeries.windowSeconds` into the tasks table. */
function jobSeries(config: BrokerConfig, ports: ProcessPorts): JobSeriesRecorder {
  return new JobSeriesRecorder({
    sampler: new JobSeriesSampler(config.broker.brokerId, ports.clock, config.jobSeries),
    store: new DynamoJobSeries(ports.doc, config.tasksTable, {
      retentionDays: config.jobSeries.retentionDays,
    }),
    logger: ports.logger,
  });
}

/** ECS task protection through the agent (a logged no-op outside ECS); a failure is counted. */
function taskProtection(config: BrokerConfig, ports: ProcessPorts, figures: BrokerFigures) {
  const { clock, timers, logger } = ports;
  return new TaskProtectionKeeper({
    port: makeEcsAgentProtection({
      agentUri: config.ecsAgentUri,
      onNoAgent: () => logger.info('no ECS agent (ECS_AGENT_URI unset): task protection is off'),
    }),
    clock,
    timers,
    logger,
    onFailure: () => figures.metrics.protectionFailed(),
  });
}

/** The lease, the work list and the call side's ports: call tasks, their links, the providers. */
function callSide(config: BrokerConfig, ports: ProcessPorts, endpoint: string) {
  const { doc, clock } = ports;
  const callLinks = new DynamoCallLinks(doc, config.tasksTable);
  return {
    leases: new DynamoLeaseStore(doc, config.controlTable, { endpoint }),
    fleet: new DynamoFleetWorkReader(doc, config.controlTable),
    tasks: new DynamoBrokerTaskStore(doc, {
      controlTable: config.controlTable,
      tasksTable: config.tasksTable,
      now: () => clock.now(),
    }),
    callLinks,
    providers: telephonyProviders(config, ports, callLinks),
  } satisfies Partial<BrokerDeps>;
}

/** The telephony providers clients may use (the HTTP provider, Amazon Connect, Twilio), with their secrets. */
function telephonyProviders(
  config: BrokerConfig,
  ports: ProcessPorts,
  links: DynamoCallLinks,
): TelephonyProviders {
  const { channelsTable } = config;
  const secrets =
    channelsTable === undefined
      ? undefined
      : new ClientTelephonySecrets({
          store: new DynamoCallbackSecretStore(ports.doc, channelsTable),
          clock: ports.clock,
        });
  return makeTelephonyProviders({
    ...config.telephony,
    connect: (region) => makeConnectClient(region === undefined ? {} : { region }),
    // Each client's stored telephony secret (none without the channels table).
    clientSecret: async (clientId) => secrets?.current(clientId),
    links,
    clock: ports.clock,
  });
}
