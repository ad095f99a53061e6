/**
 * bench/cost: what a message, a multicast recipient and a call cost on AWS, measured by counting
 * every request the real code makes on the local cloud and pricing it at published us-east-1
 * on-demand prices (bench/lib/prices.ts; the model and the sources: docs/cost.md).
 *
 * One run of the local stack as `npm start` runs it (the operator API, S3 upload, the ingest
 * Lambda fed by its queue, the job manager, the broker fleet as child processes, the LINE and
 * telephony sandboxes), three scenarios one after the other:
 *   - a personalised campaign (push, `{{name}}`/`{{coupon}}` filled per row): ingest → claim →
 *     send → outcome;
 *   - a multicast campaign (one text for every row, 500 recipients a request);
 *   - a call job through the telephony sandbox (start, signed status callbacks, settle);
 *   - an email campaign through the SES v2 stand-in (`local/ses-emulator.ts`, as `npm start` wires
 *     it): ingest → claim → SendBulkEmail, 50 recipients a call → SES's SEND and DELIVERY events of
 *     each recipient, one EventBridge event each → the rule's queue → the email-events Lambda in
 *     batches → its task's state.
 * Requests are counted by bench/lib/aws-meter.ts: in this process for the Lambdas (by function),
 * in each broker process by a preload (bench/lib/aws-meter-preload.ts), with the broker's CPU time.
 * Lambda invocations and their wall time come from local/lambda.ts; GB-s use each function's
 * configured memory (shared/functions.ts). What the Lambdas log is counted too (bench/lib/lambda-logs.ts:
 * they log as deployed, Powertools at `info` with metrics on) and priced as CloudWatch Logs, with the
 * lines Lambda adds and the X-Ray traces active tracing records. The job manager runs every second
 * here (every minute on AWS): it is a fixed cost per minute, not per message, and is printed apart.
 *
 * Designs: {@link DESIGNS} lists the designs measured side by side, each in a process of its own:
 * today's (message claims on each task), claim pages, and chunks (claim pages, and a message for
 * all held 500 recipients an item: docs/multicast-chunks.md) run at the last revision that had them
 * (bench/lib/baseline-revision.ts); personalised chunks, production's, run on this checkout.
 * Email, which has only today's storage, runs in the last design only.
 *
 *   npm run bench:cost [-- --messages 2000 --multicast 20000 --calls 500 --emails 2000]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { createJobWithList, putDemoClient } from '#local/demo-job.ts';
import { DEMO_MESSAGE, messageListCsv } from '#local/demo-messages.ts';
import { onEveryInvocation } from '#local/lambda.ts';
import { LOCAL_SES } from '#local/ses-emulator.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { BROKER_TASK_SIZE } from '#shared/broker/runtime.ts';
import type { EmailTemplate } from '#shared/email/template.ts';
import { type FunctionId, functions, type OutcomeFunctionId, outcomeFunctions } from '#shared/functions.ts';
import { type Job, keys } from '#shared/jobs/model.ts';
import { queues } from '#shared/resources.ts';
import { AwsMeter, addTallies, diffTally, sumWhere, type Tally, writeUnits } from './lib/aws-meter.ts';
import type { BrokerMeterFile } from './lib/aws-meter-preload.ts';
import { BEFORE_CLAIM_PAGES, baselineTree } from './lib/baseline-revision.ts';
import { LambdaLogMeter, type LogVolume } from './lib/lambda-logs.ts';
import {
  LAMBDA_PLATFORM_LOG_BYTES,
  LOG_EVENT_OVERHEAD_BYTES,
  PRICES,
  S3_TIER1,
  XRAY_SAMPLED_SHARE,
} from './lib/prices.ts';

const USAGE = `npm run bench:cost [-- options]
  --messages N    personalised messages (default 2000)
  --multicast N   multicast recipients (default 20000)
  --calls N       calls (default 500)
  --emails N      emails (default 2000)
  --email-rate N  the SES stand-in account's MaxSendRate, recipients a second (default 500)
  --only LIST     scenarios to run, comma-separated: push,multicast,call,email (default all)
  --help`;

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '2000' },
    multicast: { type: 'string', default: '20000' },
    calls: { type: 'string', default: '500' },
    emails: { type: 'string', default: '2000' },
    'email-rate': { type: 'string', default: '500' },
    only: { type: 'string', default: 'push,multicast,call,email' },
    // Internal: run one design in this process and write what it measured to `--out` (each design
    // runs in a process of its own: the local stack's Lambdas keep their clients for the process).
    design: { type: 'string' },
    out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

type ScenarioId = 'push' | 'multicast' | 'call' | 'email';

interface Scenario {
  readonly id: ScenarioId;
  readonly title: string;
  /** What one unit is, and how many units the price is quoted for. */
  readonly unit: string;
  readonly per: number;
  readonly perLabel: string;
  readonly size: number;
}

const SCENARIOS: readonly Scenario[] = (
  [
    {
      id: 'push',
      title: 'personalised messages (push)',
      unit: 'message',
      per: 1_000_000,
      perLabel: '1,000,000 personalised messages',
      size: Number(values.messages),
    },
    {
      id: 'multicast',
      title: 'multicast campaign (one text, 500 a request)',
      unit: 'recipient',
      per: 1_000_000,
      perLabel: '1,000,000 multicast recipients',
      size: Number(values.multicast),
    },
    {
      id: 'call',
      title: 'call job (telephony sandbox)',
      unit: 'call',
      per: 10_000,
      perLabel: '10,000 calls',
      size: Number(values.calls),
    },
    {
      id: 'email',
      title: 'email campaign (SES, SendBulkEmail, 50 recipients a call)',
      unit: 'email',
      per: 1_000_000,
      perLabel: '1,000,000 emails',
      size: Number(values.emails),
    },
  ] as const
).filter((s) => values.only.split(',').includes(s.id) && s.size > 0);

/** What one scenario of one design measured. */
interface Measured {
  readonly units: number;
  readonly seconds: number;
  readonly tally: Tally;
  readonly lambdas: Readonly<Record<string, { count: number; ms: number }>>;
  readonly brokerCpuSeconds: number;
  /**
   * Events of an AWS service put on the bus and sent by the rule to its queue (SES's, for email): each
   * an EventBridge event and an SQS SendMessage, which this process's meter does not see.
   */
  readonly busEvents?: number;
  /** What each Lambda logged (CloudWatch Logs on AWS). */
  readonly logs: Readonly<Record<string, LogVolume>>;
  readonly outcome: string;
}

/**
 * A design: runs every scenario it is given, returns what each measured. The designs before the
 * current one are measured at the last revision that had them (bench/lib/baseline-revision.ts):
 * this same bench, run there with `--design`.
 */
interface Design {
  readonly name: string;
  /** Scenarios this design does not measure (their storage is the same in every design). */
  readonly skips?: readonly ScenarioId[];
  /** The older revision it runs at; none: this checkout's code, by `run`. */
  readonly revision?: string;
  run?(scenarios: readonly Scenario[]): Promise<Map<ScenarioId, Measured>>;
}

const DESIGNS: readonly Design[] = [
  // Message claims recorded on each task, a task a recipient (the design before claim pages).
  { name: 'today', skips: ['email'], revision: BEFORE_CLAIM_PAGES },
  // Message claims recorded per page (docs/claim-pages.md), still a task a recipient.
  { name: 'claim pages', skips: ['email'], revision: BEFORE_CLAIM_PAGES },
  // And a message for all held 500 recipients a chunk item (docs/multicast-chunks.md).
  { name: 'chunks', skips: ['email'], revision: BEFORE_CLAIM_PAGES },
  // And a personalised message's recipients in chunks too, each member's variables with it: production now.
  { name: 'personalised chunks', run: (scenarios) => runOnLocalStack(scenarios, 'benchcostpers') },
];

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

// ---------------------------------------------------------------------------------------------
// One design on the local stack: the brokers' environment says which.

async function runOnLocalStack(
  scenarios: readonly Scenario[],
  stage: string,
): Promise<Map<ScenarioId, Measured>> {
  const meter = new AwsMeter('bench');
  const uninstall = meter.install();
  const logMeter = new LambdaLogMeter();
  const uninstallLogs = logMeter.install();
  const lambdas: Record<string, { count: number; ms: number }> = {};
  const stopCounting = onEveryInvocation((fn, ms) => {
    lambdas[fn] ??= { count: 0, ms: 0 };
    const entry = lambdas[fn];
    entry.count += 1;
    entry.ms += ms;
  });
  const meterDir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-cost-'));
  const preload = fileURLToPath(new URL('./lib/aws-meter-preload.ts', import.meta.url));
  // The Lambdas log as deployed (no LOG_LEVEL in the stack: Powertools' info; metrics on), counted
  // and not printed (bench/lib/lambda-logs.ts); the brokers, whose logs are not priced here, as before.
  process.env.LOG_LEVEL = 'info';
  process.env.POWERTOOLS_METRICS_DISABLED = 'false';
  const stack = await startLocalStack({
    stage,
    port: 0,
    ...(process.env.BENCH_VERBOSE ? { log: (line: string) => console.error(line) } : {}),
    fleet: true,
    maxBrokers: 1,
    telephonyTimeScale: 40,
    jobManagerIntervalMs: 1_000,
    brokerEnv: {
      NODE_OPTIONS: `--import ${preload}`,
      BENCH_METER_DIR: meterDir,
      DEFAULT_MAX_CALL_SECONDS: '4',
      RECONCILE_MARGIN_MS: '1000',
      BROKER_IDLE_WAIT_MS: '300',
      LOG_LEVEL: 'error',
    },
  });
  // Not built by the project's factory: the bench's own reads of the job are not counted.
  const reader = DynamoDBDocumentClient.from(
    new DynamoDBClient({
      region: stack.cloud.region,
      endpoint: stack.cloud.dynamoEndpoint,
      credentials: LOCAL_CREDENTIALS,
    }),
  );
  const brokers = () => readBrokerFiles(meterDir);
  const snapshot = () => {
    const b = brokers();
    return {
      tally: addTallies(meter.snapshot(), b.tally),
      cpu: b.cpuSeconds,
      lambdas: structuredClone(lambdas),
      logs: logMeter.snapshot(),
    };
  };
  const results = new Map<ScenarioId, Measured>();
  try {
    for (const scenario of scenarios) {
      const clientId = `cost-${scenario.id}`;
      const settings = await putDemoClient(stack, {
        clientId,
        maxConcurrentCalls: 50,
        callsPerSecond: 50,
      });
      if (scenario.id === 'email') await sendsEmail(stack, settings);
      await settle();
      const before = snapshot();
      const started = performance.now();
      const jobId = await createJobWithList(
        stack,
        clientId,
        jobOptions(scenario),
        Buffer.from(listFor(scenario)),
      );
      const job = await waitForJob(reader, stack, clientId, jobId);
      if (scenario.id === 'email') {
        const sent = stack.ses.sent();
        const first = sent[0]?.at ?? 0;
        console.error(
          `  … email: job ended after ${fmt((performance.now() - started) / 1000, 1)} s; SES accepted ${fmt(sent.reduce((n, e) => n + e.to.length, 0))} recipients in ${fmt(((sent.at(-1)?.at ?? first) - first) / 1000, 1)} s`,
        );
      }
      // An email's events reach email-events after its task ended: wait until they stop coming.
      if (scenario.id === 'email') await stack.emailEventsRecorded();
      const busEvents =
        scenario.id === 'email' ? stack.ses.events().reduce((n, e) => n + e.deliveries, 0) : undefined;
      const seconds = (performance.now() - started) / 1000;
      // The broker writes its counts every half second; let its last outcomes and release land.
      await settle();
      const after = snapshot();
      const c = job.counts;
      results.set(scenario.id, {
        units: c.completed + c.failed,
        seconds,
        tally: diffTally(after.tally, before.tally),
        lambdas: diffLambdas(after.lambdas, before.lambdas),
        brokerCpuSeconds: after.cpu - before.cpu,
        logs: diffLogs(after.logs, before.logs),
        ...(busEvents === undefined ? {} : { busEvents }),
        outcome: `${job.status}: ${c.completed} completed, ${c.failed} failed, ${c.cancelled} cancelled of ${c.tasks} tasks (${c.rows} rows, ${c.rejected} rejected)`,
      });
      console.error(`  … ${scenario.title}: ${results.get(scenario.id)!.outcome} in ${fmt(seconds, 1)} s`);
    }
  } finally {
    await stack.stop();
    uninstall();
    uninstallLogs();
    stopCounting();
    reader.destroy();
    rmSync(meterDir, { recursive: true, force: true });
  }
  return results;
}

function jobOptions(scenario: Scenario): Record<string, unknown> {
  switch (scenario.id) {
    case 'push':
      return { name: 'cost push', channel: 'message', message: DEMO_MESSAGE };
    case 'multicast':
      return {
        name: 'cost multicast',
        channel: 'message',
        message: '年末年始の営業時間のお知らせ: 12月29日から1月3日まで休業いたします。',
      };
    case 'call':
      return { name: 'cost calls', channel: 'call', scenarioId: 'reminder', maxAttempts: 1 };
    case 'email':
      return { name: 'cost email', channel: 'email', email: COST_EMAIL };
  }
}

/** The campaign's email: `{{name}}` and `{{coupon}}` are the list's columns (SES fills them, per entry). */
const COST_EMAIL: EmailTemplate = {
  subject: '{{name}} 様、12月のクーポンをお届けします',
  text: '{{name}} 様\n\nいつもご利用ありがとうございます。12月のクーポン {{coupon}} をお使いください。',
  html: '<p>{{name}} 様</p><p>いつもご利用ありがとうございます。12月のクーポン <b>{{coupon}}</b> をお使いください。</p>',
};

/**
 * The email client's settings: the stand-in's verified sender, and its account's rate raised so the
 * campaign takes seconds (the rate changes how long the broker runs, not what a recipient costs).
 */
async function sendsEmail(stack: LocalStack, settings: Awaited<ReturnType<typeof putDemoClient>>) {
  const { clientId, ...rest } = settings;
  const put = await stack.operator('PUT', `/clients/${clientId}`, {
    json: { ...rest, email: { from: LOCAL_SES.from, fromName: 'Switchboard コスト' } },
  });
  if (put.status !== 200) throw new Error(`email settings refused (${put.status}): ${put.body}`);
  stack.ses.account.set({ maxSendRate: Number(values['email-rate']), max24HourSend: -1 });
}

function listFor(scenario: Scenario): string {
  if (scenario.id === 'email') {
    // SES's mailbox simulator: every success@ address is sent, then delivered (a SEND and a DELIVERY event).
    const rows = ['email,name,coupon'];
    for (let i = 0; i < scenario.size; i++)
      rows.push(
        `success+${i + 1}@simulator.amazonses.com,顧客 ${i + 1},XMAS-M${String(i + 1).padStart(5, '0')}`,
      );
    return `${rows.join('\n')}\n`;
  }
  if (scenario.id !== 'call') return messageListCsv(scenario.size);
  const lines = ['電話番号,氏名'];
  for (let i = 0; i < scenario.size; i++)
    lines.push(`090-${6000 + Math.floor(i / 9000)}-${1000 + (i % 9000)},顧客 ${i + 1}`);
  return `${lines.join('\n')}\n`;
}

/** Waits until the job's counts say every task has ended (read without being counted). */
async function waitForJob(
  reader: DynamoDBDocumentClient,
  stack: LocalStack,
  clientId: string,
  jobId: string,
): Promise<Job> {
  const deadline = Date.now() + 30 * 60_000;
  for (;;) {
    const out = await reader.send(
      new GetCommand({ TableName: stack.cloud.tableNames.control!, Key: keys.job(clientId, jobId) }),
    );
    const job = out.Item as Job | undefined;
    if (job && ['completed', 'failed', 'cancelled'].includes(job.status)) return job;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${job?.status} after 30 minutes`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

const settle = () => new Promise((r) => setTimeout(r, 2_500));

function readBrokerFiles(dir: string): { tally: Tally; cpuSeconds: number } {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  const read = files.map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as BrokerMeterFile);
  return {
    tally: addTallies(...read.map((r) => r.tally)),
    cpuSeconds: read.reduce((s, r) => s + r.cpuSeconds, 0),
  };
}

function diffLogs(
  after: Record<string, LogVolume>,
  before: Record<string, LogVolume>,
): Record<string, LogVolume> {
  const out: Record<string, LogVolume> = {};
  for (const [fn, a] of Object.entries(after)) {
    const b = before[fn] ?? { bytes: 0, events: 0 };
    if (a.bytes > b.bytes) out[fn] = { bytes: a.bytes - b.bytes, events: a.events - b.events };
  }
  return out;
}

function diffLambdas(
  after: Record<string, { count: number; ms: number }>,
  before: Record<string, { count: number; ms: number }>,
): Record<string, { count: number; ms: number }> {
  const out: Record<string, { count: number; ms: number }> = {};
  for (const [fn, a] of Object.entries(after)) {
    const b = before[fn] ?? { count: 0, ms: 0 };
    if (a.count > b.count) out[fn] = { count: a.count - b.count, ms: a.ms - b.ms };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The cost model (docs/cost.md).

/** Principals whose work is a fixed cost per minute, not per unit: printed apart. */
const FIXED = new Set(['job-manager']);
/** Functions fed by an SQS event source mapping: each invocation is a receive and a delete. */
const QUEUE_FED = new Set(
  Object.values(functions)
    .filter((f) => f.queueSource)
    .map((f) => f.id as string),
);

interface Breakdown {
  dynamoWrites: number;
  dynamoReads: number;
  sqs: number;
  s3: number;
  lambdaRequests: number;
  lambdaDuration: number;
  eventBridge: number;
  cloudWatchLogs: number;
  xray: number;
  fargate: number;
}

const COMPONENTS: readonly [keyof Breakdown, string][] = [
  ['dynamoWrites', 'DynamoDB writes'],
  ['dynamoReads', 'DynamoDB reads'],
  ['sqs', 'SQS requests'],
  ['s3', 'S3 requests'],
  ['lambdaRequests', 'Lambda invocations'],
  ['lambdaDuration', 'Lambda GB-s'],
  ['eventBridge', 'EventBridge events (SES → bus)'],
  ['cloudWatchLogs', 'CloudWatch Logs (Lambda)'],
  ['xray', 'X-Ray traces (Lambda)'],
  ['fargate', 'Fargate broker (CPU)'],
];

interface Costed {
  readonly perUnit: Breakdown;
  readonly total: number;
  readonly writeUnits: number;
  readonly readUnits: number;
  readonly sqsRequests: number;
  readonly s3Requests: number;
  readonly invocations: number;
  readonly gbSeconds: number;
  readonly events: number;
  readonly logBytes: number;
  readonly brokerCpuMsPerUnit: number;
}

function cost(m: Measured): Costed {
  const counted = ({ principal }: { principal: string }) => !FIXED.has(principal);
  const dynamo = sumWhere(m.tally, (k) => counted(k) && k.service === 'DynamoDB');
  const sqs = sumWhere(m.tally, (k) => counted(k) && k.service === 'SQS');
  const s3Tier1 = sumWhere(m.tally, (k) => counted(k) && k.service === 'S3' && S3_TIER1.test(k.operation));
  const s3Tier2 = sumWhere(m.tally, (k) => counted(k) && k.service === 'S3' && !S3_TIER1.test(k.operation));
  let invocations = 0;
  let gbSeconds = 0;
  let esmRequests = 0;
  const events = m.busEvents ?? 0;
  let logBytes = 0;
  for (const [fn, l] of Object.entries(m.lambdas)) {
    if (FIXED.has(fn)) continue;
    invocations += l.count;
    // Lambda's own lines for each invocation, and what the handler wrote (each line a log event).
    const logged = m.logs?.[fn] ?? { bytes: 0, events: 0 };
    logBytes += l.count * LAMBDA_PLATFORM_LOG_BYTES + logged.bytes + logged.events * LOG_EVENT_OVERHEAD_BYTES;
    const memoryMb = (functions[fn as FunctionId] ?? outcomeFunctions[fn as OutcomeFunctionId])?.memoryMb;
    if (memoryMb === undefined) throw new Error(`no memory size for the function ${JSON.stringify(fn)}`);
    gbSeconds += (l.ms / 1000) * (memoryMb / 1024);
    // The event source mapping's receive and delete of each batch (idle long polls left out).
    if (QUEUE_FED.has(fn)) esmRequests += 2 * l.count;
  }
  // The list's upload to its presigned URL (a PUT), and S3's notification to the ingest queue.
  const uploads = 1;
  const sqsFifo = queues.find((q) => q.id === 'ingest')!.fifo;
  // The rule's target sends each bus event to its queue: a SendMessage each.
  const sqsRequests = sqs.requests + esmRequests + uploads + events;
  const s3Puts = s3Tier1.requests + uploads;
  const cpuHours = m.brokerCpuSeconds / 3600;
  const vcpu = BROKER_TASK_SIZE.cpu / 1024;
  const gb = BROKER_TASK_SIZE.memoryMiB / 1024;
  const total: Breakdown = {
    dynamoWrites: writeUnits(dynamo) * PRICES.dynamoWrite.usd,
    dynamoReads: dynamo.read * PRICES.dynamoRead.usd,
    sqs: sqsRequests * (sqsFifo ? PRICES.sqsFifo.usd : PRICES.sqsStandard.usd),
    s3: s3Puts * PRICES.s3Put.usd + s3Tier2.requests * PRICES.s3Get.usd,
    lambdaRequests: invocations * PRICES.lambdaRequest.usd,
    lambdaDuration: gbSeconds * PRICES.lambdaGbSecondArm.usd,
    eventBridge: events * PRICES.eventBridgeEvent.usd,
    cloudWatchLogs: (logBytes / 1024 ** 3) * PRICES.cloudWatchLogsGb.usd,
    xray: invocations * XRAY_SAMPLED_SHARE * PRICES.xrayTrace.usd,
    // The broker's measured CPU time, priced as that share of its task (vCPU and its memory).
    fargate: cpuHours * (PRICES.fargateVcpuHourArm.usd + (gb / vcpu) * PRICES.fargateGbHourArm.usd),
  };
  const perUnit = Object.fromEntries(
    Object.entries(total).map(([k, v]) => [k, v / m.units]),
  ) as unknown as Breakdown;
  return {
    perUnit,
    total: Object.values(perUnit).reduce((a, b) => a + b, 0),
    writeUnits: writeUnits(dynamo),
    readUnits: dynamo.read,
    sqsRequests,
    s3Requests: s3Puts + s3Tier2.requests,
    invocations,
    gbSeconds,
    events,
    logBytes,
    brokerCpuMsPerUnit: (1000 * m.brokerCpuSeconds) / m.units,
  };
}

/** Write units per unit by stage: the ingest Lambda, the broker's claims, its outcomes, the rest. */
function stages(m: Measured): [string, number][] {
  const w = (filter: Parameters<typeof sumWhere>[1]) =>
    writeUnits(sumWhere(m.tally, (k) => !FIXED.has(k.principal) && k.service === 'DynamoDB' && filter(k))) /
    m.units;
  const claim = (c: string) => c.includes('dynamo-message-claims');
  const outcome = (c: string) => c.includes('dynamo-message-outcomes');
  const callStart = (c: string) => c.includes('dynamo-call-tasks');
  return [
    ['ingest (task + index)', w((k) => k.principal === 'ingest')],
    ['claim (message)', w((k) => k.principal === 'broker' && claim(k.component))],
    ['outcome (message)', w((k) => k.principal === 'broker' && outcome(k.component))],
    ['call start/settle (broker)', w((k) => k.principal === 'broker' && callStart(k.component))],
    ['call-status Lambda', w((k) => k.principal === 'call-status')],
    ['email-events Lambda', w((k) => k.principal === 'email-events')],
    [
      'everything else',
      w(
        (k) =>
          k.principal !== 'ingest' &&
          k.principal !== 'call-status' &&
          k.principal !== 'email-events' &&
          !(
            k.principal === 'broker' &&
            (claim(k.component) || outcome(k.component) || callStart(k.component))
          ),
      ),
    ],
  ];
}

/** The requests behind a figure: by principal, operation and component, most write units first. */
function topRequests(m: Measured, limit = 14): string[] {
  const rows = Object.entries(m.tally)
    .map(([key, c]) => ({ key, c }))
    .sort((a, b) => writeUnits(b.c) + b.c.read - (writeUnits(a.c) + a.c.read) || b.c.requests - a.c.requests)
    .slice(0, limit);
  return rows.map(
    ({ key, c }) =>
      `    ${key.split('|').join(' · ').padEnd(72)} ${fmt(c.requests).padStart(7)} req ${fmt(c.items).padStart(7)} items ${fmt(writeUnits(c), 1).padStart(9)} WU (table ${fmt(c.writeTable, 1)}, index ${fmt(c.writeIndex, 1)}; Local said ${fmt(c.reportedWrite, 1)}) ${fmt(c.read, 1).padStart(8)} RU${c.failed ? `, ${c.failed} refused` : ''}${c.unmeasured ? `, ${c.unmeasured} NOT MEASURED` : ''}`,
  );
}

/** Issue 38's goal for Switchboard's own AWS cost of email, per 1,000,000 emails. */
const EMAIL_GOAL_USD = 0.3;

/** The email figure against its goal, its costliest line, SES's requests, and SES's own price beside it. */
function emailVerdict(m: Measured, c: Costed, scenario: Scenario): string[] {
  const per = (usd: number) => `$${fmt(usd * scenario.per, 2)}`;
  const lines = COMPONENTS.map(([key, label]) => ({ label, usd: c.perUnit[key] })).sort(
    (a, b) => b.usd - a.usd,
  );
  const ses = sumWhere(m.tally, (k) => k.service === 'SESv2' && /^Send(Bulk)?Email$/.test(k.operation));
  const bulk = sumWhere(m.tally, (k) => k.service === 'SESv2' && k.operation === 'SendBulkEmail');
  const pass = c.total * scenario.per <= EMAIL_GOAL_USD;
  return [
    `  email: SES sends: ${fmt(ses.requests)} requests (${fmt(bulk.requests)} SendBulkEmail) for ${fmt(m.units)} emails: ${fmt(m.units / Math.max(1, ses.requests), 1)} recipients a request`,
    `  email: Switchboard's own AWS cost ${per(c.total)} per ${scenario.perLabel} — goal ≤ $${fmt(EMAIL_GOAL_USD, 2)}: ${pass ? 'PASS' : `FAIL (×${fmt((c.total * scenario.per) / EMAIL_GOAL_USD, 1)} the goal)`}`,
    `  email: costliest lines: ${lines
      .slice(0, 3)
      .map((l) => `${l.label} ${per(l.usd)} (${fmt((100 * l.usd) / c.total, 0)} %)`)
      .join(', ')}`,
    `  email: without EventBridge (were SES's events free on the bus, as AWS management events are) ${per(c.total - c.perUnit.eventBridge)}`,
    `  email: beside it, SES's own price: ${per(PRICES.sesRecipient.usd)} per ${scenario.perLabel} ($${fmt(PRICES.sesRecipient.usd * 1000, 2)} per 1,000, à la carte; ${PRICES.sesRecipient.source}); ours is ${fmt((100 * c.total) / PRICES.sesRecipient.usd, 1)} % of it`,
  ];
}

// ---------------------------------------------------------------------------------------------

console.log(
  `cost: requests counted on the local cloud, priced at us-east-1 on-demand (bench/lib/prices.ts, docs/cost.md); ${os.availableParallelism()} cores, load average ${fmt(os.loadavg()[0]!, 1)}\n`,
);
if (values.design !== undefined) {
  const design = DESIGNS.find((d) => d.name === values.design);
  if (!design?.run || values.out === undefined)
    throw new Error(`--design ${values.design} needs a known design and --out`);
  const scenarios = SCENARIOS.filter((s) => !design.skips?.includes(s.id));
  writeFileSync(values.out, JSON.stringify([...(await design.run(scenarios))]));
  process.exit(0);
}
const measured = new Map<string, Map<ScenarioId, Measured>>();
const outDir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-cost-designs-'));
for (const design of DESIGNS) {
  if (SCENARIOS.every((s) => design.skips?.includes(s.id))) continue;
  const out = path.join(outDir, 'measured.json');
  console.error(`  design ${design.name}:`);
  const child = spawnSync(
    process.execPath,
    [
      ...process.execArgv,
      design.revision
        ? path.join(baselineTree(design.revision), 'bench/cost.ts')
        : fileURLToPath(import.meta.url),
      ...process.argv.slice(2),
      '--design',
      design.name,
      '--out',
      out,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (child.status !== 0)
    throw new Error(`design ${design.name} failed (exit ${child.status ?? child.signal})`);
  measured.set(design.name, new Map(JSON.parse(readFileSync(out, 'utf8')) as [ScenarioId, Measured][]));
}
rmSync(outDir, { recursive: true, force: true });

for (const scenario of SCENARIOS) {
  console.log(`\n${scenario.title}: ${fmt(scenario.size)} rows`);
  const costs = DESIGNS.flatMap((d) => {
    const m = measured.get(d.name)?.get(scenario.id);
    return m ? [{ design: d.name, m, c: cost(m) }] : [];
  });
  const head = `  ${`$ per ${scenario.perLabel}`.padEnd(40)}${costs.map((x) => x.design.padStart(22)).join('')}`;
  console.log(head);
  for (const [key, label] of COMPONENTS) {
    console.log(
      `  ${label.padEnd(40)}${costs.map((x) => `$${fmt(x.c.perUnit[key] * scenario.per, 3)}`.padStart(22)).join('')}`,
    );
  }
  console.log(
    `  ${'total'.padEnd(40)}${costs.map((x) => `$${fmt(x.c.total * scenario.per, 2)}`.padStart(22)).join('')}`,
  );
  console.log(
    `  ${'DynamoDB writes, share of total'.padEnd(40)}${costs.map((x) => `${fmt((100 * x.c.perUnit.dynamoWrites) / x.c.total, 1)} %`.padStart(22)).join('')}`,
  );
  for (const x of costs) {
    const perUnit = (n: number) => fmt(n / x.m.units, 3);
    console.log(
      `  ${x.design}: ${x.m.outcome}, ${fmt(x.m.seconds, 1)} s; per ${scenario.unit}: ${perUnit(x.c.writeUnits)} write units, ${perUnit(x.c.readUnits)} read units, ${perUnit(x.c.sqsRequests)} SQS requests, ${perUnit(x.c.s3Requests)} S3 requests, ${perUnit(x.c.invocations)} Lambda invocations (${fmt((1000 * x.c.gbSeconds) / x.m.units, 3)} GB-ms), ${perUnit(x.c.events)} EventBridge events, ${fmt(x.c.logBytes / x.m.units, 0)} log bytes, broker CPU ${fmt(x.c.brokerCpuMsPerUnit, 3)} ms`,
    );
    if (scenario.id === 'email') for (const line of emailVerdict(x.m, x.c, scenario)) console.log(line);
    console.log(`  ${x.design}: write units per ${scenario.unit} by stage:`);
    for (const [stage, units] of stages(x.m))
      if (units > 0) console.log(`    ${stage.padEnd(30)} ${fmt(units, 3)}`);
    console.log(`  ${x.design}: the requests behind it (who · service · operation · component):`);
    for (const line of topRequests(x.m)) console.log(line);
    const fixed = sumWhere(x.m.tally, (k) => FIXED.has(k.principal));
    const runs = x.m.lambdas['job-manager']?.count ?? 0;
    if (runs > 0) {
      const perRun = (writeUnits(fixed) * PRICES.dynamoWrite.usd + fixed.read * PRICES.dynamoRead.usd) / runs;
      console.log(
        `  ${x.design}: apart (fixed, per minute on AWS): the job manager ran ${runs} times here (every second): ${fmt(fixed.requests / runs, 1)} requests, ${fmt(fixed.read / runs, 1)} RU, ${fmt(writeUnits(fixed) / runs, 1)} WU a run → $${fmt(perRun * 60 * 24 * 30, 2)} a month at one run a minute`,
      );
    }
  }
}
console.log(
  `\nprices (us-east-1, on-demand): ${Object.values(PRICES)
    .map((p) => `${p.unit} $${p.usd < 1e-3 ? p.usd.toExponential(3) : p.usd}`)
    .join('; ')}`,
);
console.log(
  `Lambda GB-s: wall time of each invocation here (Lambda bills wall time) × the function's memory (shared/functions.ts); CloudWatch Logs: what each Lambda logged here (as deployed: info, metrics on) plus Lambda's platform.start, runtimeDone and report records (JSON log format: ${LAMBDA_PLATFORM_LOG_BYTES} bytes an invocation) and ${LOG_EVENT_OVERHEAD_BYTES} bytes a log event; X-Ray: ${XRAY_SAMPLED_SHARE * 100} % of invocations traced (the default sampling); EventBridge: each SES event the stand-in put on the bus (SES's events are data events a configuration set opts into, not the free management events), and its SendMessage to the rule's queue; broker: its process's CPU seconds priced as that share of its task (${BROKER_TASK_SIZE.cpu / 1024} vCPU, ${BROKER_TASK_SIZE.memoryMiB / 1024} GB, arm64). SQS: the requests the code makes, plus a receive and a delete per invocation of a queue-fed function (the event source mapping) and S3's notification of the upload; S3: the code's requests plus the list's presigned PUT.`,
);
