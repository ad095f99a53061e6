/**
 * How a customer's file is encoded, and whether it is text at all. Spreadsheet exports arrive
 * as UTF-8 (with or without Excel's BOM), as Shift_JIS in its Windows form CP932 (Excel's
 * "CSV" on Japanese Windows), and now and then as UTF-16 with a BOM. Detection looks only at
 * the first bytes of the file, so it works on a stream.
 */
import { isUtf8 } from 'node:buffer';
import iconv from 'iconv-lite';

/**
 * The encoding of a file. `ascii` means "not decided yet": nothing but ASCII was seen so far,
 * which UTF-8 and CP932 read alike; the first record with other bytes decides between them.
 */
export type TextEncodingName = 'ascii' | 'utf-8' | 'cp932' | 'utf-16le' | 'utf-16be';

/** How many leading bytes detection looks at. */
export const SNIFF_BYTES = 64 * 1024;

export interface Sniffed {
  readonly encoding: TextEncodingName;
  /** Bytes of byte-order mark at the start of the file (skipped before parsing). */
  readonly bomLength: number;
}

/** Why a file cannot be a CSV, in words an operator understands. */
export interface NotText {
  readonly notText: string;
}

const SIGNATURES: readonly { readonly bytes: readonly number[]; readonly what: string }[] = [
  { bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], what: 'a PNG image' },
  { bytes: [0xff, 0xd8, 0xff], what: 'a JPEG image' },
  { bytes: [0x47, 0x49, 0x46, 0x38], what: 'a GIF image' },
  { bytes: [0x25, 0x50, 0x44, 0x46, 0x2d], what: 'a PDF document' },
  {
    bytes: [0x50, 0x4b, 0x03, 0x04],
    what: 'an Excel workbook (.xlsx) or another zip archive; save it as "CSV UTF-8" first',
  },
  { bytes: [0x50, 0x4b, 0x05, 0x06], what: 'an empty zip archive' },
  {
    bytes: [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1],
    what: 'an Excel 97-2003 workbook (.xls); save it as "CSV UTF-8" first',
  },
  { bytes: [0x1f, 0x8b], what: 'a gzip archive' },
];

/**
 * Decides the encoding of a file from its first bytes (`window`, up to {@link SNIFF_BYTES};
 * `complete` when the window is the whole file), or says why it is not text.
 *
 * A BOM decides outright. Otherwise NUL bytes in every other byte mean UTF-16 without a BOM
 * (see {@link guessUtf16}); UTF-8 against CP932 (Excel's Shift_JIS) is {@link utf8OrCp932}'s
 * call, and pure ASCII leaves the choice open. A file with other NUL bytes or many control
 * characters is not a CSV, whatever its name says.
 */
export function sniffEncoding(window: Uint8Array, complete: boolean): Sniffed | NotText {
  for (const { bytes, what } of SIGNATURES) {
    if (startsWith(window, bytes)) return { notText: `not a CSV file: it is ${what}` };
  }
  if (startsWith(window, [0xff, 0xfe]) || startsWith(window, [0xfe, 0xff])) {
    const encoding = window[0] === 0xff ? 'utf-16le' : 'utf-16be';
    const notText = controlCharacterVerdict(decodeUtf16Window(window, encoding, 2));
    return notText ? { notText } : { encoding, bomLength: 2 };
  }
  const utf16 = guessUtf16(window);
  if (utf16) {
    const notText = controlCharacterVerdict(decodeUtf16Window(window, utf16, 0));
    return notText ? { notText } : { encoding: utf16, bomLength: 0 };
  }
  const bomLength = startsWith(window, [0xef, 0xbb, 0xbf]) ? 3 : 0;
  const body = window.subarray(bomLength);
  const notText = controlByteVerdict(body);
  if (notText) return { notText };
  if (bomLength > 0) return { encoding: 'utf-8', bomLength };
  if (isAscii(body)) return { encoding: 'ascii', bomLength: 0 };
  const checked = complete ? body : body.subarray(0, completeUtf8Length(body));
  return { encoding: utf8OrCp932(checked), bomLength: 0 };
}

/** The text of a UTF-16 window from `from` (past the BOM), without a code unit cut at its end. */
export function decodeUtf16Window(
  window: Uint8Array,
  encoding: 'utf-16le' | 'utf-16be',
  from: number,
): string {
  const end = from + ((window.length - from) & ~1);
  return iconv.decode(Buffer.from(window.subarray(from, end)), encoding);
}

/** Bytes of a file's start that {@link guessUtf16} looks at. */
const UTF16_SNIFF_BYTES = 4096;

/**
 * UTF-16 without a BOM, told by its NUL bytes: every ASCII character (digits, `,` TAB, line
 * breaks, Latin letters) is a NUL and the character, in that order for big-endian and the other
 * for little-endian, so a list of phone numbers has a NUL in every other byte even when its names
 * are Japanese. A binary file has NULs at random, and in pairs (U+0000, which no text has).
 *
 * One byte order is taken when at least 4 code units are ASCII in it (a stray NUL or two in a
 * text file is not UTF-16), and either a quarter of the units are ASCII (over twice as many as
 * in the other order, where 一 U+4E00 and the ideographic space U+3000 look like ASCII), or nine
 * in ten are characters a Japanese list is written in (ASCII, punctuation, kana, kanji,
 * full-width forms), more than in the other order: a list of long Japanese addresses has few
 * ASCII characters. Random bytes fit neither.
 */
export function guessUtf16(window: Uint8Array): 'utf-16le' | 'utf-16be' | undefined {
  const end = Math.min(window.length, UTF16_SNIFF_BYTES) & ~1;
  const units = end / 2;
  const ascii = { le: 0, be: 0 };
  const plausible = { le: 0, be: 0 };
  for (let i = 0; i < end; i += 2) {
    const first = window[i]!;
    const second = window[i + 1]!;
    if (first === 0 && second === 0) return undefined;
    if (second === 0 && isTextAscii(first)) ascii.le++;
    else if (first === 0 && isTextAscii(second)) ascii.be++;
    if (isJapaneseTextHighByte(second)) plausible.le++;
    if (isJapaneseTextHighByte(first)) plausible.be++;
  }
  const fits = (order: 'le' | 'be', other: 'le' | 'be'): boolean =>
    ascii[order] >= 4 &&
    ((ascii[order] >= units / 4 && ascii[order] > ascii[other] * 2) ||
      (plausible[order] >= units * 0.9 && plausible[order] > plausible[other]));
  if (fits('le', 'be')) return 'utf-16le';
  if (fits('be', 'le')) return 'utf-16be';
  return undefined;
}

/** Printable ASCII, TAB, LF or CR: what the ASCII half of a UTF-16 text's code units holds. */
function isTextAscii(byte: number): boolean {
  return (byte >= 0x20 && byte < 0x7f) || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/**
 * The high byte of a character of a Japanese list: ASCII and Latin-1 (00), punctuation, arrows,
 * shapes (20-27), CJK symbols, kana, ㈱ ㎡ (30-33), kanji (4E-9F), full-width forms and half-width
 * katakana (FF).
 */
function isJapaneseTextHighByte(byte: number): boolean {
  return (
    byte === 0 ||
    (byte >= 0x20 && byte <= 0x27) ||
    (byte >= 0x30 && byte <= 0x33) ||
    (byte >= 0x4e && byte <= 0x9f) ||
    byte === 0xff
  );
}

/**
 * UTF-8 or CP932, for bytes that are not all ASCII (and not cut inside a UTF-8 character at the
 * end). Bytes that are not valid UTF-8 are CP932, unless they are mostly UTF-8: at least four
 * valid multi-byte characters and eight times as many as broken sequences (a field a legacy export cut
 * inside a character, two files joined). CP932's Japanese is almost never valid UTF-8 (its lead
 * bytes 0x81-0x9F are UTF-8 continuation bytes), so one bad byte no longer turns a whole UTF-8
 * file into CP932 mojibake; the broken characters decode as U+FFFD and their rows are rejected
 * (`bad-encoding`). Valid UTF-8 is UTF-8, except when it reads
 * better as CP932's half-width katakana: those are the single bytes 0xA1-0xDF, and a run like
 * `ﾐｶ` (D0 B6) or `ﾃｽﾄｰ` (C3 BD C4 B0) is also valid UTF-8 (`ж`, `ýİ`). Such a file is CP932
 * when every non-ASCII byte is a half-width katakana byte, and the UTF-8 reading gives only
 * letters of Latin-1, Greek, Cyrillic... (implausible in a Japanese list) that never touch an
 * ASCII letter (accented letters sit inside Latin words: José, Müller, Zoë); symbols such as
 * `¥` `°` `©` keep the file UTF-8.
 */
export function utf8OrCp932(bytes: Uint8Array): 'utf-8' | 'cp932' {
  if (!isUtf8(bytes)) {
    const { valid, broken } = utf8Sequences(bytes);
    // Measured on 2,000,000 random CP932 strings of 1-60 characters (every JIS X 0208 character
    // alike, rare kanji included): one reached this; Japanese text, whose lead bytes are mostly
    // 0x82-0x9F, does not.
    return valid >= 4 && valid >= 8 * broken ? 'utf-8' : 'cp932';
  }
  return readsAsHalfWidthKatakana(bytes) ? 'cp932' : 'utf-8';
}

/** Multi-byte UTF-8 characters well formed (`valid`) and byte runs that are not (`broken`). */
function utf8Sequences(bytes: Uint8Array): { valid: number; broken: number } {
  let valid = 0;
  let broken = 0;
  let wasBroken = false;
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      wasBroken = false;
      continue;
    }
    const length =
      lead >= 0xc2 && lead <= 0xdf
        ? 2
        : lead >= 0xe0 && lead <= 0xef
          ? 3
          : lead >= 0xf0 && lead <= 0xf4
            ? 4
            : 0;
    // C2 80-9F is a C1 control: no text has one, CP932 text often does (a kana's lead, then 0x80-0x9F).
    const control = lead === 0xc2 && (bytes[i + 1] ?? 0) < 0xa0;
    if (!control && length > 0 && i + length <= bytes.length && isUtf8(bytes.subarray(i, i + length))) {
      valid++;
      i += length;
      wasBroken = false;
      continue;
    }
    // A run of bad bytes is one break (a character cut in two leaves one or two stray bytes).
    if (!wasBroken) broken++;
    wasBroken = true;
    i++;
  }
  return { valid, broken };
}

function readsAsHalfWidthKatakana(bytes: Uint8Array): boolean {
  let found = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte < 0x80) continue;
    if (byte < 0xa1 || byte > 0xdf) return false;
    if (isAsciiLetter(bytes[i - 1]) || isAsciiLetter(bytes[i + 1])) return false;
    found = true;
  }
  return found && LETTERS_ONLY_RE.test(Buffer.from(bytes).toString('utf8'));
}

const LETTERS_ONLY_RE = /^[\x00-\x7f\p{L}\p{M}]*$/u;

function isAsciiLetter(byte: number | undefined): boolean {
  return byte !== undefined && ((byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a));
}

/**
 * Turns the raw bytes of a record's cells into text. CSV parsing runs on bytes (read as latin1,
 * one character per byte) because the structural characters `,` `"` CR LF are single bytes that
 * never occur inside a multi-byte character in UTF-8 or CP932: so record boundaries are exact
 * byte offsets in the original file, which is what lets a later run resume by byte range.
 */
export interface CellDecoder {
  /** The encoding decided so far (still `ascii` until a non-ASCII record is seen). */
  readonly encoding: TextEncodingName;
  /** Decodes one record's cells, each given as a latin1 string of its raw bytes. */
  decodeRecord(rawCells: readonly string[]): string[];
}

/**
 * A decoder for a file in `encoding`. UTF-16 files are transcoded to UTF-8 before parsing, so
 * their cells are decoded as UTF-8 while {@link CellDecoder.encoding} still names the file's own.
 */
export function makeCellDecoder(encoding: TextEncodingName): CellDecoder {
  let current = encoding;
  return {
    get encoding() {
      return current;
    },
    decodeRecord(rawCells) {
      if (current === 'ascii') {
        const nonAscii = rawCells.filter((cell) => !ASCII_RE.test(cell));
        if (nonAscii.length === 0) return [...rawCells];
        current = utf8OrCp932(Buffer.from(nonAscii.join(','), 'latin1'));
      }
      const cp932 = current === 'cp932';
      return rawCells.map((cell) => {
        if (ASCII_RE.test(cell)) return cell;
        const bytes = Buffer.from(cell, 'latin1');
        return cp932 ? iconv.decode(bytes, 'cp932') : bytes.toString('utf8');
      });
    },
  };
}

const ASCII_RE = /^[\x00-\x7f]*$/;

function startsWith(bytes: Uint8Array, prefix: readonly number[]): boolean {
  if (bytes.length < prefix.length) return false;
  return prefix.every((byte, i) => bytes[i] === byte);
}

function isAscii(bytes: Uint8Array): boolean {
  for (const byte of bytes) if (byte > 0x7f) return false;
  return true;
}

/** Bytes that no text file has: NUL, C0 controls other than TAB/LF/VT/FF/CR, DEL. */
function isControlByte(byte: number): boolean {
  return (byte < 0x20 && (byte < 0x09 || byte > 0x0d)) || byte === 0x7f;
}

function controlByteVerdict(bytes: Uint8Array): string | undefined {
  let controls = 0;
  for (const byte of bytes) {
    if (byte === 0) return 'not a CSV file: it contains NUL bytes (a binary file)';
    if (isControlByte(byte)) controls++;
  }
  return tooManyControls(controls, bytes.length);
}

function controlCharacterVerdict(text: string): string | undefined {
  let controls = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0) return 'not a CSV file: it contains NUL characters (a binary file)';
    if (isControlByte(code)) controls++;
  }
  return tooManyControls(controls, text.length);
}

// A stray control character or two happens in real exports; a binary file has them everywhere.
function tooManyControls(controls: number, total: number): string | undefined {
  return controls > 8 && controls > total / 100
    ? 'not a CSV file: it is full of control characters (a binary file)'
    : undefined;
}

/** Length of `bytes` without a UTF-8 sequence cut off at the end of the window. */
function completeUtf8Length(bytes: Uint8Array): number {
  const end = bytes.length;
  for (let back = 1; back <= 3 && back <= end; back++) {
    const byte = bytes[end - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: keep looking for the lead
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needed > back ? end - back : end;
  }
  return end;
}
