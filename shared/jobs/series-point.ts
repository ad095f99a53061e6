/**
 * One point of a job's series as the operator API answers it (`shared/jobs/series.ts`); the
 * console reads the same type.
 */

/** One window of a job, per second where a rate is meant. */
export interface JobSeriesPoint {
  /** Start of the window (ISO 8601, UTC). */
  readonly at: string;
  readonly seconds: number;
  /** The client's peak calls in flight in the window (the limit is the client's). */
  readonly callsInFlight: number;
  readonly maxConcurrentCalls?: number;
  readonly starts: number;
  readonly callsPerSecond?: number;
  readonly messagesSent: number;
  /** Requests LINE answered 429. */
  readonly rateLimited: number;
}
