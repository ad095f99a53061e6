/**
 * A job's series over time, kept by the broker that serves it: one sample every `windowSeconds`
 * (10 s by default) per job, with the peak calls in flight against the contract's limit, the job's
 * starts against the line's rate, and the messages it sent and LINE's 429s. What the console's job
 * page charts, read back with one Query (`GET …/jobs/{jobId}/series`), so a page costs a bounded
 * number of reads whatever the job's size (see docs/job-series.md).
 *
 * The {@link JobSeriesSampler} counts in memory, fed by the broker's per-client counting
 * (`BrokerMetrics`), and turns counts into samples once a window has ended: pure, no I/O. The
 * {@link JobSeriesRecorder} takes those samples from the broker's once-a-second flush loop and
 * writes them off the hot path: a write never blocks, delays or fails a call or message start, a
 * failed write is logged and the sample dropped (a chart, not a ledger), and at most a bounded
 * number of samples wait while a write is slow.
 *
 * A sample is keyed by its window's start and the broker that took it: after a takeover two brokers
 * may each hold part of a window; reading merges them ({@link mergeSamples}), nothing is overwritten.
 */

import type { SendObservation } from '#shared/campaign/ports.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { ClientCountsTee, ClientLimits, ClientMetrics } from './broker-metrics.ts';

/** One window of one job, as a broker counted it. */
export interface JobSample {
  readonly clientId: string;
  readonly jobId: string;
  /** Start of the window, epoch ms (a multiple of the window's length). */
  readonly at: number;
  readonly seconds: number;
  readonly brokerId: string;
  /**
   * Highest calls in flight of the client during the window: the limit is the client's, shared by
   * its jobs, so this is what it bounds (0 for a client sending messages only).
   */
  readonly peakInFlight: number;
  /** The contract when the window closed; absent while the client starts no call. */
  readonly maxConcurrentCalls?: number;
  readonly callsPerSecond?: number;
  /** Calls of this job started in the window. */
  readonly starts: number;
  /** Recipients this job's messages reached in the window (a multicast counts its recipients). */
  readonly messagesSent: number;
  /** Requests of this job LINE answered 429 in the window. */
  readonly rateLimited: number;
}

/** Where samples are written and read back (`shared/adapters/dynamo-job-series.ts`). */
export interface JobSeriesStore {
  /** Writes one sample; the same window and broker again replaces it. */
  put(sample: JobSample): Promise<void>;
}

export interface JobSeriesReader {
  /** Samples of a job with a window starting after `afterMs`, oldest first, at most `limit` items. */
  since(
    clientId: string,
    jobId: string,
    afterMs: number,
    limit: number,
  ): Promise<{ readonly samples: readonly JobSample[]; readonly more: boolean }>;
}

export interface JobSeriesSettings {
  /** Length of a window, seconds. Default 10. */
  readonly windowSeconds: number;
  /**
   * Windows a job keeps being sampled after its last start or send while nothing more happens,
   * so the chart shows it fall to zero. Default 6 (a minute at 10 s).
   */
  readonly idleWindows: number;
  /**
   * The same while the client has calls in flight (they may be this job's: a call lasts up to its
   * job's maximum duration, 600 s by default). Default 60 (ten minutes at 10 s).
   */
  readonly idleWindowsWithCalls: number;
}

export const DEFAULT_JOB_SERIES_SETTINGS: JobSeriesSettings = {
  windowSeconds: 10,
  idleWindows: 6,
  idleWindowsWithCalls: 60,
};

interface JobCounts {
  starts: number;
  messagesSent: number;
  rateLimited: number;
  /** Windows closed since the job last did something. */
  idle: number;
}

interface ClientWindow {
  limits: ClientLimits | undefined;
  inFlight: number;
  peakInFlight: number;
  /** Start of the window being counted. */
  at: number;
  readonly jobs: Map<string, JobCounts>;
}

/**
 * Counts per client and job, in memory, each count in the window of the moment it happened (a
 * window is closed by the first count or {@link take} after its end, so a late flush moves nothing
 * into the wrong window); {@link take} hands over the samples of the windows that ended.
 */
export class JobSeriesSampler {
  readonly #brokerId: string;
  readonly #clock: Clock;
  readonly #settings: JobSeriesSettings;
  readonly #clients = new Map<string, ClientWindow>();
  readonly #windowMs: number;
  #closed: JobSample[] = [];

  constructor(brokerId: string, clock: Clock, settings: JobSeriesSettings = DEFAULT_JOB_SERIES_SETTINGS) {
    if (!(settings.windowSeconds >= 1)) throw new RangeError('a series window is at least 1 second');
    this.#brokerId = brokerId;
    this.#clock = clock;
    this.#settings = settings;
    this.#windowMs = settings.windowSeconds * 1000;
  }

  /** The per-client side the servers report to (through `BrokerMetrics`); never throws. */
  forClient(clientId: string): ClientMetrics {
    const window: ClientWindow = {
      limits: undefined,
      inFlight: 0,
      peakInFlight: 0,
      at: this.#windowStart(this.#clock.now()),
      jobs: new Map(),
    };
    this.#clients.set(clientId, window);
    const job = (jobId: string) => {
      this.#roll(clientId, window);
      let counts = window.jobs.get(jobId);
      if (!counts) {
        counts = { starts: 0, messagesSent: 0, rateLimited: 0, idle: 0 };
        window.jobs.set(jobId, counts);
      }
      return counts;
    };
    return {
      limits: (limits) => {
        window.limits = limits;
      },
      inFlight: (calls) => {
        this.#roll(clientId, window);
        window.inFlight = calls;
        window.peakInFlight = Math.max(window.peakInFlight, calls);
      },
      callStarted: (jobId) => {
        if (jobId !== undefined) job(jobId).starts += 1;
      },
      sent: (_channelId, observation: SendObservation) => {
        if (observation.jobId === undefined) return;
        const counts = job(observation.jobId);
        if (observation.outcome === 'delivered') counts.messagesSent += observation.recipients;
        if (observation.outcome === 'rate-limited') counts.rateLimited += 1;
      },
      quota: () => {},
    };
  }

  /** The client is no longer served here: its open window is closed now, partial, for the next {@link take}. */
  released(clientId: string): void {
    const window = this.#clients.get(clientId);
    if (!window) return;
    this.#clients.delete(clientId);
    this.#roll(clientId, window);
    this.#closed.push(...this.#close(clientId, window));
  }

  /** Samples of every window that ended (call it often: once a second is fine). */
  take(): JobSample[] {
    for (const [clientId, window] of this.#clients) this.#roll(clientId, window);
    const samples = this.#closed;
    this.#closed = [];
    return samples;
  }

  #windowStart(now: number): number {
    return Math.floor(now / this.#windowMs) * this.#windowMs;
  }

  /** Closes the client's window if it has ended; counting goes on in the window of now. */
  #roll(clientId: string, window: ClientWindow): void {
    const current = this.#windowStart(this.#clock.now());
    if (window.at >= current) return;
    this.#closed.push(...this.#close(clientId, window));
    window.at = current;
  }

  /** Samples of the client's window, then a fresh window: counts zeroed, idle jobs forgotten. */
  #close(clientId: string, window: ClientWindow): JobSample[] {
    const samples: JobSample[] = [];
    for (const [jobId, counts] of window.jobs) {
      const active = counts.starts + counts.messagesSent + counts.rateLimited > 0;
      counts.idle = active ? 0 : counts.idle + 1;
      const keep = window.peakInFlight > 0 ? this.#settings.idleWindowsWithCalls : this.#settings.idleWindows;
      if (counts.idle > keep) {
        window.jobs.delete(jobId);
        continue;
      }
      samples.push(this.#sample(clientId, jobId, window.at, window, counts));
      counts.starts = 0;
      counts.messagesSent = 0;
      counts.rateLimited = 0;
    }
    window.peakInFlight = window.inFlight;
    return samples;
  }

  #sample(clientId: string, jobId: string, at: number, window: ClientWindow, counts: JobCounts): JobSample {
    return {
      clientId,
      jobId,
      at,
      seconds: this.#settings.windowSeconds,
      brokerId: this.#brokerId,
      peakInFlight: window.peakInFlight,
      ...(window.limits
        ? {
            maxConcurrentCalls: window.limits.maxConcurrentCalls,
            callsPerSecond: window.limits.callsPerSecond,
          }
        : {}),
      starts: counts.starts,
      messagesSent: counts.messagesSent,
      rateLimited: counts.rateLimited,
    };
  }
}

/** Samples waiting for the store at most; beyond, the oldest are dropped (and said so). */
const MAX_PENDING_SAMPLES = 1_000;

/**
 * Writes the sampler's samples from the broker's flush loop, one write at a time, never throwing:
 * the series must cost the calls and messages nothing.
 */
export class JobSeriesRecorder implements ClientCountsTee {
  readonly #sampler: JobSeriesSampler;
  readonly #store: JobSeriesStore;
  readonly #logger: Logger;
  readonly #pending: JobSample[] = [];
  #writing: Promise<void> | undefined;
  #dropped = 0;

  constructor(deps: { sampler: JobSeriesSampler; store: JobSeriesStore; logger: Logger }) {
    this.#sampler = deps.sampler;
    this.#store = deps.store;
    this.#logger = deps.logger;
  }

  /** Starts counting a client this broker now serves (`BrokerMetrics` tees its counts here). */
  forClient(clientId: string): ClientMetrics {
    return this.#sampler.forClient(clientId);
  }

  /** Takes the windows that ended and starts writing them; returns at once. */
  flush(): void {
    this.#enqueue(this.#sampler.take());
  }

  /** The client is no longer served here: its last, partial window is written now. */
  released(clientId: string): void {
    this.#sampler.released(clientId);
    this.#enqueue(this.#sampler.take());
  }

  /** Resolves once every sample taken so far is written (or dropped): for a broker's exit. */
  async settled(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  #enqueue(samples: readonly JobSample[]): void {
    this.#pending.push(...samples);
    const over = this.#pending.length - MAX_PENDING_SAMPLES;
    if (over > 0) {
      this.#pending.splice(0, over);
      this.#dropped += over;
    }
    this.#kick();
  }

  /** Starts the writer unless it runs; a sample queued as it finished starts it again. */
  #kick(): void {
    if (this.#writing || this.#pending.length === 0) return;
    this.#writing = this.#writeAll().finally(() => {
      this.#writing = undefined;
      this.#kick();
    });
  }

  async #writeAll(): Promise<void> {
    for (let sample = this.#pending.shift(); sample; sample = this.#pending.shift()) {
      try {
        await this.#store.put(sample);
      } catch (error) {
        this.#dropped += 1;
        this.#logger.warn('job series sample not written; the chart has a gap', {
          clientId: sample.clientId,
          jobId: sample.jobId,
          error,
        });
      }
    }
    if (this.#dropped > 0) {
      this.#logger.warn('job series samples dropped', { dropped: this.#dropped });
      this.#dropped = 0;
    }
  }
}

/**
 * One sample per window: parts of a window taken by two brokers (a takeover) are added up; calls
 * in flight take the higher peak (the new holder adopted the old one's calls, so adding would
 * count them twice). Input and output oldest first.
 */
export function mergeSamples(samples: readonly JobSample[]): JobSample[] {
  const merged: JobSample[] = [];
  for (const sample of samples) {
    const last = merged.at(-1);
    if (!last || last.at !== sample.at) {
      merged.push(sample);
      continue;
    }
    merged[merged.length - 1] = {
      ...last,
      ...sample,
      peakInFlight: Math.max(last.peakInFlight, sample.peakInFlight),
      starts: last.starts + sample.starts,
      messagesSent: last.messagesSent + sample.messagesSent,
      rateLimited: last.rateLimited + sample.rateLimited,
    };
  }
  return merged;
}
