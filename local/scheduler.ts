/**
 * The EventBridge schedule, locally: invokes a handler (the job manager) with a scheduled event
 * of the real shape every `intervalMs` (default one minute, as deployed; tests and `npm start`
 * use shorter ticks). Like EventBridge, a tick does not wait for the previous invocation: runs
 * may overlap, and the job manager's run lease (`shared/fleet/run-lease.ts`) makes a run that
 * overlaps another do nothing, as it does on AWS (the function reserves no concurrency).
 */
import { randomUUID } from 'node:crypto';
import type { ScheduledEvent } from 'aws-lambda';
import { type Handler, invokeHandler } from './lambda.ts';

export const DEFAULT_SCHEDULE_INTERVAL_MS = 60_000;

export interface SchedulerOptions<R> {
  readonly handler: Handler<ScheduledEvent, R>;
  /** Default {@link DEFAULT_SCHEDULE_INTERVAL_MS}. */
  readonly intervalMs?: number;
  readonly functionName?: string;
  /** The function's timeout (a run longer than this fails as Lambda would). */
  readonly timeoutMs?: number;
  readonly ruleName?: string;
  readonly region?: string;
  /** Run once at start, before the first interval. Default true. */
  readonly runAtStart?: boolean;
  readonly onResult?: (result: R) => void;
  readonly onError?: (error: unknown) => void;
}

export interface Scheduler<R> {
  /** Invokes the handler now, as a tick would, and returns its result. */
  tick(): Promise<R>;
  /** Invocations so far. */
  readonly runs: number;
  /** Stops ticking and waits for invocations in progress. */
  stop(): Promise<void>;
}

/** A scheduled event as EventBridge sends it: `time` is the scheduled time, to the second. */
export function scheduledEvent(at: number, ruleArn: string, region: string): ScheduledEvent {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '000000000000',
    time: `${new Date(Math.floor(at / 1000) * 1000).toISOString().slice(0, 19)}Z`,
    region,
    resources: [ruleArn],
    detail: {},
  };
}

export function startScheduler<R>(options: SchedulerOptions<R>): Scheduler<R> {
  const region = options.region ?? 'us-east-1';
  const functionName = options.functionName ?? 'job-manager';
  const ruleArn = `arn:aws:events:${region}:000000000000:rule/${options.ruleName ?? `${functionName}-schedule`}`;
  const inFlight = new Set<Promise<unknown>>();
  let runs = 0;
  const tick = (): Promise<R> => {
    runs += 1;
    const run = invokeHandler(options.handler, scheduledEvent(Date.now(), ruleArn, region), {
      functionName,
      timeoutMs: options.timeoutMs ?? 60_000,
    });
    const tracked = run.then(
      (result) => options.onResult?.(result),
      (error: unknown) => options.onError?.(error),
    );
    inFlight.add(tracked);
    void tracked.finally(() => inFlight.delete(tracked));
    return run;
  };

  const timer = setInterval(
    () => void tick().catch(() => {}),
    options.intervalMs ?? DEFAULT_SCHEDULE_INTERVAL_MS,
  );
  timer.unref();
  if (options.runAtStart ?? true) void tick().catch(() => {});

  return {
    tick,
    get runs() {
      return runs;
    },
    async stop() {
      clearInterval(timer);
      await Promise.all([...inFlight]);
    },
  };
}
