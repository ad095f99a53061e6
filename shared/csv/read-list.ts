/**
 * Use case: turn a customer's call or message list (a CSV, uploaded or dropped in S3) into task
 * drafts, row by row, in bounded memory, resumable across Lambda invocations.
 *
 * Input: the file as a byte stream, the job's channel and default phone region, and ports:
 * the opt-out lookup, the duplicate filter, and the sinks for tasks and report entries.
 * Output: counts (accepted + rejected + skipped = data rows), and either completion, a pause
 * with a cursor to resume from, or a job-level failure reason.
 *
 * Main course:
 * 1. Detect the encoding (UTF-8 with/without BOM, CP932, UTF-16 with/without BOM) and refuse
 *    non-text files; detect the cell separator (comma, tab or semicolon) from the header line.
 * 2. Parse records as a stream; the first non-blank record is the header: find the recipient
 *    column for the channel, or fail the job naming the headers found (and the separator, when
 *    the header has tabs or semicolons).
 * 3. Check each data row (shape, size, recipient) and collect a page of `batchSize` rows.
 * 4. Per page: drop opted-out recipients (one lookup per 100), then duplicates (within the page,
 *    then through the duplicate filter), then hand the accepted drafts to `onBatch` and the
 *    report entries to `onReport`, both awaited, so everything before the cursor is stored.
 * 5. Between pages, pause when `shouldPause` says so, returning the cursor.
 *
 * Rows: see `records.ts` — spreadsheet row numbers, the header being row 1. Blank rows (every
 * cell empty or whitespace, e.g. `,,,` rows Excel leaves below the data) are skipped silently
 * and are not data rows. `onBatch` and `onReport` must be idempotent per row: after a crash,
 * a retry from the last cursor hands the same page again.
 */

import type { IdentifierKind } from '#shared/people/model.ts';
import { type CsvDelimiter, delimiterName } from './delimiter.ts';
import { type DuplicateFilter, DuplicateFilterStateError } from './duplicates.ts';
import type { CellDecoder, TextEncodingName } from './encoding.ts';
import { CsvError } from './errors.ts';
import { type Channel, type HeaderMap, mapHeader } from './headers.ts';
import {
  type CountryCode,
  isKnownRegion,
  normalizeEmailRecipient,
  normalizeLineUserId,
  normalizePhoneNumber,
  type RecipientCheck,
} from './recipients.ts';
import {
  type CsvEvent,
  type CsvLimits,
  type CsvPosition,
  DEFAULT_CSV_LIMITS,
  openCsv,
  unwrapSpacedQuotes,
} from './records.ts';
import type { ReportEntry } from './report.ts';
import { type Checked, checkRow, type RowReaders } from './row-check.ts';

/** What one accepted row becomes: the caller adds job id, task id, status and timings. */
export interface TaskDraft {
  readonly row: number;
  /** E.164 phone number (`call`) or LINE user id (`message`). */
  readonly recipient: string;
  readonly name?: string;
  /** The other columns of the row, keyed by header text as written, for the scenario/template. */
  readonly variables: Readonly<Record<string, string>>;
  /** The row's `timezone` / `タイムゾーン` cell, a valid IANA zone, when the list has one and it is filled. */
  readonly timeZone?: string;
  /**
   * The row's other identifiers of the same person (its phone, LINE user id or email columns
   * besides the recipient's, those that read as one), normalised: the ingest links them.
   */
  readonly identifiers?: readonly string[];
}

/** What a page read was, whatever was accepted of it. */
export interface PageRead {
  readonly firstRow: number;
  readonly read: readonly TaskDraft[];
}

export interface IngestCounts {
  readonly dataRows: number;
  readonly accepted: number;
  readonly rejected: number;
  readonly skipped: number;
}

/**
 * Where a paused ingest continues. JSON-serialisable. When `byteOffset` > 0 the next run reads
 * the file from that offset (S3 `Range: bytes=<byteOffset>-`); when it is 0 (UTF-16 files) the
 * next run reads the whole file again and skips through `row`.
 */
export interface IngestCursor extends CsvPosition {
  /** The header row as written, since a read from mid-file does not see it. */
  readonly header: readonly string[];
  /** Totals so far; a resumed run continues them, so its result covers the whole file. */
  readonly counts: IngestCounts;
}

export type IngestFailureCode =
  | 'empty-file'
  | 'not-csv'
  | 'bad-header'
  | 'no-recipient-column'
  | 'unknown-placeholder'
  | 'no-data-rows'
  | 'no-usable-rows'
  | 'unreadable-row';

export interface IngestFailure {
  readonly code: IngestFailureCode;
  readonly reason: string;
}

export type IngestResult =
  | { readonly status: 'completed'; readonly counts: IngestCounts; readonly encoding: TextEncodingName }
  | { readonly status: 'paused'; readonly counts: IngestCounts; readonly cursor: IngestCursor }
  | { readonly status: 'failed'; readonly counts: IngestCounts; readonly failure: IngestFailure };

export interface IngestRowsInput {
  /** The file's bytes (S3 GetObject Body, fs stream), from `resumeFrom.byteOffset` when resuming. */
  readonly source: AsyncIterable<Uint8Array>;
  readonly channel: Channel;
  /** Region for phone numbers written without a country code, e.g. `JP`. Required for `call`. */
  readonly defaultRegion?: string;
  /** Returns which of the given recipients (at most 100) opted out of this client's contacts. */
  readonly isOptedOut: (recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  /** Returns which of the given recipients (at most 100) are on the client's suppression list; none when absent. */
  readonly isSuppressed?: (recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  /** Remembers this job's recipients; restored from its snapshot when resuming. */
  readonly duplicates: DuplicateFilter;
  /**
   * Stores a page of accepted drafts (in row order, at most `batchSize`); `firstRow` is the page's
   * first row read, accepted or not, and `read` its rows that are drafts before opt-outs,
   * suppressions and duplicates are taken out (the same page read again after a crash has the
   * same of both, whatever changed in those lists meanwhile). Called for every page with a row
   * read as a draft, even when none was accepted (so a re-read can undo what a crashed run wrote).
   */
  readonly onBatch: (tasks: readonly TaskDraft[], page: PageRead) => Promise<void>;
  /** Stores a page of report entries (in row order). */
  readonly onReport: (entries: readonly ReportEntry[]) => Promise<void>;
  /** Data rows per page; 500 by default. */
  readonly batchSize?: number;
  readonly resumeFrom?: IngestCursor;
  /** Asked between pages (after a page is stored): true stops with a cursor, e.g. when the Lambda runs out of time. */
  readonly shouldPause?: (counts: IngestCounts) => boolean;
  readonly limits?: Partial<CsvLimits>;
  /** The recipient column's header, when the job names it instead of relying on the aliases. */
  readonly recipientColumn?: string;
  /**
   * Of the job's `{{placeholders}}`, those the list's header cannot fill (`shared/jobs/placeholders.ts`):
   * any makes the file fail at its header, naming them and the columns it has.
   */
  readonly unfilled?: (header: {
    readonly variables: readonly string[];
    readonly hasName: boolean;
  }) => string[];
}

/** Invalid arguments: a programming or configuration error, not a problem of the file. */
export class IngestInputError extends CsvError {}

/** Recipients per opt-out lookup: DynamoDB's BatchGetItem takes up to 100 keys. */
export const OPT_OUT_BATCH = 100;

const ZERO: IngestCounts = { dataRows: 0, accepted: 0, rejected: 0, skipped: 0 };

/** Streams a CSV into task drafts and report entries. See the module comment for the steps. */
export async function ingestRows(input: IngestRowsInput): Promise<IngestResult> {
  const batchSize = input.batchSize ?? 500;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new IngestInputError(`bad batchSize ${batchSize}`);
  const checkRecipient = recipientChecker(input.channel, input.defaultRegion);
  const readIdentifier = identifierReader(input.defaultRegion);
  const limits: CsvLimits = { ...DEFAULT_CSV_LIMITS, ...input.limits };
  const { resumeFrom } = input;
  const counts = resumeFrom?.counts ?? ZERO;
  if (input.duplicates.size !== counts.accepted) {
    throw new DuplicateFilterStateError(
      `the duplicate filter remembers ${input.duplicates.size} recipients but ${counts.accepted} tasks were accepted ` +
        'before this point: restore it from the snapshot taken with the cursor',
    );
  }
  let map: HeaderMap | undefined;
  if (resumeFrom) {
    const mapping = mapHeader(resumeFrom.header, input.channel, { recipientColumn: input.recipientColumn });
    if (!mapping.ok)
      throw new IngestInputError(`the cursor's header does not fit this job: ${mapping.reason}`);
    map = mapping.map;
  }

  const opened = await openCsv(input.source, {
    resume: resumeFrom,
    limits,
    // As the cells are (quotes kept): a header that fits another separator better must win it.
    acceptsHeader: (cells) => mapHeader(cells, input.channel, { recipientColumn: input.recipientColumn }).ok,
  });
  if (!opened.ok) return { status: 'failed', counts, failure: { code: opened.code, reason: opened.reason } };
  const run = new IngestRun(
    input,
    { batchSize, readers: { recipient: checkRecipient, identifier: readIdentifier }, limits, counts, map },
    opened,
  );
  try {
    return await run.readAll(opened.events);
  } finally {
    await opened.close();
  }
}

/** The state of one invocation: the page being filled and the position of the last record read. */
class IngestRun {
  readonly #input: IngestRowsInput;
  readonly #batchSize: number;
  readonly #readers: RowReaders;
  readonly #limits: CsvLimits;
  readonly #decoder: CellDecoder;
  readonly #delimiter: CsvDelimiter;
  #counts: IngestCounts;
  #map: HeaderMap | undefined;
  #page: Checked[] = [];
  #pagesStored = 0;
  #byteOffset: number;
  #row: number;

  constructor(
    input: IngestRowsInput,
    setup: {
      readonly batchSize: number;
      readonly readers: RowReaders;
      readonly limits: CsvLimits;
      readonly counts: IngestCounts;
      readonly map: HeaderMap | undefined;
    },
    csv: { readonly decoder: CellDecoder; readonly delimiter: CsvDelimiter },
  ) {
    this.#input = input;
    this.#batchSize = setup.batchSize;
    this.#readers = setup.readers;
    this.#limits = setup.limits;
    this.#counts = setup.counts;
    this.#map = setup.map;
    this.#decoder = csv.decoder;
    this.#delimiter = csv.delimiter;
    this.#byteOffset = input.resumeFrom?.byteOffset ?? 0;
    this.#row = input.resumeFrom?.row ?? 0;
  }

  async readAll(events: AsyncIterable<CsvEvent>): Promise<IngestResult> {
    for await (const event of events) {
      if (event.kind === 'runaway') {
        await this.#storePage();
        const reason = `row ${event.row} is longer than ${this.#limits.maxRecordBytes} bytes: a quote is probably never closed, so the rest of the file cannot be read`;
        return this.#fail(this.#map ? 'unreadable-row' : 'bad-header', reason);
      }
      const map = this.#map;
      if (!map) {
        const failure = this.#readHeader(event);
        if (failure) return failure;
        continue;
      }
      if (event.kind === 'record' && isBlank(event.cells)) {
        this.#advance(event);
        continue;
      }
      // Pause only where more data follows, and only after progress, so a run never ends idle.
      if (this.#page.length === 0 && this.#pagesStored > 0 && this.#input.shouldPause?.(this.#counts)) {
        const cursor: IngestCursor = {
          byteOffset: this.#byteOffset,
          row: this.#row,
          encoding: this.#decoder.encoding,
          delimiter: this.#delimiter,
          header: map.headers,
          counts: this.#counts,
        };
        return { status: 'paused', counts: this.#counts, cursor };
      }
      this.#page.push(checkRow(event, map, this.#limits, this.#readers));
      if (event.kind !== 'unclosed-quote') this.#advance(event);
      if (this.#page.length >= this.#batchSize) await this.#storePage();
    }
    await this.#storePage();

    const counts = this.#counts;
    if (!this.#map) return this.#fail('empty-file', 'the file has only blank lines');
    if (counts.dataRows === 0)
      return this.#fail('no-data-rows', 'the file has a header row but no data rows');
    if (counts.accepted === 0) {
      return this.#fail(
        'no-usable-rows',
        `none of the ${counts.dataRows} data rows can be used: ${counts.rejected} rejected, ${counts.skipped} skipped`,
      );
    }
    return { status: 'completed', counts, encoding: this.#decoder.encoding };
  }

  /** Takes the first non-blank record as the header; returns a failure when it cannot be one. */
  #readHeader(event: Exclude<CsvEvent, { kind: 'runaway' }>): IngestResult | undefined {
    if (event.kind === 'unclosed-quote')
      return this.#fail('bad-header', 'the header row has a quote that is never closed');
    if (event.kind === 'too-long') {
      return this.#fail('bad-header', `the header row is longer than ${this.#limits.maxRowBytes} bytes`);
    }
    if (!isBlank(event.cells)) {
      const mapping = mapHeader(event.cells.map(unwrapSpacedQuotes), this.#input.channel, {
        recipientColumn: this.#input.recipientColumn,
      });
      if (!mapping.ok) {
        const looksLikeData = event.cells.some((cell) => this.#readers.recipient(cell).ok);
        const hint = looksLikeData ? '; the first row looks like data: the file needs a header row' : '';
        return this.#fail(
          'no-recipient-column',
          mapping.reason + separatorNote(this.#delimiter, event.cells) + hint,
        );
      }
      const unfilled = this.#unfilled(mapping.map);
      if (unfilled) return this.#fail('unknown-placeholder', unfilled);
      this.#map = mapping.map;
    }
    this.#advance(event);
    return undefined;
  }

  /** Why the job's placeholders cannot be filled from this header, or undefined when they can. */
  #unfilled(map: HeaderMap): string | undefined {
    const unfilled = this.#input.unfilled?.({
      variables: map.variables.map((v) => v.key),
      hasName: map.name !== undefined,
    });
    if (!unfilled || unfilled.length === 0) return undefined;
    const named = unfilled.map((name) => `{{${name}}}`).join(', ');
    const columns = map.headers.filter((header) => header !== '').join(', ');
    return `the job's content uses ${named}, which no column of the list holds (its columns: ${columns}; the name column is {{name}})`;
  }

  #advance(event: { readonly row: number; readonly end: number }): void {
    this.#row = event.row;
    this.#byteOffset = event.end;
  }

  async #storePage(): Promise<void> {
    const page = this.#page;
    if (page.length === 0) return;
    const { tasks, entries } = await settlePage(page, this.#input);
    const first = page[0]!;
    const firstRow = first.kind === 'entry' ? first.entry.row : first.draft.row;
    const read = page.flatMap((row) => (row.kind === 'candidate' ? [row.draft] : []));
    if (read.length > 0) await this.#input.onBatch(tasks, { firstRow, read });
    if (entries.length > 0) await this.#input.onReport(entries);
    const rejected = entries.filter((entry) => entry.outcome === 'rejected').length;
    const counts = this.#counts;
    this.#counts = {
      dataRows: counts.dataRows + page.length,
      accepted: counts.accepted + tasks.length,
      rejected: counts.rejected + rejected,
      skipped: counts.skipped + entries.length - rejected,
    };
    this.#page = [];
    this.#pagesStored++;
  }

  #fail(code: IngestFailureCode, reason: string): IngestResult {
    return { status: 'failed', counts: this.#counts, failure: { code, reason } };
  }
}

function recipientChecker(
  channel: Channel,
  defaultRegion: string | undefined,
): (cell: string) => RecipientCheck {
  if (channel === 'line') return normalizeLineUserId;
  if (channel === 'email') return normalizeEmailRecipient;
  if (channel !== 'call' && channel !== 'sms')
    throw new IngestInputError(`unknown channel ${JSON.stringify(channel)}`);
  if (defaultRegion === undefined || !isKnownRegion(defaultRegion)) {
    throw new IngestInputError(
      `a ${channel} job needs a known default region, got ${JSON.stringify(defaultRegion)}`,
    );
  }
  const region: CountryCode = defaultRegion;
  return (cell) => normalizePhoneNumber(cell, region);
}

/** A phone, LINE or email cell beside the recipient's, normalised, or undefined when it is not one. */
function identifierReader(defaultRegion: string | undefined): RowReaders['identifier'] {
  const region = defaultRegion !== undefined && isKnownRegion(defaultRegion) ? defaultRegion : undefined;
  const readers: Record<IdentifierKind, ((cell: string) => RecipientCheck) | undefined> = {
    line: normalizeLineUserId,
    email: normalizeEmailRecipient,
    phone: region && ((cell) => normalizePhoneNumber(cell, region)),
  };
  return (kind, cell) => {
    const checked = cell.trim() === '' ? undefined : readers[kind]?.(cell);
    return checked?.ok ? checked.recipient : undefined;
  };
}

/**
 * How the header was split, when it matters to the reader of a failure: the file was read as tab-
 * or semicolon-separated, or as comma-separated although its header also has tabs or semicolons.
 */
function separatorNote(delimiter: CsvDelimiter, headerCells: readonly string[]): string {
  if (delimiter !== ',') return ` (read as ${delimiterName(delimiter)}-separated)`;
  const others = (['\t', ';'] as const).filter((d) => headerCells.some((cell) => cell.includes(d)));
  if (others.length === 0) return '';
  const names = others.map((d) => (d === '\t' ? 'tabs' : 'semicolons')).join(' and ');
  return ` (read as comma-separated; it also has ${names})`;
}

function isBlank(cells: readonly string[]): boolean {
  return cells.every((cell) => cell.trim() === '');
}

type Candidate = Extract<Checked, { kind: 'candidate' }>;

/**
 * Opt-outs, then duplicates: what is left of a page becomes tasks. Opt-outs go first so that
 * the duplicate filter only ever holds recipients that became tasks, which is what a Bloom
 * filter's confirm lookup can find among the stored tasks.
 */
async function settlePage(
  page: readonly Checked[],
  ports: Pick<IngestRowsInput, 'isOptedOut' | 'isSuppressed' | 'duplicates'>,
): Promise<{ tasks: TaskDraft[]; entries: ReportEntry[] }> {
  const entries: ReportEntry[] = [];
  const candidates: Candidate[] = [];
  for (const item of page) {
    if (item.kind === 'entry') entries.push(item.entry);
    else candidates.push(item);
  }
  const { optedOut, suppressed } = await optOutsAmong(candidates, ports);
  const firstInPage = new Map<string, Candidate>();
  const repeats: Candidate[] = [];
  for (const c of candidates) {
    if (optedOut.has(c.draft.recipient)) entries.push(skipped(c, 'opted-out', 'opted out'));
    else if (suppressed.has(c.draft.recipient))
      entries.push(skipped(c, 'suppressed', 'on the suppression list'));
    else if (firstInPage.has(c.draft.recipient)) repeats.push(c);
    else firstInPage.set(c.draft.recipient, c);
  }
  const tasks = await admitFirsts(firstInPage, repeats, ports.duplicates, entries);
  entries.sort((a, b) => a.row - b.row);
  return { tasks, entries };
}

/** The candidates' recipients that opted out, and those on the suppression list: one lookup each per 100. */
async function optOutsAmong(
  candidates: readonly Candidate[],
  ports: Pick<IngestRowsInput, 'isOptedOut' | 'isSuppressed'>,
): Promise<{ optedOut: Set<string>; suppressed: Set<string> }> {
  const distinct = [...new Set(candidates.map((c) => c.draft.recipient))];
  const optedOut = new Set<string>();
  const suppressed = new Set<string>();
  for (let i = 0; i < distinct.length; i += OPT_OUT_BATCH) {
    const chunk = distinct.slice(i, i + OPT_OUT_BATCH);
    const [answer, listed] = await Promise.all([
      ports.isOptedOut(chunk),
      ports.isSuppressed ? ports.isSuppressed(chunk) : new Set<string>(),
    ]);
    for (const recipient of chunk) if (answer.has(recipient)) optedOut.add(recipient);
    for (const recipient of chunk) if (listed.has(recipient)) suppressed.add(recipient);
  }
  return { optedOut, suppressed };
}

/**
 * Each recipient's first row in the page, through the duplicate filter: a task unless an earlier
 * page had the recipient. A duplicate entry goes to `entries` for the others and for every repeat.
 */
async function admitFirsts(
  firstInPage: ReadonlyMap<string, Candidate>,
  repeats: readonly Candidate[],
  duplicates: DuplicateFilter,
  entries: ReportEntry[],
): Promise<TaskDraft[]> {
  const earlier = await duplicates.admit(
    [...firstInPage.values()].map((c) => ({ recipient: c.draft.recipient, row: c.draft.row })),
  );
  const tasks: TaskDraft[] = [];
  for (const c of firstInPage.values()) {
    const first = earlier.get(c.draft.recipient);
    if (first === undefined) tasks.push(c.draft);
    else entries.push(skipped(c, 'duplicate', `duplicate of row ${first}`));
  }
  for (const c of repeats) {
    const first = earlier.get(c.draft.recipient) ?? firstInPage.get(c.draft.recipient)!.draft.row;
    entries.push(skipped(c, 'duplicate', `duplicate of row ${first}`));
  }
  return tasks;
}

/** A candidate's report entry when it is skipped: a duplicate, opted out or suppressed. */
function skipped(c: Candidate, code: 'duplicate' | 'opted-out' | 'suppressed', reason: string): ReportEntry {
  return { row: c.draft.row, outcome: 'skipped', code, reason, column: c.column, value: c.value };
}
