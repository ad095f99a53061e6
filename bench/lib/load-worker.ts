/**
 * The load generator of bench/webhook-ingest, in a worker thread: autocannon gets its own event
 * loop (and core), so it does not steal time from the receiver it measures. Every request carries
 * fresh LINE events and their signature.
 */
import { parentPort, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { newUlid } from '#shared/ids.ts';
import { signBody } from '#shared/line/signature.ts';
import { type LoadSummary, summarise } from './autocannon-result.ts';

export interface LoadRequest {
  readonly url: string;
  readonly seconds: number;
  readonly connections: number;
  readonly eventsPerRequest: number;
  readonly channelSecret: string;
}

export type LoadResult = LoadSummary;

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
parentPort!.postMessage(summarise(raw, options, request.seconds) satisfies LoadResult);
