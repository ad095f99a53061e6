/**
 * The whole of Switchboard on the local cloud: what `npm start` runs and what end-to-end tests
 * and benchmarks start. Handlers are the very modules deployed to Lambda (each `main.ts`); they
 * read the same environment variables, here pointed at the emulators and sandboxes.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, SQSEvent } from 'aws-lambda';
import { buildConsole } from '#console/build.ts';
import {
  makeDocumentClient,
  makeDynamoClient,
  REQUEST_TIMEOUT_SCALE_ENV,
} from '#shared/adapters/aws-clients.ts';
import { DynamoCallbackSecretStore } from '#shared/adapters/dynamo-callback-secrets.ts';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { publishDesiredVersion } from '#shared/adapters/dynamo-fleet.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { channelFromInput } from '#shared/channels/channel-input.ts';
import { CLOCK_OFFSET_ENV } from '#shared/config.ts';
import { emailConfigurationSetName } from '#shared/email/event-destination.ts';
import { type FunctionId, functions } from '#shared/functions.ts';
import { ADMINS_GROUP, clientGroup } from '#shared/operators/tenancy.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { routes } from '#shared/routes.ts';
import { clientSecretName, rotateCallbackSecret } from '#shared/telephony/callback-secrets.ts';
import { CONNECT_EVENT_RULES, matchesContactRule } from '#shared/telephony/connect-contact.ts';
import { TWILIO_STATUS_PATH } from '#shared/telephony/twilio.ts';
import { type ApiGatewayServer, type InvokeStatement, startApiGateway } from './api-gateway.ts';
import { LOCAL_CREDENTIALS, type LocalCloud, type LocalCloudOptions, startLocalCloud } from './cloud.ts';
import { type CognitoEmulator, type PoolUser, startCognitoEmulator } from './cognito-emulator.ts';
import { type EventBridgeEvent, startConnectEmulator } from './connect-emulator.ts';
import { startEcsAgent } from './ecs-agent.ts';
import { type LocalFleet, startLocalFleet } from './ecs-service.ts';
import { type LocalEmail, startLocalEmail } from './email-wiring.ts';
import { makeLocalJobManager } from './job-manager.ts';
import { type JobsLocal, startJobsLocal } from './jobs-wiring.ts';
import { type Handler, invokeHandler } from './lambda.ts';
import { type LineSandbox, startLineSandbox } from './line-sandbox.ts';
import { isMetricRecord } from './metric-records.ts';
import { makeOperatorClient, type OperatorRequest } from './operator-client.ts';
import { LOCAL_OUTCOME_ENV, type LocalOutcomeWebhooks, startLocalOutcomeWebhooks } from './outcome-wiring.ts';
import { startScheduler } from './scheduler.ts';
import type { SesEmulator } from './ses-emulator.ts';
import type { SmsEmulator } from './sms-emulator.ts';
import { type LocalSms, startLocalSms } from './sms-wiring.ts';
import { type SqsPoller, startSqsPoller } from './sqs-poller.ts';
import {
  type Range,
  realTime,
  type SandboxTime,
  startTelephonySandbox,
  type TelephonyEmulator,
  type TelephonySandbox,
} from './telephony-sandbox.ts';
import { startTwilioEmulator } from './twilio-emulator.ts';
import { LocalUnsubscribeLinks, localUnsubscribeEnv, unsubscribeHttpFunction } from './unsubscribe-wiring.ts';

/** The demo channel `npm start` creates, wired to the LINE sandbox. */
export const DEMO_CHANNEL = {
  channelId: 'demo',
  clientId: 'demo-client',
  channelSecret: 'demo-channel-secret',
  accessToken: 'demo-channel-access-token',
  autoAnswer: 'push',
  greeting: 'Thanks for adding us! Send "hours" or "help".',
  rules: [
    {
      match: 'exact',
      pattern: 'hours',
      answer: 'We are open 9:00-18:00, Monday to Friday.',
      ignoreCase: true,
    },
    {
      match: 'contains',
      pattern: 'help',
      answer: 'An operator will get back to you shortly.',
      ignoreCase: true,
    },
  ],
  fallback: 'Sorry, I did not understand. Send "help" to reach an operator.',
} as const;

export interface LocalStackOptions {
  readonly dataDir?: string;
  /** HTTP API port (0: a free one). */
  readonly port?: number;
  readonly stage?: string;
  /** Parallel pollers of the webhook queue (Lambda scales these with the FIFO groups). */
  readonly processorConcurrency?: number;
  /** Options for the LINE sandbox (rate limit, faults). */
  readonly lineRateLimitPerSecond?: number;
  /** Queue visibility timeouts (tests shorten them to see crashed batches come back sooner). */
  readonly visibilityTimeoutSeconds?: LocalCloudOptions['visibilityTimeoutSeconds'];
  /** Wraps the processor handler (fault tests make it crash mid-batch). */
  readonly wrapProcessor?: (handler: Handler<SQSEvent, unknown>) => Handler<SQSEvent, unknown>;
  /**
   * Run the broker fleet: the ECS agent and service stand-ins with broker child processes, and
   * the job manager on a short schedule. Off by default (webhook tests do not need it).
   */
  readonly fleet?: boolean;
  /** Most brokers the job manager may ask for (default 2). */
  readonly maxBrokers?: number;
  /** Call seconds per wall second in the telephony sandbox (default 30: a minute's call in 2 s). */
  readonly telephonyTimeScale?: number;
  /**
   * Talk time of answered Connect calls, call seconds (default 20–180). Connect does not end a call
   * at the job's maximum duration (the broker stops it), so drills shorten it here.
   */
  readonly connectTalkSeconds?: Range;
  /** How often the job manager runs locally (AWS: every minute). Default 2 s. */
  readonly jobManagerIntervalMs?: number;
  /** Extra environment for every broker (drills: a short `LEASE_MS`, a short call deadline). */
  readonly brokerEnv?: Readonly<Record<string, string>>;
  readonly log?: (line: string) => void;
  /**
   * More operator identities for the IAM authorizer, by access key id, each with its identity
   * policy on `execute-api:Invoke` (e.g. one client's routes only). The local credentials stay
   * the administrator.
   */
  readonly operators?: Readonly<
    Record<string, { readonly secretAccessKey: string; readonly statements: readonly InvokeStatement[] }>
  >;
  /** The console's users (default {@link LOCAL_CONSOLE_USERS}). */
  readonly consoleUsers?: readonly PoolUser[];
  /**
   * The instant (epoch ms) the stack's clock reads when it starts, then runs on from: every
   * handler, broker and provider stand-in reads the system's time shifted by as much
   * (`SWITCHBOARD_CLOCK_OFFSET_MS`), so a public holiday or a window closing at midnight can be
   * tried on any day (`npm start -- --at`). The SDK's signatures and tokens keep the real time.
   */
  readonly startAt?: number;
  /** A directory the SES stand-in writes each email it accepts to, as a `.eml` file (default: none). */
  readonly sentEmailDir?: string;
}

/**
 * The console's users on the local cloud: an administrator (every client), and the demo client's
 * admin, operator and viewer (one of each role). Local passwords, printed by `npm start`; in AWS,
 * users are the user pool's.
 */
export const LOCAL_CONSOLE_USERS: readonly PoolUser[] = [
  { username: 'admin', password: 'Switchboard-admin-1', groups: [ADMINS_GROUP], email: 'admin@example.com' },
  {
    username: 'demo',
    password: 'Switchboard-demo-1',
    groups: [clientGroup(DEMO_CHANNEL.clientId, 'admin')],
    email: 'demo@example.com',
  },
  {
    username: 'demo-operator',
    password: 'Switchboard-operator-1',
    groups: [clientGroup(DEMO_CHANNEL.clientId, 'operator')],
    email: 'demo-operator@example.com',
  },
  {
    username: 'demo-viewer',
    password: 'Switchboard-viewer-1',
    groups: [clientGroup(DEMO_CHANNEL.clientId, 'viewer')],
    email: 'demo-viewer@example.com',
  },
];

/** The local user pool's ids (in AWS: the stack's outputs). */
export const LOCAL_USER_POOL = { userPoolId: 'us-east-1_Local0000', clientId: 'localconsoleclient00000000' };

/** The telephony sandbox's provider name in the status route, and its callback secret. */
export const LOCAL_TELEPHONY = {
  provider: 'sandbox',
  callbackSecret: 'local-callback-secret',
  apiToken: 'sandbox-token',
};

export interface LocalStack {
  readonly cloud: LocalCloud;
  readonly api: ApiGatewayServer;
  readonly line: LineSandbox;
  readonly processor: SqsPoller;
  /** Outcome webhooks: the stream mappings and the delivery worker's poller. */
  readonly outcomes: LocalOutcomeWebhooks;
  readonly telephony: TelephonySandbox;
  /** The Amazon Connect emulator (clients with `telephony: { provider: 'connect', … }`). */
  readonly connect: TelephonyEmulator;
  /** The Twilio emulator (clients with `telephony: { provider: 'twilio', … }` and a stored auth token). */
  readonly twilio: TelephonyEmulator;
  /** The SES v2 stand-in; its configuration set's events reach email-events (`./email-wiring.ts`). */
  readonly ses: SesEmulator;
  /** Resolves once every SES event published so far is recorded by email-events (through its queue). */
  emailEventsRecorded(): Promise<void>;
  /**
   * The End User Messaging SMS stand-in: its configuration set's events reach sms-events, and a
   * customer's text back (`sms.reply(from, to, body)`) reaches sms-inbound (`./sms-wiring.ts`).
   */
  readonly sms: SmsEmulator;
  /** Resolves once every SMS event and text back published so far is recorded (through their queues). */
  smsRecorded(): Promise<void>;
  readonly jobs: JobsLocal;
  /** The broker service stand-in (when started with `fleet: true`). */
  readonly fleet: LocalFleet | undefined;
  /** The operator API, signed with SigV4 as on AWS. */
  readonly operator: OperatorRequest;
  /** The user pool the console signs in to (the Cognito emulator). */
  readonly cognito: CognitoEmulator;
  /** The console's address. */
  readonly consoleUrl: string;
  /** Email unsubscribe links: their base URL (`{api}/unsubscribe`) and `link(…)`, signed as brokers sign. */
  readonly unsubscribe: LocalUnsubscribeLinks;
  /** The stack's clock: the system's, shifted when it was started at another time (`startAt`). */
  readonly clock: Clock;
  /** The webhook URL of a channel on the local HTTP API. */
  webhookUrl(channelId: string): string;
  /** Creates or replaces a channel (and tells the LINE sandbox its token). */
  putChannel(input: unknown): Promise<Channel>;
  /**
   * Stores a client's telephony secret (its Twilio auth token), as `npm run channel --
   * put-telephony-secret` does on AWS.
   */
  putTelephonySecret(clientId: string, secret: string): Promise<void>;
  stop(): Promise<void>;
}

const ROOT = path.resolve(import.meta.dirname, '..');

/** Imports a Lambda's `main.ts` (after the environment is set) and returns its handler. */
async function loadHandler<E, R>(id: FunctionId): Promise<Handler<E, R>> {
  const module = (await import(pathToFileURL(path.join(ROOT, functions[id].entry)).href)) as {
    handler: Handler<E, R>;
  };
  return module.handler;
}

/**
 * The Amazon Connect emulator; its contact events go to connect-events and connect-opt-outs as the
 * stack's two EventBridge rules route them (`CONNECT_EVENT_RULES`), each invoked as
 * Lambda's asynchronous invocation would, once `target` names them. A failure of either is retried
 * by the far side for both (each handler is idempotent).
 */
async function startLocalConnect(options: LocalStackOptions, time: SandboxTime) {
  const handlers = new Map<ConnectTargetId, Handler<EventBridgeEvent, unknown>>();
  const invoke = async (id: ConnectTargetId, event: EventBridgeEvent) => {
    const handler = handlers.get(id);
    if (!handler) throw new Error(`${id} is not loaded yet`);
    const spec = functions[id];
    await invokeHandler(handler, event, { functionName: spec.id, timeoutMs: spec.timeoutSeconds * 1000 });
  };
  const emulator = await startConnectEmulator({
    time,
    timeScale: options.telephonyTimeScale ?? 30,
    ...(options.connectTalkSeconds === undefined ? {} : { durationSeconds: options.connectTalkSeconds }),
    // Each rule's pattern, as EventBridge matches it (the instance is the emulator's own).
    deliver: async (event) => {
      for (const id of ['connect-events', 'connect-opt-outs'] as const) {
        if (matchesContactRule(event.detail, CONNECT_EVENT_RULES[id])) await invoke(id, event);
      }
    },
  });
  return {
    emulator,
    target: (id: ConnectTargetId, loaded: Handler<EventBridgeEvent, unknown>) => {
      handlers.set(id, loaded);
    },
  };
}

/** The system's time and timers, the clock read `offset` ms later (timers are not shifted). */
function shiftedTime(offset: number): SandboxTime {
  return offset === 0 ? realTime : { ...realTime, now: () => Date.now() + offset };
}

/** The functions Amazon Connect's contact events are delivered to. */
type ConnectTargetId = 'connect-events' | 'connect-opt-outs';

/** Starts the local cloud, then everything that runs on it. */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const log = options.log ?? (() => {});
  const cloud = await startLocalCloud({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    stage: options.stage ?? 'local',
    ...(options.visibilityTimeoutSeconds
      ? { visibilityTimeoutSeconds: options.visibilityTimeoutSeconds }
      : {}),
    log,
  });
  const offset = options.startAt === undefined ? 0 : Math.round(options.startAt - Date.now());
  const starter = new LocalStackStarter({ options, log, cloud, clockOffsetMs: offset });
  try {
    return await starter.start();
  } catch (error) {
    await starter.stopAll();
    throw error;
  }
}

/** The sandboxes and emulators standing in for LINE and the telephony providers. */
interface Providers {
  readonly line: LineSandbox;
  readonly connect: TelephonyEmulator;
  /** Names the contact events' target handlers, once they are loaded. */
  readonly connectTarget: (id: ConnectTargetId, handler: Handler<EventBridgeEvent, unknown>) => void;
  readonly twilio: TelephonyEmulator;
  readonly telephony: TelephonySandbox;
}

/** The channel table, as `npm run channel` writes it on AWS. */
interface ChannelAdmin {
  readonly doc: DynamoDBDocumentClient;
  readonly putChannel: LocalStack['putChannel'];
  readonly putTelephonySecret: LocalStack['putTelephonySecret'];
}

interface LocalStackStarterDeps {
  readonly options: LocalStackOptions;
  readonly log: (line: string) => void;
  readonly cloud: LocalCloud;
  /** Milliseconds every process adds to the system's time ({@link LocalStackOptions.startAt}). */
  readonly clockOffsetMs: number;
}

/**
 * Starts, on a running local cloud, each part of the stack in turn, remembering how to stop each;
 * {@link stopAll} stops them (and the cloud) in the reverse order.
 */
class LocalStackStarter {
  readonly #options: LocalStackOptions;
  readonly #log: (line: string) => void;
  readonly #cloud: LocalCloud;
  readonly #stoppers: (() => Promise<void>)[];
  /** The SES stand-in and its events' wiring, once started (the brokers send email through it). */
  #email: LocalEmail | undefined;
  #sms: LocalSms | undefined;
  readonly #clockOffsetMs: number;

  constructor(deps: LocalStackStarterDeps) {
    this.#options = deps.options;
    this.#log = deps.log;
    this.#cloud = deps.cloud;
    this.#clockOffsetMs = deps.clockOffsetMs;
    this.#stoppers = [() => deps.cloud.stop()];
  }

  async start(): Promise<LocalStack> {
    const providers = await this.#startProviders();
    this.#setHandlerEnvironment(providers);
    const admin = await this.#seedChannels(providers.line);
    for (const id of ['connect-events', 'connect-opt-outs'] as const)
      providers.connectTarget(id, await loadHandler<EventBridgeEvent, unknown>(id));
    const jobs = await startJobsLocal({ cloud: this.#cloud, log: this.#log });
    this.#stoppers.push(() => jobs.stop());
    const cognito = await this.#startConsole();
    const api = await this.#startApi(jobs, cognito);
    const processor = await this.#startProcessor();
    const outcomes = await startLocalOutcomeWebhooks({ cloud: this.#cloud, log: this.#log });
    this.#stoppers.push(() => outcomes.stop());
    const { email, sms } = await this.#startUnkeyedChannels();
    const fleet = this.#options.fleet ? await this.#startFleet(providers, api, admin.doc) : undefined;
    const { line, connect, twilio, telephony } = providers;
    return {
      cloud: this.#cloud,
      api,
      line,
      processor,
      outcomes,
      telephony,
      connect,
      twilio,
      ses: email.ses,
      emailEventsRecorded: () => email.recorded(),
      sms: sms.sms,
      smsRecorded: () => sms.recorded(),
      jobs,
      fleet,
      operator: makeOperatorClient({
        baseUrl: api.url,
        region: this.#cloud.region,
        credentials: LOCAL_CREDENTIALS,
      }),
      cognito,
      consoleUrl: `${api.url}/console`,
      unsubscribe: new LocalUnsubscribeLinks(api.url, { now: () => Date.now() + this.#clockOffsetMs }),
      clock: { now: () => Date.now() + this.#clockOffsetMs },
      webhookUrl: (channelId) => `${api.url}/webhooks/line/${encodeURIComponent(channelId)}`,
      putChannel: admin.putChannel,
      putTelephonySecret: admin.putTelephonySecret,
      stop: () => this.stopAll(),
    };
  }

  /** The SES and End User Messaging SMS stand-ins, their events wired to email-events and sms-events. */
  async #startUnkeyedChannels(): Promise<{ email: LocalEmail; sms: LocalSms }> {
    const clock = { now: () => Date.now() + this.#clockOffsetMs };
    const email = await startLocalEmail({
      cloud: this.#cloud,
      log: this.#log,
      ses: {
        clock,
        ...(this.#options.sentEmailDir === undefined ? {} : { outbox: this.#options.sentEmailDir }),
      },
    });
    this.#stoppers.push(() => email.stop());
    this.#email = email;
    const sms = await startLocalSms({ cloud: this.#cloud, log: this.#log, sms: { clock } });
    this.#stoppers.push(() => sms.stop());
    this.#sms = sms;
    return { email, sms };
  }

  /** Stops what was started, last first (the cloud last of all); a failing stop does not stop the rest. */
  async stopAll(): Promise<void> {
    for (const stop of this.#stoppers.reverse()) await stop().catch(() => {});
  }

  /** Region and credentials for the SDK clients that talk to the local cloud. */
  get #clientBase() {
    return { region: this.#cloud.region, credentials: LOCAL_CREDENTIALS };
  }

  async #startProviders(): Promise<Providers> {
    const options = this.#options;
    const offset = this.#clockOffsetMs;
    const time = shiftedTime(offset);
    const line = await startLineSandbox({
      channels: [{ channelId: DEMO_CHANNEL.channelId, accessToken: DEMO_CHANNEL.accessToken }],
      clock: time,
      ...(options.lineRateLimitPerSecond ? { rateLimitPerSecond: options.lineRateLimitPerSecond } : {}),
    });
    this.#stoppers.push(() => line.stop());
    this.#log(`LINE sandbox    ${line.url} (Messaging API stand-in: retry keys, rate limit, faults)`);

    const { emulator: connect, target: connectTarget } = await startLocalConnect(options, time);
    this.#stoppers.push(() => connect.stop());
    this.#log(
      `Amazon Connect  ${connect.url} (emulator: StartOutboundVoiceContact, DescribeContact, GetContactAttributes, contact events)`,
    );

    const twilio = await startTwilioEmulator({ timeScale: options.telephonyTimeScale ?? 30, time });
    this.#stoppers.push(() => twilio.stop());
    this.#log(`Twilio          ${twilio.url} (emulator: Calls.json, signed status callbacks)`);

    const telephony = await startTelephonySandbox({
      time,
      callbackSecret: LOCAL_TELEPHONY.callbackSecret,
      apiToken: LOCAL_TELEPHONY.apiToken,
      timeScale: options.telephonyTimeScale ?? 30,
    });
    this.#stoppers.push(() => telephony.stop());
    this.#log(
      `Telephony       ${telephony.url} (provider sandbox: answers, busy, no-answer, signed callbacks)`,
    );
    return { line, connect, connectTarget, twilio, telephony };
  }

  /** Handlers read their configuration once, at import: set the environment first. */
  #setHandlerEnvironment({ line, connect }: Providers): void {
    Object.assign(process.env, this.#cloud.env(), {
      [CLOCK_OFFSET_ENV]: String(this.#clockOffsetMs),
      LINE_API_URL: line.url,
      AWS_ENDPOINT_URL_CONNECT: connect.url,
      TELEPHONY_PROVIDER: LOCAL_TELEPHONY.provider,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      // One process on a small machine runs every function and emulator: its stalls are not AWS's latency.
      [REQUEST_TIMEOUT_SCALE_ENV]: process.env[REQUEST_TIMEOUT_SCALE_ENV] ?? '10',
      POWERTOOLS_METRICS_DISABLED: process.env.POWERTOOLS_METRICS_DISABLED ?? 'true',
      ...LOCAL_OUTCOME_ENV,
      ...localUnsubscribeEnv(),
    });
  }

  /** Puts the demo channel and the sandbox's callback secret where the handlers read them. */
  async #seedChannels(line: LineSandbox): Promise<ChannelAdmin> {
    const cloud = this.#cloud;
    const doc = makeDocumentClient(makeDynamoClient({ ...this.#clientBase, endpoint: cloud.dynamoEndpoint }));
    const channels = new DynamoChannelStore(doc, cloud.tableNames.channels!);
    const putChannel = async (input: unknown): Promise<Channel> => {
      const channel = channelFromInput(input, Date.now());
      await channels.put(channel);
      line.addChannel({ channelId: channel.channelId, accessToken: channel.accessToken });
      return channel;
    };
    await putChannel(DEMO_CHANNEL);
    // The sandbox's callback secret, where the call-status function reads it (as an operator's
    // `npm run channel -- put-callback-secret` stores it on AWS).
    const secretStore = new DynamoCallbackSecretStore(doc, cloud.tableNames.channels!);
    await secretStore.put(
      rotateCallbackSecret(undefined, {
        provider: LOCAL_TELEPHONY.provider,
        secret: LOCAL_TELEPHONY.callbackSecret,
        now: Date.now(),
      }),
    );
    const putTelephonySecret = async (clientId: string, secret: string) => {
      const name = clientSecretName(clientId);
      await secretStore.put(
        rotateCallbackSecret(await secretStore.get(name), {
          provider: name,
          secret,
          now: Date.now(),
          graceMs: 0,
        }),
      );
    };
    return { doc, putChannel, putTelephonySecret };
  }

  /**
   * The console: its user pool (the Cognito emulator) and its files, built into a folder the
   * console function reads as it reads its layer in AWS.
   */
  async #startConsole(): Promise<CognitoEmulator> {
    const cognito = await startCognitoEmulator({
      region: this.#cloud.region,
      ...LOCAL_USER_POOL,
      users: this.#options.consoleUsers ?? LOCAL_CONSOLE_USERS,
    });
    this.#stoppers.push(() => cognito.stop());
    const filesDir = builtConsole();
    Object.assign(process.env, {
      CONSOLE_FILES_DIR: filesDir,
      USER_POOL_ID: cognito.userPoolId,
      USER_POOL_CLIENT_ID: cognito.clientId,
      COGNITO_ENDPOINT: cognito.url,
      STORAGE_ORIGIN: new URL(this.#cloud.s3Endpoint).origin,
    });
    this.#log(`Cognito         ${cognito.url} (user pool emulator: sign-in, tokens, keys)`);
    return cognito;
  }

  /**
   * The HTTP API: the public routes' Lambdas, the operator routes behind the IAM authorizer, the
   * console's behind the JWT authorizer (the user pool's issuer and app client).
   */
  async #startApi(jobs: JobsLocal, cognito: CognitoEmulator): Promise<ApiGatewayServer> {
    const log = this.#log;
    const api = await startApiGateway({
      routes,
      functions: {
        'webhook-receiver': await httpFunction('webhook-receiver'),
        'call-status': await httpFunction('call-status'),
        console: await httpFunction('console'),
        'channels-api': await httpFunction('channels-api'),
        unsubscribe: await unsubscribeHttpFunction(),
        ...jobs.httpFunctions,
      },
      port: this.#options.port ?? 0,
      iam: this.#iam(),
      jwt: { issuer: cognito.issuer, audience: [cognito.clientId] },
      onError: (error, route) => log(`${route} failed: ${(error as Error).stack ?? String(error)}`),
      onClientGone: (request) =>
        log(`${request}: the caller closed the connection mid-request; nothing answered`),
    });
    this.#stoppers.push(() => api.stop());
    log(`HTTP API        ${api.url} (API Gateway stand-in, payload v2)`);
    for (const route of routes.filter((r) => r.auth !== 'jwt')) {
      log(`  ${route.method.padEnd(5)} ${api.url}${route.path}`);
    }
    log(`  (and the operator routes again under ${api.url}/console/api, for the console's signed-in users)`);
    return api;
  }

  /** The local credentials are the administrator; each extra operator has its own policy. */
  #iam() {
    const operators = Object.entries(this.#options.operators ?? {});
    return {
      secrets: {
        [LOCAL_CREDENTIALS.accessKeyId]: LOCAL_CREDENTIALS.secretAccessKey,
        ...Object.fromEntries(operators.map(([id, o]) => [id, o.secretAccessKey])),
      },
      region: this.#cloud.region,
      policies: Object.fromEntries(operators.map(([id, o]) => [id, o.statements])),
    };
  }

  /** The webhook processor, fed from its queue as Lambda's event source mapping would. */
  async #startProcessor(): Promise<SqsPoller> {
    const options = this.#options;
    const processorSpec = functions['webhook-processor'];
    const webhookQueue = this.#cloud.queues[processorSpec.queueSource!.queue]!;
    const sqs = new SQSClient({ ...this.#clientBase, endpoint: this.#cloud.sqsEndpoint });
    this.#stoppers.push(async () => sqs.destroy());
    const processor = startSqsPoller({
      sqs,
      queueUrl: webhookQueue.url,
      queueArn: webhookQueue.arn,
      functionName: processorSpec.id,
      handler: (options.wrapProcessor ?? ((h) => h))(
        await loadHandler<SQSEvent, unknown>('webhook-processor'),
      ),
      functionTimeoutMs: processorSpec.timeoutSeconds * 1000,
      batchSize: processorSpec.queueSource!.batchSize,
      maxBatchingWindowMs: (processorSpec.queueSource!.maxBatchingWindowSeconds ?? 0) * 1000,
      concurrency: options.processorConcurrency ?? 4,
      onError: (error) => this.#log(`webhook-processor: ${(error as Error).message}`),
    });
    this.#stoppers.push(() => processor.stop());
    this.#log(`SQS → Lambda    webhook-processor polls ${webhookQueue.url}`);
    return processor;
  }

  /** The broker fleet: the ECS agent and service stand-ins, and the job manager on a schedule. */
  async #startFleet(providers: Providers, api: ApiGatewayServer, doc: DynamoDBDocumentClient) {
    const options = this.#options;
    const cloud = this.#cloud;
    const agent = await startEcsAgent();
    this.#stoppers.push(() => agent.stop());
    const fleet = startLocalFleet({
      agent,
      version: 'local-1',
      env: this.#brokerEnv(providers, api),
      onDeploy: publishDesiredVersion(doc, cloud.tableNames.control!),
      onOutput: (id, line) => {
        // A broker's metric records (EMF, one per client a second) are CloudWatch's on AWS; here
        // they would bury the progress lines. SWITCHBOARD_SHOW_METRICS=1 prints them.
        if (isMetricRecord(line) && process.env.SWITCHBOARD_SHOW_METRICS !== '1') return;
        this.#log(`[broker ${id}] ${line}`);
      },
    });
    this.#stoppers.push(() => fleet.stop());
    const scheduler = startScheduler({
      intervalMs: options.jobManagerIntervalMs ?? 2_000,
      timeoutMs: functions['job-manager'].timeoutSeconds * 1000,
      handler: makeLocalJobManager({
        doc,
        controlTable: cloud.tableNames.control!,
        tasksTable: cloud.tableNames.tasks!,
        cloud,
        fleet,
        maxBrokers: options.maxBrokers ?? 2,
        log: new PowertoolsLog('job-manager', { level: 'warn' }),
      }),
      onError: (error) => this.#log(`job-manager: ${(error as Error).message}`),
    });
    this.#stoppers.push(() => scheduler.stop());
    this.#log(
      `ECS service     local broker fleet (task protection at ${agent.url}), job manager every ${(options.jobManagerIntervalMs ?? 2_000) / 1000} s`,
    );
    return fleet;
  }

  /** Every broker's environment: the local cloud, every provider, the callback routes. */
  #brokerEnv(providers: Providers, api: ApiGatewayServer): Record<string, string> {
    const options = this.#options;
    return {
      ...this.#cloud.env(),
      [CLOCK_OFFSET_ENV]: String(this.#clockOffsetMs),
      TELEPHONY_API_URL: providers.telephony.url,
      TELEPHONY_API_TOKEN: LOCAL_TELEPHONY.apiToken,
      AWS_ENDPOINT_URL_CONNECT: providers.connect.url,
      CALL_STATUS_CALLBACK_URL: `${api.url}/providers/${LOCAL_TELEPHONY.provider}/calls/status`,
      TWILIO_API_URL: providers.twilio.url,
      TWILIO_CALLBACK_URL: `${api.url}${TWILIO_STATUS_PATH}`,
      LINE_API_URL: providers.line.url,
      // Every email's List-Unsubscribe link to the local API's route (plain http to a loopback host,
      // which `shared/email/unsubscribe.ts` allows only there).
      ...localUnsubscribeEnv(api.url),
      // Email jobs through the SES stand-in, under the stage's configuration set (its events reach email-events).
      ...(this.#email
        ? {
            AWS_ENDPOINT_URL_SESV2: this.#email.ses.url,
            SES_CONFIGURATION_SET: emailConfigurationSetName(this.#cloud.stage),
          }
        : {}),
      // SMS jobs through the End User Messaging SMS stand-in, under the stage's configuration set (its events reach sms-events).
      ...(this.#sms
        ? {
            AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2: this.#sms.sms.url,
            SMS_CONFIGURATION_SET: this.#sms.configurationSet,
          }
        : {}),
      ...(options.lineRateLimitPerSecond
        ? { LINE_RATE_PER_SECOND: String(options.lineRateLimitPerSecond) }
        : {}),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      ...options.brokerEnv,
    };
  }
}

let consoleDir: string | undefined;

/**
 * The console's files, built once per process (every local stack of a test run serves the same
 * page), into a folder removed when the process exits.
 */
function builtConsole(): string {
  if (consoleDir) return consoleDir;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-console-'));
  buildConsole(dir);
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  consoleDir = dir;
  return dir;
}

/** A Lambda behind an HTTP route: its handler and timeout. */
async function httpFunction(id: 'webhook-receiver' | 'call-status' | 'console' | 'channels-api') {
  return {
    handler: await loadHandler<APIGatewayProxyEventV2, APIGatewayProxyResultV2>(id),
    timeoutMs: functions[id].timeoutSeconds * 1000,
  };
}
