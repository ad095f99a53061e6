/**
 * What a Lambda's `main.ts` wires to trace its AWS calls: `lambda-logging.ts`'s logger, and
 * Powertools' Tracer (X-Ray) around the handler and every AWS SDK client. Kept apart from
 * `powertools.ts`, and the Tracer loaded only inside Lambda, because importing it loads
 * `cls-hooked`, whose async hook taxes every promise of the process (about ten times the CPU of an
 * awaited promise): Lambdas accept that for tracing; the broker, and the local cloud running the
 * same handlers in-process, never load it.
 */
import { onEveryAwsClientBuilt } from './aws-client-hooks.ts';
import { type LambdaLogging, lambdaLogging } from './lambda-logging.ts';

/** Lambda sets it; Powertools' Tracer traces nothing without it (`isTracingEnabled`). */
const IN_LAMBDA = Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME);
const tracing = IN_LAMBDA
  ? {
      ...(await import('@aws-lambda-powertools/tracer')),
      ...(await import('@aws-lambda-powertools/tracer/middleware')),
    }
  : undefined;

/**
 * The service's logger, and (in Lambda) X-Ray tracing of the handler and of every AWS SDK client
 * built after this call.
 */
export function lambdaObservability(service: string): LambdaLogging {
  const logging = lambdaLogging(service);
  const tracer = tracing ? new tracing.Tracer({ serviceName: service }) : undefined;
  if (tracer?.isTracingEnabled()) onEveryAwsClientBuilt((client) => tracer.captureAWSv3Client(client));
  return {
    log: logging.log,
    observe: (handler) => {
      const withContext = logging.observe(handler);
      return (
        tracing && tracer
          ? withContext.use(tracing.captureLambdaHandler(tracer, { captureResponse: false }))
          : withContext
      ) as typeof handler;
    },
  };
}
