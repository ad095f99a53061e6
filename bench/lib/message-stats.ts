/**
 * A latency histogram in fixed memory (0.1 ms buckets up to 10 s), so recording a million sends
 * costs the same as recording a hundred thousand and does not skew the peak RSS being measured.
 */
const BUCKET_MS = 0.1;
const BUCKETS = 100_000;

export class LatencyHistogram {
  readonly #counts = new Uint32Array(BUCKETS + 1);
  count = 0;

  record(ms: number): void {
    this.#counts[Math.min(BUCKETS, Math.max(0, Math.floor(ms / BUCKET_MS)))]!++;
    this.count++;
  }

  /** The latency (ms, upper edge of its bucket) below which `q` of the samples fall. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const target = Math.ceil(q * this.count);
    let seen = 0;
    for (let i = 0; i <= BUCKETS; i++) {
      seen += this.#counts[i]!;
      if (seen >= target) return (i + 1) * BUCKET_MS;
    }
    return BUCKETS * BUCKET_MS;
  }
}

/**
 * Request starts counted per whole second from the first start, in memory that grows with the
 * run's duration (a number a second), not with its messages: the steady rate, second by second.
 */
export class StartsPerSecond {
  #first: number | undefined;
  readonly #counts: number[] = [];

  record(at: number): void {
    this.#first ??= at;
    const second = Math.floor((at - this.#first) / 1000);
    while (this.#counts.length <= second) this.#counts.push(0);
    this.#counts[second]!++;
  }

  /** Starts in each whole second after the first start; the last, partial second is left out. */
  wholeSeconds(): number[] {
    return this.#counts.slice(0, -1);
  }
}

/**
 * The rate held in steady state: whole seconds after the first one (senders filling, the pacer's
 * initial burst), the partial last second already left out by {@link StartsPerSecond}.
 */
export function steadyRate(startsPerSecond: readonly number[]): {
  perSecond: number;
  min: number;
  max: number;
  seconds: number;
} {
  const steady = startsPerSecond.slice(1);
  if (steady.length === 0) return { perSecond: 0, min: 0, max: 0, seconds: 0 };
  return {
    perSecond: steady.reduce((a, b) => a + b, 0) / steady.length,
    min: Math.min(...steady),
    max: Math.max(...steady),
    seconds: steady.length,
  };
}

/** What a contender child process reports to the bench. */
export interface ContenderResult {
  readonly name: string;
  readonly messages: number;
  readonly delivered: number;
  readonly requests: number;
  readonly seconds: number;
  /** CPU seconds (user + system, every thread) of the contender's process during the job. */
  readonly cpuSeconds: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Peak resident set size of the contender's process during the job (after its warm-up), in MB. */
  readonly peakRssMb: number;
  /** Peak resident set size before the job: start-up (type stripping, imports) and warm-up, in MB. */
  readonly startPeakRssMb: number;
  /** Peak V8 heap in use (sampled every 50 ms), in MB. */
  readonly peakHeapUsedMb: number;
  /** Largest V8 heap (and external memory) in use right after a forced full GC, in MB: live data. */
  readonly liveHeapMb?: number;
  readonly liveExternalMb?: number;
  /** Paced runs: starts in each whole second after the first start (the last, partial one left out). */
  readonly startsPerSecond?: readonly number[];
  /** Paced runs: event-loop delay of the contender (ms), p99 and max over the run. */
  readonly loopDelayP99Ms?: number;
  readonly loopDelayMaxMs?: number;
  /** Most requests in flight at once. */
  readonly maxInFlight: number;
}

/** High-resolution wall clock in ms since the epoch (sub-millisecond latencies). */
export const preciseClock = { now: () => performance.timeOrigin + performance.now() };
