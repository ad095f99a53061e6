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

/** What a contender child process reports to the bench. */
export interface ContenderResult {
  readonly name: string;
  readonly messages: number;
  readonly delivered: number;
  readonly requests: number;
  readonly seconds: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Peak resident set size of the contender's process, in MB. */
  readonly peakRssMb: number;
  /** Start of the first and of the last request (ms, same clock): the rate held between them. */
  readonly firstSendAt: number;
  readonly lastSendAt: number;
  /** Peak V8 heap in use (sampled every 50 ms), in MB. */
  readonly peakHeapUsedMb: number;
}

/** High-resolution wall clock in ms since the epoch (sub-millisecond latencies). */
export const preciseClock = { now: () => performance.timeOrigin + performance.now() };
