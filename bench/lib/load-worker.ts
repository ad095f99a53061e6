/**
 * The load generator of bench/webhook-ingest, in a worker thread: autocannon gets its own event
 * loop (and core), so it does not steal time from the receiver it measures. Every request carries
 * fresh LINE events and their signature.
 */
import { parentPort, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { newUlid } from '#shared/ids.ts';
import { signBody } from '#shared/line/signature.ts';

export interface LoadRequest {
  readonly url: string;
  readonly seconds: number;
  readonly connections: number;
  readonly eventsPerRequest: number;
  readonly channelSecret: string;
}

export interface LoadResult {
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly total: number;
}

function signedBody(eventsPerRequest: number, secret: string): { body: string; signature: string } {
  const now = Date.now();
  const events = Array.from({ length: eventsPerRequest }, (_, i) => ({
    type: 'message',
    message: { type: 'text', id: String(now + i), quoteToken: 'q', text: `こんにちは ${i} 👋` },
    webhookEventId: newUlid(now),
    deliveryContext: { isRedelivery: false },
    timestamp: now,
    source: {
      type: 'user',
      userId: `U${(Math.floor(Math.random() * 1e6) + i).toString(16).padStart(32, '0')}`,
    },
    replyToken: 'r'.repeat(32),
    mode: 'active',
  }));
  const body = JSON.stringify({ destination: 'U0000000000000000000000000000000b', events });
  return { body, signature: signBody(body, secret) };
}

const request = workerData as LoadRequest;
const options = {
  url: request.url,
  method: 'POST' as const,
  connections: request.connections,
  duration: request.seconds,
};
// Off the main thread autocannon hands back raw histograms: aggregate them as its manager does.
const raw = await autocannon({
  ...options,
  requests: [
    {
      setupRequest: (req) => {
        const { body, signature } = signedBody(request.eventsPerRequest, request.channelSecret);
        return {
          ...req,
          body,
          headers: { 'content-type': 'application/json', 'x-line-signature': signature },
        };
      },
    },
  ],
});
const aggregate = (
  autocannon as unknown as { aggregateResult: (r: unknown[], o: unknown) => autocannon.Result }
).aggregateResult;
const result = aggregate([raw], options);
parentPort!.postMessage({
  rps: result.requests.total / request.seconds,
  p50: result.latency.p50,
  p99: result.latency.p99,
  non2xx: result.non2xx,
  errors: result.errors,
  total: result.requests.total,
} satisfies LoadResult);
