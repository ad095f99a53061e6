/**
 * The job report an operator downloads: one line per data row of the list — every task with its
 * state, attempts and last result, and every rejected or skipped row with the reason.
 *
 * Order: rejected and skipped rows first, in row order; then the tasks shard by shard (a job's
 * tasks are spread over {@link TASK_SHARDS} partitions by a hash, so a row-ordered report would
 * mean holding a million rows in memory to sort them). The `row` column sorts it in a spreadsheet.
 * Cells are made safe from formula injection by {@link reportCell}: that also keeps E.164 numbers
 * as text (`'+81…`), which Excel would otherwise turn into a number without its `+`.
 */
import { type ReportEntry, reportCell } from '#shared/csv/report.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import type { Task } from './model.ts';

export const JOB_REPORT_HEADER = [
  'row',
  'recipient',
  'outcome',
  'attempts',
  'last_result',
  'reason',
  'column',
  'value',
] as const;

function line(cells: readonly (string | number | undefined)[]): string {
  return `${cells.map(reportCell).join(',')}\r\n`;
}

/** The tasks of a job, shard after shard. */
export async function* tasksInShardOrder(
  shard: (index: number) => AsyncIterable<Task>,
): AsyncGenerator<Task, void, undefined> {
  for (let i = 0; i < TASK_SHARDS; i++) yield* shard(i);
}

/** The report as UTF-8 CSV with a BOM (for Excel), streamed in chunks of about 32 KB. */
export async function* jobReportCsv(
  entries: AsyncIterable<ReportEntry>,
  tasks: AsyncIterable<Task>,
): AsyncGenerator<Uint8Array, void, undefined> {
  let pending = `\ufeff${line(JOB_REPORT_HEADER)}`;
  const flush = function* () {
    if (pending.length >= 32 * 1024) {
      yield Buffer.from(pending, 'utf8');
      pending = '';
    }
  };
  for await (const entry of entries) {
    pending += line([
      entry.row,
      undefined,
      entry.outcome,
      0,
      undefined,
      entry.reason,
      entry.column,
      entry.value,
    ]);
    yield* flush();
  }
  for await (const task of tasks) {
    pending += line([
      task.row,
      task.recipient,
      task.state,
      task.attempts,
      task.lastResult,
      task.reason,
      undefined,
      undefined,
    ]);
    yield* flush();
  }
  yield Buffer.from(pending, 'utf8');
}
