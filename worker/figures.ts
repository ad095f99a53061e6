/**
 * What the broker publishes about its work, every second: each served client's figures for
 * CloudWatch (EMF records, high resolution) and each served job's series window once it ended (the
 * console's chart, written in the background, never awaited by the broker's loop).
 */
import { BrokerMetrics } from '#shared/broker/broker-metrics.ts';
import type { JobSeriesRecorder } from '#shared/broker/job-series.ts';
import type { Logger } from '#shared/log.ts';

/** How often the broker publishes its per-client figures: CloudWatch's high resolution. */
const FLUSH_MS = 1_000;

/** The last series samples are waited for at most this long on the way out: a chart never holds up an exit. */
const SERIES_EXIT_WAIT_MS = 5_000;

export class BrokerFigures {
  /** What the broker and its servers report to. */
  readonly metrics: BrokerMetrics;
  readonly #series: JobSeriesRecorder;
  readonly #everySecond: NodeJS.Timeout;

  constructor(series: JobSeriesRecorder, logger: Logger) {
    this.#series = series;
    this.metrics = new BrokerMetrics(logger, series);
    this.#everySecond = setInterval(() => this.#flush(), FLUSH_MS);
    this.#everySecond.unref();
  }

  /** Flushes a last time and resolves once the series is written, or {@link SERIES_EXIT_WAIT_MS} passed. */
  close(): Promise<void> {
    clearInterval(this.#everySecond);
    this.#flush();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, SERIES_EXIT_WAIT_MS);
      timer.unref();
      void this.#series.settled().then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  #flush(): void {
    this.metrics.flush();
    this.#series.flush();
  }
}
