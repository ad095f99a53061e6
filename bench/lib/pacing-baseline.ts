/**
 * The baseline for bench/pacing: the common design of an outbound dialler. Status callbacks are
 * written to a store (here a set of ended call ids) and wake nobody; every `pollMs` a loop counts
 * the calls still in flight and starts up to the free slots, spaced for the line's rate. Same
 * telephony port, same sandbox, same contract as Switchboard's broker; no DynamoDB, so it carries
 * less overhead per call than the real broker does.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isFinal, type TelephonyProvider } from '#shared/telephony/port.ts';

/** Where the baselines' callbacks land: recorded, never acted on. */
export interface CallbackStore {
  readonly url: string;
  /** True once the call's final status has been recorded. */
  hasEnded(callId: string): boolean;
  stop(): Promise<void>;
}

/** Starts the callback store's HTTP endpoint on 127.0.0.1. */
export async function startCallbackStore(): Promise<CallbackStore> {
  const ended = new Set<string>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          callId?: string;
          status?: string;
        };
        if (typeof body.callId === 'string' && typeof body.status === 'string' && isFinalStatus(body.status))
          ended.add(body.callId);
      } catch {
        // Not a status event: nothing to record.
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/status`,
    hasEnded: (callId) => ended.has(callId),
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function isFinalStatus(status: string): boolean {
  return isFinal(status as Parameters<typeof isFinal>[0]);
}

export interface PollingBrokerOptions {
  readonly provider: TelephonyProvider;
  readonly store: CallbackStore;
  readonly clientId: string;
  /** In the order they are started. */
  readonly calls: readonly { readonly to: string; readonly taskId: string }[];
  readonly limit: number;
  /** Starts per wall second the line takes. */
  readonly wallRatePerSecond: number;
  /** Extra spacing between starts against jitter, wall ms (the real broker's margin, scaled alike). */
  readonly wallMarginMs: number;
  /** The polling period, wall ms. */
  readonly pollMs: number;
  readonly maxDurationSeconds: number;
}

class BaselineCallRefused extends Error {
  override name = 'BaselineCallRefused';
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Runs the polling broker until every call has been placed and has ended. */
export async function runPollingBroker(options: PollingBrokerOptions): Promise<void> {
  const { provider, store, calls, limit } = options;
  const intervalMs = 1000 / options.wallRatePerSecond + options.wallMarginMs;
  const inFlight = new Set<string>();
  let next = 0;
  let lastAnsweredAt = Number.NEGATIVE_INFINITY;
  while (next < calls.length || inFlight.size > 0) {
    const tickAt = Date.now();
    for (const callId of inFlight) if (store.hasEnded(callId)) inFlight.delete(callId);
    while (inFlight.size < limit && next < calls.length) {
      const call = calls[next++]!;
      await sleep(lastAnsweredAt + intervalMs - Date.now());
      const key = randomUUID();
      for (let tries = 1; ; tries++) {
        const outcome = await provider.initiate(
          {
            to: call.to,
            clientId: options.clientId,
            jobId: 'baseline',
            taskId: call.taskId,
            attempt: 1,
            callbackUrl: store.url,
            maxDurationSeconds: options.maxDurationSeconds,
            variables: {},
          },
          key,
        );
        lastAnsweredAt = Date.now();
        if (outcome.kind === 'accepted') {
          inFlight.add(outcome.callId);
          break;
        }
        if (outcome.kind === 'rejected' || tries >= 6)
          throw new BaselineCallRefused(`initiate ${call.taskId}: ${JSON.stringify(outcome)}`);
        await sleep(outcome.kind === 'rate-limited' ? outcome.retryAfterMs : 100);
      }
    }
    await sleep(tickAt + options.pollMs - Date.now());
  }
}
