/**
 * Reads a customer's CSV as a stream of records, each with the spreadsheet row it sits on and
 * the byte offset right after it, in bounded memory whatever the file's size.
 *
 * Row numbers are the ones Excel and Google Sheets show when the file is opened: each record is
 * one row, even when a quoted cell spans several lines, and a blank line is a row too (they
 * show it as an empty row). The first record is row 1 (normally the header).
 */
import { pipeline, Readable } from 'node:stream';
import { type Options, Parser } from 'csv-parse';
import iconv from 'iconv-lite';
import { type CsvDelimiter, sniffDelimiter } from './delimiter.ts';
import {
  type CellDecoder,
  decodeUtf16Window,
  makeCellDecoder,
  SNIFF_BYTES,
  sniffEncoding,
  type TextEncodingName,
} from './encoding.ts';

export type { CsvDelimiter };

export interface CsvLimits {
  /** A record longer than this (bytes, line ending included) is rejected as "row too long". */
  readonly maxRowBytes: number;
  /**
   * Past this many bytes without the end of a record, the file cannot be read further (a quote
   * that is never closed swallows the rest of the file): this bounds the memory of one record.
   */
  readonly maxRecordBytes: number;
}

export const DEFAULT_CSV_LIMITS: CsvLimits = { maxRowBytes: 8 * 1024, maxRecordBytes: 1024 * 1024 };

/** Where a read starts again: the state a {@link CsvEvent} stream needs to pick up mid-file. */
export interface CsvPosition {
  /** Offset in the file of the next record; 0 re-reads from the start and skips through `row`. */
  readonly byteOffset: number;
  /** Spreadsheet row of the last record already read. */
  readonly row: number;
  readonly encoding: TextEncodingName;
  /** The cell separator found in the header; absent in cursors saved before it was detected: comma. */
  readonly delimiter?: CsvDelimiter;
}

export type CsvEvent =
  | {
      readonly kind: 'record';
      readonly row: number;
      readonly cells: readonly string[];
      /**
       * Set when a quote opened in the record is closed in the wrong place after line ends (`"abc`
       * … `,"e"`): `relax_quotes` made those lines (other rows) one cell. How many lines it took.
       */
      readonly acrossLines?: number;
      /** Offset in the file right after this record (0 when the file can only be re-read). */
      readonly end: number;
    }
  | { readonly kind: 'too-long'; readonly row: number; readonly bytes: number; readonly end: number }
  /** The file ends inside a quoted cell: the record starting at `row` is broken. Always last. */
  | { readonly kind: 'unclosed-quote'; readonly row: number }
  /** The record at `row` exceeds {@link CsvLimits.maxRecordBytes}: nothing after it can be read. Always last. */
  | { readonly kind: 'runaway'; readonly row: number };

export type OpenedCsv =
  | { readonly ok: false; readonly code: 'empty-file' | 'not-csv'; readonly reason: string }
  | {
      readonly ok: true;
      /** Tells the file's encoding as decided so far (see {@link TextEncodingName}). */
      readonly decoder: CellDecoder;
      /** The cell separator, decided from the header line (see `delimiter.ts`). */
      readonly delimiter: CsvDelimiter;
      readonly events: AsyncGenerator<CsvEvent, void, undefined>;
      /**
       * Closes the source now (e.g. releases an S3 body's socket) when reading stops early; a
       * no-op once the file was read to its end. Call it in a `finally`.
       */
      readonly close: () => Promise<void>;
    };

/** Source chunks are cut to this size so that one huge chunk cannot defeat the record limit. */
const SLICE_BYTES = 64 * 1024;

/**
 * Opens `source` (the whole file, or — when `resume.byteOffset` > 0 — the file from that offset
 * on, e.g. an S3 ranged GET) and returns its records as events. A fresh read detects the
 * encoding and the cell separator, and rejects files that are not text; a resumed one trusts
 * `resume`. `acceptsHeader` (given a header row's cells) settles a header line that has more than
 * one kind of separator: see {@link sniffDelimiter}.
 *
 * UTF-16 files are transcoded before parsing, so their records have no byte offset in the file:
 * their events carry `end: 0`, and a resume re-reads from the start, skipping through `resume.row`.
 */
export async function openCsv(
  source: AsyncIterable<Uint8Array>,
  options: {
    readonly resume?: CsvPosition;
    readonly limits?: Partial<CsvLimits>;
    readonly acceptsHeader?: (cells: readonly string[]) => boolean;
  } = {},
): Promise<OpenedCsv> {
  const limits = { ...DEFAULT_CSV_LIMITS, ...options.limits };
  const { resume } = options;
  const file = new CsvSource(source);
  if (resume && resume.byteOffset > 0) return resumeCsv(file, resume, limits);

  const { window, done } = await file.readHead();
  if (window.length === 0) return { ok: false, code: 'empty-file', reason: 'the file is empty' };
  const sniffWindow = done ? window : window.subarray(0, SNIFF_BYTES);
  const sniffed = sniffEncoding(sniffWindow, done);
  if ('notText' in sniffed) {
    await file.close();
    return { ok: false, code: 'not-csv', reason: sniffed.notText };
  }
  const { encoding, bomLength } = sniffed;
  const utf16 = isUtf16(encoding);
  const delimiter =
    resume?.delimiter ?? headerDelimiter(sniffWindow, sniffed, { acceptsHeader: options.acceptsHeader });
  const raw = file.continueWith(window.subarray(bomLength));
  const decoder = makeCellDecoder(resume && resume.encoding !== 'ascii' ? resume.encoding : encoding);
  const events = parseRecords(utf16 ? transcodeToUtf8(raw, encoding) : raw, decoder, limits, {
    delimiter,
    rowBase: 0,
    offsetBase: utf16 ? null : bomLength,
    skipThroughRow: resume?.row ?? 0,
  });
  return { ok: true, decoder, delimiter, events, close: file.close };
}

/** A read resumed mid-file: the encoding and separator are `resume`'s, the rows counted on from it. */
function resumeCsv(file: CsvSource, resume: CsvPosition, limits: CsvLimits): OpenedCsv {
  if (isUtf16(resume.encoding)) {
    throw new RangeError('a UTF-16 file can only be resumed from byte 0 (records have no byte offset)');
  }
  const decoder = makeCellDecoder(resume.encoding);
  const delimiter = resume.delimiter ?? ',';
  const events = parseRecords(file.continueWith(Buffer.alloc(0)), decoder, limits, {
    delimiter,
    rowBase: resume.row,
    offsetBase: resume.byteOffset,
    skipThroughRow: 0,
  });
  return { ok: true, decoder, delimiter, events, close: file.close };
}

/** The cell separator of the header line at the start of `window` (after the byte order mark). */
function headerDelimiter(
  window: Buffer,
  { encoding, bomLength }: { readonly encoding: TextEncodingName; readonly bomLength: number },
  { acceptsHeader }: { readonly acceptsHeader: ((cells: readonly string[]) => boolean) | undefined },
): CsvDelimiter {
  if (isUtf16(encoding))
    return sniffDelimiter(decodeUtf16Window(window, encoding, bomLength), { acceptsHeader });
  return sniffDelimiter(window.subarray(bomLength).toString('latin1'), {
    acceptsHeader,
    // A throwaway decoder: the parse decides the encoding, record by record.
    decodeCells: (cells) => makeCellDecoder(encoding).decodeRecord(cells),
  });
}

function isUtf16(encoding: TextEncodingName): encoding is 'utf-16le' | 'utf-16be' {
  return encoding === 'utf-16le' || encoding === 'utf-16be';
}

function toBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** The customer's file as it is read: its chunks in order, and a close that ends the read early. */
class CsvSource {
  readonly #iterator: AsyncIterator<Uint8Array>;
  #finished = false;
  #closing: Promise<unknown> | undefined;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.#iterator = source[Symbol.asyncIterator]();
  }

  /** The next chunk, or undefined once the file has ended. */
  async #next(): Promise<Buffer | undefined> {
    const next = await this.#iterator.next();
    if (next.done) {
      this.#finished = true;
      return undefined;
    }
    return toBuffer(next.value);
  }

  /** The file's first {@link SNIFF_BYTES} or more (whole chunks), and whether that was all of it. */
  async readHead(): Promise<{ window: Buffer; done: boolean }> {
    const head: Buffer[] = [];
    let length = 0;
    while (length < SNIFF_BYTES) {
      const chunk = await this.#next();
      if (!chunk) break;
      head.push(chunk);
      length += chunk.length;
    }
    return { window: Buffer.concat(head), done: this.#finished };
  }

  /** `first`, then the rest of the file; closes the source when the read stops, early or not. */
  async *continueWith(first: Buffer): AsyncGenerator<Buffer, void, undefined> {
    try {
      if (first.length > 0) yield first;
      while (!this.#finished) {
        const chunk = await this.#next();
        if (chunk) yield chunk;
      }
    } finally {
      await this.close();
    }
  }

  /** Closes the source now; a no-op once the file was read to its end. */
  readonly close = async (): Promise<void> => {
    if (this.#finished) return;
    this.#closing ??= Promise.resolve(this.#iterator.return?.());
    await this.#closing;
  };
}

async function* transcodeToUtf8(
  bytes: AsyncIterable<Buffer>,
  encoding: TextEncodingName,
): AsyncGenerator<Buffer, void, undefined> {
  const decoder = iconv.getDecoder(encoding);
  for await (const chunk of bytes) {
    const text = decoder.write(chunk);
    if (text) yield Buffer.from(text, 'utf8');
  }
  const rest = decoder.end();
  if (rest) yield Buffer.from(rest, 'utf8');
}

/** csv-parse's stream parser, counting the bytes it has been handed. */
class CountingParser extends Parser {
  bytesRead = 0;

  override _transform(
    chunk: Buffer,
    encoding: BufferEncoding,
    callback: (error?: Error | null) => void,
  ): void {
    this.bytesRead += chunk.length;
    super._transform(chunk, encoding, callback);
  }
}

interface ParsedRecord {
  readonly cells: string[];
  /** Lines a quote closed in the wrong place made one record of (`quoteClosedAcrossLines`). */
  readonly acrossLines?: number;
  readonly end: number;
}

/** Where a parse's rows and offsets start, and the rows it skips (a resume from byte 0). */
interface ParseStart {
  readonly delimiter: CsvDelimiter;
  readonly rowBase: number;
  readonly offsetBase: number | null;
  readonly skipThroughRow: number;
}

/**
 * What the parser has read and emitted so far, updated synchronously as it parses, so the guard
 * measures the record being parsed, not how far behind the consumer happens to be.
 */
interface ParseProgress {
  records: number;
  end: number;
  runawayAfter: number | undefined;
  unclosedQuote: boolean;
}

async function* parseRecords(
  bytes: AsyncIterable<Buffer>,
  decoder: CellDecoder,
  limits: CsvLimits,
  at: ParseStart,
): AsyncGenerator<CsvEvent, void, undefined> {
  const progress: ParseProgress = { records: 0, end: 0, runawayAfter: undefined, unclosedQuote: false };
  const parser = new CountingParser(parserOptions(at.delimiter, progress));
  const slices = guardedSlices(bytes, parser, progress, limits.maxRecordBytes);
  // Errors of the source (a dropped connection) surface through the parser's iterator.
  pipeline(Readable.from(slices, { highWaterMark: 1 }), parser, () => {});

  let seen = 0;
  let start = 0;
  for await (const record of parser as AsyncIterable<ParsedRecord>) {
    seen++;
    if (progress.runawayAfter !== undefined && seen > progress.runawayAfter) break;
    const row = at.rowBase + seen;
    const length = record.end - start;
    start = record.end;
    if (row <= at.skipThroughRow) continue;
    const end = at.offsetBase === null ? 0 : at.offsetBase + record.end;
    if (length > limits.maxRowBytes) yield { kind: 'too-long', row, bytes: length, end };
    else yield recordEvent(record, row, end, decoder);
  }
  if (progress.runawayAfter !== undefined)
    yield { kind: 'runaway', row: at.rowBase + progress.runawayAfter + 1 };
  else if (progress.unclosedQuote) yield { kind: 'unclosed-quote', row: at.rowBase + seen + 1 };
}

/** A parsed record as its event, its cells decoded. */
function recordEvent(record: ParsedRecord, row: number, end: number, decoder: CellDecoder): CsvEvent {
  const cells = decoder.decodeRecord(record.cells);
  return {
    kind: 'record',
    row,
    cells,
    end,
    ...(record.acrossLines ? { acrossLines: record.acrossLines } : {}),
  };
}

/**
 * `bytes` in slices of at most {@link SLICE_BYTES}, ending early (marking `progress.runawayAfter`)
 * once the parser has been handed more than `maxRecordBytes` past the last record it emitted.
 */
async function* guardedSlices(
  bytes: AsyncIterable<Buffer>,
  parser: CountingParser,
  progress: ParseProgress,
  maxRecordBytes: number,
): AsyncGenerator<Buffer, void, undefined> {
  for await (const chunk of bytes) {
    for (let from = 0; from < chunk.length; from += SLICE_BYTES) {
      if (parser.bytesRead - progress.end > maxRecordBytes) {
        progress.runawayAfter = progress.records;
        return;
      }
      yield chunk.subarray(from, from + SLICE_BYTES);
    }
  }
}

/** csv-parse's options for a customer's file, reporting each record and skip into `progress`. */
function parserOptions(delimiter: CsvDelimiter, progress: ParseProgress): Options {
  return {
    // latin1 maps each byte to one character, so offsets are file offsets and cells can be
    // turned back into their exact bytes for the real decoding.
    encoding: 'latin1',
    bom: false,
    delimiter,
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_quotes: true,
    relax_column_count: true,
    // The only error left with the options above is a quote still open at the end of the file;
    // it is reported as a broken row, not a broken job. A quote closed in the wrong place after
    // line ends is no error here: `read-list.ts` rejects the cell it made (`bad-quote`).
    skip_records_with_error: true,
    max_record_size: 0,
    // The record's raw text, for the rare record whose cells hold a line end (`quoteClosedAcrossLines`).
    raw: true,
    on_record: ((
      { record: cells }: { record: string[] },
      context: { bytes: number; raw: string },
    ): ParsedRecord => {
      progress.records++;
      progress.end = context.bytes;
      const lines = cells.some((cell) => LINE_END_RE.test(cell))
        ? quoteClosedAcrossLines(context.raw, delimiter)
        : undefined;
      return { cells, end: context.bytes, ...(lines === undefined ? {} : { acrossLines: lines }) };
    }) as unknown as Options['on_record'],
    on_skip: () => {
      progress.unclosedQuote = true;
      return undefined;
    },
  };
}

const LINE_END_RE = /[\r\n]/;

/**
 * The lines a record's raw text spans when one of its quoted cells runs past a line end and is
 * then closed by a quote that neither doubles nor ends the cell (a stray `"` that opened the cell,
 * closed by another cell's opening quote lines later); undefined for a well-quoted record.
 */
export function quoteClosedAcrossLines(raw: string, delimiter: string): number | undefined {
  const body = raw.replace(/(\r\n|\r|\n)$/, '');
  let i = 0;
  while (i <= body.length) {
    if (body[i] !== '"') {
      const next = body.indexOf(delimiter, i);
      if (next < 0) return undefined;
      i = next + delimiter.length;
      continue;
    }
    let j = i + 1;
    for (;;) {
      const quote = body.indexOf('"', j);
      if (quote < 0) return undefined; // open to the end: the parser's own error
      if (body[quote + 1] === '"') {
        j = quote + 2;
        continue;
      }
      const after = body.slice(quote + 1, quote + 1 + delimiter.length);
      if (quote + 1 === body.length || after === delimiter) {
        i = quote + 1 + delimiter.length;
        break;
      }
      // Closed in the wrong place: a fault when the cell ran past a line end first. Otherwise the
      // parser goes on with the cell as plain text (`"Taro" Sato`) to the next separator.
      if (LINE_END_RE.test(body.slice(i, quote))) return body.split(/\r\n|\r|\n/).length;
      const next = body.indexOf(delimiter, quote + 1);
      if (next < 0) return undefined;
      i = next + delimiter.length;
      break;
    }
  }
  return undefined;
}

/**
 * A quoted cell with spaces outside its quotes (`"電話番号", "氏名"`: a space after the comma), which
 * the CSV rules read as text with quotes in it: read as the quoted text it was meant to be, its
 * doubled quotes undone. Used where quotes cannot be meant: header names (`read-list.ts`); a data
 * cell may hold exactly that text, quoted properly, and is left as it is.
 */
export function unwrapSpacedQuotes(cell: string): string {
  const text = cell.trim();
  if (text === cell || text.length < 2 || !text.startsWith('"') || !text.endsWith('"')) return cell;
  const inner = text.slice(1, -1);
  // A lone quote inside means the quotes were not a pair around the cell: left as written.
  if (inner.replace(/""/g, '').includes('"')) return cell;
  return inner.replace(/""/g, '"');
}
