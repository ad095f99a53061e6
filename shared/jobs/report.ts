/**
 * The job report an operator downloads: one line per data row of the list — every task with its
 * state, attempts and last result, and every rejected or skipped row with the reason.
 *
 * Order: rejected and skipped rows first, in row order; then the tasks shard by shard (a job's
 * tasks are spread over {@link TASK_SHARDS} partitions by a hash, so a row-ordered report would
 * mean holding a million rows in memory to sort them). The `row` column sorts it in a spreadsheet.
 * Cells are made safe from formula injection by {@link reportCell}: that also keeps E.164 numbers
 * as text (`'+81…`), which Excel would otherwise turn into a number without its `+`.
 *
 * An email job's report has one more column, `email`: the email's delivery state as SES's events
 * last moved it (`sent`, `delivered`, `bounced`, `complained`, …; `shared/email/ses-events.ts`), as a
 * task `completed` means SES accepted the email, not that it was delivered. Call and LINE reports
 * keep their columns.
 *
 * A job that falls back through channels (`docs/fallback.md`) has three more: `channel` (the one the
 * task is on: that reached the person when it completed), `delivery` (its delivery state on that
 * channel, when the channel's events report one) and `tried` (the channels it left before, and why:
 * `line: opted-out; email: no-identifier`).
 */
import { type ReportEntry, reportCell } from '#shared/csv/report.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { triedCell } from './fallback.ts';
import { type JobChannel, type MessageChannel, type Task, taskChannelOf } from './model.ts';

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

/**
 * The column an email or SMS job's report adds after {@link JOB_REPORT_HEADER}: each task's delivery
 * state as the channel's events last said (`delivered`, `bounced`, …), named for the channel.
 */
export const DELIVERY_REPORT_COLUMN: Partial<Record<JobChannel, string>> = { email: 'email', sms: 'sms' };

/** The columns a fallback job's report adds after {@link JOB_REPORT_HEADER}. */
export const FALLBACK_REPORT_COLUMNS: readonly string[] = ['channel', 'delivery', 'tried'];

function line(cells: readonly (string | number | undefined)[]): string {
  return `${cells.map(reportCell).join(',')}\r\n`;
}

/** The tasks of a job, shard after shard. */
export async function* tasksInShardOrder(
  shard: (index: number) => AsyncIterable<Task>,
): AsyncGenerator<Task, void, undefined> {
  for (let i = 0; i < TASK_SHARDS; i++) yield* shard(i);
}

/**
 * The report as UTF-8 CSV with a BOM (for Excel), streamed in chunks of about 32 KB; an email or
 * SMS job's adds its {@link DELIVERY_REPORT_COLUMN}.
 */
export async function* jobReportCsv(
  entries: AsyncIterable<ReportEntry>,
  tasks: AsyncIterable<Task>,
  job: { readonly channel?: JobChannel; readonly fallback?: readonly MessageChannel[] } = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const falls = job.channel !== undefined && job.fallback !== undefined;
  const column = falls || job.channel === undefined ? undefined : DELIVERY_REPORT_COLUMN[job.channel];
  const delivery = column !== undefined;
  const extra: readonly string[] = falls ? FALLBACK_REPORT_COLUMNS : delivery ? [column] : [];
  const header: readonly string[] = [...JOB_REPORT_HEADER, ...extra];
  const blanks = extra.map(() => undefined);
  let pending = `\ufeff${line(header)}`;
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
      ...blanks,
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
      ...(falls
        ? [taskChannelOf(task, { channel: job.channel! }), task.deliveryState, triedCell(task.tried)]
        : delivery
          ? [task.deliveryState ?? task.emailState]
          : []),
    ]);
    yield* flush();
  }
  yield Buffer.from(pending, 'utf8');
}
