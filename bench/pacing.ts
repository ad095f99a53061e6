/**
 * bench/pacing: how close the broker comes to the physical bound of a client's contract.
 *
 * In one process and one run, for each scenario, against one telephony sandbox on an accelerated
 * clock, side by side as three clients with the same contract and the same calls:
 *   - Switchboard: the real {@link Broker} (lease, fleet work list and tasks in DynamoDB Local,
 *     the HTTP telephony provider, its call-ended nudge server), with the sandbox's status
 *     callbacks going through the API Gateway stand-in to the call-status Lambda handler, which
 *     settles the task and nudges the broker, as deployed;
 *   - the common design, a broker that polls every N call-seconds (5 and 1): callbacks are only
 *     recorded, and each poll counts the calls in flight and starts up to the free slots.
 * The far side's ring records give each makespan, the maxima (calls in flight, starts per
 * second) and the latency from a call's end to the start it let through.
 *
 * Scaling: time scale S means one wall second carries S call-seconds. Everything that is a
 * duration in the scenario is divided by S (call durations, the line's rate interval, the polling
 * period, the broker's rate margin); the limit is not. The brokers' own fixed costs (HTTP round
 * trips, DynamoDB writes, the nudge) are NOT scaled, so they weigh S times more here than in
 * production: the measured ratios are pessimistic for both contenders.
 *
 * `--provider http,connect,twilio` (the default: all three) runs one Switchboard broker per provider in the
 * same run: the HTTP contract through its sandbox and signed callbacks, Twilio through its emulator
 * (form-encoded REST, callbacks signed with X-Twilio-Signature to the status route), and Amazon Connect through
 * its emulator (`StartOutboundVoiceContact`, contact events in EventBridge's envelope handled by
 * the connect-events use case, call links in DynamoDB). The baselines call through the HTTP sandbox.
 *
 *   npm run bench:pacing [-- --quick] [-- --scale 60] [-- --provider http,connect,twilio] [-- --checks-only]
 *
 * First (and last) it prints the cost of the start check per start with restricted periods off and
 * on (`bench/start-check.ts`); `--checks-only` prints only that.
 */
import { availableParallelism, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { makeCallStatusHandler } from '#lambdas/call-status/handler.ts';
import { startApiGateway } from '#local/api-gateway.ts';
import { LOCAL_CREDENTIALS, startLocalCloud } from '#local/cloud.ts';
import { LOCAL_CONNECT, startConnectEmulator } from '#local/connect-emulator.ts';
import { type RingRecord, startTelephonySandbox, type TelephonyEmulator } from '#local/telephony-sandbox.ts';
import { LOCAL_TWILIO, startTwilioEmulator } from '#local/twilio-emulator.ts';
import { makeConnectClient, makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { ConnectTelephonyProvider } from '#shared/adapters/connect-telephony.ts';
import { DynamoCallLinks } from '#shared/adapters/dynamo-call-links.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoFleetWorkReader, DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { makeEcsAgentProtection } from '#shared/adapters/ecs-agent.ts';
import { TwilioTelephonyProvider } from '#shared/adapters/twilio-telephony.ts';
import { Broker } from '#shared/broker/broker.ts';
import { makeRecordContactEvent } from '#shared/broker/contact-events.ts';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import { DEFAULT_SERVE_SETTINGS } from '#shared/broker/serve-settings.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { TaskProtectionKeeper } from '#shared/broker/task-protection.ts';
import { makeRecordTwilioStatus } from '#shared/broker/twilio-status.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { systemClock, systemTimers } from '#shared/pacing/clock.ts';
import { routes } from '#shared/routes.ts';
import { HttpTelephonyProvider } from '#shared/telephony/http-provider.ts';
import { oneProvider, type TelephonyProvider } from '#shared/telephony/port.ts';
import { TWILIO_STATUS_PATH } from '#shared/telephony/twilio.ts';
import { startBrokerHttpServer } from '#worker/http.ts';
import { runPollingBroker, startCallbackStore } from './lib/pacing-baseline.ts';
import {
  figuresOf,
  fixedScenario,
  greedyMakespan,
  lowerBound,
  mixedScenario,
  type PacingScenario,
  percentile,
  type RunFigures,
  reactionTimes,
} from './lib/pacing-plan.ts';
import { pendingTask, runningJob, seedRunningJob } from './lib/seed-job.ts';
import {
  checkLines,
  measureCallStartChecks,
  personP99Line,
  withoutSuppressionChecks,
} from './lib/start-checks.ts';
import { measureStartCheck, startCheckLine } from './start-check.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    scale: { type: 'string', default: '25' },
    polls: { type: 'string', default: '5,1' },
    provider: { type: 'string', default: 'http,connect,twilio' },
    'checks-only': { type: 'boolean', default: false },
    /** Call starts per variant in the contact-policy checks' lines (0 skips them). */
    'start-checks': { type: 'string', default: '300' },
    /** Only the checks' lines, no pacing scenario. */
    'start-checks-only': { type: 'boolean', default: false },
  },
});

// The start check every start passes (hours, restricted periods, holidays), off and on: printed
// first, and alone with --checks-only (no local cloud needed).
const startCheck = startCheckLine(measureStartCheck());
console.log(startCheck);
if (values['checks-only']) process.exit(0);
const BENCH_PROVIDERS = ['http', 'connect', 'twilio'] as const;
type BenchProvider = (typeof BENCH_PROVIDERS)[number];
const providers = values.provider.split(',').map((p) => p.trim()) as BenchProvider[];
if (providers.length === 0 || providers.some((p) => !BENCH_PROVIDERS.includes(p))) {
  throw new RangeError(`--provider: a comma-separated list of http, connect, twilio; got ${values.provider}`);
}
const quick = values.quick;
const timeScale = Number(values.scale);
const polls = values.polls.split(',').map(Number);
if (!(timeScale > 0) || polls.some((p) => !(p > 0))) throw new RangeError('--scale and --polls must be > 0');

const SECRET = 'bench-pacing-callback-secret';
const PROVIDER = 'sandbox';
/** The broker's default extra spacing between starts, wall ms at time scale 1. */
const RATE_MARGIN_MS = DEFAULT_SERVE_SETTINGS.rateMarginMs;
const MAX_CALL_SECONDS = 600;

const startChecks = Number(values['start-checks']);
if (!Number.isInteger(startChecks) || startChecks < 0)
  throw new RangeError('--start-checks must be a whole number');
const scenarios: PacingScenario[] = values['start-checks-only']
  ? []
  : [
      fixedScenario({ id: 'fixed', count: quick ? 60 : 600, seconds: 60, limit: 6, rate: 1, timeScale }),
      mixedScenario({ id: 'mixed', count: quick ? 60 : 240, limit: 6, rate: 1, timeScale }),
      fixedScenario({ id: 'wide', count: quick ? 200 : 400, seconds: 60, limit: 20, rate: 5, timeScale }),
    ];

process.env.LOG_LEVEL = 'error';
const started = Date.now();
const cloud = await startLocalCloud({ stage: 'pacing' });
const ddb = new DynamoDBClient({
  region: cloud.region,
  endpoint: cloud.dynamoEndpoint,
  credentials: LOCAL_CREDENTIALS,
});
const doc = makeDocumentClient(ddb);
const controlTable = cloud.tableNames.control!;
const tasksTable = cloud.tableNames.tasks!;
const settleDeps = {
  tasks: new DynamoBrokerTaskStore(doc, { controlTable, tasksTable }),
  leases: new DynamoLeaseStore(doc, controlTable),
  notifier: makeHttpBrokerNotifier(),
  clock: systemClock,
};
const api = await startApiGateway({
  routes: routes.filter((r) => r.functionId === 'call-status'),
  functions: {
    'call-status': {
      timeoutMs: 10_000,
      handler: makeCallStatusHandler({
        provider: PROVIDER,
        record: makeRecordCallStatus({ ...settleDeps, secrets: SECRET }),
        twilio: {
          record: makeRecordTwilioStatus({ ...settleDeps, authTokens: async () => [LOCAL_TWILIO.authToken] }),
        },
        log: silentLogger,
      }),
    },
  },
});
const callbackUrl = `${api.url}/providers/${PROVIDER}/calls/status`;
const callbackStore = await startCallbackStore();

const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};

/** The client, its running job and one pending task per call, in the scenario's order. */
async function seedOurs(clientId: string, scenario: PacingScenario): Promise<void> {
  const now = Date.now();
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: scenario.limit,
    callsPerSecond: scenario.rate * scenario.timeScale,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS,
    defaultRegion: 'JP',
    updatedAt: now,
  };
  const n = scenario.calls.length;
  const job = runningJob(
    {
      name: `bench ${scenario.id}`,
      channel: 'call',
      scenarioId: 's1',
      startAt: now - 60_000,
      maxAttempts: 1,
      retryDelaySeconds: 60,
      maxCallDurationSeconds: MAX_CALL_SECONDS,
    },
    clientId,
    n,
    now,
  );
  await seedRunningJob(
    doc,
    { controlTable, tasksTable },
    {
      client,
      job,
      count: scenario.calls.length,
      tasks: (i) =>
        pendingTask(
          job,
          i,
          {
            channel: 'call',
            recipient: scenario.calls[i]!.to,
            variables: {},
            // One ms apart: the broker takes them in the same order as the baseline.
            readyAt: now - 60_000 + i,
            updatedAt: now,
          },
          5,
        ),
    },
  );
  await doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: now }),
    }),
  );
}

/** The Connect emulator and how contact events reach the use case (EventBridge → connect-events). */
async function startConnect(scenario: PacingScenario): Promise<TelephonyEmulator> {
  const record = makeRecordContactEvent({
    tasks: new DynamoBrokerTaskStore(doc, { controlTable, tasksTable }),
    leases: new DynamoLeaseStore(doc, controlTable),
    notifier: makeHttpBrokerNotifier(),
    links: new DynamoCallLinks(doc, tasksTable),
    clock: systemClock,
  });
  return startConnectEmulator({
    seed: 11,
    timeScale: scenario.timeScale,
    overrides: Object.fromEntries(scenario.calls.map((c) => [c.to, c.script])),
    deliver: async (event) => {
      await record(event);
    },
  });
}

function connectProvider(emulator: TelephonyEmulator): TelephonyProvider {
  const client = makeConnectClient({
    region: cloud.region,
    endpoint: emulator.url,
    credentials: LOCAL_CREDENTIALS,
  });
  return new ConnectTelephonyProvider(client, {
    provider: 'connect',
    instanceId: LOCAL_CONNECT.instanceId,
    contactFlowId: LOCAL_CONNECT.contactFlowId,
    sourcePhoneNumber: LOCAL_CONNECT.sourcePhoneNumber,
  });
}

function twilioProvider(emulator: TelephonyEmulator, clientId: string): TelephonyProvider {
  return new TwilioTelephonyProvider({
    settings: {
      provider: 'twilio',
      accountSid: LOCAL_TWILIO.accountSid,
      from: LOCAL_TWILIO.from,
      voiceUrl: LOCAL_TWILIO.voiceUrl,
    },
    apiUrl: emulator.url,
    callbackUrl: `${api.url}${TWILIO_STATUS_PATH}`,
    clientId,
    authToken: async () => LOCAL_TWILIO.authToken,
    links: new DynamoCallLinks(doc, tasksTable),
    clock: systemClock,
  });
}

/** Switchboard's broker, wired as `worker/process.ts` does, with the rate margin scaled like every other duration. */
async function startOurBroker(provider: TelephonyProvider, scenario: PacingScenario, id: string) {
  let broker: Broker | undefined;
  /** Call id → when its call-ended nudge reached the broker, wall ms. */
  const nudges = new Map<string, number>();
  const server = await startBrokerHttpServer(
    {
      callEnded: (ended) => {
        if (ended.callId !== undefined && !nudges.has(ended.callId)) nudges.set(ended.callId, Date.now());
        return broker?.callEnded(ended) ?? Promise.resolve();
      },
      health: () => ({}),
    },
    { host: '127.0.0.1', port: 0 },
  );
  const logger = silentLogger;
  broker = new Broker({
    leases: new DynamoLeaseStore(doc, controlTable, { endpoint: server.url }),
    tasks: new DynamoBrokerTaskStore(doc, { controlTable, tasksTable, now: () => Date.now() }),
    providers: oneProvider(provider),
    callLinks: new DynamoCallLinks(doc, tasksTable),
    fleet: new DynamoFleetWorkReader(doc, controlTable),
    protection: new TaskProtectionKeeper({
      port: makeEcsAgentProtection({ agentUri: undefined }),
      clock: systemClock,
      timers: systemTimers,
      logger,
    }),
    clock: systemClock,
    timers: systemTimers,
    logger,
    settings: {
      ...DEFAULT_SERVE_SETTINGS,
      rateMarginMs: RATE_MARGIN_MS / scenario.timeScale,
      callbackUrl,
      brokerId: `bench-broker-${id}-${scenario.id}`,
      version: 'v1',
      leaseMs: 30_000,
      idleWaitMs: 100,
      stopGraceMs: 10_000,
      noWorkBackoffMs: 30_000,
    },
  });
  const running = broker;
  const done = running.run().finally(() => server.stop());
  return {
    nudges,
    stop: async () => {
      running.stop('sigterm');
      await done;
    },
  };
}

interface Contender {
  readonly name: string;
  readonly clientId: string;
  finishedAt?: number;
}

interface ContenderResult {
  readonly name: string;
  readonly finished: boolean;
  readonly figures: RunFigures;
  readonly rings: number;
  readonly maxInFlight: number;
  readonly maxStartsPerSecond: number;
  readonly repeatedRings: number;
}

async function until(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

interface Ours extends Contender {
  readonly provider: BenchProvider;
  readonly emulator: TelephonyEmulator;
  readonly broker: Awaited<ReturnType<typeof startOurBroker>>;
}

/** The far sides of one scenario: the HTTP sandbox (and its provider), and the emulators asked for. */
interface FarSides {
  readonly sandbox: Awaited<ReturnType<typeof startTelephonySandbox>>;
  readonly connect: TelephonyEmulator | undefined;
  readonly twilio: TelephonyEmulator | undefined;
  /** The HTTP provider through the sandbox (our http broker's, and every baseline's). */
  readonly provider: TelephonyProvider;
}

async function startFarSides(scenario: PacingScenario): Promise<FarSides> {
  const S = scenario.timeScale;
  const sandbox = await startTelephonySandbox({
    callbackSecret: SECRET,
    seed: 11,
    timeScale: S,
    overrides: Object.fromEntries(scenario.calls.map((c) => [c.to, c.script])),
  });
  const connect = providers.includes('connect') ? await startConnect(scenario) : undefined;
  const twilio = providers.includes('twilio')
    ? await startTwilioEmulator({
        seed: 11,
        timeScale: S,
        overrides: Object.fromEntries(scenario.calls.map((c) => [c.to, c.script])),
      })
    : undefined;
  const provider = new HttpTelephonyProvider({
    baseUrl: sandbox.url,
    apiToken: sandbox.apiToken,
    clock: systemClock,
  });
  return { sandbox, connect, twilio, provider };
}

/** One Switchboard broker per provider asked for, each with its own client seeded. */
async function startOurs(scenario: PacingScenario, far: FarSides): Promise<Ours[]> {
  const ours: Ours[] = [];
  for (const name of providers) {
    const clientId = `ours-${name}-${scenario.id}`;
    await seedOurs(clientId, scenario);
    const emulator = name === 'connect' ? far.connect! : name === 'twilio' ? far.twilio! : far.sandbox;
    const through =
      name === 'connect'
        ? connectProvider(far.connect!)
        : name === 'twilio'
          ? twilioProvider(far.twilio!, clientId)
          : far.provider;
    const broker = await startOurBroker(through, scenario, name);
    ours.push({ name: `Switchboard, ${name}`, provider: name, clientId, emulator, broker });
  }
  return ours;
}

/** Runs each polling baseline through the HTTP sandbox; each settles when its run ends. */
function runBaselines(scenario: PacingScenario, baselines: Contender[], provider: TelephonyProvider) {
  const S = scenario.timeScale;
  return baselines.map((b, i) =>
    runPollingBroker({
      provider,
      store: callbackStore,
      clientId: b.clientId,
      calls: scenario.calls.map((c, k) => ({ to: c.to, taskId: `t${String(k).padStart(5, '0')}` })),
      limit: scenario.limit,
      wallRatePerSecond: scenario.rate * S,
      wallMarginMs: RATE_MARGIN_MS / S,
      pollMs: (polls[i]! * 1000) / S,
      maxDurationSeconds: MAX_CALL_SECONDS,
    }).then(
      () => {
        b.finishedAt = Date.now();
      },
      (error: unknown) => console.error(`${b.name} failed:`, error),
    ),
  );
}

/** Waits (within the budget) until each of our clients had every call rung and ended, then stops its broker. */
function runOurs(scenario: PacingScenario, ours: Ours[], budgetMs: number) {
  const n = scenario.calls.length;
  return ours.map(async (o) => {
    const done = await until(() => {
      const stats = o.emulator.stats(o.clientId);
      return stats.rings >= n && stats.inFlight === 0;
    }, budgetMs);
    if (done) o.finishedAt = Date.now();
    await o.broker.stop();
  });
}

/** A contender's figures from the rings its far side recorded for its client. */
function resultOf(scenario: PacingScenario, c: Contender, emulator: TelephonyEmulator): ContenderResult {
  const S = scenario.timeScale;
  const stats = emulator.stats(c.clientId);
  const rings: RingRecord[] = emulator.rings().filter((r) => r.clientId === c.clientId);
  return {
    name: c.name,
    finished: c.finishedAt !== undefined && stats.rings >= scenario.calls.length && stats.inFlight === 0,
    figures: figuresOf(rings, {
      limit: scenario.limit,
      wallIntervalMs: 1000 / (scenario.rate * S),
      timeScale: S,
    }),
    rings: stats.rings,
    maxInFlight: stats.maxInFlight,
    maxStartsPerSecond: stats.maxStartsPerSecond,
    repeatedRings: stats.repeatedRings.length,
  };
}

/** Where our reaction goes: the call's end through its status path to the nudge, then the broker. */
function breakdownOf(scenario: PacingScenario, o: Ours) {
  const ourRings = o.emulator.rings().filter((r) => r.clientId === o.clientId);
  const nudged = ourRings.flatMap((r) => {
    const at = o.broker.nudges.get(r.callId);
    return at === undefined || r.endedAt === undefined ? [] : [{ at, endedAt: r.endedAt }];
  });
  return {
    name: o.name,
    endToNudgeMs: nudged.map((x) => x.at - x.endedAt),
    nudgeToStartMs: reactionTimes(
      ourRings.map((r) => r.startedAt),
      nudged.map((x) => x.at),
      { limit: scenario.limit, wallIntervalMs: 1000 / (scenario.rate * scenario.timeScale) },
    ),
    nudgesMissing: ourRings.length - nudged.length,
  };
}

async function runScenario(scenario: PacingScenario) {
  const far = await startFarSides(scenario);
  const ours = await startOurs(scenario, far);
  const baselines: Contender[] = polls.map((p) => ({
    name: `baseline, polls every ${p} s`,
    clientId: `poll${p}-${scenario.id}`.replace('.', '_'),
  }));
  const bound = lowerBound(scenario);
  const budgetMs = ((bound * 3) / scenario.timeScale) * 1000 + 60_000;

  const baselineRuns = runBaselines(scenario, baselines, far.provider);
  await Promise.all(runOurs(scenario, ours, budgetMs));
  let budget: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(baselineRuns), new Promise((r) => (budget = setTimeout(r, budgetMs)))]);
  clearTimeout(budget); // a budget left running kept the process alive for minutes after the summary

  const results = [
    ...ours.map((o) => resultOf(scenario, o, o.emulator)),
    ...baselines.map((b) => resultOf(scenario, b, far.sandbox)),
  ];
  const breakdowns = ours.map((o) => breakdownOf(scenario, o));
  await far.sandbox.stop();
  await far.connect?.stop();
  await far.twilio?.stop();
  return { bound, results, breakdowns, oursCount: ours.length };
}

const fmt = (x: number, digits = 0) =>
  Number.isFinite(x)
    ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : '—';
const pad = (s: string, w: number) => s.padEnd(w);
const lpad = (s: string, w: number) => s.padStart(w);

console.log(
  `bench/pacing${quick ? ' --quick' : ''}: time scale ${timeScale} (1 call-second = ${fmt(1000 / timeScale, 1)} ms wall)`,
);
console.log(
  `Scaled by ${timeScale}: call durations, the line's rate (R call/s → ${timeScale}·R starts per wall second), the polling periods and the broker's ${RATE_MARGIN_MS} ms rate margin.`,
);
console.log(
  "Not scaled: the limit, and every fixed cost of the brokers (HTTP, DynamoDB, the call-status Lambda's nudge): they weigh ×" +
    `${timeScale} here against a call, so the ratios are pessimistic. Latencies are wall ms, unscaled.`,
);
console.log(
  `Machine: ${availableParallelism()} cores, load average at start ${loadavg()
    .map((x) => fmt(x, 2))
    .join(' ')} (other work on the machine inflates every latency below).`,
);
console.log(
  'All contenders of a scenario run at once on the same sandbox (separate clients, the same calls in the same order).\n',
);

const summary: string[] = [];
for (const [index, scenario] of scenarios.entries()) {
  const S = scenario.timeScale;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const { bound, results, breakdowns, oursCount } = await runScenario(scenario);
  loop.disable();
  const ideal = greedyMakespan(
    scenario.calls.map((c) => c.seconds),
    scenario.limit,
    scenario.rate,
  );
  console.log(`(${index + 1}) ${scenario.title}`);
  console.log(
    `    physical lower bound ${fmt(bound)} s (${fmt(bound / 60, 1)} min)${scenario.fixedDuration ? ', exact' : `; a zero-latency broker in task order: ${fmt(ideal)} s`}`,
  );
  console.log(
    `    ${pad('broker', 30)}${lpad('makespan', 12)}${lpad('/bound', 8)}${lpad('p50 react', 11)}${lpad('p99 react', 11)}` +
      `${lpad('maxInFlight', 13)}${lpad('starts/wall s', 15)}${lpad('starts/call s', 15)}${lpad('rings twice', 13)}`,
  );
  const oursResult = results[0]!;
  const oursSeconds = (oursResult.figures.makespanWallMs * S) / 1000;
  for (const r of results) {
    const seconds = (r.figures.makespanWallMs * S) / 1000;
    console.log(
      `    ${pad(r.name, 30)}${lpad(`${fmt(seconds)} s`, 12)}${lpad(fmt(seconds / bound, 3), 8)}` +
        `${lpad(`${fmt(percentile(r.figures.reactionMs, 50), 1)} ms`, 11)}${lpad(`${fmt(percentile(r.figures.reactionMs, 99), 1)} ms`, 11)}` +
        `${lpad(`${r.maxInFlight} ≤ ${scenario.limit}`, 13)}${lpad(`${r.maxStartsPerSecond} ≤ ${fmt(scenario.rate * S)}`, 15)}` +
        `${lpad(`${r.figures.maxStartsPerCallSecond} ≤ ${fmt(Math.ceil(scenario.rate))}`, 15)}${lpad(String(r.repeatedRings), 13)}` +
        (r.finished ? '' : `   NOT FINISHED (${r.rings}/${scenario.calls.length} rung)`),
    );
  }
  const p = (xs: readonly number[], q: number) => `${fmt(percentile(xs, q), 1)} ms`;
  for (const breakdown of breakdowns) {
    const path = breakdown.name.endsWith('connect')
      ? 'contact event, connect-events settling in DynamoDB'
      : 'callback, API Gateway, call-status Lambda settling in DynamoDB';
    console.log(
      `    ${breakdown.name}, react split: call end → nudge at the broker (${path}) p50 ${p(breakdown.endToNudgeMs, 50)}, p99 ${p(breakdown.endToNudgeMs, 99)}; ` +
        `nudge → next start (broker: start transaction, initiate) p50 ${p(breakdown.nudgeToStartMs, 50)}, p99 ${p(breakdown.nudgeToStartMs, 99)}` +
        (breakdown.nudgesMissing > 0 ? `; ${breakdown.nudgesMissing} calls never nudged` : ''),
    );
  }
  console.log(
    `    this process's event loop delay (every contender, the sandbox, the Lambda share it): p50 ${fmt(loop.percentile(50) / 1e6, 1)} ms, p99 ${fmt(loop.percentile(99) / 1e6, 1)} ms, max ${fmt(loop.max / 1e6, 1)} ms; load average ${loadavg()
      .map((x) => fmt(x, 2))
      .join(' ')}`,
  );
  if (!scenario.fixedDuration) {
    console.log(
      `    against a zero-latency broker taking the tasks in the same order (${fmt(ideal)} s; the bound above is not tight for mixed durations): ${results
        .map(
          (r) =>
            `${r.name.replace('baseline, polls every ', 'every ')} ${fmt((r.figures.makespanWallMs * S) / 1000 / ideal, 3)}`,
        )
        .join(', ')}`,
    );
  }
  const excessWallMs = oursResult.figures.makespanWallMs - (bound / S) * 1000;
  const realTime = 1 + excessWallMs / (bound * 1000);
  console.log(
    `    baseline / ours (${oursResult.name}): ${results
      .slice(oursCount)
      .map(
        (r) =>
          `${r.name.replace('baseline, polls every ', 'every ')}: ${fmt((r.figures.makespanWallMs * S) / 1000 / oursSeconds, 3)}×`,
      )
      .join(', ')}`,
  );
  console.log(
    `    ours at time scale 1 (est.): its ${fmt(excessWallMs / 1000, 2)} s wall above the bound are fixed costs, not scaled → ${fmt(realTime, 4)}`,
  );
  console.log('');
  summary.push(
    `(${index + 1}) ` +
      results
        .slice(0, oursCount)
        .map(
          (r) =>
            `${r.name} ${fmt((r.figures.makespanWallMs * S) / 1000 / bound, 3)} of bound, p99 ${fmt(percentile(r.figures.reactionMs, 99), 1)} ms`,
        )
        .join('; ') +
      '; ' +
      results
        .slice(oursCount)
        .map((r) => `${r.name}: ${fmt((r.figures.makespanWallMs * S) / 1000 / bound, 3)} of bound`)
        .join('; '),
  );
}
console.log(
  "react = wall ms from the moment both limits allowed the next start (the freed slot's call ended at the sandbox, i.e. its final callback was sent; the rate token was due) to that start at the sandbox. Target p99 ≤ 250 ms; goal makespan/bound ≤ 1.02.",
);
console.log(
  `starts/wall s: the sandbox's own count in any 1 s wall window (≤ R·S); starts/call s: in any 1 call-second window, from its ring records (≤ R).`,
);
for (const line of summary) console.log(line);
console.log(startCheck);
if (startChecks > 0) {
  const bare = withoutSuppressionChecks(
    new DynamoDBClient({
      region: cloud.region,
      endpoint: cloud.dynamoEndpoint,
      credentials: LOCAL_CREDENTIALS,
    }),
  );
  const figures = await measureCallStartChecks(doc, { controlTable, tasksTable }, startChecks, bare);
  const title =
    'contact-policy checks in the call start transaction (DynamoDB Local, sequential starts, interleaved; WCU: 2 per item of a transaction under 1 KB):';
  for (const line of checkLines(title, 'start', figures)) console.log(line);
  console.log(personP99Line(figures));
}
console.log(`total ${fmt((Date.now() - started) / 1000, 0)} s wall`);

await callbackStore.stop();
await api.stop();
ddb.destroy();
await cloud.stop();
