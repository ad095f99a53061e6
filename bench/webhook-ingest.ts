/**
 * bench/webhook-ingest: how fast LINE's webhooks are acknowledged.
 *
 * In one run, against the same fauxqs SQS, it drives over HTTP (autocannon, fresh signed events in
 * every request, 5 events a request as LINE batches them):
 *   - Switchboard: the API Gateway stand-in → the webhook receiver Lambda handler (verify on the
 *     raw bytes, one SendMessageBatch per request into the FIFO queue);
 *   - the baseline most bots use: Express + `@line/bot-sdk`'s `middleware` + one `SendMessage`
 *     per event.
 * The load generator runs in a worker thread (its own event loop). It prints requests/s and p50/p99 acknowledgement latency for each, and the ratios.
 *
 *   npm run bench:webhook-ingest [-- --seconds 10 --connections 50 --events 5]
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { middleware, type webhook } from '@line/bot-sdk';
import express from 'express';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { DEMO_CHANNEL, startLocalStack } from '#local/stack.ts';
import { asciiJson } from '#shared/webhooks/queue-message.ts';
import type { LoadRequest, LoadResult } from './lib/load-worker.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    events: { type: 'string', default: '5' },
  },
});
let seconds = Number(values.seconds);
const connections = Number(values.connections);
const eventsPerRequest = Number(values.events);

process.env.LOG_LEVEL = 'error';
const stack = await startLocalStack({ stage: 'bench', port: 0 });
// Only the acknowledgement is measured: the processor would compete for the same two cores.
await stack.processor.stop();
const sqs = new SQSClient({
  region: stack.cloud.region,
  endpoint: stack.cloud.sqsEndpoint,
  credentials: LOCAL_CREDENTIALS,
});
const queueUrl = stack.cloud.queues['webhook-events']!.url;

/** The baseline: Express + the SDK's middleware + one SendMessage per event. */
async function startBaseline(): Promise<{ url: string; stop: () => Promise<void> }> {
  const app = express();
  app.post('/webhook', middleware({ channelSecret: DEMO_CHANNEL.channelSecret }), async (req, res) => {
    const body = req.body as webhook.CallbackRequest;
    try {
      for (const event of body.events) {
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            // ASCII-escaped as ours is: fauxqs refuses emoji (AWS takes them), and the baseline
            // should fail for no reason of the emulator's.
            MessageBody: asciiJson(event),
            MessageGroupId: event.source?.type === 'user' ? event.source.userId : 'group',
            MessageDeduplicationId: event.webhookEventId,
          }),
        );
      }
      res.status(200).json({});
    } catch {
      res.status(500).end();
    }
  });
  const server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`,
    stop: () => new Promise((r) => server.close(() => r())),
  };
}

interface Figures extends LoadResult {
  readonly name: string;
}

/** Drives `url` from a worker thread (its own event loop) and returns the figures. */
function drive(name: string, url: string): Promise<Figures> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./lib/load-worker.ts', import.meta.url), {
      workerData: {
        url,
        seconds,
        connections,
        eventsPerRequest,
        channelSecret: DEMO_CHANNEL.channelSecret,
      } satisfies LoadRequest,
    });
    worker.once('message', (r: LoadResult) => resolve({ name, ...r }));
    worker.once('error', reject);
  });
}

const baseline = await startBaseline();
try {
  console.log(
    `webhook-ingest: ${seconds}s per receiver, ${connections} connections, ${eventsPerRequest} events/request, same fauxqs SQS FIFO queue\n`,
  );
  // A short warm-up of each (JIT, keep-alive pools, the channel cache), then the measured runs.
  const measured = seconds;
  seconds = 2;
  await drive('warm-up', stack.webhookUrl(DEMO_CHANNEL.channelId));
  await drive('warm-up', baseline.url);
  seconds = measured;
  const ours = await drive(
    'switchboard (API GW stand-in → receiver Lambda)',
    stack.webhookUrl(DEMO_CHANNEL.channelId),
  );
  const theirs = await drive(
    'baseline (Express + @line/bot-sdk middleware + SendMessage per event)',
    baseline.url,
  );
  const rows = [ours, theirs];
  const pad = (s: string, n: number) => s.padEnd(n);
  console.log(
    `${pad('receiver', 72)} ${pad('req/s', 9)} ${pad('events/s', 9)} ${pad('p50 ms', 7)} ${pad('p99 ms', 7)} non-2xx`,
  );
  for (const r of rows) {
    console.log(
      `${pad(r.name, 72)} ${pad(r.rps.toFixed(0), 9)} ${pad((r.rps * eventsPerRequest).toFixed(0), 9)} ${pad(String(r.p50), 7)} ${pad(String(r.p99), 7)} ${r.non2xx + r.errors}`,
    );
  }
  console.log(
    `\nratio ours/baseline: throughput ×${(ours.rps / theirs.rps).toFixed(2)}, p50 latency ×${(ours.p50 / Math.max(1, theirs.p50)).toFixed(2)}, p99 latency ×${(ours.p99 / Math.max(1, theirs.p99)).toFixed(2)} (lower latency ratio is better)`,
  );
  console.log(`LINE's budget is 2,000 ms per webhook: our p99 is ${ours.p99} ms.`);
} finally {
  await baseline.stop();
  sqs.destroy();
  await stack.stop();
}
