/**
 * One contender of bench/message-throughput, in its own process (so its peak RSS is its own).
 *
 * 1. Warm-up: sends `warmUp` messages the same way (unpaced, recipients of their own), so the
 *    JIT, the connections and V8's heap are where a long-running broker has them; then says
 *    `{ warmedUp: true }` over IPC and waits for `'go'` (the bench resets the sandbox's records
 *    and sets its rate meanwhile).
 * 2. The job: resets the kernel's peak-RSS mark (`/proc/self/clear_refs`), sends `messages`
 *    messages and reports a {@link ContenderResult}: peak RSS is the job's, on top of what the
 *    warmed process already held.
 *
 * Tasks come from a synthetic source that makes each page on demand, as a claim from the table
 * would, and outcomes go to a sink that only counts: the figures are the pipeline's, not a list's.
 *
 *   node bench/lib/message-contender.ts '<ContenderRequest as JSON>'
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { PooledHttpSend } from '#shared/campaign/http-send.ts';
import { runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { ClaimedTask, ReportSink, SendPort, TaskSource } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { newUlid } from '#shared/ids.ts';
import { fixedPool, oneAtATime } from './message-baselines.ts';
import { type ContenderResult, LatencyHistogram, preciseClock, StartsPerSecond } from './message-stats.ts';

export interface ContenderRequest {
  readonly name: string;
  readonly kind: 'switchboard' | 'fixed-pool' | 'one-at-a-time';
  readonly url: string;
  readonly accessToken: string;
  readonly messages: number;
  /** Messages sent the same way, unpaced, before the job (not counted in any figure). */
  readonly warmUp: number;
  /** `personal`: a `{{name}}` per recipient (push); `same`: one text for all (multicast-able). */
  readonly template: 'personal' | 'same';
  /** Distinguishes the recipients of each run (1–254), so the sandbox's per-recipient counts stay apart. */
  readonly run: number;
  /** Switchboard: requests/s (Infinity: none). */
  readonly rate?: number;
  readonly concurrency?: number;
  /** Switchboard: the pacer's burst (default: the pipeline's own). */
  readonly burst?: number;
  /**
   * Force a full GC (needs `--expose-gc`) each time this many more outcomes have been written,
   * and keep the largest heap still in use right after: what the job keeps alive, without garbage.
   */
  readonly liveHeapEvery?: number;
}

/** The contender's answer once warmed up; the bench answers `'go'`. */
export interface WarmedUp {
  readonly warmedUp: true;
}

const TEMPLATES: Record<ContenderRequest['template'], MessageTemplate> = {
  personal: {
    messages: [
      { type: 'text', text: 'Hello {{name}}, your parcel arrives tomorrow between 9:00 and 12:00.' },
    ],
  },
  same: { messages: [{ type: 'text', text: 'Our stores open at 10:00 tomorrow. See you there!' }] },
};

const request = JSON.parse(process.argv[2]!) as ContenderRequest;
const concurrency = request.concurrency ?? 128;
const template = TEMPLATES[request.template];
const gc = (globalThis as { gc?: () => void }).gc;
if (request.liveHeapEvery !== undefined && !gc) throw new Error('liveHeapEvery needs node --expose-gc');

// One transport for warm-up and job: a broker keeps its connections between jobs.
const http = new PooledHttpSend({
  channelAccessToken: request.accessToken,
  baseUrl: request.url,
  clock: preciseClock,
  maxSockets: concurrency,
});

/** Tasks made on demand for `count` recipients whose ids start with `prefix` (2 hex digits). */
function taskSource(count: number, prefix: string): TaskSource {
  const jobId = newUlid();
  const startedAt = Date.now();
  let next = 0;
  return {
    async nextPage(limit) {
      const page: ClaimedTask[] = [];
      for (; page.length < limit && next < count; next++) {
        page.push({
          jobId,
          taskId: `T${next.toString(36).padStart(8, '0')}`,
          recipient: `U${prefix}${next.toString(16).padStart(30, '0')}`,
          variables: { name: `Customer ${next}` },
          template,
          attempt: 1,
          attemptStartedAt: startedAt,
        });
      }
      return page;
    },
  };
}

interface Job {
  readonly count: number;
  readonly prefix: string;
  readonly rate: number;
  readonly liveHeapEvery?: number;
}

async function sendJob(job: Job) {
  let nextProbe = job.liveHeapEvery ?? Number.POSITIVE_INFINITY;
  let liveHeap = 0;
  let liveExternal = 0;
  let written = 0;
  const sink: ReportSink = {
    async write(outcomes) {
      written += outcomes.length;
      if (written >= nextProbe && gc) {
        nextProbe += job.liveHeapEvery!;
        gc();
        const m = process.memoryUsage();
        liveHeap = Math.max(liveHeap, m.heapUsed);
        liveExternal = Math.max(liveExternal, m.external);
      }
    },
  };
  // Every request start, counted where the HTTP request leaves: the rate held, second by second.
  const starts = Number.isFinite(job.rate) ? new StartsPerSecond() : undefined;
  let inFlight = 0;
  let maxInFlight = 0;
  const done = <T>(value: T): T => {
    inFlight--;
    return value;
  };
  const failed = (error: unknown): never => {
    inFlight--;
    throw error;
  };
  const send: SendPort = (prepared) => {
    starts?.record(preciseClock.now());
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    return http.send(prepared).then(done, failed);
  };
  const latency = new LatencyHistogram();
  // Paced runs only: a 1 ms timer of its own would cost the unpaced contenders a little throughput.
  const loopDelay = starts ? monitorEventLoopDelay({ resolution: 1 }) : undefined;
  loopDelay?.enable();
  // The JS heap's peak, sampled: tells live data and GC slack apart from the process's RSS.
  let peakHeapUsed = 0;
  const sampler = setInterval(() => {
    peakHeapUsed = Math.max(peakHeapUsed, process.memoryUsage().heapUsed);
  }, 50);

  const source = taskSource(job.count, job.prefix);
  const cpuAtStart = process.cpuUsage();
  const t0 = preciseClock.now();
  let delivered: number;
  let requests: number;
  if (request.kind === 'switchboard') {
    const totals = await runMessagePipeline({
      source,
      send,
      report: sink,
      rate: { perSecond: job.rate, ...(request.burst === undefined ? {} : { burst: request.burst }) },
      concurrency,
      queueCapacity: 2000,
      clock: preciseClock,
      observe: (o) => latency.record(o.latencyMs),
    });
    delivered = totals.delivered;
    requests = totals.requests;
  } else {
    const run = { source, send, report: sink, latency };
    delivered =
      request.kind === 'one-at-a-time'
        ? await oneAtATime(run)
        : await fixedPool(run, { senders: concurrency, queueSize: 1000, pageSize: 100, reportBatch: 25 });
    requests = latency.count;
  }
  const seconds = (preciseClock.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpuAtStart);
  clearInterval(sampler);
  loopDelay?.disable();
  if (written !== job.count) throw new Error(`${request.name}: ${written} outcomes written of ${job.count}`);
  return {
    delivered,
    requests,
    seconds,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    p50Ms: latency.quantile(0.5),
    p99Ms: latency.quantile(0.99),
    peakHeapUsedMb: peakHeapUsed / 2 ** 20,
    ...(gc && job.liveHeapEvery !== undefined
      ? { liveHeapMb: liveHeap / 2 ** 20, liveExternalMb: liveExternal / 2 ** 20 }
      : {}),
    ...(starts && loopDelay
      ? {
          startsPerSecond: starts.wholeSeconds(),
          loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
          loopDelayMaxMs: loopDelay.max / 1e6,
        }
      : {}),
    maxInFlight,
  };
}

/** The kernel's high-water mark of this process's resident set (VmHWM), in MB. */
function peakRssMb(): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return Number(kb) / 1024;
}

if (request.warmUp > 0) {
  await sendJob({ count: request.warmUp, prefix: 'fe', rate: Number.POSITIVE_INFINITY });
}
const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
process.send!({ warmedUp: true } satisfies WarmedUp);
await go;
const processPeakRssMb = peakRssMb();
// Linux: "5" resets VmHWM to the current RSS, so the mark that follows is the job's own peak.
writeFileSync('/proc/self/clear_refs', '5');
const result = await sendJob({
  count: request.messages,
  prefix: request.run.toString(16).padStart(2, '0'),
  rate: request.rate ?? Number.POSITIVE_INFINITY,
  ...(request.liveHeapEvery === undefined ? {} : { liveHeapEvery: request.liveHeapEvery }),
});
const jobPeakRssMb = peakRssMb();
http.close();

process.send!({
  name: request.name,
  messages: request.messages,
  ...result,
  peakRssMb: jobPeakRssMb,
  startPeakRssMb: processPeakRssMb,
} satisfies ContenderResult);
process.disconnect();
