/**
 * What a load worker reports of an autocannon run. Off the main thread autocannon hands back raw
 * histograms: they are aggregated as its manager does.
 */
import autocannon from 'autocannon';

export interface LoadSummary {
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly total: number;
}

export function summarise(raw: unknown, options: unknown, seconds: number): LoadSummary {
  const aggregate = (
    autocannon as unknown as { aggregateResult: (r: unknown[], o: unknown) => autocannon.Result }
  ).aggregateResult;
  const result = aggregate([raw], options);
  return {
    rps: result.requests.total / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    total: result.requests.total,
  };
}
