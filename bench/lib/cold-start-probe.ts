/**
 * One cold start, in the fresh process bench/cold-start spawns for it: imports a bundle as Lambda's
 * runtime would (its environment is the function's, set by the parent), then, when given an event
 * file, calls `handler` once with it. Writes the import's and the first answer's milliseconds as
 * JSON to file descriptor 3 (a pipe of the parent's): stdout is the handler's, for its log lines.
 *
 *   node bench/lib/cold-start-probe.ts <bundle.mjs> [event.json]
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, writeSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { ProbeResult } from './cold-start-probes.ts';

type Handler = (event: unknown, context: unknown) => Promise<unknown>;

/** The Lambda context of the one invocation (what `local/lambda.ts` builds, without its imports). */
function context(): Record<string, unknown> {
  const deadline = Date.now() + 10_000;
  const requestId = randomUUID();
  const functionName = process.env.AWS_LAMBDA_FUNCTION_NAME ?? 'bench';
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION}:000000000000:function:${functionName}`,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? '512',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `bench/${requestId}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

async function probe(bundle: string, eventPath: string | undefined): Promise<ProbeResult> {
  const event: unknown = eventPath ? JSON.parse(readFileSync(eventPath, 'utf8')) : undefined;
  const url = pathToFileURL(bundle).href;
  const importedAt = performance.now();
  const module = (await import(url)) as { handler?: Handler };
  const importMs = performance.now() - importedAt;
  if (event === undefined) return { importMs };
  if (typeof module.handler !== 'function') return { importMs, error: 'no handler export' };
  const invokedAt = performance.now();
  try {
    const answer = (await module.handler(event, context())) as { statusCode?: number } | undefined;
    return {
      importMs,
      firstEventMs: performance.now() - invokedAt,
      ...(typeof answer?.statusCode === 'number' ? { statusCode: answer.statusCode } : {}),
    };
  } catch (error) {
    return { importMs, error: `first event: ${error instanceof Error ? error.message : String(error)}` };
  }
}

const [bundle, eventPath] = process.argv.slice(2);
if (!bundle) throw new Error('usage: cold-start-probe.ts <bundle.mjs> [event.json]');
let result: ProbeResult;
try {
  result = await probe(bundle, eventPath);
} catch (error) {
  result = {
    importMs: Number.NaN,
    error: `import: ${error instanceof Error ? error.message : String(error)}`,
  };
}
writeSync(3, JSON.stringify(result));
// Keep-alive sockets and timers of the SDK would keep a finished probe alive.
process.exit(0);
