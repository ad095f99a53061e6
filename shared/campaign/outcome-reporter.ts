/**
 * The pipeline's reporter: outcomes written to the {@link ReportSink} in batches (every
 * `batchSize` outcomes or after `intervalMs`), one write at a time, retried with backoff, and the
 * job's progress passed on at most once per interval. Senders wait (`room()`) when it falls behind.
 */
import { backoffDelay } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import { CampaignError } from './errors.ts';
import type { JobProgress, ReportSink, TaskOutcome } from './ports.ts';
import { Signal } from './signal.ts';

/** The report sink kept failing: these outcomes could not be written. */
export class ReportWriteError extends CampaignError {
  readonly unwritten: readonly TaskOutcome[];
  constructor(cause: unknown, unwritten: readonly TaskOutcome[]) {
    super(`could not write ${unwritten.length} task outcomes: ${(cause as Error)?.message ?? cause}`, {
      cause,
    });
    this.unwritten = unwritten;
  }
}

export interface OutcomeReporterOptions {
  readonly report: ReportSink;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly batchSize: number;
  readonly intervalMs: number;
  readonly writeAttempts: number;
  readonly onProgress: ((progress: readonly JobProgress[]) => void | Promise<void>) | undefined;
  readonly progressIntervalMs: number;
  readonly log: Logger | undefined;
  /** Called once when a batch could not be written after every attempt. */
  readonly onFatal: (error: Error) => void;
}

type Counts = { delivered: number; failed: number; skipped: number; released: number };

export class OutcomeReporter {
  readonly #options: OutcomeReporterOptions;
  readonly #limit: number;
  #buffer: TaskOutcome[] = [];
  #writing: Promise<void> | undefined;
  #timer: TimerHandle | undefined;
  #failed: ReportWriteError | undefined;
  readonly #drained = new Signal();
  readonly #progress = new Map<string, Counts>();
  #lastProgressAt: number;
  #closing = false;

  constructor(options: OutcomeReporterOptions) {
    this.#options = options;
    this.#limit = options.batchSize * 4;
    this.#lastProgressAt = options.clock.now();
  }

  add(outcome: TaskOutcome): void {
    if (this.#failed) {
      (this.#failed.unwritten as TaskOutcome[]).push(outcome);
      return;
    }
    this.#buffer.push(outcome);
    this.#kick();
  }

  /** Resolves while fewer than a few batches wait to be written. */
  async room(): Promise<void> {
    while (this.#buffer.length >= this.#limit && !this.#failed) await this.#drained.wait();
  }

  /** Writes everything left, then the last progress. */
  async close(): Promise<void> {
    this.#closing = true;
    if (this.#timer !== undefined) this.#options.timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    while (!this.#failed && (this.#writing || this.#buffer.length > 0)) {
      this.#writing ??= this.#writeLoop(true);
      await this.#writing;
    }
    if (!this.#failed) await this.#maybeProgress(true);
  }

  #kick(): void {
    if (this.#writing || this.#failed || this.#closing) return;
    const { batchSize, intervalMs, timers } = this.#options;
    if (this.#buffer.length >= batchSize) {
      this.#writing = this.#writeLoop(false);
    } else if (this.#buffer.length > 0 && this.#timer === undefined) {
      this.#timer = timers.setTimeout(() => {
        this.#timer = undefined;
        if (!this.#writing && !this.#failed) this.#writing = this.#writeLoop(true);
      }, intervalMs);
    }
  }

  async #writeLoop(all: boolean): Promise<void> {
    const { batchSize } = this.#options;
    try {
      while (!this.#failed && (this.#buffer.length >= batchSize || (all && this.#buffer.length > 0))) {
        // splice, not slice: a multicast settles 500 at once, and copying the rest per batch churns.
        const batch = this.#buffer.splice(0, batchSize);
        await this.#writeBatch(batch);
        this.#drained.notify();
      }
      await this.#maybeProgress(false);
    } finally {
      this.#writing = undefined;
      this.#drained.notify();
      if (!this.#failed) this.#kick();
    }
  }

  async #writeBatch(batch: TaskOutcome[]): Promise<void> {
    const { report, writeAttempts, log, timers } = this.#options;
    for (let attempt = 0; ; attempt++) {
      try {
        await report.write(batch);
        break;
      } catch (error) {
        if (attempt + 1 >= writeAttempts) {
          this.#fail(error, batch);
          return;
        }
        log?.warn('writing message outcomes failed, retrying', { error });
        await new Promise<void>((r) =>
          timers.setTimeout(r, backoffDelay(attempt, { baseMs: 100, capMs: 5000 })),
        );
      }
    }
    for (const o of batch) {
      const counts = this.#progress.get(o.jobId) ?? { delivered: 0, failed: 0, skipped: 0, released: 0 };
      counts[o.kind]++;
      this.#progress.set(o.jobId, counts);
    }
  }

  #fail(error: unknown, batch: TaskOutcome[]): void {
    const failed = new ReportWriteError(error, [...batch, ...this.#buffer]);
    this.#failed = failed;
    this.#buffer = [];
    this.#options.log?.error('writing message outcomes failed', {
      error,
      unwritten: failed.unwritten.length,
    });
    this.#options.onFatal(failed);
  }

  async #maybeProgress(force: boolean): Promise<void> {
    const { onProgress, clock, progressIntervalMs, log } = this.#options;
    if (!onProgress || this.#progress.size === 0) return;
    const now = clock.now();
    if (!force && now - this.#lastProgressAt < progressIntervalMs) return;
    this.#lastProgressAt = now;
    const snapshot = [...this.#progress].map(([jobId, c]) => ({ jobId, ...c }));
    this.#progress.clear();
    try {
      await onProgress(snapshot);
    } catch (error) {
      // Progress is a courtesy to the job's counters; the outcomes themselves are written.
      log?.warn('progress update failed', { error });
    }
  }
}
