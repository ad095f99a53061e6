/**
 * An SQS event source mapping's batch, each record handed to `recordOne` a few at a time, as a
 * batch with partial failures wants it: a record whose work threw is a batch item failure (SQS gives
 * it back after its visibility timeout), the others are counted by outcome, for one metric record an
 * outcome a batch rather than one a record.
 */
import type { SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { Logger } from '#shared/log.ts';

export interface RecordedBatch<Outcome extends string> {
  readonly failures: readonly SQSBatchItemFailure[];
  readonly outcomes: ReadonlyMap<Outcome, number>;
}

/**
 * Runs `recordOne` on every record, `atOnce` at a time; `onFailure` hears of each that threw.
 *
 * @example
 * const { failures, outcomes } = await recordBatch(event.Records, 16, recordOne, (record, error) =>
 *   log.warn('not recorded', { messageId: record.messageId, error: String(error) }));
 * return { batchItemFailures: [...failures] };
 */
export async function recordBatch<Outcome extends string>(
  records: readonly SQSRecord[],
  atOnce: number,
  recordOne: (record: SQSRecord) => Promise<Outcome>,
  onFailure: (record: SQSRecord, error: unknown) => void,
): Promise<RecordedBatch<Outcome>> {
  const failures: SQSBatchItemFailure[] = [];
  const outcomes = new Map<Outcome, number>();
  for (let i = 0; i < records.length; i += atOnce) {
    const slice = records.slice(i, i + atOnce);
    const results = await Promise.allSettled(slice.map((record) => recordOne(record)));
    results.forEach((result, j) => {
      if (result.status === 'fulfilled') {
        outcomes.set(result.value, (outcomes.get(result.value) ?? 0) + 1);
        return;
      }
      onFailure(slice[j]!, result.reason);
      failures.push({ itemIdentifier: slice[j]!.messageId });
    });
  }
  return { failures, outcomes };
}

/** An error's message, for a log line. */
export function errorMessage(error: unknown): string {
  return String((error as Error)?.message ?? error);
}

/** What {@link batchHandler} records a batch with, and how it speaks of it. */
export interface BatchHandling<Outcome extends string> {
  /** Records handled at once (each is a write or two). */
  readonly atOnce: number;
  /** What a record is, in the log: `email event`, `SMS event`, `inbound SMS`. */
  readonly what: string;
  /** The metric each outcome is counted under, once a batch (`EmailEvents` …). */
  readonly metric: string;
  readonly log: Logger;
  /** One record handled, its outcome returned; throws only when it must be given back. */
  readonly recordOne: (record: SQSRecord) => Promise<Outcome>;
}

/**
 * The body of a queue-fed function with partial batch failures: every record through
 * {@link recordBatch}, each failure logged and given back, one metric record an outcome a batch.
 */
export function batchHandler<Outcome extends string>(
  handling: BatchHandling<Outcome>,
): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const { atOnce, what, metric, log, recordOne } = handling;
  return async (event) => {
    const { failures, outcomes } = await recordBatch(event.Records, atOnce, recordOne, (record, error) =>
      log.warn(`${what} not recorded: given back to the queue`, {
        messageId: record.messageId,
        error: errorMessage(error),
      }),
    );
    for (const [outcome, count] of outcomes) log.metrics({ [metric]: count }, { outcome });
    return { batchItemFailures: [...failures] };
  };
}
