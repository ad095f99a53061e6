/**
 * One contender of bench/message-throughput, in its own process (so its peak RSS is its own):
 * sends `messages` messages to the sandbox at `url` and reports a {@link ContenderResult} over IPC.
 * Tasks come from a synthetic source that makes each page on demand, as a claim from the table
 * would, and outcomes go to a sink that only counts: the figures are the pipeline's, not a list's.
 *
 *   node bench/lib/message-contender.ts '<ContenderRequest as JSON>'
 */
import { newUlid } from '#shared/ids.ts';
import { makeHttpSend } from '#shared/messaging/http-send.ts';
import { runMessagePipeline } from '#shared/messaging/pipeline.ts';
import type { ClaimedTask, ReportSink, TaskSource } from '#shared/messaging/ports.ts';
import type { MessageTemplate } from '#shared/messaging/template.ts';
import { fixedPool, oneAtATime } from './message-baselines.ts';
import { type ContenderResult, LatencyHistogram, preciseClock } from './message-stats.ts';

export interface ContenderRequest {
  readonly name: string;
  readonly kind: 'switchboard' | 'fixed-pool' | 'one-at-a-time';
  readonly url: string;
  readonly accessToken: string;
  readonly messages: number;
  /** `personal`: a `{{name}}` per recipient (push); `same`: one text for all (multicast-able). */
  readonly template: 'personal' | 'same';
  /** Distinguishes the recipients of each run, so the sandbox's per-recipient counts stay apart. */
  readonly run: number;
  /** Switchboard: requests/s (Infinity: none). */
  readonly rate?: number;
  readonly concurrency?: number;
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
const rate = request.rate ?? Number.POSITIVE_INFINITY;
const concurrency = request.concurrency ?? 128;
const jobId = newUlid();
const template = TEMPLATES[request.template];
const startedAt = Date.now();

let next = 0;
const source: TaskSource = {
  async nextPage(limit) {
    const page: ClaimedTask[] = [];
    for (; page.length < limit && next < request.messages; next++) {
      page.push({
        jobId,
        taskId: `T${next.toString(36).padStart(8, '0')}`,
        recipient: `U${request.run.toString(16).padStart(2, '0')}${next.toString(16).padStart(30, '0')}`,
        variables: { name: `Customer ${next}` },
        template,
        attempt: 1,
        attemptStartedAt: startedAt,
      });
    }
    return page;
  },
};
let written = 0;
const sink: ReportSink = {
  async write(outcomes) {
    written += outcomes.length;
  },
};

const http = makeHttpSend({
  channelAccessToken: request.accessToken,
  baseUrl: request.url,
  clock: preciseClock,
  maxSockets: concurrency,
});
const latency = new LatencyHistogram();
// The JS heap's peak, sampled: tells live data and GC slack apart from the process's RSS.
let peakHeapUsed = 0;
const sampler = setInterval(() => {
  peakHeapUsed = Math.max(peakHeapUsed, process.memoryUsage().heapUsed);
}, 50);
const t0 = preciseClock.now();
let delivered = 0;
let requests = 0;
let firstSendAt = Number.POSITIVE_INFINITY;
let lastSendAt = 0;
if (request.kind === 'switchboard') {
  const totals = await runMessagePipeline({
    source,
    send: http.send,
    report: sink,
    rate: { perSecond: rate },
    concurrency,
    queueCapacity: 2000,
    clock: preciseClock,
    observe: (o) => {
      latency.record(o.latencyMs);
      const startedAt = preciseClock.now() - o.latencyMs;
      firstSendAt = Math.min(firstSendAt, startedAt);
      lastSendAt = Math.max(lastSendAt, startedAt);
    },
  });
  delivered = totals.delivered;
  requests = totals.requests;
} else {
  const run = { source, send: http.send, report: sink, latency };
  delivered =
    request.kind === 'one-at-a-time'
      ? await oneAtATime(run)
      : await fixedPool(run, { senders: concurrency, queueSize: 1000, pageSize: 100, reportBatch: 25 });
  requests = latency.count;
}
const seconds = (preciseClock.now() - t0) / 1000;
http.close();
if (written !== request.messages)
  throw new Error(`${request.name}: ${written} outcomes written of ${request.messages}`);

process.send!({
  name: request.name,
  messages: request.messages,
  delivered,
  requests,
  seconds,
  p50Ms: latency.quantile(0.5),
  p99Ms: latency.quantile(0.99),
  peakRssMb: process.resourceUsage().maxRSS / 1024,
  peakHeapUsedMb: peakHeapUsed / 2 ** 20,
  firstSendAt,
  lastSendAt,
} satisfies ContenderResult);
clearInterval(sampler);
process.disconnect();
