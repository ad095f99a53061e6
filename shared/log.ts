/**
 * The logging and metrics port every use case and adapter takes. The implementation is
 * Powertools for AWS Lambda (`shared/adapters/powertools.ts`): structured JSON logs that
 * CloudWatch Logs Insights queries, and metrics in CloudWatch's Embedded Metric Format, so a
 * count becomes a metric without an SDK call. Never pass secrets or tokens in `fields`.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** The CloudWatch units Switchboard publishes in. */
export type MetricUnit = 'Count' | 'Milliseconds' | 'Percent' | 'Count/Second';

export interface MetricOptions {
  /** Default `Count`. */
  readonly unit?: MetricUnit;
  /** One-second resolution (CloudWatch high-resolution metrics) where a second matters. */
  readonly highResolution?: boolean;
  /**
   * A level, not a count: zero is published too (a count of zero is left out, as CloudWatch
   * treats a missing count as none).
   */
  readonly gauge?: boolean;
  /**
   * Also publish the values under the service alone, without `dimensions`: what an alarm watches
   * (an alarm cannot search across clients; a dashboard can).
   */
  readonly rollUp?: boolean;
}

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /**
   * Publishes `values` as metrics in the `Switchboard` namespace, dimensioned by the service and
   * `dimensions`, in one record.
   */
  metrics(values: Record<string, number>, dimensions?: Record<string, string>, options?: MetricOptions): void;
  /** A logger whose every line also carries `keys` (client, job, task, attempt: correlation). */
  withKeys(keys: Record<string, unknown>): Logger;
}

const ignore = (): void => {};

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = {
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
  metrics: ignore,
  withKeys: () => silentLogger,
};
