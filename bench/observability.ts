/**
 * bench/observability: what Powertools costs on the paths that log and count, side by side with
 * the hand-written JSON line and EMF record it replaced (one `JSON.stringify` each), in one run.
 *
 * 1. A log line with five fields (the broker's "call failed" shape), through a keyed logger.
 * 2. A metrics record of three values with a roll-up dimension set (the receiver's ack latency).
 * 3. The broker's per-request counting (`ClientMetrics.sent`) on the message hot path, and one
 *    second's flush for 100 clients: what 2,000 sends a second add to the broker's CPU.
 *
 * Lines go to a sink that drops them, so only building and serialising is measured.
 *
 *   npm run bench:observability [-- --lines 200000]
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { BrokerMetrics } from '#shared/broker/broker-metrics.ts';

const { values } = parseArgs({ options: { lines: { type: 'string' } } });
const n = Number(values.lines ?? 200_000);
let sink = 0;
const write = (line: string) => {
  sink += line.length;
};

/** µs per call of `f`, best of three runs of `n` (after a warm-up run). */
function perCall(f: (i: number) => void, count = n): number {
  const run = () => {
    const start = performance.now();
    for (let i = 0; i < count; i++) f(i);
    return ((performance.now() - start) * 1000) / count;
  };
  run();
  return Math.min(run(), run(), run());
}

const fields = {
  taskId: 't-000123',
  attempt: 2,
  reason: 'busy on all 3 attempts',
  callId: 'CA123',
  queuedMs: 0,
};

// 1. Log lines.
const handWritten = (i: number) =>
  write(
    JSON.stringify({
      level: 'warn',
      service: 'broker',
      message: 'call failed',
      time: new Date().toISOString(),
      clientId: 'c1',
      jobId: 'j1',
      i,
      ...fields,
    }),
  );
const keyed = new PowertoolsLog('broker', { write, level: 'info' }).withKeys({ clientId: 'c1', jobId: 'j1' });
const baseLine = perCall(handWritten);
const powertoolsLine = perCall((i) => keyed.warn('call failed', { i, ...fields }));

// 2. Metrics records.
const log = new PowertoolsLog('webhook-receiver', { write });
const handWrittenEmf = (i: number) =>
  write(
    JSON.stringify({
      _aws: {
        Timestamp: Date.now(),
        CloudWatchMetrics: [
          {
            Namespace: 'Switchboard',
            Dimensions: [['service', 'channelId'], ['service']],
            Metrics: [{ Name: 'WebhookAckLatency', Unit: 'Milliseconds', StorageResolution: 1 }],
          },
        ],
      },
      service: 'webhook-receiver',
      channelId: 'ch1',
      WebhookAckLatency: i % 100,
    }),
  );
const baseEmf = perCall(handWrittenEmf, n / 4);
const powertoolsEmf = perCall(
  (i) =>
    log.metrics(
      { WebhookAckLatency: i % 100 },
      { channelId: 'ch1' },
      { unit: 'Milliseconds', highResolution: true, gauge: true, rollUp: true },
    ),
  n / 4,
);

// 3. The broker's counting.
const metrics = new BrokerMetrics(new PowertoolsLog('broker', { write }));
const clients = Array.from({ length: 100 }, (_, c) => metrics.forClient(`client-${c}`));
for (const c of clients) c.limits({ maxConcurrentCalls: 10, callsPerSecond: 2 });
const observation = { endpoint: 'push', recipients: 1, outcome: 'delivered', latencyMs: 40 } as const;
const perSend = perCall((i) => clients[i % 100]!.sent('ch1', observation));
const flush = perCall(() => {
  for (const c of clients) c.callStarted();
  metrics.flush();
}, 200);

const fmt = (us: number) => us.toFixed(2).padStart(9);
console.log(`observability on the real code, ${n.toLocaleString()} lines (µs per call; lower is better)`);
console.log('                                       hand-written   Powertools   ratio');
console.log(
  `1. log line, 5 fields + 2 keys         ${fmt(baseLine)}    ${fmt(powertoolsLine)}   ${(powertoolsLine / baseLine).toFixed(2)}`,
);
console.log(
  `2. metrics record, roll-up, 1 s res.   ${fmt(baseEmf)}    ${fmt(powertoolsEmf)}   ${(powertoolsEmf / baseEmf).toFixed(2)}`,
);
console.log(`3. broker: count one send              ${fmt(perSend)} µs`);
console.log(`   broker: one second's flush, 100 clients ${(flush / 1000).toFixed(2)} ms`);
console.log(
  `   at LINE's 2,000 sends/s: ${((perSend * 2000) / 1000).toFixed(2)} ms of CPU a second for counting, ${(flush / 1000).toFixed(2)} ms for the flush (of 1,000)`,
);
if (sink === 0) console.log('(nothing written)');
