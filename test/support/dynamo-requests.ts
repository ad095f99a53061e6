/**
 * The DynamoDB requests a function makes, counted while a test asks: a middleware on every SDK
 * client built from now on (as `record-aws-calls.ts` records calls, and `bench/console.ts` counts
 * them), each request attributed to the function on whose behalf it runs. Install it before the
 * stack whose functions it counts is started.
 */
import { awsPrincipal } from '#local/iam/recorder.ts';
import { onEveryAwsClient } from '#shared/adapters/aws-client-hooks.ts';

/** One request: the operation (`GetItem`, `Query`, …), its table and its input as sent by the caller. */
export interface DynamoRequest {
  readonly operation: string;
  readonly table: string | undefined;
  readonly input: Readonly<Record<string, unknown>>;
}

export class DynamoRequestLog {
  #principal: string | undefined;
  #requests: DynamoRequest[] = [];

  /** Starts counting (for clients built from now on); answers the way to stop. */
  install(): () => void {
    const log = this;
    return onEveryAwsClient({
      applyToStack(stack) {
        (stack as unknown as { add: (mw: unknown, options: unknown) => void }).add(
          (
            next: (args: unknown) => Promise<unknown>,
            context: { clientName?: string; commandName?: string },
          ) =>
            async (args: { input?: Record<string, unknown> }) => {
              log.#record(context, args.input ?? {});
              return next(args);
            },
          { step: 'initialize', name: 'testDynamoRequestLog' },
        );
      },
    });
  }

  #record(context: { clientName?: string; commandName?: string }, input: Record<string, unknown>): void {
    if (this.#principal === undefined || context.clientName !== 'DynamoDBClient') return;
    if (awsPrincipal.getStore() !== this.#principal) return;
    this.#requests.push({
      operation: (context.commandName ?? '').replace(/Command$/, ''),
      table: typeof input.TableName === 'string' ? input.TableName : undefined,
      input: structuredClone(input),
    });
  }

  /** The DynamoDB requests `principal` (a function id) made while `run` ran. */
  async during<T>(
    principal: string,
    run: () => Promise<T>,
  ): Promise<{ result: T; requests: DynamoRequest[] }> {
    this.#principal = principal;
    this.#requests = [];
    try {
      const result = await run();
      return { result, requests: this.#requests };
    } finally {
      this.#principal = undefined;
    }
  }
}
