/**
 * bench/fleet-scale: what one job manager run costs, and whether it still succeeds, as the number
 * of clients grows.
 *
 * The job manager is run as deployed: its Lambda handler (lambdas/job-manager/handler.ts through
 * local/job-manager.ts: the use case, the DynamoDB fleet store, the ingest queue for sweeps),
 * invoked the way Lambda invokes it (local/lambda.ts: its 50 s timeout), against DynamoDB Local.
 * Only the broker service is a stand-in that records the desired count. For N clients, one in four
 * has a running job with a few tasks ready now (so it is listed in the work list); the rest have
 * none. For each N, two runs: cold (a fresh handler instance and SDK client, as after a Lambda cold
 * start: the job manager remembers nothing, so it reads every running job's tasks) and warm (the
 * same instance a minute later). Each run: wall time, requests by operation, read and write units
 * (counted by bench/lib/aws-meter.ts) and whether it succeeded (the work list is one item: past
 * DynamoDB's 400 KB it cannot be written and the whole run fails).
 *
 * Data is seeded fast (BatchWriteItem, 8 writers), with the item shapes the adapters write
 * (keys from shared/jobs/model.ts, the client list entry of dynamo-clients), growing from one N
 * to the next.
 *
 * Designs: {@link DESIGNS} lists the job manager designs measured side by side:
 * - `today`: the job manager as it was before issue #16 item 3 (bench/lib/today/ at the revision
 *   bench/lib/baseline-revision.ts builds beside this checkout): every
 *   run asks each client with a running job for a ready task (16 Queries), a cold instance also
 *   each job for an open one (16 more), and the work list is one item;
 * - `hints`: the job manager as it is (shared/fleet/job-manager.ts): per-client ready hints read
 *   in batches, tasks read only for clients whose marks changed (or whose sweep came due), a read
 *   budget per run, a sharded work list. Its rows: `first` (the first run after the deploy that
 *   brings hints: nothing remembered, the read budget bounds it), then, once the hints are made
 *   (priming runs, not measured, their time printed), `cold`, `warm`, `sweep` (a warm run 31
 *   minutes after the hints were made at once: the first thirtieth of the quiet clients' hints due,
 *   the sweep at its heaviest, against one in 45 a run in steady state; `--quiet` makes a share of
 *   the running jobs quiet) and `1% new` (a warm run after an ingest
 *   step touched 1 % of the running jobs: the cost of a change). Each run prints where its time
 *   went (the job manager's `stepMs`).
 *
 *   npm run bench:fleet-scale [-- --sizes 10,100,1000,10000] [--big]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { ScheduledEvent } from 'aws-lambda';
import { isSkippedRun, makeJobManagerHandler } from '#lambdas/job-manager/handler.ts';
import { LOCAL_CREDENTIALS, type LocalCloud, startLocalCloud } from '#local/cloud.ts';
import { localIngestQueue, makeLocalJobManager } from '#local/job-manager.ts';
import { invokeHandler } from '#local/lambda.ts';
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import type { JobManagerResult } from '#shared/fleet/job-manager.ts';
import { RunLease, runLeaseMs } from '#shared/fleet/run-lease.ts';
import { fleetWorkItem, splitFleetWork } from '#shared/fleet/work-list.ts';
import { functions } from '#shared/functions.ts';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { AwsMeter, diffTally, sumWhere, type Tally, writeUnits } from './lib/aws-meter.ts';
import { importFromBaseline } from './lib/baseline-revision.ts';
import { PRICES } from './lib/prices.ts';

const USAGE = `npm run bench:fleet-scale [-- options]
  --sizes LIST   numbers of clients (default 10,100,1000,10000)
  --big          also 100,000 clients (seeding takes minutes)
  --tasks N      tasks per running job (default 4)
  --quiet P      percent of running jobs whose tasks are ready only in 2 hours (default 0: all ready
                 now); the sweep row re-reads only such quiet clients
  --designs LIST designs to measure (default today,hints); today's at 100,000 clients runs for many
                 minutes past its timeout, in the background, so measure it apart if at all
  --timeout S    the run's timeout in seconds (default 50, the deployed function's); a longer one
                 measures what a run that would time out on AWS asks of DynamoDB
  --help`;

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10,100,1000,10000' },
    big: { type: 'boolean', default: false },
    tasks: { type: 'string', default: '4' },
    quiet: { type: 'string', default: '0' },
    timeout: { type: 'string' },
    designs: { type: 'string', default: 'today,hints' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const BIG = 100_000;
const SIZES = [...values.sizes.split(',').map(Number), ...(values.big ? [BIG] : [])].sort((a, b) => a - b);
const TASKS_PER_JOB = Number(values.tasks);
/** Running jobs in 100 whose tasks are ready only in 2 hours (their clients are quiet). */
const QUIET_PERCENT = Number(values.quiet);
const isQuiet = (i: number) => (i / RUNNING_SHARE) % 100 < QUIET_PERCENT;
/** One client in four has a running job. */
const RUNNING_SHARE = 4;
/** DynamoDB's largest item. */
const ITEM_LIMIT = 400 * 1024;
const JOB_MANAGER = functions['job-manager'];
const TIMEOUT_MS = Number(values.timeout ?? JOB_MANAGER.timeoutSeconds) * 1000;

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** A client id as long as a ULID (26 characters), as client ids tend to be. */
const clientId = (i: number) => `cl${String(i).padStart(24, '0')}`;

interface Run {
  readonly ok: boolean;
  readonly error?: string;
  readonly ms: number;
  readonly tally: Tally;
  readonly listed: number;
  /** The run's own step times (JobManagerResult.stepMs). */
  readonly stepMs?: JobManagerResult['stepMs'];
}

interface Measured {
  readonly clients: number;
  readonly running: number;
  /** The first run with nothing remembered (designs that remember between runs). */
  readonly first?: Run;
  readonly cold: Run;
  readonly warm: Run;
  /** A warm run after 1 % of the running jobs changed. */
  readonly changed?: Run;
  /** A warm run when the hints made at once start coming due: the sweep at its heaviest. */
  readonly sweep?: Run;
  /** Priming runs (not measured): how many and their wall time. */
  readonly priming?: { readonly runs: number; readonly ms: number };
}

/** A job manager design: measures one size on a seeded table. */
interface Design {
  readonly name: string;
  measure(env: Env, clients: number): Promise<Measured>;
}

interface Env {
  readonly cloud: LocalCloud;
  readonly meter: AwsMeter;
  readonly now: number;
}

const DESIGNS: readonly Design[] = [
  { name: 'today', measure: measureToday },
  { name: 'hints', measure: measureHints },
].filter((design) => values.designs.split(',').includes(design.name));

function benchDoc(env: Env) {
  return makeDocumentClient(
    makeDynamoClient({
      region: env.cloud.region,
      endpoint: env.cloud.dynamoEndpoint,
      credentials: LOCAL_CREDENTIALS,
    }),
  );
}

/** What the baseline revision's bench/lib/today/ gives: its store and its job manager's run. */
interface TodayJobManager {
  readonly makeDynamoFleetStore: (
    doc: DynamoDBDocumentClient,
    tables: { controlTable: string; tasksTable: string },
  ) => unknown;
  readonly makeRunJobManager: (options: {
    store: unknown;
    scaler: { setDesiredCount(count: number): Promise<void> };
    sweeps: unknown;
    clock: { now(): number };
    maxBrokers: number;
    desiredVersion: () => string;
  }) => () => Promise<Omit<JobManagerResult, 'served' | 'read' | 'unread' | 'stepMs'>>;
}

async function todayJobManager(): Promise<TodayJobManager> {
  const [fleet, run] = await Promise.all([
    importFromBaseline<Pick<TodayJobManager, 'makeDynamoFleetStore'>>('bench/lib/today/dynamo-fleet.ts'),
    importFromBaseline<Pick<TodayJobManager, 'makeRunJobManager'>>('bench/lib/today/job-manager.ts'),
  ]);
  return { makeDynamoFleetStore: fleet.makeDynamoFleetStore, makeRunJobManager: run.makeRunJobManager };
}

/** Today's job manager (the baseline revision's): a fresh handler (cold), then the same one again (warm). */
async function measureToday(env: Env, clients: number): Promise<Measured> {
  const doc = benchDoc(env);
  const { makeDynamoFleetStore: makeTodayFleetStore, makeRunJobManager: makeTodayRun } =
    await todayJobManager();
  const todayRun = makeTodayRun({
    store: makeTodayFleetStore(doc, {
      controlTable: env.cloud.tableNames.control!,
      tasksTable: env.cloud.tableNames.tasks!,
    }),
    scaler: { setDesiredCount: async () => {} },
    sweeps: localIngestQueue(env.cloud),
    clock: { now: () => Date.now() },
    maxBrokers: 1_000_000,
    desiredVersion: () => 'v1',
  });
  const handler = makeJobManagerHandler({
    // Today's result has none of the fields the handler now logs about hints.
    run: async (): Promise<JobManagerResult> => ({
      ...(await todayRun()),
      served: [],
      read: 0,
      unread: 0,
      stepMs: { start: 0, running: 0, states: 0, complete: 0, clients: 0, hints: 0, fleet: 0 },
    }),
    // The same run lease as deployed, so both columns pay its three requests.
    runLease: new RunLease({
      store: new DynamoLeaseStore(doc, env.cloud.tableNames.control!, { key: keys.runLease }),
      clock: { now: () => Date.now() },
      leaseMs: runLeaseMs(JOB_MANAGER.timeoutSeconds),
    }),
    log: silentLogger,
  });
  try {
    const cold = await runOnce(env.meter, handler);
    const warm = await runOnce(env.meter, handler);
    return { clients, running: Math.ceil(clients / RUNNING_SHARE), cold, warm };
  } finally {
    doc.destroy();
  }
}

/**
 * The job manager as it is: the first run on a table with no hints (its read budget as deployed),
 * priming runs without a budget until every hint is made and confirmed, then cold, warm, a warm
 * run after an ingest step touched 1 % of the running jobs, and a warm run 31 minutes on (sweep).
 */
async function measureHints(env: Env, clients: number): Promise<Measured> {
  const doc = benchDoc(env);
  // The wall clock, or, for the sweep row, a clock that runs from a moment set ahead of it.
  let ahead: { readonly at: number; readonly from: number } | undefined;
  const now = () => (ahead ? ahead.at + (Date.now() - ahead.from) : Date.now());
  const handlerWith = (maxTaskReadsPerRun?: number, readForMs?: number) =>
    makeLocalJobManager({
      now,
      doc,
      controlTable: env.cloud.tableNames.control!,
      tasksTable: env.cloud.tableNames.tasks!,
      cloud: env.cloud,
      fleet: { version: 'v1', setDesiredCount: async () => {} },
      maxBrokers: 1_000_000,
      log: silentLogger,
      ...(maxTaskReadsPerRun === undefined ? {} : { maxTaskReadsPerRun }),
      ...(readForMs === undefined ? {} : { readForMs }),
    });
  const running = Math.ceil(clients / RUNNING_SHARE);
  try {
    await forgetHints(env, clients);
    const first = await runOnce(env.meter, handlerWith());
    const primer = handlerWith(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
    const t0 = performance.now();
    let runs = 0;
    // When the hints were confirmed: the clock of the last priming run that read a client (a hint
    // that finds a task ready now is confirmed at once; one that finds none, by a second reading).
    let primedAt: number | undefined;
    while (runs < 6) {
      runs += 1;
      const out = await invokeHandler(primer, scheduledEvent(), {
        functionName: JOB_MANAGER.id,
        timeoutMs: 3_600_000,
      });
      if (isSkippedRun(out)) throw new Error('a priming run was skipped: another run holds the run lease');
      if (out.read > 0) primedAt = out.at;
      if (out.read === 0 && out.unread === 0) break;
    }
    const priming = { runs, ms: performance.now() - t0 };
    const handler = handlerWith();
    const cold = await runOnce(env.meter, handler);
    const warm = await runOnce(env.meter, handler);
    // Last, 31 minutes after the priming run that confirmed the hints: the expiries of those that
    // say nothing is ready (`--quiet`; a "ready" hint is not swept) are spread over their second
    // half hour, so the first thirtieth of them has come due (one in 45 a run on average in steady
    // state).
    await touchJobs(env, clients, 100);
    const changed = await runOnce(env.meter, handler);
    ahead = { at: (primedAt ?? Date.now()) + 31 * 60_000, from: Date.now() };
    const sweep = await runOnce(env.meter, handler);
    ahead = undefined;
    // Its work list is dated 31 minutes ahead: later runs' lists would be refused as older.
    await forgetWorkList(env);
    return { clients, running, first, cold, warm, sweep, changed, priming };
  } finally {
    doc.destroy();
  }
}

/** Deletes the work list, head and shards (not counted). */
async function forgetWorkList(env: Env): Promise<void> {
  const table = env.cloud.tableNames.control!;
  const out = await seeder.send(
    new QueryCommand({
      TableName: table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': 'FLEET' },
      ProjectionExpression: 'pk, sk',
    }),
  );
  for (const key of out.Items ?? []) await seeder.send(new DeleteCommand({ TableName: table, Key: key }));
}

/** Deletes the hints of clients `[0, clients)` (not counted), so each size starts with none. */
async function forgetHints(env: Env, clients: number): Promise<void> {
  const ids = Array.from({ length: clients }, (_, i) => clientId(i)).filter(
    (_, i) => i % RUNNING_SHARE === 0,
  );
  const table = env.cloud.tableNames.control!;
  await inBatches(ids, async (batch) => {
    let left: Record<string, unknown[]> | undefined = {
      [table]: batch.map((id) => ({ DeleteRequest: { Key: { pk: `FLEETHINT#${id}`, sk: 'HINT' } } })),
    };
    while (left && Object.keys(left).length > 0) {
      const out = await seeder.send(new BatchWriteCommand({ RequestItems: left as never }));
      left = out.UnprocessedItems as Record<string, unknown[]> | undefined;
    }
  });
}

/** An ingest step on one running job in `every` (not counted): more tasks, ready now, and the job's counts. */
async function touchJobs(env: Env, clients: number, every: number): Promise<void> {
  const touched: number[] = [];
  for (let i = 0; i < clients; i += RUNNING_SHARE * every) touched.push(i);
  const at = Date.now();
  await inBatches(touched, async (batch) => {
    await Promise.all(
      batch.map(async (i) => {
        const id = clientId(i);
        const jobId = jobIdOf(i);
        const task: Task = { ...taskOf(id, jobId, TASKS_PER_JOB + 1, at), readyAt: at - 1_000 };
        await seeder.send(
          new BatchWriteCommand({
            RequestItems: {
              [env.cloud.tableNames.tasks!]: [
                {
                  PutRequest: {
                    Item: { ...keys.task(jobId, task.taskId), ...task, ...keys.outstandingIndex(task) },
                  },
                },
              ],
            },
          }),
        );
        await seeder.send(
          new UpdateCommand({
            TableName: env.cloud.tableNames.control!,
            Key: keys.job(id, jobId),
            UpdateExpression: 'ADD #counts.#tasks :one, #counts.#rows :one SET updatedAt = :at',
            ExpressionAttributeNames: { '#counts': 'counts', '#tasks': 'tasks', '#rows': 'rows' },
            ExpressionAttributeValues: { ':one': 1, ':at': at },
          }),
        );
      }),
    );
  });
}

async function inBatches<T>(items: readonly T[], fn: (batch: T[]) => Promise<void>): Promise<void> {
  const batches: T[][] = [];
  for (let i = 0; i < items.length; i += 25) batches.push(items.slice(i, i + 25));
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < batches.length) await fn(batches[next++]!);
    }),
  );
}

async function runOnce(meter: AwsMeter, handler: ReturnType<typeof makeLocalJobManager>): Promise<Run> {
  const before = meter.snapshot();
  const started = performance.now();
  let result: JobManagerResult | undefined;
  let error: string | undefined;
  try {
    const out = await invokeHandler(handler, scheduledEvent(), {
      functionName: JOB_MANAGER.id,
      timeoutMs: TIMEOUT_MS,
      memoryMb: JOB_MANAGER.memoryMb,
    });
    // A timed-out run that goes on in the background still holds the run lease.
    if (isSkippedRun(out)) error = `skipped: ${out.skipped}`;
    else result = out;
  } catch (e) {
    error = `${(e as Error).name}: ${(e as Error).message}`.slice(0, 160);
  }
  const ms = performance.now() - started;
  if (result && ms > JOB_MANAGER.timeoutSeconds * 1000)
    error = `would time out on AWS (${JOB_MANAGER.timeoutSeconds} s): ran ${fmt(ms / 1000, 1)} s under --timeout`;
  // A timed-out run goes on in the background (Lambda would have killed it): let it end before
  // the next one is measured.
  if (!result) await new Promise((r) => setTimeout(r, 5_000));
  const tally = diffTally(meter.snapshot(), before);
  return {
    ok: result !== undefined && error === undefined,
    ...(error ? { error } : {}),
    ms,
    tally,
    listed: result?.clients.length ?? 0,
    ...(result ? { stepMs: result.stepMs } : {}),
  };
}

function scheduledEvent(): ScheduledEvent {
  return {
    version: '0',
    id: crypto.randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '000000000000',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: ['arn:aws:events:us-east-1:000000000000:rule/job-manager'],
    detail: {},
  };
}

// ---------------------------------------------------------------------------------------------
// Seeding.

const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};

/** The items of clients `[from, to)`: each client, and for one in four a running job and its tasks. */
function* itemsFor(
  from: number,
  to: number,
  now: number,
): Generator<Record<string, unknown> & { table: 'control' | 'tasks' }> {
  for (let i = from; i < to; i++) {
    const id = clientId(i);
    const client: ClientSettings = {
      clientId: id,
      maxConcurrentCalls: 10,
      callsPerSecond: 5,
      timeZone: 'Asia/Tokyo',
      callingHours: ALWAYS,
      defaultRegion: 'JP',
      updatedAt: now,
    };
    yield { table: 'control', ...keys.client(id), ...client, statusKey: 'CLIENTS', dueKey: id };
    if (i % RUNNING_SHARE !== 0) continue;
    const job: Job = {
      clientId: id,
      jobId: jobIdOf(i),
      name: `list ${i}`,
      channel: 'call',
      scenarioId: 'reminder',
      startAt: now - 3_600_000,
      maxAttempts: 1,
      retryDelaySeconds: 60,
      status: 'running',
      counts: {
        rows: TASKS_PER_JOB,
        rejected: 0,
        skipped: 0,
        tasks: TASKS_PER_JOB,
        completed: 0,
        failed: 0,
        cancelled: 0,
      },
      createdAt: now - 3_600_000,
      updatedAt: now,
    };
    yield { table: 'control', ...keys.job(id, job.jobId), ...job, ...keys.jobStatusIndex(job) };
    for (let t = 0; t < TASKS_PER_JOB; t++) {
      const task = taskOf(id, job.jobId, t, now, isQuiet(i) ? now + 2 * 3_600_000 : now - 60_000);
      yield { table: 'tasks', ...keys.task(job.jobId, task.taskId), ...task, ...keys.outstandingIndex(task) };
    }
  }
}

const jobIdOf = (i: number) => `01JOB${String(i).padStart(21, '0')}`;

/** Task `t` of a seeded job, pending, ready at `readyAt` (a minute before `now` unless told). */
function taskOf(id: string, jobId: string, t: number, now: number, readyAt = now - 60_000): Task {
  return {
    clientId: id,
    jobId,
    taskId: `t${String(t).padStart(6, '0')}`,
    row: t + 2,
    channel: 'call',
    recipient: `+8190${String(60000000 + t)}`,
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt,
    updatedAt: now,
  };
}

/** Writes clients `[from, to)` in BatchWriteItems of 25, 8 at once (not counted: an unmetered client). */
async function seed(doc: DynamoDBDocumentClient, cloud: LocalCloud, from: number, to: number, now: number) {
  const tableName = { control: cloud.tableNames.control!, tasks: cloud.tableNames.tasks! };
  const items = itemsFor(from, to, now);
  const writer = async () => {
    for (;;) {
      const batch: Record<string, unknown[]> = {};
      let n = 0;
      while (n < 25) {
        const next = items.next();
        if (next.done) break;
        const { table, ...item } = next.value;
        batch[tableName[table]] ??= [];
        batch[tableName[table]]!.push({ PutRequest: { Item: item } });
        n += 1;
      }
      if (n === 0) return;
      let left: Record<string, unknown[]> | undefined = batch;
      while (left && Object.keys(left).length > 0) {
        const out = await doc.send(new BatchWriteCommand({ RequestItems: left as never }));
        left = out.UnprocessedItems as Record<string, unknown[]> | undefined;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));
}

// ---------------------------------------------------------------------------------------------

const meter = new AwsMeter('bench');
meter.install();
process.env.LOG_LEVEL ??= 'error';
const cloud = await startLocalCloud({ stage: 'benchfleet' });
// Seeding is not measured: a client of its own, not built by the project's factory.
const seeder = DynamoDBDocumentClient.from(
  new DynamoDBClient({
    region: cloud.region,
    endpoint: cloud.dynamoEndpoint,
    credentials: LOCAL_CREDENTIALS,
  }),
);
const now = Date.now();
const env: Env = { cloud, meter, now };
const results = new Map<string, Measured[]>(DESIGNS.map((d) => [d.name, []]));
console.log(
  `fleet-scale: the job manager's Lambda handler on DynamoDB Local, one client in four with a running job of ${TASKS_PER_JOB} tasks (ready now${QUIET_PERCENT > 0 ? `; in ${QUIET_PERCENT} % of them, in 2 hours` : ''}); client ids of 26 characters; timeout ${TIMEOUT_MS / 1000} s (deployed: ${JOB_MANAGER.timeoutSeconds} s); ${os.availableParallelism()} cores, load average ${fmt(os.loadavg()[0]!, 1)}\n`,
);
try {
  let seeded = 0;
  for (const size of SIZES) {
    const t0 = performance.now();
    await seed(seeder, cloud, seeded, size, now);
    seeded = size;
    console.error(`  … seeded ${fmt(size)} clients in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    for (const design of DESIGNS) {
      const m = await design.measure(env, size);
      results.get(design.name)!.push(m);
      console.error(
        `  … ${design.name}, ${fmt(size)} clients: ${m.first ? `first ${fmt(m.first.ms / 1000, 1)} s${m.first.ok ? '' : ' FAILED'}, ` : ''}cold ${fmt(m.cold.ms / 1000, 1)} s${m.cold.ok ? '' : ' FAILED'}, warm ${fmt(m.warm.ms / 1000, 1)} s${m.warm.ok ? '' : ' FAILED'}${m.priming ? ` (primed in ${m.priming.runs} runs, ${fmt(m.priming.ms / 1000, 1)} s)` : ''}`,
      );
    }
  }
} finally {
  seeder.destroy();
  await cloud.stop();
}

const pad = (s: string, n: number) => s.padStart(n);
const requestsOf = (run: Run) => sumWhere(run.tally, (k) => k.principal === JOB_MANAGER.id).requests;
for (const design of DESIGNS) {
  console.log(`design: ${design.name}`);
  console.log(
    `${'clients'.padStart(8)} ${pad('running', 8)} ${pad('run', 7)} ${pad('wall s', 7)} ${pad('requests', 9)} ${pad('req/job', 8)} ${pad('vs today', 9)} ${pad('RCU', 9)} ${pad('WCU', 8)} ${pad('$/month', 9)}  result`,
  );
  for (const m of results.get(design.name)!) {
    const today = results.get('today')?.find((t) => t.clients === m.clients);
    const rows: [string, Run | undefined, Run | undefined][] = [
      ['first', m.first, today?.cold],
      ['cold', m.cold, today?.cold],
      ['warm', m.warm, today?.warm],
      ['1% new', m.changed, today?.warm],
      ['sweep', m.sweep, today?.warm],
    ];
    for (const [label, run, baseline] of rows) {
      if (!run) continue;
      const all = sumWhere(run.tally, (k) => k.principal === JOB_MANAGER.id);
      // A run a minute for a 30-day month: DynamoDB units, one invocation and its GB-s.
      const perRun =
        all.read * PRICES.dynamoRead.usd +
        writeUnits(all) * PRICES.dynamoWrite.usd +
        PRICES.lambdaRequest.usd +
        (run.ms / 1000) * (JOB_MANAGER.memoryMb / 1024) * PRICES.lambdaGbSecondArm.usd;
      const ratio =
        design.name === 'today' || !baseline
          ? ''
          : `÷${fmt(requestsOf(baseline) / Math.max(1, all.requests), 1)}`;
      console.log(
        `${pad(fmt(m.clients), 8)} ${pad(fmt(m.running), 8)} ${pad(label, 7)} ${pad(fmt(run.ms / 1000, 2), 7)} ${pad(fmt(all.requests), 9)} ${pad(fmt(all.requests / Math.max(1, m.running), 1), 8)} ${pad(ratio, 9)} ${pad(fmt(all.read, 1), 9)} ${pad(fmt(writeUnits(all), 1), 8)} ${pad(`$${fmt(perRun * 43_200, 2)}`, 9)}  ${run.ok ? `ok, ${fmt(run.listed)} listed` : `FAILED: ${run.error}`}`,
      );
    }
    console.log(
      `${''.padStart(8)} requests by operation: ${rows
        .filter(([, run]) => run)
        .map(([label, run]) => `${label} ${ops(run!.tally)}`)
        .join(
          '; ',
        )}${m.priming ? ` (hints primed by ${m.priming.runs} unbudgeted runs in ${fmt(m.priming.ms / 1000, 1)} s, not counted)` : ''}`,
    );
    if (design.name === 'hints')
      console.log(
        `${''.padStart(8)} where the time went (s): ${rows
          .filter(([, run]) => run?.stepMs)
          .map(([label, run]) => `${label} ${steps(run!.stepMs!)}`)
          .join('; ')}`,
      );
    if (design.name === 'hints') {
      // What the measured warm run leaves out: the jittered sweeps coming due, spread over runs.
      const sweep = steadySweepQueries(Math.round((m.running * QUIET_PERCENT) / 100));
      const steady = requestsOf(m.warm) + sweep;
      const baseline = today ? requestsOf(today.warm) : undefined;
      console.log(
        `${''.padStart(8)} steady state with nothing changing ≈ warm + the sweeps due each run (${fmt(sweep)} Queries: each quiet client every ~45 runs × 16; a client with work ready is not swept) = ${fmt(steady)} requests${baseline ? `, ÷${fmt(baseline / steady, 1)} against today's warm` : ''}`,
      );
    }
  }
}

// The work list at sizes not seeded: the item the job manager would write, measured.
console.log(
  '\nthe work list by clients listed: today one item written whole; now a head and shards (splitFleetWork):',
);
for (const size of [...new Set([...SIZES, BIG])]) {
  const listed = Math.ceil(size / RUNNING_SHARE);
  const bytes = workListBytes(listed);
  const { shards } = splitFleetWork(
    fleetWorkItem({
      clients: Array.from({ length: listed }, (_, i) => clientId(i)),
      served: Array.from({ length: listed }, (_, i) => clientId(i)),
      desiredVersion: 'v1',
      updatedAt: now,
    }),
  );
  const largest = Math.max(
    0,
    ...shards.map((shard) => itemBytes(shard as unknown as Record<string, unknown>)),
  );
  console.log(
    `  ${pad(fmt(size), 8)} clients → ${pad(fmt(listed), 6)} listed: today ${pad(fmt(bytes / 1024, 1), 6)} KB ${bytes > ITEM_LIMIT ? '> 400 KB: PutItem refused, the run FAILS' : 'fits'}; now ${shards.length === 0 ? 'the head alone' : `${shards.length} shards, the largest ${fmt(largest / 1024, 1)} KB with every client also served`}${!SIZES.includes(size) ? ` (not run: seeding ${fmt(size)} clients is ${fmt(size + (size / RUNNING_SHARE) * (1 + TASKS_PER_JOB))} items; --big runs it)` : ''}`,
  );
}
const fitsUpTo = Math.floor(ITEM_LIMIT / (workListBytes(10_000) / 10_000));
console.log(
  `  today's list overflows DynamoDB's 400 KB item at about ${fmt(fitsUpTo)} listed clients (ids of 26 characters), i.e. ${fmt(fitsUpTo * RUNNING_SHARE)} clients at one in four; a sharded list has no such limit.`,
);

/**
 * Queries a run makes in steady state for the hints' sweep of `quiet` clients (`sweepEveryMs` 60
 * min, jittered over its second half: a client every 45 runs on average, 16 Queries). The jobs'
 * full checks (in turns) are in every measured run already.
 */
function steadySweepQueries(quiet: number): number {
  return Math.round((quiet / 45) * 16);
}

/** A run's step times, e.g. `states 6.1, complete 3.2` (steps under 0.05 s left out). */
function steps(stepMs: JobManagerResult['stepMs']): string {
  const long = Object.entries(stepMs).filter(([, ms]) => ms >= 50);
  return long.length === 0
    ? 'each step < 0.05'
    : long.map(([step, ms]) => `${step} ${fmt(ms / 1000, 1)}`).join(', ');
}

function ops(tally: Tally): string {
  const by = new Map<string, number>();
  for (const [key, c] of Object.entries(tally)) {
    const [principal, , operation] = key.split('|');
    if (principal !== JOB_MANAGER.id) continue;
    by.set(operation!, (by.get(operation!) ?? 0) + c.requests);
  }
  return [...by].map(([op, n]) => `${op} ${fmt(n)}`).join(', ');
}

/** DynamoDB's size of the work list item listing `listed` clients (names + values; a list costs 3 + 1 per element). */
function workListBytes(listed: number): number {
  const item = fleetWorkItem({
    clients: Array.from({ length: listed }, (_, i) => clientId(i)),
    desiredVersion: 'v1',
    updatedAt: now,
  }) as unknown as Record<string, unknown>;
  return itemBytes(item);
}

/** DynamoDB's size of an item of strings, numbers and lists of strings. */
function itemBytes(item: Record<string, unknown>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name);
    if (typeof value === 'string') bytes += Buffer.byteLength(value);
    else if (typeof value === 'number') bytes += Math.ceil(String(value).length / 2) + 1;
    else if (Array.isArray(value))
      bytes += 3 + value.reduce((n: number, v) => n + 1 + Buffer.byteLength(String(v)), 0);
  }
  return bytes;
}
