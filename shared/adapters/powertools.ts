/**
 * The `Logger` port on Powertools for AWS Lambda: its Logger writes the JSON lines (with the
 * Lambda context, cold start and X-Ray trace id when in Lambda), its Metrics builds and checks
 * the Embedded Metric Format records. The broker uses the same Logger and Metrics outside Lambda.
 * X-Ray's Tracer is apart, in `lambda-observability.ts`: importing it loads `cls-hooked`, whose
 * async hook makes every promise of the process about ten times as costly (measured: 50,000
 * awaited promises ×20 take 0.5 s of CPU without it, 5.2 s with it), so the broker must not load it.
 */
import { type LogItem, Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import { MetricResolution, Metrics } from '@aws-lambda-powertools/metrics';
import type { Logger, LogLevel, MetricOptions } from '#shared/log.ts';

/** The CloudWatch namespace of every Switchboard metric. */
export const METRICS_NAMESPACE = 'Switchboard';

export interface LoggerOptions {
  /** Default: `LOG_LEVEL`, else `info`. */
  readonly level?: LogLevel;
  /** Where lines go instead of stdout (tests read them). */
  readonly write?: (line: string) => void;
}

/** Powertools' Logger, printing through `write` when one is given. */
class LineLogger extends PowertoolsLogger {
  readonly #write: ((line: string) => void) | undefined;

  constructor(serviceName: string, level: LogLevel, write?: (line: string) => void) {
    super({ serviceName, logLevel: level.toUpperCase() as 'INFO' });
    this.#write = write;
  }

  protected override printLog(logLevel: number, log: LogItem): void {
    if (this.#write) this.#write(JSON.stringify(log.getAttributes(), this.getJsonReplacer()));
    else super.printLog(logLevel, log);
  }
}

/**
 * The port, on Powertools: the logger of a service (a Lambda, the broker, a local stand-in).
 * `powertools` is what Lambda's middy middleware wraps.
 */
export class PowertoolsLog implements Logger {
  readonly powertools: PowertoolsLogger;
  readonly #metrics: Metrics;
  readonly #write: ((line: string) => void) | undefined;

  constructor(service: string, options: LoggerOptions = {}) {
    const level = options.level ?? ((process.env.LOG_LEVEL as LogLevel | undefined) || 'info');
    this.powertools = new LineLogger(service, level, options.write);
    this.#metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: service });
    this.#write = options.write;
  }

  debug(message: string, fields?: Record<string, unknown>): void {
    this.powertools.debug(message, fields ?? {});
  }
  info(message: string, fields?: Record<string, unknown>): void {
    this.powertools.info(message, fields ?? {});
  }
  warn(message: string, fields?: Record<string, unknown>): void {
    this.powertools.warn(message, fields ?? {});
  }
  error(message: string, fields?: Record<string, unknown>): void {
    this.powertools.error(message, fields ?? {});
  }

  withKeys(keys: Record<string, unknown>): Logger {
    return new KeyedLogger(this, keys);
  }

  metrics(
    values: Record<string, number>,
    dimensions: Record<string, string> = {},
    options: MetricOptions = {},
  ): void {
    const names = Object.keys(values).filter((name) => options.gauge || values[name] !== 0);
    if (names.length === 0) return;
    const metrics = this.#metrics;
    // Synchronous from the first add to the publish: no other record can interleave.
    for (const [name, value] of Object.entries(dimensions)) metrics.addDimension(name, value);
    if (options.rollUp) metrics.addDimensions({});
    const resolution = options.highResolution ? MetricResolution.High : MetricResolution.Standard;
    for (const name of names) metrics.addMetric(name, options.unit ?? 'Count', values[name]!, resolution);
    if (!this.#write) {
      metrics.publishStoredMetrics();
      return;
    }
    try {
      this.#write(JSON.stringify(metrics.serializeMetrics()));
    } finally {
      metrics.clearMetrics();
      metrics.clearDimensions();
    }
  }
}

/** A logger whose lines carry fixed keys on top of each line's own fields. */
class KeyedLogger implements Logger {
  readonly #base: Logger;
  readonly #keys: Record<string, unknown>;

  constructor(base: Logger, keys: Record<string, unknown>) {
    this.#base = base;
    this.#keys = keys;
  }

  debug(message: string, fields?: Record<string, unknown>): void {
    this.#base.debug(message, { ...this.#keys, ...fields });
  }
  info(message: string, fields?: Record<string, unknown>): void {
    this.#base.info(message, { ...this.#keys, ...fields });
  }
  warn(message: string, fields?: Record<string, unknown>): void {
    this.#base.warn(message, { ...this.#keys, ...fields });
  }
  error(message: string, fields?: Record<string, unknown>): void {
    this.#base.error(message, { ...this.#keys, ...fields });
  }
  metrics(
    values: Record<string, number>,
    dimensions?: Record<string, string>,
    options?: MetricOptions,
  ): void {
    this.#base.metrics(values, dimensions, options);
  }
  withKeys(keys: Record<string, unknown>): Logger {
    return new KeyedLogger(this.#base, { ...this.#keys, ...keys });
  }
}
