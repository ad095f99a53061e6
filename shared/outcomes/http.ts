/** The HTTP side of a delivery: one POST with a timeout; a lost answer is an error, not a status. */
import type { OutcomeHttp, PostResult } from './ports.ts';

/** A POST through `fetch`, given up after `timeoutMs`. */
export function makeFetchOutcomeHttp(options: { timeoutMs: number }): OutcomeHttp {
  return {
    async post(url, body, headers): Promise<PostResult> {
      try {
        const response = await fetch(url, {
          method: 'POST',
          body,
          headers,
          redirect: 'manual',
          signal: AbortSignal.timeout(options.timeoutMs),
        });
        await response.body?.cancel().catch(() => undefined);
        return { status: response.status };
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause?.code;
        return { error: cause ?? (error as Error).name ?? 'request failed' };
      }
    },
  };
}
