/**
 * Step 3 of `read-list.ts`: one data row checked on its own (shape, size, encoding, recipient,
 * time zone), becoming a report entry when it is rejected, else a candidate task.
 */
import { checkTimeZoneCell } from '#shared/pacing/recipient-zone.ts';
import type { IdentifierKind } from '#shared/people/model.ts';
import type { HeaderMap } from './headers.ts';
import type { TaskDraft } from './read-list.ts';
import type { RecipientCheck } from './recipients.ts';
import type { CsvEvent, CsvLimits } from './records.ts';
import { type ReportEntry, reportValue } from './report.ts';

/** A row checked: rejected (its report entry), or a candidate task with its recipient's cell. */
export type Checked =
  | { readonly kind: 'entry'; readonly entry: ReportEntry }
  | {
      readonly kind: 'candidate';
      readonly draft: TaskDraft;
      readonly column: string;
      readonly value: string;
    };

/** How a row's cells are read: its recipient's, and each other identifier's (undefined when it is none). */
export interface RowReaders {
  readonly recipient: (cell: string) => RecipientCheck;
  readonly identifier: (kind: IdentifierKind, cell: string) => string | undefined;
}

/** Why a row is rejected: its report entry without the row and outcome. */
type Fault = Omit<ReportEntry, 'row' | 'outcome'>;

/** Checks one data row (any event but a runaway, which ends the read). */
export function checkRow(
  event: Exclude<CsvEvent, { kind: 'runaway' }>,
  map: HeaderMap,
  limits: CsvLimits,
  readers: RowReaders,
): Checked {
  const { row } = event;
  if (event.kind !== 'record') return rejected(row, unreadFault(event, limits));
  const { cells } = event;
  const fault = quoteFault(event) ?? shapeFault(cells, map);
  if (fault) return rejected(row, fault);
  const cell = cells[map.recipient]!;
  const checked = readers.recipient(cell);
  if (!checked.ok) {
    const value = cell.trim();
    return rejected(row, {
      code: checked.code,
      reason: checked.reason,
      column: map.headers[map.recipient],
      ...(value === '' ? {} : { value: reportValue(value) }),
    });
  }
  const zoneCell = map.timeZone === undefined ? '' : cells[map.timeZone]!.trim();
  const zone = zoneCell === '' ? undefined : checkTimeZoneCell(zoneCell);
  if (zone && !zone.ok) {
    return rejected(row, {
      code: 'bad-time-zone',
      reason: zone.reason,
      column: map.headers[map.timeZone!],
      value: reportValue(zoneCell),
    });
  }
  const draft = {
    ...taskDraft(row, cells, map, checked.recipient, zone?.ok ? zone.timeZone : undefined),
    ...otherIdentifiers(cells, map, readers, checked.recipient),
  };
  return { kind: 'candidate', draft, column: map.headers[map.recipient]!, value: reportValue(cell.trim()) };
}

function rejected(row: number, fault: Fault): Checked {
  return { kind: 'entry', entry: { row, outcome: 'rejected', ...fault } };
}

/** A row the parser could not hand as cells: a quote never closed, or a row over the size limit. */
function unreadFault(
  event: Extract<CsvEvent, { kind: 'unclosed-quote' | 'too-long' }>,
  limits: CsvLimits,
): Fault {
  if (event.kind === 'unclosed-quote') {
    return {
      code: 'unclosed-quote',
      reason: 'a quoted cell is never closed: the row runs to the end of the file',
    };
  }
  return {
    code: 'row-too-long',
    reason: `row too long (${event.bytes} bytes; the limit is ${limits.maxRowBytes})`,
  };
}

/** A quote closed in the wrong place after line ends, which made several lines one row. */
function quoteFault(event: Extract<CsvEvent, { kind: 'record' }>): Fault | undefined {
  if (event.acrossLines === undefined) return undefined;
  return {
    code: 'bad-quote',
    reason: `a quote opened in this row is closed in the wrong place, so ${event.acrossLines} lines from here were read as one row: fix the quotes and upload again`,
  };
}

/** Cells missing or under no header, or a cell that is not text in the file's encoding. */
function shapeFault(cells: readonly string[], map: HeaderMap): Fault | undefined {
  const expected = map.headers.length;
  // Trailing empty cells past the header (and under the empty header cells `mapHeader` drops)
  // are what Excel writes when its used range is wider than the header: no data is lost, so
  // they are not an error. Missing cells are, and so is a value under no header.
  if (cells.length < expected || cells.slice(expected).some((cell) => cell.trim() !== '')) {
    return { code: 'ragged-row', reason: `expected ${expected} columns, got ${cells.length}` };
  }
  // A character the file's encoding cannot read (decoded as U+FFFD): nothing garbled is spoken or sent.
  const broken = cells.findIndex((c) => c.includes('\uFFFD'));
  if (broken < 0) return undefined;
  return {
    code: 'bad-encoding',
    reason:
      "a cell has bytes that are not text in the file's encoding (a character cut in two, or text from a file in another encoding)",
    ...(map.headers[broken] === undefined ? {} : { column: map.headers[broken] }),
    value: reportValue(cells[broken]!.trim()),
  };
}

/** The task a checked row becomes: its recipient, name, other columns and time zone. */
function taskDraft(
  row: number,
  cells: readonly string[],
  map: HeaderMap,
  recipient: string,
  timeZone: string | undefined,
): TaskDraft {
  const name = map.name === undefined ? '' : cells[map.name]!.trim();
  const variables = Object.fromEntries(map.variables.map(({ index, key }) => [key, cells[index]!.trim()]));
  return {
    row,
    recipient,
    ...(name === '' ? {} : { name }),
    variables,
    ...(timeZone === undefined ? {} : { timeZone }),
  };
}

/** The row's other identifiers that read as one, each once, without the recipient. */
function otherIdentifiers(
  cells: readonly string[],
  map: HeaderMap,
  readers: RowReaders,
  recipient: string,
): { identifiers?: string[] } {
  const found = map.identifiers.flatMap(({ index, kind }) => readers.identifier(kind, cells[index]!) ?? []);
  const identifiers = [...new Set(found)].filter((id) => id !== recipient);
  return identifiers.length === 0 ? {} : { identifiers };
}
