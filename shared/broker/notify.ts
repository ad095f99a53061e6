/**
 * Nudges to the broker holding a client, at the endpoint its lease advertises:
 * - from the call-status route, `POST {endpoint}/calls/ended` with `{jobId, taskId, callId}`: short
 *   deadline, no retries, not waited on beyond the request: the route must answer the provider
 *   quickly, and the broker's reconciliation covers a nudge that never arrives;
 * - from the operator API, `POST {endpoint}/jobs/changed` with `{clientId, jobId}` after a pause or
 *   cancel: the broker answers 204 once no new send of the job will start, so this one WAITS for
 *   the answer (a few seconds at most); the broker's own job watch covers a nudge that fails.
 */
import type { JobChangeNotifier, NudgeAnswer } from '#shared/jobs/ports.ts';
import type { BrokerNotifier } from './ports.ts';

/** How long the call-ended nudge may take. */
export const CALL_ENDED_TIMEOUT_MS = 500;
/** How long the operator API waits for the broker to confirm a job change. */
export const JOB_CHANGED_TIMEOUT_MS = 3_000;

/** Makes a {@link BrokerNotifier} and {@link JobChangeNotifier} over HTTP; neither ever throws. */
export function makeHttpBrokerNotifier(
  options: { timeoutMs?: number; jobChangedTimeoutMs?: number; fetch?: typeof fetch } = {},
): BrokerNotifier & JobChangeNotifier {
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? CALL_ENDED_TIMEOUT_MS;
  const jobChangedTimeoutMs = options.jobChangedTimeoutMs ?? JOB_CHANGED_TIMEOUT_MS;
  const post = async (url: string, body: unknown, deadlineMs: number): Promise<number> => {
    const response = await doFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(deadlineMs),
    });
    await response.arrayBuffer();
    return response.status;
  };
  const base = (endpoint: string) => endpoint.replace(/\/+$/, '');

  return {
    async callEnded(endpoint, ended) {
      try {
        await post(`${base(endpoint)}/calls/ended`, ended, timeoutMs);
      } catch {
        // Best effort by design.
      }
    },

    async jobChanged(endpoint, changed): Promise<NudgeAnswer> {
      try {
        const status = await post(
          `${base(endpoint)}/jobs/changed`,
          { clientId: changed.clientId, jobId: changed.jobId },
          jobChangedTimeoutMs,
        );
        return status >= 200 && status < 300
          ? { ok: true }
          : { ok: false, reason: `the broker answered ${status}` };
      } catch (error) {
        const name = (error as Error | undefined)?.name;
        if (name === 'TimeoutError' || name === 'AbortError') {
          return { ok: false, reason: `no answer within ${jobChangedTimeoutMs} ms` };
        }
        const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
        const detail = cause?.code ?? cause?.message ?? (error as Error | undefined)?.message ?? 'unknown';
        return { ok: false, reason: `unreachable: ${String(detail)}` };
      }
    },
  };
}
