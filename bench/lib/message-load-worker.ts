/**
 * The sandbox's own ceiling for bench/message-throughput: autocannon in a worker thread (its own
 * event loop) POSTing valid push requests, each with a fresh retry key and recipient.
 */
import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { type LoadSummary, summarise } from './autocannon-result.ts';

export interface CeilingRequest {
  readonly url: string;
  readonly accessToken: string;
  readonly seconds: number;
  readonly connections: number;
}

export type CeilingResult = LoadSummary;

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
parentPort!.postMessage(summarise(raw, options, request.seconds) satisfies CeilingResult);
