/**
 * Structured logs, one JSON object a line (what CloudWatch Logs Insights queries), and metrics in
 * CloudWatch's Embedded Metric Format, so a count becomes a metric without an SDK call.
 * Never pass secrets or tokens in `fields`.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** Emits counters as EMF metrics in the `Switchboard` namespace, with the given dimensions. */
  metrics(counters: Record<string, number>, dimensions?: Record<string, string>): void;
}

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function makeLogger(
  service: string,
  options: { level?: LogLevel; write?: (line: string) => void; now?: () => number } = {},
): Logger {
  const min =
    ORDER[options.level ?? ((process.env.LOG_LEVEL as LogLevel | undefined) || 'info')] ?? ORDER.info;
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const now = options.now ?? Date.now;
  // The local cloud has no CloudWatch to read EMF lines: it turns them off.
  const metricsOff = process.env.METRICS_DISABLED === 'true';
  const emit = (level: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < min) return;
    write(
      JSON.stringify(
        { level, service, message, time: new Date(now()).toISOString(), ...fields },
        errorReplacer,
      ),
    );
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    metrics(counters, dimensions = {}) {
      if (metricsOff) return;
      const names = Object.keys(counters).filter((k) => counters[k] !== 0);
      if (names.length === 0) return;
      write(
        JSON.stringify({
          _aws: {
            Timestamp: now(),
            CloudWatchMetrics: [
              {
                Namespace: 'Switchboard',
                Dimensions: [['service', ...Object.keys(dimensions)]],
                Metrics: names.map((Name) => ({ Name, Unit: 'Count' })),
              },
            ],
          },
          service,
          ...dimensions,
          ...Object.fromEntries(names.map((n) => [n, counters[n]])),
        }),
      );
    },
  };
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  return value;
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = makeLogger('silent', { write: () => {} });
