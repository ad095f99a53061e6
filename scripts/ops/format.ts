/**
 * What the CLI prints for people: pure functions from the API's records to text. (`--json` prints
 * the records themselves.) Counts are grouped by thousands, times are the API's ISO strings.
 */
import type { JobView } from '#shared/jobs/api.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import type { OptOutsAnswer } from '#shared/jobs/opt-outs.ts';
import type { SuppressionsAnswer, SuppressionUploadAnswer } from '#shared/suppressions/api.ts';

/** A rejected or skipped row of a list, as `GET …/jobs/{jobId}/row-problems` gives it. */
export interface RowProblem {
  readonly row: number;
  readonly outcome: 'rejected' | 'skipped';
  readonly reason: string;
  readonly column?: string;
  readonly value?: string;
}

/** The statuses after which a job never changes again. */
export const FINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'cancelled', 'failed']);
/** The statuses of a job whose list is still being read. */
export const INGEST_STATUSES: ReadonlySet<string> = new Set(['uploading', 'validating']);

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** A bar of `width` cells, `fraction` (0 to 1) of them full. */
export function bar(fraction: number, width: number): string {
  const f = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  const full = Math.round(f * width);
  return `${'█'.repeat(full)}${'░'.repeat(width - full)}`;
}

function percent(fraction: number): string {
  return `${Math.floor(Math.min(1, Math.max(0, fraction)) * 100)}%`.padStart(4);
}

/** The upload's progress line: `list.csv ▕█████░░░░░▏  45%  1.2 MB of 2.6 MB, 850 KB/s`. */
export function uploadLine(name: string, sent: number, total: number, elapsedMs: number): string {
  const fraction = total === 0 ? 1 : sent / total;
  const rate = elapsedMs > 0 ? `, ${bytes(Math.round((sent * 1000) / elapsedMs))}/s` : '';
  return `uploading ${name} ▕${bar(fraction, 20)}▏${percent(fraction)}  ${bytes(sent)} of ${bytes(total)}${rate}`;
}

const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
type Weekly = Readonly<Partial<Record<string, readonly { readonly start: string; readonly end: string }[]>>>;

/** Calling hours on one line, alike days run together: `mon–fri 09:00–18:00 · sat 10:00–14:00 · sun closed`. */
export function callingHoursLine(weekly: Weekly): string {
  const of = (day: string) => (weekly[day] ?? []).map((w) => `${w.start}–${w.end}`).join(', ') || 'closed';
  const parts: string[] = [];
  for (let i = 0; i < WEEKDAYS.length; ) {
    let j = i;
    while (j + 1 < WEEKDAYS.length && of(WEEKDAYS[j + 1]!) === of(WEEKDAYS[i]!)) j++;
    const days = i === j ? WEEKDAYS[i]! : `${WEEKDAYS[i]}–${WEEKDAYS[j]}`;
    parts.push(`${days} ${of(WEEKDAYS[i]!)}`);
    i = j + 1;
  }
  return parts.length === 1 && parts[0] === 'mon–sun closed' ? 'never open' : parts.join(' · ');
}

/** East Asian wide and full-width characters take two columns of a terminal (half-width katakana one). */
function isWide(cp: number): boolean {
  return (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  );
}

/** Columns `text` takes in a terminal. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text) width += isWide(ch.codePointAt(0)!) ? 2 : 1;
  return width;
}

/** Rows as aligned columns (by display width, so Japanese headers line up), two spaces apart. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => displayWidth(r[c] ?? ''))));
  return rows
    .map((r) =>
      r
        .map((cell, c) => (c === r.length - 1 ? cell : cell + ' '.repeat(widths[c]! - displayWidth(cell))))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function fields(pairs: readonly (readonly [string, string | undefined])[]): string {
  const shown = pairs.filter((p): p is readonly [string, string] => p[1] !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length)) + 1;
  return shown.map(([k, v]) => `${`${k}:`.padEnd(width + 1)}${v}`).join('\n');
}

/** A client's settings. The telephony settings hold no secret (tokens are stored apart, never returned). */
export function formatClient(client: ClientSettings): string {
  const telephony = client.telephony
    ? Object.entries(client.telephony)
        .filter(([k]) => k !== 'provider')
        .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
        .join(', ')
    : undefined;
  const defaults = client.jobDefaults
    ? Object.entries(client.jobDefaults)
        .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
        .join(', ')
    : undefined;
  return fields([
    ['client', `${client.clientId}${client.paused ? ' (PAUSED: nothing of it starts)' : ''}`],
    ['concurrent calls', count(client.maxConcurrentCalls)],
    ['calls per second', String(client.callsPerSecond)],
    ['time zone', client.timeZone],
    ['calling hours', callingHoursLine(client.callingHours.weekly)],
    ['restricted periods', restrictedPeriodsLine(client.restrictedPeriods)],
    ['holidays', client.holidays ? `public holidays of ${client.holidays.country}` : undefined],
    ['default region', client.defaultRegion],
    ['message channel', client.messageChannelId],
    [
      'LINE quota short',
      client.messageChannelId
        ? client.allowPartialDelivery
          ? 'send what the quota allows (allowPartialDelivery)'
          : 'pause the job, saying why'
        : undefined,
    ],
    ['job defaults', defaults || undefined],
    [
      'telephony',
      client.telephony
        ? `${client.telephony.provider}${telephony ? ` (${telephony})` : ''}`
        : "the deployment's default",
    ],
    ['updated', new Date(client.updatedAt).toISOString()],
  ]);
}

/** Tasks ended, whatever the way; `expired` only where the API counts it. */
export function endedTasks(counts: JobView['counts']): number {
  const expired = (counts as { expired?: number }).expired ?? 0;
  return counts.completed + counts.failed + counts.cancelled + expired;
}

function outcomes(counts: JobView['counts']): string {
  const expired = (counts as { expired?: number }).expired;
  return [
    `${count(counts.completed)} completed`,
    `${count(counts.failed)} failed`,
    `${count(counts.cancelled)} cancelled`,
    ...(expired ? [`${count(expired)} expired`] : []),
  ].join(', ');
}

function rowsLine(counts: JobView['counts']): string {
  return `${count(counts.rows)} rows: ${count(counts.tasks)} tasks, ${count(counts.rejected)} rejected, ${count(counts.skipped)} skipped`;
}

/** One line of a job's progress, for the live view: status, bar, counts, what it waits for. */
export function progressLine(job: JobView): string {
  const { counts } = job;
  if (INGEST_STATUSES.has(job.status)) {
    return job.status === 'uploading'
      ? 'uploading: waiting for the list to arrive'
      : `validating: ${rowsLine(counts)} so far`;
  }
  const ended = endedTasks(counts);
  const fraction = counts.tasks === 0 ? 1 : ended / counts.tasks;
  // Short enough for a terminal's width: the outcomes that happened only, then what it waits for.
  const happened = outcomes(counts)
    .split(', ')
    .filter((o) => !o.startsWith('0 '));
  const parts = [
    `${job.status.padEnd(9)} ▕${bar(fraction, 12)}▏${percent(fraction)}`,
    `${count(ended)}/${count(counts.tasks)} ended${happened.length > 0 ? ` (${happened.join(', ')})` : ''}`,
    `${count(counts.outstanding)} outstanding`,
  ];
  if (job.waiting) parts.push(`waiting: ${job.waiting.message}`);
  if (job.failureReason) parts.push(job.failureReason);
  if (job.status === 'paused' && job.pausedReason) parts.push(`paused: ${job.pausedReason}`);
  return parts.join(' · ');
}

/** The last line of a watched job: `completed: 3 completed, 0 failed, 0 cancelled of 3 tasks (5 rows, 1 rejected, 1 skipped)`. */
export function doneLine(job: JobView): string {
  const { counts } = job;
  const why = job.failureReason ? `: ${job.failureReason}` : '';
  return `job ${job.jobId} ${job.status}${why}: ${outcomes(counts)} of ${count(counts.tasks)} tasks (${count(counts.rows)} rows, ${count(counts.rejected)} rejected, ${count(counts.skipped)} skipped)`;
}

/** A job in full. */
export function formatJob(job: JobView): string {
  const { counts } = job;
  const waiting = job.waiting
    ? `${job.waiting.reason}${job.waiting.until ? ` until ${job.waiting.until}` : ''}: ${job.waiting.message}`
    : undefined;
  return fields([
    ['job', `${job.jobId} (${job.name})`],
    ['client', job.clientId],
    ['channel', `${job.channel}${job.channel === 'call' ? `, scenario ${job.scenarioId}` : ''}`],
    ['status', job.status],
    ['failed because', job.failureReason],
    ['paused because', job.status === 'paused' ? job.pausedReason : undefined],
    ['waiting', waiting],
    ['list', rowsLine(counts)],
    ['tasks', `${outcomes(counts)}; ${count(counts.outstanding)} outstanding`],
    ['starts at', job.startAt],
    [
      'attempts',
      `${job.maxAttempts} at most, ${job.retryDelaySeconds} s apart${job.retries ? ' (retries by outcome set)' : ''}`,
    ],
    ['calling hours', job.callingHours ? callingHoursLine(job.callingHours.weekly) : "the client's"],
    ['restricted periods', restrictedPeriodsLine(job.restrictedPeriods)],
    ['holidays', job.holidays ? `public holidays of ${job.holidays.country}` : undefined],
    ['created', job.createdAt],
    ['updated', job.updatedAt],
  ]);
}

/** A page of jobs as a table; the next page's token after it. */
export function formatJobTable(jobs: readonly JobView[], next?: string): string {
  if (jobs.length === 0) return 'no jobs';
  const rows = [
    ['JOB', 'NAME', 'CHANNEL', 'STATUS', 'PROGRESS', 'CREATED'],
    ...jobs.map((job) => {
      const ended = endedTasks(job.counts);
      const fraction =
        job.counts.tasks === 0 ? (FINAL_STATUSES.has(job.status) ? 1 : 0) : ended / job.counts.tasks;
      return [
        job.jobId,
        job.name.length > 30 ? `${job.name.slice(0, 29)}…` : job.name,
        job.channel,
        job.status,
        `${bar(fraction, 10)} ${count(ended)}/${count(job.counts.tasks)}`,
        job.createdAt,
      ];
    }),
  ];
  return `${table(rows)}${next ? `\nmore: --next ${next}` : ''}`;
}

/** The ingest's result: the counts, then the rejected and skipped rows given (the first of them). */
export function formatIngestResult(job: JobView, problems: readonly RowProblem[]): string {
  const { counts } = job;
  const lines = [`list read: ${rowsLine(counts)}`];
  if (job.status === 'failed' && job.failureReason) lines.push(`the job failed: ${job.failureReason}`);
  if (problems.length > 0) {
    lines.push(
      table([
        ['ROW', 'OUTCOME', 'COLUMN', 'REASON', 'VALUE'],
        ...problems.map((p) => [String(p.row), p.outcome, p.column ?? '', p.reason, p.value ?? '']),
      ]),
    );
    const total = counts.rejected + counts.skipped;
    if (total > problems.length)
      lines.push(`… and ${count(total - problems.length)} more in the job's report (jobs report)`);
  }
  return lines.join('\n');
}

/** Opt-outs: one line per recipient; a page's next token after them. */
export function formatOptOuts(answer: OptOutsAnswer): string {
  if (answer.optOuts.length === 0)
    return answer.next ? `none on this page\nmore: --next ${answer.next}` : 'no opted-out recipients';
  const rows = [
    ['RECIPIENT', 'OPTED OUT', 'SINCE', 'AS TYPED'],
    ...answer.optOuts.map((o) => [
      o.recipient,
      o.optedOut ? 'yes' : 'no',
      o.since ?? (o.optedOut ? '' : 'never opted out'),
      o.input ?? '',
    ]),
  ];
  return `${table(rows)}${answer.next ? `\nmore: --next ${answer.next}` : ''}`;
}

/** `2026-12-29–2027-01-03 (year-end), 2026-11-20T12:00–2026-11-20T13:00`; undefined when none. */
export function restrictedPeriodsLine(
  periods: readonly { start: string; end?: string; name?: string }[] | undefined,
): string | undefined {
  if (!periods || periods.length === 0) return undefined;
  return periods
    .map((p) => `${p.start}${p.end ? `–${p.end}` : ''}${p.name ? ` (${p.name})` : ''}`)
    .join(', ');
}

/** Suppression entries: one line per recipient; a page's next token after them. */
export function formatSuppressions(answer: SuppressionsAnswer): string {
  if (answer.suppressions.length === 0)
    return answer.next ? `none on this page\nmore: --next ${answer.next}` : 'nobody on the suppression list';
  const rows = [
    ['RECIPIENT', 'SUPPRESSED', 'SOURCE', 'SINCE', 'REASON', 'AS TYPED'],
    ...answer.suppressions.map((s) => [
      s.recipient,
      s.suppressed ? 'yes' : 'no',
      s.source ?? '',
      s.addedAt ?? '',
      s.reason ?? '',
      s.input ?? '',
    ]),
  ];
  return `${table(rows)}${answer.next ? `\nmore: --next ${answer.next}` : ''}`;
}

/** What an upload did, and its bad rows (row, column, reason, value). */
export function formatSuppressionUpload(answer: SuppressionUploadAnswer): string {
  const lines = [
    `${answer.added} added of ${answer.dataRows} rows (${answer.rejected} rejected, ${answer.skipped} skipped)`,
  ];
  if (answer.problems.length > 0)
    lines.push(
      table([
        ['ROW', 'OUTCOME', 'COLUMN', 'REASON', 'VALUE'],
        ...answer.problems.map((p) => [String(p.row), p.outcome, p.column ?? '', p.reason, p.value ?? '']),
      ]),
    );
  return lines.join('\n');
}

/** An API error's field errors on one line: `maxAttempts: must be …; callingHours.mon[0].start: …`. */
export function fieldErrorsLine(fieldErrors: Readonly<Record<string, readonly string[]>>): string {
  return Object.entries(fieldErrors)
    .map(([field, problems]) => `${field}: ${problems.join(', ')}`)
    .join('; ');
}
