/**
 * The address a broker advertises in its lease, where the call-status route and the operator API
 * reach it (`POST /calls/ended`, `POST /jobs/changed`).
 */

import { BrokerError } from '#shared/broker/errors.ts';
import type { BrokerConfig } from './config.ts';

export class BrokerStartError extends BrokerError {}

/**
 * The URL the lease advertises to the call-status route and the operator API: `BROKER_ADVERTISE_URL`
 * when set; in a Fargate task (awsvpc) the task's private address from the task metadata endpoint
 * (`metadataUri`), asked up to `tries` times with backoff; else the server's own URL. Never a
 * wildcard address: a lease naming `http://0.0.0.0:8080` would send every nudge nowhere, so a
 * broker that cannot learn its address fails to start (ECS starts another) instead.
 */
export async function advertisedEndpoint(
  config: Pick<BrokerConfig, 'advertiseUrl' | 'httpHost'>,
  server: { readonly url: string; readonly port: number },
  metadataUri: string | undefined,
  deps: { fetch?: typeof fetch; sleep?: (ms: number) => Promise<void>; tries?: number } = {},
): Promise<string> {
  if (config.advertiseUrl) return config.advertiseUrl;
  if (metadataUri) return privateAddress(metadataUri, server.port, deps);
  if (config.httpHost === '0.0.0.0' || config.httpHost === '::') {
    throw new BrokerStartError(
      `the broker listens on every address (BROKER_HTTP_HOST=${config.httpHost}) and has no ECS task metadata to learn its own: set BROKER_ADVERTISE_URL`,
    );
  }
  return server.url;
}

/** The task's private address from the ECS task metadata endpoint, asked up to `tries` times. */
async function privateAddress(
  uri: string,
  port: number,
  deps: { fetch?: typeof fetch; sleep?: (ms: number) => Promise<void>; tries?: number },
): Promise<string> {
  const get = deps.fetch ?? fetch;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const tries = deps.tries ?? 5;
  let last = 'no answer';
  let lastError: unknown;
  for (let attempt = 1; attempt <= tries; attempt++) {
    try {
      const response = await get(uri, { signal: AbortSignal.timeout(2_000) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = (await response.json()) as { Networks?: { IPv4Addresses?: string[] }[] };
      const address = body.Networks?.[0]?.IPv4Addresses?.[0];
      if (address) return `http://${address}:${port}`;
      last = 'no IPv4 address in Networks';
      lastError = undefined;
    } catch (error) {
      last = (error as Error).message;
      lastError = error;
    }
    if (attempt < tries) await sleep(200 * 2 ** (attempt - 1));
  }
  throw new BrokerStartError(
    `the ECS task metadata endpoint gave no private address after ${tries} tries (${last})`,
    lastError === undefined ? {} : { cause: lastError },
  );
}
