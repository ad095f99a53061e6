/**
 * Invoking a Lambda handler in process, the way the Lambda runtime does: a fresh context per
 * invocation with a request id and a deadline the handler can read.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { LocalCloudError } from './errors.ts';
import { awsPrincipal } from './iam/recorder.ts';

/** Any Lambda handler: what middy produces, and what the runtime calls. */
export type Handler<TEvent = unknown, TResult = unknown> = (
  event: TEvent,
  context: Context,
) => Promise<TResult>;

export interface InvokeOptions {
  readonly functionName: string;
  /** The function's timeout, as configured in CDK. */
  readonly timeoutMs: number;
  readonly memoryMb?: number;
}

/** A Lambda context for one invocation. */
export function lambdaContext(options: InvokeOptions): Context {
  const deadline = Date.now() + options.timeoutMs;
  const requestId = randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: options.functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${options.functionName}`,
    memoryLimitInMB: String(options.memoryMb ?? 1024),
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${options.functionName}`,
    logStreamName: `local/${requestId}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

/** Told of every invocation once it ends: the function, its wall time (what Lambda bills) and outcome. */
export type InvocationListener = (functionName: string, milliseconds: number, ok: boolean) => void;

const listeners: InvocationListener[] = [];

/**
 * Calls `listener` after every invocation from now on (benchmarks count invocations and their
 * billed duration); returns a function that removes it.
 */
export function onEveryInvocation(listener: InvocationListener): () => void {
  listeners.push(listener);
  return () => {
    const at = listeners.indexOf(listener);
    if (at >= 0) listeners.splice(at, 1);
  };
}

export class LambdaTimeoutError extends LocalCloudError {}

/**
 * Runs a handler with its context, failing with {@link LambdaTimeoutError} when it outlives the
 * function's timeout (Lambda would freeze and kill it; here the result is simply dropped).
 */
export async function invokeHandler<TEvent, TResult>(
  handler: Handler<TEvent, TResult>,
  event: TEvent,
  options: InvokeOptions,
): Promise<TResult> {
  const context = lambdaContext(options);
  const startedAt = performance.now();
  let ok = false;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new LambdaTimeoutError(`${options.functionName} timed out after ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
  });
  try {
    // The function is the principal of the AWS calls its handler makes (the IAM conformance record).
    const result = await Promise.race([
      awsPrincipal.run(options.functionName, () => handler(event, context)),
      timeout,
    ]);
    ok = true;
    return result;
  } finally {
    clearTimeout(timer);
    const ms = performance.now() - startedAt;
    for (const listener of listeners) listener(options.functionName, ms, ok);
  }
}
