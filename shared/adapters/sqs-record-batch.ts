/**
 * An SQS event source mapping's batch, each record handed to `recordOne` a few at a time, as a
 * batch with partial failures wants it: a record whose work threw is a batch item failure (SQS gives
 * it back after its visibility timeout), the others are counted by outcome, for one metric record an
 * outcome a batch rather than one a record.
 */
import type { SQSBatchItemFailure, SQSRecord } from 'aws-lambda';

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
