/**
 * The logging half of what a Lambda's `main.ts` wires: the service's logger, and the Lambda context
 * on every line. A function that wires only this loads no X-Ray SDK: Lambda's active tracing still
 * records its invocations, and the SDK clients still pass the trace on (their recursion-detection
 * middleware sends `_X_AMZN_TRACE_ID` as `X-Amzn-Trace-Id`, so SQS carries it to the next function);
 * only its AWS calls get no subsegments of their own. `lambda-observability.ts` adds those.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type middy from '@middy/core';
import { PowertoolsLog } from './powertools.ts';

export interface LambdaLogging {
  readonly log: PowertoolsLog;
  /** Adds the Lambda context to every log line (and, with tracing, traces the invocation). */
  // biome-ignore lint/suspicious/noExplicitAny: any event and result: the middleware reads neither
  readonly observe: <H extends middy.MiddyfiedHandler<any, any>>(handler: H) => H;
}

/** The service's logger, and the Lambda context on each of its lines. */
export function lambdaLogging(service: string): LambdaLogging {
  const log = new PowertoolsLog(service);
  return {
    log,
    observe: (handler) =>
      handler.use(injectLambdaContext(log.powertools, { resetKeys: true })) as typeof handler,
  };
}
