/**
 * The validation report of a job: one entry per data row that did not become a task, and its cells
 * made safe to open in Excel ({@link reportCell}, which the job's report, `shared/jobs/report.ts`,
 * writes every cell with).
 */
import type { RecipientRejection } from './recipients.ts';

export type ReportCode =
  | RecipientRejection
  | 'ragged-row'
  | 'row-too-long'
  | 'unclosed-quote'
  | 'bad-quote'
  | 'bad-encoding'
  | 'bad-time-zone'
  | 'duplicate'
  | 'opted-out'
  | 'suppressed'
  /** A people upload's row whose identifiers would make a person of more than 20 (`shared/people/api.ts`). */
  | 'person-too-large';

/** Why one data row did not become a task. */
export interface ReportEntry {
  /** Spreadsheet row (see `records.ts`): the header is row 1 when it is the first line. */
  readonly row: number;
  /** `rejected`: the row is unusable as written; `skipped`: usable, but not to be contacted. */
  readonly outcome: 'rejected' | 'skipped';
  /** Stable machine-readable reason, for translations and counts per reason. */
  readonly code: ReportCode;
  /** The reason in words: "invalid phone number", "duplicate of row 3", "opted out", ... */
  readonly reason: string;
  /** Header text of the offending column, when one column is at fault. */
  readonly column?: string;
  /** The offending cell as written (shortened to {@link REPORT_VALUE_MAX} characters). */
  readonly value?: string;
}

/** Longest cell value kept in a report entry, so that a report stays small. */
export const REPORT_VALUE_MAX = 100;

/** Shortens a cell for a report entry. */
export function reportValue(cell: string): string {
  const chars = [...cell];
  return chars.length <= REPORT_VALUE_MAX ? cell : `${chars.slice(0, REPORT_VALUE_MAX - 1).join('')}…`;
}

const FORMULA_START_RE = /^[=+\-@\t\r]/;

/**
 * One cell, safe to open in a spreadsheet: a cell that Excel would run as a formula (starting
 * with = + - @, tab or CR) is prefixed with `'`, and a cell with a comma, quote or line break
 * is quoted with inner quotes doubled.
 */
export function reportCell(value: string | number | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'number') return String(value);
  const safe = FORMULA_START_RE.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}
