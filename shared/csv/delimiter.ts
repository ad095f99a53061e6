/**
 * Which character separates the cells of a customer's file. Excel's "CSV" writes commas, but its
 * "Unicode text" export separates with tabs, a `.tsv` renamed `.csv` does too, and Excel in most
 * of Europe writes semicolons (the comma is their decimal mark). The header row decides: it is
 * the one row whose shape the ingest knows, while data rows may hold any text.
 *
 * Detection reads the file's first bytes as text in which the separators and the quote are the
 * ASCII characters they are in every encoding the ingest reads (UTF-8 and CP932 bytes read as
 * latin1, where none of `,` `;` TAB `"` CR LF occurs inside a multi-byte character; UTF-16
 * decoded first).
 */
import { parse } from 'csv-parse/sync';

export type CsvDelimiter = ',' | '\t' | ';';

/** The separators, in the order a tie between them is settled. */
const DELIMITERS: readonly CsvDelimiter[] = [',', '\t', ';'];

/** The separator's name in a sentence: "read as tab-separated". */
export function delimiterName(delimiter: CsvDelimiter): string {
  return delimiter === '\t' ? 'tab' : delimiter === ';' ? 'semicolon' : 'comma';
}

export interface HeaderLine {
  /** The header line without its line break (cut short when the text ends inside it). */
  readonly text: string;
  /** Separators of each kind outside quoted cells. */
  readonly counts: Readonly<Record<CsvDelimiter, number>>;
}

/**
 * The first line with something in it (lines of nothing but blanks, separators and empty quotes
 * are skipped, as the ingest skips blank rows), with its separators counted outside quotes: a
 * quote opens a cell at the start of the line or after any separator, `""` inside it is a quote,
 * and line breaks inside it belong to the cell.
 */
export function findHeaderLine(text: string): HeaderLine | undefined {
  let start = 0;
  let counts = { ',': 0, '\t': 0, ';': 0 };
  let content = false;
  let quoted = false;
  let cellStart = true;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') i++;
        else quoted = false;
      } else if (!isBlank(ch)) content = true;
      continue;
    }
    if (ch === '\r' || ch === '\n') {
      if (content) return { text: text.slice(start, i), counts };
      start = i + 1;
      counts = { ',': 0, '\t': 0, ';': 0 };
      cellStart = true;
      continue;
    }
    if (ch === ',' || ch === '\t' || ch === ';') {
      counts[ch]++;
      cellStart = true;
      continue;
    }
    if (ch === '"' && cellStart) quoted = true;
    else if (!isBlank(ch)) content = true;
    cellStart = false;
  }
  return content ? { text: text.slice(start), counts } : undefined;
}

/**
 * The separators a header line may use, most likely first: those that occur in it, the most
 * frequent first (ties: comma, tab, semicolon). A header without any is one column: comma.
 */
export function rankDelimiters(counts: Readonly<Record<CsvDelimiter, number>>): CsvDelimiter[] {
  const seen = DELIMITERS.filter((d) => counts[d] > 0).sort((a, b) => counts[b] - counts[a]);
  return seen.length > 0 ? seen : [','];
}

/** The cells of one line split at `delimiter` as the stream parser would, or undefined if it cannot. */
export function splitLine(line: string, delimiter: CsvDelimiter): string[] | undefined {
  try {
    const records: string[][] = parse(line, {
      delimiter,
      bom: false,
      relax_quotes: true,
      relax_column_count: true,
      record_delimiter: ['\r\n', '\n', '\r'],
    });
    return records[0];
  } catch {
    return undefined; // a quote still open where the window ends: no verdict from this line
  }
}

/**
 * Decides the separator of a file from its first bytes as text (see the module comment). When
 * the header line has several kinds, the most frequent wins unless `acceptsHeader` (given the
 * header's cells, decoded by `decodeCells`) refuses its split and accepts another's: a European
 * header `Name, Vorname;Telefon` has more commas, but only semicolons give it a phone column.
 */
export function sniffDelimiter(
  text: string,
  options: {
    readonly decodeCells?: (rawCells: string[]) => string[];
    readonly acceptsHeader?: (cells: readonly string[]) => boolean;
  } = {},
): CsvDelimiter {
  const header = findHeaderLine(text);
  if (!header) return ',';
  const ranked = rankDelimiters(header.counts);
  const { acceptsHeader, decodeCells = (cells) => cells } = options;
  if (acceptsHeader && ranked.length > 1) {
    for (const delimiter of ranked) {
      const cells = splitLine(header.text, delimiter);
      if (cells && acceptsHeader(decodeCells(cells))) return delimiter;
    }
  }
  return ranked[0]!;
}

// Blank as the ingest's blank rows are: only ASCII spaces and the ideographic space count, so that
// a byte of a multi-byte character read as latin1 (0x85, 0xA0) is never taken for a blank.
function isBlank(ch: string): boolean {
  return ch === ' ' || ch === '\v' || ch === '\f' || ch === '\u3000';
}
