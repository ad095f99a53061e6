/**
 * What the console's job page costs DynamoDB, per refresh, against a page that reads the job's
 * tasks (what a naive page would do to draw its chart and counters).
 *
 * 1. A real call job on the local stack (a broker process, the telephony sandbox): the page's refresh
 *    as the console makes it every 2 s — `GET …/jobs/{jobId}` and `GET …/jobs/{jobId}/series?since=`
 *    the last window shown — through the API Gateway stand-in to the jobs function. Every DynamoDB
 *    request the function makes is counted with the consumed capacity DynamoDB reports (the way
 *    `test/support/record-aws-calls.ts` records calls: a middleware on every SDK client, by the
 *    function on whose behalf it runs). Then the series the broker wrote: items, bytes, and the write
 *    cost per job-hour.
 * 2. Jobs of 1,000 and 10,000 tasks (seeded as the ingest writes them, most ended, with an hour of
 *    series): our page load (the last hour) and refresh, against the baseline that Queries every
 *    shard of the job's tasks (eventually consistent, paged), with the ratio.
 *
 * `node bench/console.ts [--rows 600] [--limit 20] [--rate 10] [--sizes 1000,10000]`
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { createJobWithList, putDemoClient } from '#local/demo-job.ts';
import { awsPrincipal } from '#local/iam/recorder.ts';
import { startLocalStack } from '#local/stack.ts';
import { onEveryAwsClient } from '#shared/adapters/aws-client-hooks.ts';
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoJobSeries, jobSeriesPk } from '#shared/adapters/dynamo-job-series.ts';
import { newUlid } from '#shared/ids.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { keys } from '#shared/jobs/model.ts';
import type { JobSeriesAnswer } from '#shared/jobs/series.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { seedRunningJob } from './lib/seed-job.ts';

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1]! : fallback;
};
const ROWS = Number(arg('rows', '600'));
const LIMIT = Number(arg('limit', '20'));
const RATE = Number(arg('rate', '10'));
const SIZES = arg('sizes', '1000,10000').split(',').map(Number);
const REFRESH_MS = 2_000;
const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};
/** DynamoDB on-demand prices (us-east-1, per million request units). */
const PRICE_PER_MILLION = { read: 0.125, write: 0.625 };

/** DynamoDB requests and consumed units, counted per principal while `on`. */
class DynamoMeter {
  on = false;
  readonly counts = new Map<
    string,
    { requests: number; read: number; write: number; ops: Map<string, number> }
  >();

  install(): void {
    const meter = this;
    onEveryAwsClient({
      applyToStack(stack) {
        (stack as unknown as { add: (mw: unknown, options: unknown) => void }).add(
          (
            next: (args: unknown) => Promise<{ output: Record<string, unknown> }>,
            context: Record<string, string>,
          ) =>
            async (args: { input: Record<string, unknown> }) => {
              const principal = awsPrincipal.getStore();
              const counted = meter.on && principal !== undefined && context.clientName === 'DynamoDBClient';
              const data = context.commandName !== 'DescribeTableCommand';
              if (counted && data) args.input.ReturnConsumedCapacity = 'TOTAL';
              const result = await next(args);
              if (counted) meter.#add(principal, context.commandName!, result.output.ConsumedCapacity);
              if (counted && process.env.BENCH_TRACE)
                console.log('  ·', principal, context.commandName, JSON.stringify(args.input).slice(0, 160));
              return result;
            },
          { step: 'initialize', name: 'benchDynamoMeter' },
        );
      },
    });
  }

  #add(principal: string, command: string, consumed: unknown): void {
    const entry = this.counts.get(principal) ?? { requests: 0, read: 0, write: 0, ops: new Map() };
    entry.requests += 1;
    const op = command.replace(/Command$/, '');
    entry.ops.set(op, (entry.ops.get(op) ?? 0) + 1);
    const list = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as {
      ReadCapacityUnits?: number;
      WriteCapacityUnits?: number;
      CapacityUnits?: number;
    }[];
    for (const c of list) {
      const read = c.ReadCapacityUnits ?? 0;
      const write = c.WriteCapacityUnits ?? 0;
      // Some answers carry only the total: a read operation's is reads, a write's is writes.
      const total = read + write === 0 ? (c.CapacityUnits ?? 0) : 0;
      entry.read += read + (/Get|Query|Scan/.test(op) ? total : 0);
      entry.write += write + (/Get|Query|Scan/.test(op) ? 0 : total);
    }
    this.counts.set(principal, entry);
  }

  /** Counts of what `run` made `principal` do. */
  async measure<T>(
    principal: string,
    run: () => Promise<T>,
  ): Promise<{ result: T; requests: number; read: number; ops: string }> {
    this.counts.delete(principal);
    this.on = true;
    try {
      const result = await run();
      const entry = this.counts.get(principal) ?? { requests: 0, read: 0, write: 0, ops: new Map() };
      const ops = [...entry.ops].map(([op, n]) => `${op}×${n}`).join(' ');
      return { result, requests: entry.requests, read: entry.read, ops };
    } finally {
      this.on = false;
    }
  }
}

const meter = new DynamoMeter();
meter.install();

process.env.LOG_LEVEL ??= 'error';
const stack = await startLocalStack({
  stage: 'benchconsole',
  port: 0,
  fleet: true,
  maxBrokers: 1,
  telephonyTimeScale: 10,
  jobManagerIntervalMs: 1_000,
  brokerEnv: { DEFAULT_MAX_CALL_SECONDS: '4', RECONCILE_MARGIN_MS: '1000', BROKER_IDLE_WAIT_MS: '300' },
});
// Built through the project's factory, so the meter counts the baseline's requests too.
const doc = makeDocumentClient(
  makeDynamoClient({
    region: stack.cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: stack.cloud.dynamoEndpoint,
  }),
);
const controlTable = stack.cloud.tableNames.control!;
const tasksTable = stack.cloud.tableNames.tasks!;
const fmt = (n: number, digits = 1) => n.toLocaleString('en-US', { maximumFractionDigits: digits });

try {
  await liveJob();
  for (const size of SIZES) await seededJob(size);
} finally {
  await stack.stop();
  doc.destroy();
}

/** One refresh of the job page, as the console makes it: the job, and the series after `since`. */
async function refresh(clientId: string, jobId: string, since: string | undefined) {
  const path = `/clients/${clientId}/jobs/${jobId}`;
  const query = since === undefined ? '' : `?since=${encodeURIComponent(since)}`;
  const [job, series] = await Promise.all([
    stack.operator('GET', path),
    stack.operator('GET', `${path}/series${query}`),
  ]);
  if (job.status !== 200 || series.status !== 200)
    throw new Error(`refresh failed: ${job.status} ${series.status}`);
  return { job: job.json<{ status: string }>(), series: series.json<JobSeriesAnswer>() };
}

/** Part 1: a real call job, refreshed every 2 s while it runs. */
async function liveJob(): Promise<void> {
  const clientId = 'bench-console';
  await putDemoClient(stack, { clientId, maxConcurrentCalls: LIMIT, callsPerSecond: RATE });
  const lines = ['電話番号,氏名'];
  for (let i = 0; i < ROWS; i++)
    lines.push(`090-${6000 + Math.floor(i / 9000)}-${1000 + (i % 9000)},顧客 ${i + 1}`);
  const jobId = await createJobWithList(
    stack,
    clientId,
    { name: 'bench console', channel: 'call', scenarioId: 'reminder', maxAttempts: 1 },
    Buffer.from(`${lines.join('\n')}\n`),
  );
  console.log(
    `live call job: ${ROWS} tasks, ${LIMIT} calls at once, ${RATE} calls/s (a broker process, the sandbox)`,
  );
  const perRefresh: { requests: number; read: number; ops: string; samples: number }[] = [];
  let since: string | undefined;
  const started = Date.now();
  for (;;) {
    const { result, requests, read, ops } = await meter.measure('jobs-api', () =>
      refresh(clientId, jobId, since),
    );
    perRefresh.push({ requests, read, ops, samples: result.series.samples.length });
    since = result.series.samples.at(-1)?.at ?? since;
    if (['completed', 'failed', 'cancelled'].includes(result.job.status)) break;
    if (Date.now() - started > 15 * 60_000) throw new Error('the job did not end within 15 minutes');
    await new Promise((r) => setTimeout(r, REFRESH_MS));
  }
  const running = perRefresh.slice(1);
  const avg = (f: (r: (typeof perRefresh)[number]) => number) =>
    running.reduce((s, r) => s + f(r), 0) / Math.max(1, running.length);
  console.log(
    `  ${perRefresh.length} refreshes over ${fmt((Date.now() - started) / 1000)} s; per refresh: ${fmt(avg((r) => r.requests))} DynamoDB requests, ` +
      `${fmt(
        avg((r) => r.read),
        2,
      )} read units (max ${fmt(Math.max(...running.map((r) => r.read)), 2)}), e.g. ${perRefresh.at(-2)?.ops ?? perRefresh[0]!.ops}`,
  );
  await seriesWriteCost(clientId, jobId);
}

/** What the broker wrote for the job: items, their size, and the cost of an hour of them. */
async function seriesWriteCost(clientId: string, jobId: string): Promise<void> {
  // The last window is written when the broker lets the client go.
  await new Promise((r) => setTimeout(r, 3_000));
  const out = await doc.send(
    new QueryCommand({
      TableName: tasksTable,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': jobSeriesPk(jobId) },
    }),
  );
  const items = out.Items ?? [];
  const sizes = items.map((item) => itemBytes(item));
  const biggest = Math.max(0, ...sizes);
  const windowSeconds = Number(items[0]?.seconds ?? 10);
  const perHour = 3600 / windowSeconds;
  const units = perHour * Math.max(1, Math.ceil(biggest / 1024));
  const starts = items.reduce((s, i) => s + Number(i.starts ?? 0), 0);
  const peak = Math.max(0, ...items.map((i) => Number(i.peakInFlight ?? 0)));
  const maxRate = Math.max(0, ...items.map((i) => Number(i.starts ?? 0) / windowSeconds));
  console.log(
    `  series of job ${jobId} (client ${clientId}): ${items.length} samples of ${windowSeconds} s, ${starts} starts, ` +
      `peak in flight ${peak} (limit ${LIMIT}), max ${fmt(maxRate, 2)} starts/s (rate ${RATE}); items ${Math.min(...sizes)}–${biggest} bytes`,
  );
  console.log(
    `  series write cost per job-hour: ${perHour} PutItems = ${units} write units ($${fmt((units / 1e6) * PRICE_PER_MILLION.write * 1000, 4)} per 1,000 job-hours on demand), ` +
      `${fmt((perHour * biggest) / 1024, 1)} KB stored until TTL`,
  );
}

/** Part 2: a job of `size` tasks, most ended, with an hour of series: ours vs reading the tasks. */
async function seededJob(size: number): Promise<void> {
  const now = Date.now();
  const clientId = `bench-console-${size}`;
  // Paused: no broker serves it while it is measured (the page reads it as it would a running job's).
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: LIMIT,
    callsPerSecond: RATE,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS,
    defaultRegion: 'JP',
    updatedAt: now,
    paused: true,
  };
  const job: Job = {
    clientId,
    jobId: newUlid(now),
    name: `bench ${size}`,
    channel: 'call',
    scenarioId: 's1',
    startAt: now - 3_600_000,
    maxAttempts: 1,
    retryDelaySeconds: 60,
    status: 'running',
    counts: {
      rows: size,
      rejected: 0,
      skipped: 0,
      tasks: size,
      completed: size - 1,
      failed: 0,
      cancelled: 0,
    },
    createdAt: now,
    updatedAt: now,
  };
  // One task still waits (the client is paused), so the job stays running while measured; it is the
  // first written, or the job manager could complete the job before it exists.
  const tasks = (i: number): Task =>
    i === 0 ? { ...endedTask(job, i, now), state: 'pending', attempts: 0 } : endedTask(job, i, now);
  await seedRunningJob(doc, { controlTable, tasksTable }, { client, job, count: size, tasks });
  const series = new DynamoJobSeries(doc, tasksTable);
  for (let k = 0; k < 360; k++) {
    await series.put({
      clientId,
      jobId: job.jobId,
      at: Math.floor((now - 3_600_000) / 10_000) * 10_000 + k * 10_000,
      seconds: 10,
      brokerId: 'broker-0d6f3c1e-7a51-4bb0-9c55-8a4c1d2e9f10',
      peakInFlight: LIMIT,
      maxConcurrentCalls: LIMIT,
      callsPerSecond: RATE,
      starts: 10 * RATE - 3,
      messagesSent: 0,
      rateLimited: 0,
    });
  }
  const load = await meter.measure('jobs-api', () => refresh(clientId, job.jobId, undefined));
  const last = load.result.series.samples.at(-1)?.at;
  const again = await meter.measure('jobs-api', () => refresh(clientId, job.jobId, last));
  const naive = await meter.measure('baseline', () =>
    awsPrincipal.run('baseline', () => readAllTasks(job.jobId)),
  );
  console.log(`job of ${fmt(size, 0)} tasks (seeded, an hour of series):`);
  console.log(
    `  ours, page load (the last hour, ${load.result.series.samples.length} samples): ${load.requests} requests, ${fmt(load.read, 2)} read units (${load.ops})`,
  );
  console.log(
    `  ours, each refresh:  ${again.requests} requests, ${fmt(again.read, 2)} read units (${again.ops})`,
  );
  console.log(
    `  baseline (read the job's ${fmt(naive.result, 0)} tasks): ${naive.requests} requests, ${fmt(naive.read, 2)} read units (${naive.ops})`,
  );
  console.log(
    `  ratio baseline/ours per refresh: ×${fmt(naive.requests / again.requests, 1)} requests, ×${fmt(naive.read / again.read, 0)} read units; ` +
      `page load: ×${fmt(naive.read / load.read, 1)} read units`,
  );
}

function endedTask(job: Job, i: number, now: number): Task {
  return {
    clientId: job.clientId,
    jobId: job.jobId,
    taskId: `t${String(i).padStart(6, '0')}`,
    row: i + 2,
    channel: 'call',
    recipient: `+8190${String(60000000 + i)}`,
    name: `顧客 ${i + 1}`,
    variables: { 氏名: `顧客 ${i + 1}` },
    state: 'completed',
    attempts: 1,
    readyAt: now - 3_600_000,
    lastResult: 'answered',
    callId: `call-${job.jobId}-${i}`,
    startedAt: now - 1_800_000,
    updatedAt: now,
  };
}

/** The baseline: every shard of the job's tasks, every page, eventually consistent. */
async function readAllTasks(jobId: string): Promise<number> {
  const pages = await Promise.all(
    Array.from({ length: TASK_SHARDS }, async (_, shard) => {
      let count = 0;
      let startKey: Record<string, unknown> | undefined;
      do {
        const out = await doc.send(
          new QueryCommand({
            TableName: tasksTable,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': keys.taskShardPk(jobId, shard) },
            ...(startKey ? { ExclusiveStartKey: startKey } : {}),
          }),
        );
        count += out.Items?.length ?? 0;
        startKey = out.LastEvaluatedKey;
      } while (startKey);
      return count;
    }),
  );
  return pages.reduce((a, b) => a + b, 0);
}

/** DynamoDB's item size: attribute names plus values (strings in UTF-8, numbers ~1 byte per 2 digits). */
function itemBytes(item: Record<string, unknown>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name);
    if (typeof value === 'string') bytes += Buffer.byteLength(value);
    else if (typeof value === 'number') bytes += Math.ceil(String(value).replace(/\D/g, '').length / 2) + 1;
    else bytes += Buffer.byteLength(JSON.stringify(value));
  }
  return bytes;
}
