/**
 * The sandbox's own ceiling for bench/message-throughput: autocannon in a worker thread (its own
 * event loop) POSTing valid push requests, each with a fresh retry key and recipient.
 */
import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';

export interface CeilingRequest {
  readonly url: string;
  readonly accessToken: string;
  readonly seconds: number;
  readonly connections: number;
}

export interface CeilingResult {
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly non2xx: number;
  readonly errors: number;
}

const request = workerData as CeilingRequest;
const options = {
  url: `${request.url}/v2/bot/message/push`,
  method: 'POST' as const,
  connections: request.connections,
  duration: request.seconds,
};
let n = 0;
const raw = await autocannon({
  ...options,
  requests: [
    {
      setupRequest: (req) => ({
        ...req,
        body: JSON.stringify({
          to: `Uff${(n++).toString(16).padStart(30, '0')}`,
          messages: [
            { type: 'text', text: 'Hello Customer, your parcel arrives tomorrow between 9:00 and 12:00.' },
          ],
        }),
        headers: {
          authorization: `Bearer ${request.accessToken}`,
          'content-type': 'application/json',
          'x-line-retry-key': randomUUID(),
        },
      }),
    },
  ],
});
// Off the main thread autocannon hands back raw histograms: aggregate them as its manager does.
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
} satisfies CeilingResult);
