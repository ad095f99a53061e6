/**
 * The nudge from the call-status route to the broker holding a client: `POST {endpoint}/calls/ended`
 * with `{jobId, taskId, callId}`. Short deadline and no retries: the route must answer the
 * provider quickly, and the broker's reconciliation covers a nudge that never arrives.
 */
import type { BrokerNotifier } from './ports.ts';

/** Makes a {@link BrokerNotifier} over HTTP; never throws. */
export function makeHttpBrokerNotifier(
  options: { timeoutMs?: number; fetch?: typeof fetch } = {},
): BrokerNotifier {
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 500;
  return {
    async callEnded(endpoint, ended) {
      try {
        const response = await doFetch(`${endpoint.replace(/\/+$/, '')}/calls/ended`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(ended),
          signal: AbortSignal.timeout(timeoutMs),
        });
        await response.arrayBuffer();
      } catch {
        // Best effort by design.
      }
    },
  };
}
