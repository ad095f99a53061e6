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
 *   - a call job through the telephony sandbox (start, signed status callbacks, settle).
 * Requests are counted by bench/lib/aws-meter.ts: in this process for the Lambdas (by function),
 * in each broker process by a preload (bench/lib/aws-meter-preload.ts), with the broker's CPU time.
 * Lambda invocations and their wall time come from local/lambda.ts; GB-s use each function's
 * configured memory (shared/functions.ts). The job manager runs every second here (every minute on
 * AWS): it is a fixed cost per minute, not per message, and is printed apart.
 *
 * Designs: {@link DESIGNS} lists the designs measured side by side, each a function that runs the
 * scenarios and returns what it measured: today's (message claims on each task), claim pages, and
 * chunks (claim pages, and a message for all held 500 recipients an item: docs/multicast-chunks.md).
 *
 *   npm run bench:cost [-- --messages 2000 --multicast 20000 --calls 500]
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
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { BROKER_TASK_SIZE } from '#shared/broker/runtime.ts';
import { type FunctionId, functions, type OutcomeFunctionId, outcomeFunctions } from '#shared/functions.ts';
import { type Job, keys } from '#shared/jobs/model.ts';
import { queues } from '#shared/resources.ts';
import { AwsMeter, addTallies, diffTally, sumWhere, type Tally, writeUnits } from './lib/aws-meter.ts';
import type { BrokerMeterFile } from './lib/aws-meter-preload.ts';
import { PRICES, S3_TIER1 } from './lib/prices.ts';

const USAGE = `npm run bench:cost [-- options]
  --messages N    personalised messages (default 2000)
  --multicast N   multicast recipients (default 20000)
  --calls N       calls (default 500)
  --only LIST     scenarios to run, comma-separated: push,multicast,call (default all)
  --help`;

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '2000' },
    multicast: { type: 'string', default: '20000' },
    calls: { type: 'string', default: '500' },
    only: { type: 'string', default: 'push,multicast,call' },
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

type ScenarioId = 'push' | 'multicast' | 'call';

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
  ] as const
).filter((s) => values.only.split(',').includes(s.id) && s.size > 0);

/** What one scenario of one design measured. */
interface Measured {
  readonly units: number;
  readonly seconds: number;
  readonly tally: Tally;
  readonly lambdas: Readonly<Record<string, { count: number; ms: number }>>;
  readonly brokerCpuSeconds: number;
  readonly outcome: string;
}

/** A design: runs every scenario it is given, returns what each measured. */
interface Design {
  readonly name: string;
  run(scenarios: readonly Scenario[]): Promise<Map<ScenarioId, Measured>>;
}

const DESIGNS: readonly Design[] = [
  // Message claims recorded on each task (the design before claim pages).
  {
    name: 'today',
    run: (scenarios) =>
      runOnLocalStack(scenarios, 'benchcosttask', {
        BROKER_CLAIM_RECORDS: 'task',
        INGEST_MULTICAST_CHUNKS: 'off',
      }),
  },
  // Message claims recorded per page (shared/adapters/dynamo-claim-pages.ts, docs/claim-pages.md).
  {
    name: 'claim pages',
    run: (scenarios) =>
      runOnLocalStack(scenarios, 'benchcostpage', {
        BROKER_CLAIM_RECORDS: 'page',
        INGEST_MULTICAST_CHUNKS: 'off',
      }),
  },
  // And a message for all held 500 recipients a chunk item (docs/multicast-chunks.md).
  {
    name: 'chunks',
    run: (scenarios) =>
      runOnLocalStack(scenarios, 'benchcostchunk', {
        BROKER_CLAIM_RECORDS: 'page',
        INGEST_MULTICAST_CHUNKS: 'on',
        INGEST_PERSONALISED_CHUNKS: 'off',
      }),
  },
  // And a personalised message's recipients in chunks too, each member's variables with it: the default now.
  {
    name: 'personalised chunks',
    run: (scenarios) =>
      runOnLocalStack(scenarios, 'benchcostpers', {
        BROKER_CLAIM_RECORDS: 'page',
        INGEST_MULTICAST_CHUNKS: 'on',
        INGEST_PERSONALISED_CHUNKS: 'on',
      }),
  },
];

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

// ---------------------------------------------------------------------------------------------
// One design on the local stack: the brokers' environment says which.

async function runOnLocalStack(
  scenarios: readonly Scenario[],
  stage: string,
  designEnv: Record<string, string>,
): Promise<Map<ScenarioId, Measured>> {
  const meter = new AwsMeter('bench');
  const uninstall = meter.install();
  const lambdas: Record<string, { count: number; ms: number }> = {};
  const stopCounting = onEveryInvocation((fn, ms) => {
    lambdas[fn] ??= { count: 0, ms: 0 };
    const entry = lambdas[fn];
    entry.count += 1;
    entry.ms += ms;
  });
  const meterDir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-cost-'));
  const preload = fileURLToPath(new URL('./lib/aws-meter-preload.ts', import.meta.url));
  process.env.LOG_LEVEL ??= 'error';
  // The in-process Lambdas read the design's switches too (this process runs this design only).
  Object.assign(process.env, designEnv);
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
      ...designEnv,
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
    };
  };
  const results = new Map<ScenarioId, Measured>();
  try {
    for (const scenario of scenarios) {
      const clientId = `cost-${scenario.id}`;
      await putDemoClient(stack, {
        clientId,
        maxConcurrentCalls: 50,
        callsPerSecond: 50,
      });
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
        outcome: `${job.status}: ${c.completed} completed, ${c.failed} failed, ${c.cancelled} cancelled of ${c.tasks} tasks (${c.rows} rows, ${c.rejected} rejected)`,
      });
      console.error(`  … ${scenario.title}: ${results.get(scenario.id)!.outcome} in ${fmt(seconds, 1)} s`);
    }
  } finally {
    await stack.stop();
    uninstall();
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
  }
}

function listFor(scenario: Scenario): string {
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
  fargate: number;
}

const COMPONENTS: readonly [keyof Breakdown, string][] = [
  ['dynamoWrites', 'DynamoDB writes'],
  ['dynamoReads', 'DynamoDB reads'],
  ['sqs', 'SQS requests'],
  ['s3', 'S3 requests'],
  ['lambdaRequests', 'Lambda invocations'],
  ['lambdaDuration', 'Lambda GB-s'],
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
  for (const [fn, l] of Object.entries(m.lambdas)) {
    if (FIXED.has(fn)) continue;
    invocations += l.count;
    const memoryMb = (functions[fn as FunctionId] ?? outcomeFunctions[fn as OutcomeFunctionId])?.memoryMb;
    if (memoryMb === undefined) throw new Error(`no memory size for the function ${JSON.stringify(fn)}`);
    gbSeconds += (l.ms / 1000) * (memoryMb / 1024);
    // The event source mapping's receive and delete of each batch (idle long polls left out).
    if (QUEUE_FED.has(fn)) esmRequests += 2 * l.count;
  }
  // The list's upload to its presigned URL (a PUT), and S3's notification to the ingest queue.
  const uploads = 1;
  const sqsFifo = queues.find((q) => q.id === 'ingest')!.fifo;
  const sqsRequests = sqs.requests + esmRequests + uploads;
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
    [
      'everything else',
      w(
        (k) =>
          k.principal !== 'ingest' &&
          k.principal !== 'call-status' &&
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

// ---------------------------------------------------------------------------------------------

console.log(
  `cost: requests counted on the local cloud, priced at us-east-1 on-demand (bench/lib/prices.ts, docs/cost.md); ${os.availableParallelism()} cores, load average ${fmt(os.loadavg()[0]!, 1)}\n`,
);
if (values.design !== undefined) {
  const design = DESIGNS.find((d) => d.name === values.design);
  if (!design || values.out === undefined)
    throw new Error(`--design ${values.design} needs a known design and --out`);
  writeFileSync(values.out, JSON.stringify([...(await design.run(SCENARIOS))]));
  process.exit(0);
}
const measured = new Map<string, Map<ScenarioId, Measured>>();
const outDir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-cost-designs-'));
for (const design of DESIGNS) {
  const out = path.join(outDir, 'measured.json');
  console.error(`  design ${design.name}:`);
  const child = spawnSync(
    process.execPath,
    [
      ...process.execArgv,
      fileURLToPath(import.meta.url),
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
  const costs = DESIGNS.map((d) => ({ design: d.name, m: measured.get(d.name)!.get(scenario.id)! }))
    .filter((x) => x.m)
    .map((x) => ({ ...x, c: cost(x.m) }));
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
      `  ${x.design}: ${x.m.outcome}, ${fmt(x.m.seconds, 1)} s; per ${scenario.unit}: ${perUnit(x.c.writeUnits)} write units, ${perUnit(x.c.readUnits)} read units, ${perUnit(x.c.sqsRequests)} SQS requests, ${perUnit(x.c.s3Requests)} S3 requests, ${perUnit(x.c.invocations)} Lambda invocations (${fmt((1000 * x.c.gbSeconds) / x.m.units, 3)} GB-ms), broker CPU ${fmt(x.c.brokerCpuMsPerUnit, 3)} ms`,
    );
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
  `Lambda GB-s: wall time of each invocation here (Lambda bills wall time) × the function's memory (shared/functions.ts); broker: its process's CPU seconds priced as that share of its task (${BROKER_TASK_SIZE.cpu / 1024} vCPU, ${BROKER_TASK_SIZE.memoryMiB / 1024} GB, arm64). SQS: the requests the code makes, plus a receive and a delete per invocation of a queue-fed function (the event source mapping) and S3's notification of the upload; S3: the code's requests plus the list's presigned PUT.`,
);
