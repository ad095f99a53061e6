/**
 * The whole broker on the local cloud, for bench/message-throughput: a `message` job written to
 * DynamoDB Local as ingest writes it, served by the real broker (worker/process.ts: the lease, the
 * claims fenced by it, the pipeline, outcome transactions with the job's counts) sending to the
 * bench's LINE sandbox. In its own process, under the broker task's V8 flags, so its peak RSS is a
 * broker's.
 *
 * 1. Creates its tables (names unique to the run), the channel, the client and a running job of
 *    `messages` tasks; says `{ seeded: true }` over IPC and waits for `'go'`.
 * 2. Resets the kernel's peak-RSS mark, starts the broker, hands it the client through the work
 *    list, and reads the job's counts until every task is final; stops the broker (SIGTERM path)
 *    and reports a {@link BrokerContenderResult}.
 *
 *   node bench/lib/message-broker-contender.ts '<BrokerContenderRequest as JSON>'
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { createTable, LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { newUlid } from '#shared/ids.ts';
import { type ClientSettings, type Job, keys } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { readBrokerConfig } from '#worker/config.ts';
import { startBrokerProcess } from '#worker/process.ts';
import { makeNodeHttpSend } from './node-http-send.ts';
import { pendingTask, seedRunningJob } from './seed-job.ts';

export interface BrokerContenderRequest {
  /** LINE's transport: undici's Pool (now) or `node:http` with a keep-alive agent (before). */
  readonly transport: 'undici' | 'node-http';
  /** How the job's recipients are held: a task each (before), or chunks of 500 with their variables (now). */
  readonly held: 'tasks' | 'chunks';
  readonly dynamoEndpoint: string;
  readonly region: string;
  readonly lineUrl: string;
  readonly channelId: string;
  readonly accessToken: string;
  readonly messages: number;
  /** The broker's MESSAGE_RATE_PER_SECOND (the channel's limit). */
  readonly rate: number;
  readonly concurrency: number;
  /** Load Powertools' Tracer (X-Ray SDK, cls-hooked) first, as the broker's logger module once did. */
  readonly withXRaySdk?: boolean;
}

export interface BrokerContenderResult {
  readonly messages: number;
  readonly seconds: number;
  readonly messagesPerSecond: number;
  readonly completed: number;
  readonly failed: number;
  readonly cancelled: number;
  readonly peakRssMb: number;
  readonly seedSeconds: number;
  /** CPU seconds (user + system) the broker's process used during the job. */
  readonly cpuSeconds: number;
  /** CPU ms a message from a quarter of the job done to its end: start-up and the JIT's warm-up behind. */
  readonly steadyCpuMsPerMessage: number;
  /** The broker's DynamoDB requests during the job, by operation (the bench's own reads apart). */
  readonly requests: Record<string, number>;
  /**
   * Steady state's CPU ms a message by the process's threads (Linux's `/proc/self/task`), user and
   * kernel apart: the main thread (JavaScript, and the kernel's work for its sockets), V8's helpers
   * (concurrent GC, the optimising compiler), libuv's pool. Empty off Linux.
   */
  readonly steadyThreads: readonly ThreadCpu[];
}

export interface ThreadCpu {
  readonly thread: string;
  readonly userMs: number;
  readonly systemMs: number;
}

/** CPU ms (user, kernel) so far of each of this process's threads, summed by thread name. */
function threadCpu(): Map<string, { user: number; system: number }> {
  const out = new Map<string, { user: number; system: number }>();
  let tasks: string[];
  try {
    tasks = readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  const msPerTick = 10; // USER_HZ is 100 on Linux.
  for (const tid of tasks) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    // Fields after the name: state is the 3rd field of stat; utime and stime the 14th and 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const thread = Number(tid) === process.pid ? 'main' : name.replace(/\d+$/, '').trim();
    const sum = out.get(thread) ?? { user: 0, system: 0 };
    sum.user += Number(fields[11]) * msPerTick;
    sum.system += Number(fields[12]) * msPerTick;
    out.set(thread, sum);
  }
  return out;
}

/**
 * Experiments: V8's sampling heap profiler over the steady state, counting what the garbage
 * collector took back too (so it says what allocates, not what stays), written to `path` as a
 * `.heapprofile` (Chrome DevTools reads it).
 */
function allocationSampler(path: string) {
  const session = new Session();
  session.connect();
  return {
    async start() {
      await session.post('HeapProfiler.enable');
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 16_384,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    },
    async stop() {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      writeFileSync(path, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

/** Each thread's CPU ms a message between two {@link threadCpu} readings. */
function threadCpuPerMessage(
  from: Map<string, { user: number; system: number }>,
  to: Map<string, { user: number; system: number }>,
  messages: number,
): ThreadCpu[] {
  return [...to]
    .map(([thread, t]) => ({
      thread,
      userMs: (t.user - (from.get(thread)?.user ?? 0)) / messages,
      systemMs: (t.system - (from.get(thread)?.system ?? 0)) / messages,
    }))
    .filter((t) => t.userMs + t.systemMs > 0)
    .sort((a, b) => b.userMs + b.systemMs - (a.userMs + a.systemMs));
}

const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};
const TEMPLATE: MessageTemplate = {
  messages: [{ type: 'text', text: 'Hello {{name}}, your parcel arrives tomorrow between 9:00 and 12:00.' }],
};

const request = JSON.parse(process.argv[2]!) as BrokerContenderRequest;
if (request.withXRaySdk) await import('@aws-lambda-powertools/tracer');
const ddb = new DynamoDBClient({
  region: request.region,
  endpoint: request.dynamoEndpoint,
  credentials: LOCAL_CREDENTIALS,
});
const doc = makeDocumentClient(ddb);
// The bench's own reads of the job's counts go through a client of their own, not counted.
const probe = makeDocumentClient(
  new DynamoDBClient({
    region: request.region,
    endpoint: request.dynamoEndpoint,
    credentials: LOCAL_CREDENTIALS,
  }),
);
const requests: Record<string, number> = {};
let counting = false;
ddb.middlewareStack.add(
  (next, context) => async (args) => {
    const op = context.commandName ?? 'unknown';
    if (counting) requests[op] = (requests[op] ?? 0) + 1;
    return next(args);
  },
  { step: 'initialize', name: 'benchRequestCount' },
);
const stage = `bench${process.pid}`;
const [controlTable, tasksTable, channelsTable] = await Promise.all([
  createTable(ddb, stage, tableSpec('control')),
  createTable(ddb, stage, tableSpec('tasks')),
  createTable(ddb, stage, tableSpec('channels')),
]);

const seedStart = performance.now();
const now = Date.now();
const clientId = `bench-${process.pid}`;
const client: ClientSettings = {
  clientId,
  maxConcurrentCalls: 1,
  callsPerSecond: 1,
  timeZone: 'Asia/Tokyo',
  callingHours: ALWAYS,
  defaultRegion: 'JP',
  messageChannelId: request.channelId,
  updatedAt: now,
};
const job: Job = {
  clientId,
  jobId: newUlid(now),
  name: 'bench campaign',
  channel: 'line',
  scenarioId: 'default',
  message: TEMPLATE,
  startAt: now - 1000,
  maxAttempts: 1,
  retryDelaySeconds: 0,
  status: 'running',
  counts: {
    rows: request.messages,
    rejected: 0,
    skipped: 0,
    tasks: request.messages,
    completed: 0,
    failed: 0,
    cancelled: 0,
  },
  createdAt: now,
  updatedAt: now,
};
await doc.send(
  new PutCommand({
    TableName: channelsTable,
    Item: {
      channelId: request.channelId,
      clientId,
      accessToken: request.accessToken,
      secrets: [{ secret: 'unused', addedAt: 0 }],
      autoAnswer: 'push',
      rules: [],
      updatedAt: now,
    },
  }),
);
// Recipients of their own (the run's pid in the id), so the sandbox's per-recipient counts stay apart.
const recipient = (i: number) =>
  `U${(process.pid % 0xffff).toString(16).padStart(4, '0')}${i.toString(16).padStart(28, '0')}`;
await seedRunningJob(
  doc,
  { controlTable, tasksTable },
  {
    client,
    job,
    count: request.messages,
    tasks: (i) =>
      pendingTask(job, i, {
        channel: 'message',
        recipient: recipient(i),
        variables: { name: `Customer ${i}` },
        readyAt: now - 1000,
        updatedAt: now,
      }),
    chunks: request.held === 'chunks',
  },
);
const seedSeconds = (performance.now() - seedStart) / 1000;

process.send!({ seeded: true });
await new Promise<void>((resolve) => process.once('message', () => resolve()));

writeFileSync('/proc/self/clear_refs', '5');
const cpuAtStart = process.cpuUsage();
counting = true;
const start = performance.now();
// The broker's configuration as a Fargate task reads it from its environment: production's defaults
// for everything the bench does not set (lease, hold, idle wait…). Telephony is not used here.
const broker = await startBrokerProcess(
  readBrokerConfig({
    CONTROL_TABLE: controlTable,
    TASKS_TABLE: tasksTable,
    CHANNELS_TABLE: channelsTable,
    LINE_API_URL: request.lineUrl,
    LINE_RATE_PER_SECOND: String(request.rate),
    MESSAGE_CONCURRENCY: String(request.concurrency),
    TELEPHONY_API_URL: 'http://127.0.0.1:9',
    TELEPHONY_API_TOKEN: 'unused',
    CALL_STATUS_CALLBACK_URL: 'http://127.0.0.1:9/status',
    BROKER_VERSION: 'v1',
    // Experiments: more of the broker's environment, as JSON (e.g. `{"MESSAGE_QUEUE_CAPACITY":"1000"}`).
    ...(JSON.parse(process.env.BENCH_BROKER_ENV ?? '{}') as Record<string, string>),
  }),
  { doc, logger: silentLogger, ...(request.transport === 'node-http' ? { makeSend: makeNodeHttpSend } : {}) },
);
await doc.send(
  new PutCommand({
    TableName: controlTable,
    Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
  }),
);
let counts = job.counts;
const allocations = process.env.BENCH_BROKER_ALLOC_PROFILE
  ? allocationSampler(process.env.BENCH_BROKER_ALLOC_PROFILE)
  : undefined;
// Steady state: from the first reading at a quarter of the job done (start-up and the JIT's
// warm-up behind) to the end.
let quarter: { cpu: NodeJS.CpuUsage; threads: ReturnType<typeof threadCpu>; done: number } | undefined;
for (;;) {
  const out = await probe.send(
    new GetCommand({ TableName: controlTable, Key: keys.job(clientId, job.jobId), ConsistentRead: true }),
  );
  counts = (out.Item as Job).counts;
  const done = counts.completed + counts.failed + counts.cancelled;
  if (!quarter && done >= request.messages / 4) {
    quarter = { cpu: process.cpuUsage(), threads: threadCpu(), done };
    await allocations?.start();
  }
  if (done >= request.messages) break;
  await new Promise((r) => setTimeout(r, 100));
}
const seconds = (performance.now() - start) / 1000;
const cpu = process.cpuUsage(cpuAtStart);
const steady = quarter ? process.cpuUsage(quarter.cpu) : cpu;
const steadyMessages = request.messages - (quarter?.done ?? 0);
const steadyThreads = threadCpuPerMessage(quarter?.threads ?? new Map(), threadCpu(), steadyMessages);
await allocations?.stop();
counting = false;
const peakRssMb = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
broker.stop('sigterm');
await broker.done;

process.send!({
  messages: request.messages,
  seconds,
  messagesPerSecond: request.messages / seconds,
  completed: counts.completed,
  failed: counts.failed,
  cancelled: counts.cancelled,
  peakRssMb,
  seedSeconds,
  cpuSeconds: (cpu.user + cpu.system) / 1e6,
  steadyCpuMsPerMessage: (steady.user + steady.system) / 1e3 / steadyMessages,
  requests,
  steadyThreads,
} satisfies BrokerContenderResult);
process.disconnect();
