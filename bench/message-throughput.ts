/**
 * bench/message-throughput: how fast a `message` job goes out, and at what memory.
 *
 * One run, each contender in its own child process (so peak RSS is its own) against a fresh,
 * warmed LINE sandbox of its own (its own process, rate limit lifted: the sandbox remembers every
 * retry key, and a sandbox grown by the contender before would slow the next one), all over the
 * same keep-alive HTTP transport (so the figures compare designs):
 *   - Switchboard's pipeline (shared/campaign/pipeline.ts): claimed pages → bounded queue →
 *     paced senders → batched reporter; personalised messages by push, a text without variables
 *     by multicast (500 recipients a request);
 *   - (a) one at a time: await each push before the next;
 *   - (b) the mass-mailing design the issue cites: producer → bounded queue → a FIXED pool of
 *     100 senders → batched reporter, no token bucket, no multicast;
 *   - (c) the sandbox's own ceiling: autocannon in a worker thread POSTing valid pushes with fresh
 *     retry keys.
 * Memory: every contender warms up first (see warmUpFor) and runs under the broker task's V8 flags
 * (see HEAP_FLAGS); peak RSS is the kernel's high-water mark of its process during the job, reset
 * after the warm-up; separate runs force full GCs to show the heap the job keeps alive. Then the rate-limit scenario: the sandbox at 2,000 requests/s,
 * Switchboard paced at 2,000/s: the sends/s it holds in steady state and the 429s it got.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { assertJava17, LOCAL_CREDENTIALS, startLocalCloud } from '#local/cloud.ts';
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { BROKER_TASK_SIZE, brokerV8Flags } from '#shared/broker/runtime.ts';
import { type HttpSend, PooledHttpSend } from '#shared/campaign/http-send.ts';
import { LINE_RATE_LIMITS } from '#shared/line/rate-limits.ts';
import { baselineTree } from './lib/baseline-revision.ts';
import type { BrokerContenderRequest, BrokerContenderResult } from './lib/message-broker-contender.ts';
import type { ContenderRequest, WarmedUp } from './lib/message-contender.ts';
import type { CeilingRequest, CeilingResult } from './lib/message-load-worker.ts';
import { BENCH_CHANNEL, type SandboxCommand, type SandboxStats } from './lib/message-sandbox.ts';
import { type ContenderResult, steadyRate } from './lib/message-stats.ts';
import { makeNodeHttpSend } from './lib/node-http-send.ts';
import { measurePacedRates, measureQuotaCheck, pacedLines, quotaLines } from './lib/quota-check.ts';
import { checkLines, measureMessageClaimChecks } from './lib/start-checks.ts';

const USAGE = `npm run bench:message-throughput [-- options]
  --messages N         messages per contender (default 100000)
  --one-at-a-time N    messages for (a) (default: --messages; fewer is extrapolated and labelled so)
  --million            also Switchboard push and multicast at 1,000,000 (minutes) and the RSS rule
  --ceiling-seconds S  autocannon's run (default 10)
  --rate-seconds S     the 2,000/s scenario's length (default 15)
  --concurrency N      Switchboard's senders (default 128, the broker's MESSAGE_CONCURRENCY)
  --latency-ms MS      every sandbox request waits this long first (a round trip to LINE; default 0)
  --rate-only          only the 2,000/s scenario
  --burst N            experiment: the pacer's burst in the 2,000/s scenario (default: the pipeline's)
  --rate-concurrency N senders in the 2,000/s scenario (default 128, the pipeline's default)
  --default-heap       run contenders with V8's default heap sizing instead of the broker task's flags
  --broker-messages N  the whole broker on DynamoDB Local at 2,000/s: this many messages (default 60000, ~30 s
                       now: 20,000 ended while the JIT still compiled; 0 skips)
  --broker-now-only    experiment: the whole broker's current design only (no baselines beside it)
  --claim-checks N     the suppression read at the claim, on and off: this many messages each (default 5000; 0 skips)
  --transport N        LINE's transport alone, node:http vs undici: this many pushes each (default 20000; 0 skips)
  --claim-checks-only  only that
  --quota-check-only   only LINE's per-endpoint pacing (vs multicast at the push rate) and the quota check's cost
  --quota-seconds S    the per-endpoint pacing runs' length (default 5)
  --help`;

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '100000' },
    'one-at-a-time': { type: 'string' },
    million: { type: 'boolean', default: false },
    'ceiling-seconds': { type: 'string', default: '10' },
    'rate-seconds': { type: 'string', default: '15' },
    concurrency: { type: 'string', default: '128' },
    'latency-ms': { type: 'string', default: '0' },
    'rate-only': { type: 'boolean', default: false },
    burst: { type: 'string' },
    'rate-concurrency': { type: 'string', default: '128' },
    'default-heap': { type: 'boolean', default: false },
    'broker-messages': { type: 'string', default: '60000' },
    'claim-checks': { type: 'string', default: '5000' },
    transport: { type: 'string', default: '20000' },
    'claim-checks-only': { type: 'boolean', default: false },
    'quota-check-only': { type: 'boolean', default: false },
    'quota-seconds': { type: 'string', default: '5' },
    'broker-now-only': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const claimChecks = Number(values['claim-checks']);
const transportMessages = Number(values.transport);
if (!Number.isInteger(claimChecks) || claimChecks < 0)
  throw new RangeError('--claim-checks must be a whole number');

/** The claim's contact-policy checks on DynamoDB Local, with and without (bench/lib/start-checks.ts). */
async function printClaimChecks(): Promise<void> {
  const cloud = await startLocalCloud();
  try {
    const doc = makeDocumentClient(
      makeDynamoClient({
        region: cloud.region,
        endpoint: cloud.dynamoEndpoint,
        credentials: LOCAL_CREDENTIALS,
      }),
    );
    const tables = { controlTable: cloud.tableNames.control!, tasksTable: cloud.tableNames.tasks! };
    const figures = await measureMessageClaimChecks(doc, tables, claimChecks);
    const title = `\ncontact-policy checks at the message claim (DynamoDB Local, pages of 500, interleaved):`;
    for (const line of checkLines(title, 'message', figures)) console.log(line);
  } finally {
    await cloud.stop();
  }
}
if (values['quota-check-only']) {
  const seconds = Number(values['quota-seconds']);
  const paced = [
    await measurePacedRates(
      'multicasts: Switchboard, a bucket per endpoint',
      LINE_RATE_LIMITS.multicast,
      seconds,
      'multicast',
    ),
    await measurePacedRates(
      'multicasts: baseline, paced at the push rate',
      LINE_RATE_LIMITS.push,
      seconds,
      'multicast',
    ),
    await measurePacedRates('pushes + multicasts: Switchboard', LINE_RATE_LIMITS.multicast, seconds, 'mixed'),
  ];
  for (const line of pacedLines(paced)) console.log(line);
  for (const line of quotaLines(await measureQuotaCheck())) console.log(line);
  process.exit(0);
}
if (values['claim-checks-only']) {
  await printClaimChecks();
  process.exit(0);
}
const messages = Number(values.messages);
const oneAtATimeMessages = Number(values['one-at-a-time'] ?? messages);
const ceilingSeconds = Number(values['ceiling-seconds']);
const rateSeconds = Number(values['rate-seconds']);
const concurrency = Number(values.concurrency);
const latencyMs = Number(values['latency-ms']);
const burst = values.burst === undefined ? undefined : Number(values.burst);
const rateConcurrency = Number(values['rate-concurrency']);
const brokerMessages = Number(values['broker-messages']);
// Enough connections that the sandbox, not the round trip, is what limits the load generator.
const ceilingConnections = Math.max(64, concurrency);
const LINE_RATE = 2000;
const MILLION = 1_000_000;
/**
 * Every contender runs under the V8 flags the broker's Fargate task has (shared/broker/runtime.ts):
 * V8 otherwise sizes its young generation and old space by how long a process has been allocating
 * fast, so a 0.3 s run and a 2 s run of the same code differ by 100+ MB of room for garbage. The
 * same limits for every contender make peak RSS compare what the code keeps.
 */
const HEAP_FLAGS = values['default-heap'] ? [] : brokerV8Flags();
const heapLabel =
  HEAP_FLAGS.length > 0
    ? `V8 heap as the broker task's (${HEAP_FLAGS.join(' ')})`
    : "V8's default heap sizing";

const here = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));

function child(script: string, args: string[] = [], nodeFlags: string[] = []): ChildProcess {
  return spawn(process.execPath, [...nodeFlags, path.isAbsolute(script) ? script : here(script), ...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

function nextMessage<T>(proc: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`child exited with ${code} before answering`));
    proc.once('exit', onExit);
    proc.once('message', (m) => {
      proc.off('exit', onExit);
      resolve(m as T);
    });
  });
}

interface Sandbox {
  readonly url: string;
  command<T = { ok: true }>(command: SandboxCommand): Promise<T>;
  stop(): Promise<void>;
}

async function startSandbox(): Promise<Sandbox> {
  const proc = child('./lib/message-sandbox.ts');
  const { url } = await nextMessage<{ url: string }>(proc);
  const command = <T>(c: SandboxCommand): Promise<T> => {
    const answer = nextMessage<T>(proc);
    proc.send(c);
    return answer;
  };
  return {
    url,
    command,
    async stop() {
      await command({ cmd: 'stop' }).catch(() => undefined);
      proc.kill();
    },
  };
}

let runs = 0;
interface Row extends ContenderResult {
  readonly sandbox: SandboxStats;
}

/**
 * Warm-up before every job, unpaced, in the contender's process (it warms the sandbox too): the
 * JIT, the connections and V8's heap reach where a long-running broker has them. 20,000 messages
 * or 200 requests, whichever is more (a multicast carries 500).
 */
const warmUpFor = (request: Pick<ContenderRequest, 'template' | 'kind' | 'messages'>) =>
  // One at a time, a warm-up of 20,000 would take 1,000 s at 50 ms a request: it warms with its
  // own job's size, at most 1,000 (its memory does not depend on the list either way).
  request.kind === 'one-at-a-time'
    ? Math.min(1_000, request.messages)
    : request.template === 'same'
      ? 100_000
      : 20_000;

async function runContender(
  sandbox: Sandbox,
  request: Omit<ContenderRequest, 'url' | 'accessToken' | 'run' | 'warmUp'>,
  options: { perSecond: number | null; nodeFlags: string[] },
): Promise<Row> {
  const proc = child(
    './lib/message-contender.ts',
    [
      JSON.stringify({
        ...request,
        warmUp: warmUpFor(request),
        url: sandbox.url,
        accessToken: BENCH_CHANNEL.accessToken,
        run: ++runs,
      } satisfies ContenderRequest),
    ],
    options.nodeFlags,
  );
  await nextMessage<WarmedUp>(proc);
  await sandbox.command({ cmd: 'reset' });
  await sandbox.command({ cmd: 'rate', perSecond: options.perSecond });
  const answer = nextMessage<ContenderResult>(proc);
  proc.send('go');
  const result = await answer;
  await new Promise((r) => proc.once('exit', r));
  const stats = await sandbox.command<SandboxStats>({ cmd: 'stats' });
  if (stats.recipients !== request.messages || stats.duplicates !== 0) {
    console.log(
      `!! ${request.name}: the sandbox counted ${stats.recipients} recipients (want ${request.messages}), ${stats.duplicates} duplicates`,
    );
  }
  return { ...result, sandbox: stats };
}

async function freshSandbox(): Promise<Sandbox> {
  const sandbox = await startSandbox();
  if (latencyMs > 0) await sandbox.command({ cmd: 'latency', ms: latencyMs });
  return sandbox;
}

async function contender(
  name: string,
  kind: ContenderRequest['kind'],
  count: number,
  template: ContenderRequest['template'],
  extra: Partial<ContenderRequest> = {},
  options: { perSecond?: number; liveHeap?: boolean } = {},
): Promise<Row> {
  const sandbox = await freshSandbox();
  try {
    const row = await runContender(
      sandbox,
      {
        name,
        kind,
        messages: count,
        template,
        concurrency,
        ...(options.liveHeap ? { liveHeapEvery: Math.ceil(count / 10) } : {}),
        ...extra,
      },
      {
        perSecond: options.perSecond ?? null,
        nodeFlags: options.liveHeap ? [...HEAP_FLAGS, '--expose-gc'] : HEAP_FLAGS,
      },
    );
    console.error(`  … ${name}: ${fmt(count)} messages in ${fmt(row.seconds, 1)} s`);
    return row;
  } finally {
    await sandbox.stop();
  }
}

async function ceiling(): Promise<CeilingResult> {
  const sandbox = await freshSandbox();
  try {
    // Warm the sandbox as every contender's warm-up does.
    await runContender(
      sandbox,
      { name: 'warm-up', kind: 'switchboard', messages: 0, template: 'personal', concurrency },
      { perSecond: null, nodeFlags: HEAP_FLAGS },
    );
    const result = await new Promise<CeilingResult>((resolve, reject) => {
      const worker = new Worker(here('./lib/message-load-worker.ts'), {
        workerData: {
          url: sandbox.url,
          accessToken: BENCH_CHANNEL.accessToken,
          seconds: ceilingSeconds,
          connections: ceilingConnections,
        } satisfies CeilingRequest,
      });
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    console.error(`  … (c) sandbox ceiling: ${fmt(result.rps)} requests/s`);
    return result;
  } finally {
    await sandbox.stop();
  }
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const rate = (r: ContenderResult) => r.messages / r.seconds;
const load = () => fmt(loadavg()[0]!, 1);
const loadAtStart = load();

console.log(
  `message-throughput: ${fmt(messages)} messages to the local LINE sandbox (rate limit lifted${latencyMs > 0 ? `, ${latencyMs} ms added to every request` : ''}), each contender in its own process against a fresh warmed sandbox, same keep-alive HTTP transport; ${availableParallelism()} cores, load average ${loadAtStart} at start\n`,
);
if (!values['rate-only']) {
  const cap = await ceiling();
  const oneByOne = await contender(
    '(a) one at a time (await each push)',
    'one-at-a-time',
    oneAtATimeMessages,
    'personal',
  );
  const pool = await contender(
    '(b) fixed pool: queue + 100 senders + reporter',
    'fixed-pool',
    messages,
    'personal',
    {
      concurrency: 100,
    },
  );
  const push = await contender('switchboard, personalised (push)', 'switchboard', messages, 'personal');
  const multi = await contender('switchboard, same text (multicast ×500)', 'switchboard', messages, 'same');
  let million: { push: Row; multi: Row } | undefined;
  if (values.million) {
    console.error('  --million: 1,000,000 by push (minutes) and by multicast…');
    million = {
      push: await contender('switchboard, personalised (push), 1M', 'switchboard', MILLION, 'personal'),
      multi: await contender('switchboard, same text (multicast ×500), 1M', 'switchboard', MILLION, 'same'),
    };
  }
  // Forced full GCs cost time, so the heap the pipeline keeps alive is measured in runs of its own.
  const sizes = million ? [messages, MILLION] : [messages];
  const live: { push: Row[]; multi: Row[] } = { push: [], multi: [] };
  for (const size of sizes) {
    const opts = { liveHeap: true };
    live.push.push(
      await contender(`live heap: push, ${fmt(size)}`, 'switchboard', size, 'personal', {}, opts),
    );
    live.multi.push(
      await contender(`live heap: multicast, ${fmt(size)}`, 'switchboard', size, 'same', {}, opts),
    );
  }

  const loadAfterTable = load();
  const rows: Row[] = [oneByOne, pool, push, multi, ...(million ? [million.push, million.multi] : [])];
  const pad = (s: string, n: number) => s.padEnd(n);
  const padL = (s: string, n: number) => s.padStart(n);
  console.log(
    `\n${pad('contender', 50)} ${padL('messages', 10)} ${padL('requests', 10)} ${padL('msgs/s', 10)} ${padL('req/s', 8)} ${padL('p50 ms', 7)} ${padL('p99 ms', 7)} ${padL('peak RSS', 9)} ${padL('warm RSS', 9)} ${padL('heap', 7)} dup`,
  );
  for (const r of rows) {
    console.log(
      `${pad(r.name, 50)} ${padL(fmt(r.messages), 10)} ${padL(fmt(r.requests), 10)} ${padL(fmt(rate(r)), 10)} ${padL(fmt(r.requests / r.seconds), 8)} ${padL(fmt(r.p50Ms, 1), 7)} ${padL(fmt(r.p99Ms, 1), 7)} ${padL(`${fmt(r.peakRssMb)} MB`, 9)} ${padL(`${fmt(r.startPeakRssMb)} MB`, 9)} ${padL(`${fmt(r.peakHeapUsedMb)} MB`, 7)} ${r.sandbox.duplicates}`,
    );
  }
  console.log(
    `${pad(`(c) sandbox ceiling: autocannon, ${ceilingConnections} connections`, 50)} ${padL('-', 10)} ${padL(fmt(cap.rps * ceilingSeconds), 10)} ${padL('-', 10)} ${padL(fmt(cap.rps), 8)} ${padL(fmt(cap.p50, 1), 7)} ${padL(fmt(cap.p99, 1), 7)} ${padL('-', 9)} ${padL('-', 9)} ${padL('-', 7)} (${cap.non2xx + cap.errors} non-2xx/errors)`,
  );
  console.log(
    `(load average ${loadAtStart} → ${loadAfterTable} over these runs on ${availableParallelism()} cores: other work on the machine slows every contender)\n\npeak RSS: the kernel's high-water mark (VmHWM) of the contender's own process during the job, marked afresh (/proc/self/clear_refs) after a warm-up sent the same way (20,000 messages; multicast 100,000 = 200 requests), so it counts what the warmed process held plus what the job added; warm RSS: the mark before the job (start-up and warm-up). ${heapLabel} for every contender. heap: the most V8 heap in use, sampled every 50 ms, garbage included. p50/p99: per HTTP request, from send to answer.`,
  );
  if (oneAtATimeMessages !== messages) {
    console.log(
      `(a) ran on ${fmt(oneAtATimeMessages)} messages only; EXTRAPOLATED at its measured rate, ${fmt(messages)} would take ${fmt(messages / rate(oneByOne))} s (vs ${fmt(push.seconds, 1)} s push, ${fmt(multi.seconds, 1)} s multicast).`,
    );
  }
  console.log('\nratios (messages/s):');
  console.log(`  switchboard push      / (a) one at a time: ×${fmt(rate(push) / rate(oneByOne), 1)}`);
  console.log(`  switchboard push      / (b) fixed pool:    ×${fmt(rate(push) / rate(pool), 2)}`);
  console.log(`  switchboard multicast / (a) one at a time: ×${fmt(rate(multi) / rate(oneByOne), 0)}`);
  console.log(`  switchboard multicast / (b) fixed pool:    ×${fmt(rate(multi) / rate(pool), 0)}`);
  console.log(
    `  requests/s vs (c) the sandbox's ceiling: push ${fmt((100 * push.requests) / push.seconds / cap.rps)} %, fixed pool ${fmt((100 * pool.requests) / pool.seconds / cap.rps)} %, one at a time ${fmt((100 * oneByOne.requests) / oneByOne.seconds / cap.rps)} %`,
  );
  console.log(
    `  multicast cut the requests ×${fmt(push.requests / multi.requests)} (${fmt(push.requests)} → ${fmt(multi.requests)})`,
  );

  console.log(
    `\nmemory vs job size (peak RSS as above; live heap: the most V8 heap in use right after a full GC forced at every tenth of the messages, in runs of their own):`,
  );
  for (const [label, small, big, probes] of [
    ['push', push, million?.push, live.push],
    ['multicast', multi, million?.multi, live.multi],
  ] as const) {
    const liveFigures = probes.map((p) => `${fmt(p.liveHeapMb ?? 0, 1)} MB at ${fmt(p.messages)}`).join(', ');
    if (!big) {
      console.log(
        `  ${pad(label, 9)} peak RSS ${fmt(small.peakRssMb)} MB at ${fmt(small.messages)}; live heap ${liveFigures} (--million for the 1M comparison)`,
      );
      continue;
    }
    const growth = big.peakRssMb / small.peakRssMb - 1;
    console.log(
      `  ${pad(label, 9)} peak RSS ${fmt(small.peakRssMb)} MB at ${fmt(small.messages)} → ${fmt(big.peakRssMb)} MB at ${fmt(big.messages)}: ${growth >= 0 ? '+' : ''}${fmt(100 * growth, 1)} % (${Math.abs(growth) <= 0.1 ? 'within' : 'NOT within'} 10 %); live heap ${liveFigures}`,
    );
  }
}

// The channel's real limit: a fresh sandbox at 2,000 requests/s, Switchboard paced at the same.
const loadBefore = load();
const paced = await contender(
  `switchboard paced at ${LINE_RATE}/s, ~${rateSeconds} s`,
  'switchboard',
  LINE_RATE * rateSeconds,
  'personal',
  // Little's law: 2,000/s at tens of ms per request needs more requests in flight.
  { rate: LINE_RATE, concurrency: rateConcurrency, ...(burst === undefined ? {} : { burst }) },
  { perSecond: LINE_RATE },
);
const steady = steadyRate(paced.startsPerSecond ?? []);
const tooMany = paced.sandbox.byStatus['429'] ?? 0;
const met = Math.round(steady.perSecond) >= 1950 && Math.round(steady.perSecond) <= 2000 && tooMany === 0;
console.log(
  `\nrate limit ${fmt(LINE_RATE)}/s${burst === undefined ? '' : ` (EXPERIMENT: pacer burst ${burst}, not the pipeline's default)`}${rateConcurrency === 128 ? '' : ` (EXPERIMENT: ${rateConcurrency} senders)`}: ${fmt(paced.requests)} sends in ${fmt(paced.seconds, 1)} s`,
);
console.log(
  `  steady state (whole seconds 2–${steady.seconds + 1} after the first send): ${fmt(steady.perSecond)} sends/s held, slowest second ${fmt(steady.min)}, fastest ${fmt(steady.max)}; sandbox 429s: ${tooMany} → goal 1,950–2,000/s with 0 429s: ${met ? 'met' : 'MISSED'}`,
);
console.log(
  `  first second (senders filling, the pacer's burst): ${fmt(paced.startsPerSecond?.[0] ?? 0)} sends; whole run ${fmt(paced.requests / paced.seconds)}/s; p99 ${fmt(paced.p99Ms, 1)} ms; most in flight ${paced.maxInFlight} of ${rateConcurrency}; duplicates ${paced.sandbox.duplicates}`,
);
console.log(
  `  CPU ${fmt((1000 * paced.cpuSeconds) / paced.messages, 3)} ms a message (the pipeline and LINE's transport, no table: the floor under the whole broker's figure below)`,
);
console.log(
  `  conditions: event-loop delay p99/max ${fmt(paced.loopDelayP99Ms ?? 0, 1)}/${fmt(paced.loopDelayMaxMs ?? 0)} ms in the sender, ${fmt(paced.sandbox.loopDelayP99Ms, 1)}/${fmt(paced.sandbox.loopDelayMaxMs)} ms in the sandbox; load average ${loadBefore} → ${load()} on ${availableParallelism()} cores (a stall longer than the pacer's burst, 10 ms at the default, loses sends)`,
);

/**
 * The whole broker, as deployed, on the local cloud: the real broker (lease, fenced claims from the
 * tasks table, the pipeline, outcome transactions with the job's counts) on DynamoDB Local, at the
 * channel's 2,000/s, against a fresh sandbox at 2,000/s. Beside it, the same pipeline paced the
 * same with an in-memory table (the row above): the difference is the table. DynamoDB Local is one
 * Java process on the cores the broker and the sandbox share, so its CPU time is printed too.
 */
/**
 * One run of the whole broker, its claims recorded per page (now) or per task (`before`: before
 * claim pages, run at the last revision that had them, bench/lib/baseline-revision.ts), sending
 * over undici's Pool (now) or `node:http` (before), the job's recipients held in chunks with their
 * variables (now) or a task each (before).
 */
async function runWholeBroker(
  claims: 'pages' | 'before',
  transport: BrokerContenderRequest['transport'],
  held: BrokerContenderRequest['held'],
) {
  // A DynamoDB Local of its own: a second job in the same Java process ran ten times slower.
  const cloud = await startLocalCloud();
  const sandbox = await freshSandbox();
  try {
    const proc = child(
      claims === 'before'
        ? path.join(baselineTree(), 'bench/lib/message-broker-contender.ts')
        : './lib/message-broker-contender.ts',
      [
        JSON.stringify({
          dynamoEndpoint: cloud.dynamoEndpoint,
          region: cloud.region,
          lineUrl: sandbox.url,
          channelId: BENCH_CHANNEL.channelId,
          accessToken: BENCH_CHANNEL.accessToken,
          messages: brokerMessages,
          rate: LINE_RATE,
          concurrency: rateConcurrency,
          withXRaySdk: false,
          transport,
          held,
          // The baseline revision's contender sets its broker's BROKER_CLAIM_RECORDS from it.
          ...(claims === 'before' ? { claimRecords: 'task' } : {}),
        } satisfies BrokerContenderRequest & { claimRecords?: 'task' }),
      ],
      [
        ...HEAP_FLAGS,
        ...(process.env.BENCH_BROKER_CPU_PROF
          ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_BROKER_CPU_PROF}`]
          : []),
        // Experiments: more flags for the broker's process (e.g. `--trace-gc`).
        ...(process.env.BENCH_BROKER_NODE_FLAGS?.split(' ').filter(Boolean) ?? []),
      ],
    );
    await nextMessage<{ seeded: true }>(proc);
    await sandbox.command({ cmd: 'reset' });
    await sandbox.command({ cmd: 'rate', perSecond: LINE_RATE });
    const javaAtGo = javaCpuSeconds();
    const answer = nextMessage<BrokerContenderResult>(proc);
    proc.send('go');
    const r = await answer;
    const javaSeconds = javaCpuSeconds() - javaAtGo;
    await new Promise((done) => proc.once('exit', done));
    const stats = await sandbox.command<SandboxStats>({ cmd: 'stats' });
    return { r, javaSeconds, stats };
  } finally {
    await sandbox.stop();
    await cloud.stop();
  }
}

if (brokerMessages > 0) {
  let javaReady = true;
  try {
    assertJava17();
  } catch (error) {
    javaReady = false;
    console.log(`\nthe whole broker on DynamoDB Local: skipped (${(error as Error).message})`);
  }
  if (javaReady && values['broker-now-only']) {
    const { r } = await runWholeBroker('pages', 'undici', 'chunks');
    console.log(
      `\nthe whole broker now, ${fmt(r.messages)} personalised messages in chunks: ${fmt(r.messagesPerSecond)} msgs/s; CPU ${fmt((1000 * r.cpuSeconds) / r.messages, 3)} ms a message whole run, ${fmt(r.steadyCpuMsPerMessage, 3)} steady; by thread ${threadsLine(r)}`,
    );
  } else if (javaReady) await printWholeBrokers();
}

/**
 * The whole broker before issue #16 (claims recorded on each task, a transactional update and an
 * index re-sort of each, sent over node:http), then claim pages over undici a task a recipient,
 * then now (the recipients in chunks of 500 with their variables: docs/multicast-chunks.md). Same
 * job, the baselines first so the machine is as warm for all.
 */
async function printWholeBrokers(): Promise<void> {
  const before = await runWholeBroker('before', 'node-http', 'tasks');
  const pagesOnly = await runWholeBroker('pages', 'undici', 'tasks');
  const { r, javaSeconds, stats } = await runWholeBroker('pages', 'undici', 'chunks');
  console.log(
    `\nthe whole broker on DynamoDB Local (worker/process.ts: lease, claim pages, pipeline, outcome writes), ${fmt(r.messages)} personalised messages held in chunks of 500, channel and sandbox at ${fmt(LINE_RATE)}/s:`,
  );
  console.log(
    `  ${fmt(r.messagesPerSecond)} msgs/s (${fmt(r.seconds, 1)} s, from the broker's start to the job's counts all final); completed ${fmt(r.completed)}, failed ${r.failed}, cancelled ${r.cancelled}; sandbox: ${fmt(stats.recipients)} recipients, ${stats.duplicates} duplicates, ${stats.byStatus['429'] ?? 0} 429s; peak RSS ${fmt(r.peakRssMb)} MB (${heapLabel})`,
  );
  console.log(
    `  vs the same pipeline paced at ${fmt(LINE_RATE)}/s on an in-memory table (above, whole run): ×${fmt(r.messagesPerSecond / (paced.requests / paced.seconds), 2)}. In that time (${fmt(r.seconds * availableParallelism(), 1)} CPU-s on ${availableParallelism()} cores) DynamoDB Local used ${fmt(javaSeconds, 1)} CPU-s and the broker ${fmt(r.cpuSeconds, 1)} (${fmt((1000 * r.cpuSeconds) / r.messages, 2)} ms a message, start-up included: ${fmt((LINE_RATE * r.cpuSeconds) / r.messages, 2)} vCPU at ${fmt(LINE_RATE)}/s, the broker task has ${BROKER_TASK_SIZE.cpu / 1024}): the broker waits on the table, which is the bound here (DynamoDB in AWS takes thousands of writes/s on a sharded on-demand table).`,
  );
  const perMessage = (x: BrokerContenderResult) => (1000 * x.cpuSeconds) / x.messages;
  console.log(
    `  broker's DynamoDB requests a 1,000 messages: ${[
      ['now', r],
      ['a task a recipient', pagesOnly.r],
      ['before', before.r],
    ]
      .map(([label, x]) => `${label} ${perThousand((x as BrokerContenderResult).requests, r.messages)}`)
      .join('; ')}`,
  );
  console.log(
    `  broker CPU per message, whole run (start-up and the JIT's warm-up in it): ${fmt(perMessage(r), 3)} ms now (chunks of 500, a push a member) vs ${fmt(perMessage(before.r), 3)} ms before (claims on each task, node:http; ×${fmt(perMessage(before.r) / perMessage(r), 2)}; ${fmt(before.r.messagesPerSecond)} msgs/s then); a task a recipient (claim pages, undici) ${fmt(perMessage(pagesOnly.r), 3)} ms (${fmt(pagesOnly.r.messagesPerSecond)} msgs/s)`,
  );
  const steady = (x: BrokerContenderResult) => x.steadyCpuMsPerMessage;
  console.log(
    `  broker CPU per message, steady state (from a quarter of the job done to its end): ${fmt(steady(r), 3)} ms now vs ${fmt(steady(before.r), 3)} ms before (×${fmt(steady(before.r) / steady(r), 2)}); a task a recipient ${fmt(steady(pagesOnly.r), 3)} ms; the pipeline alone on an in-memory table, warmed up, ${fmt((1000 * paced.cpuSeconds) / paced.messages, 3)} ms → goal 0.15 ms: ${steady(r) <= 0.15 ? 'met' : 'MISSED'}`,
  );
  console.log(
    `  where the steady state's CPU goes, ms a message by thread (user + kernel): now ${threadsLine(r)}; before ${threadsLine(before.r)}`,
  );
}

/** `main 0.081 + 0.020, V8 DefaultWorke 0.030 + 0.001, …` (threads of the same name summed). */
function threadsLine(r: BrokerContenderResult): string {
  if (r.steadyThreads.length === 0) return '(no /proc/self/task here)';
  return r.steadyThreads.map((t) => `${t.thread} ${fmt(t.userMs, 3)} + ${fmt(t.systemMs, 3)}`).join(', ');
}

/** Requests by operation per 1,000 messages, largest first: `UpdateItem 12.3, Query 4.5 (total 16.8)`. */
function perThousand(requests: Record<string, number>, messages: number): string {
  const rows = Object.entries(requests).sort(([, a], [, b]) => b - a);
  const total = rows.reduce((sum, [, n]) => sum + n, 0);
  const per = (n: number) => fmt((1000 * n) / messages, 1);
  return `${rows.map(([op, n]) => `${op.replace(/Command$/, '')} ${per(n)}`).join(', ')} (total ${per(total)})`;
}

/**
 * LINE's transport alone: the send port pushing `n` messages, 64 at a time, from this process to a
 * fresh sandbox (its own process), over `node:http` with a keep-alive agent (before) and undici's
 * Pool (now), each twice in turn after a warm-up; CPU of this process per request.
 */
async function printTransport(n: number): Promise<void> {
  const sandbox = await freshSandbox();
  try {
    await sandbox.command({ cmd: 'rate', perSecond: null });
    const clock = { now: () => Date.now() };
    const options = {
      channelAccessToken: BENCH_CHANNEL.accessToken,
      baseUrl: sandbox.url,
      maxSockets: 64,
      clock,
    };
    const transports = {
      'node:http (before)': makeNodeHttpSend(options),
      'undici Pool (now)': new PooledHttpSend(options),
    };
    const perRequest = async (port: HttpSend, count: number) => {
      let next = 0;
      const cpu = process.cpuUsage();
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          for (; next < count; next++) {
            const to = `U${(next + 1).toString(16).padStart(32, '0')}`;
            const outcome = await port.send({
              endpoint: 'push',
              body: JSON.stringify({ to, messages: [{ type: 'text', text: `お知らせ ${next}` }] }),
              retryKey: randomUUID(),
            });
            if (outcome.kind !== 'delivered') throw new Error(`transport bench: ${outcome.kind}`);
          }
        }),
      );
      const used = process.cpuUsage(cpu);
      return (used.user + used.system) / count;
    };
    const best = new Map<string, number>();
    for (const port of Object.values(transports)) await perRequest(port, Math.min(n, 5_000));
    for (let round = 0; round < 2; round++)
      for (const [name, port] of Object.entries(transports))
        best.set(name, Math.min(best.get(name) ?? Number.POSITIVE_INFINITY, await perRequest(port, n)));
    for (const port of Object.values(transports)) port.close();
    const [before, now] = [...best.values()] as [number, number];
    console.log(
      `\nLINE's transport alone (the send port, ${fmt(n)} pushes twice each, 64 at a time, to the sandbox):`,
    );
    for (const [name, us] of best) console.log(`  ${name.padEnd(20)} ${fmt(us, 1)} µs of CPU a request`);
    console.log(
      `  undici: ×${fmt(before / now, 2)} less CPU a request than node:http (${fmt((before - now) / 1000, 3)} ms less a message)`,
    );
  } finally {
    await sandbox.stop();
  }
}

if (transportMessages > 0) await printTransport(transportMessages);

if (claimChecks > 0) await printClaimChecks();

/** CPU seconds (user + system) used so far by the Java processes this bench started (DynamoDB Local). */
function javaCpuSeconds(): number {
  const ticks = 100; // USER_HZ on Linux
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      if (comm !== 'java' || !isDescendant(Number(fields[1]))) continue;
      total += (Number(fields[11]) + Number(fields[12])) / ticks;
    } catch {
      // the process ended meanwhile
    }
  }
  return total;
}

function isDescendant(ppid: number): boolean {
  for (let pid = ppid, hops = 0; pid > 1 && hops < 10; hops++) {
    if (pid === process.pid) return true;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      return false;
    }
  }
  return false;
}
