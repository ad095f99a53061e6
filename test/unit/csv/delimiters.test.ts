/**
 * The cell separator: detected from the header line (comma, tab or semicolon), in every encoding
 * the ingest reads, and kept across a paused ingest's runs.
 */
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { findHeaderLine, rankDelimiters, sniffDelimiter } from '#shared/csv/delimiter.ts';
import { ingestBytes } from './support.ts';

describe('sniffDelimiter', () => {
  it.each([
    ['phone,name,memo\n090,A,B\n', ','],
    ['phone\tname\tmemo\n090\tA\tB\n', '\t'],
    ['phone;name;memo\r\n090;A;B\r\n', ';'],
    ['phone\n090\n', ','], // one column: nothing to split
    ['phone\tname, kana\tmemo\n', '\t'], // a comma inside a tab-separated cell
    ['phone;"name; kana";memo, notes\n', ';'],
  ])('%j is %j-separated', (text, delimiter) => {
    expect(sniffDelimiter(text)).toBe(delimiter);
  });

  it('is not confused by separators inside quoted header cells, doubled quotes, or line breaks in them', () => {
    expect(sniffDelimiter('"a,b,c,d"\tphone\t"x;y;z"\n')).toBe('\t');
    expect(sniffDelimiter('"say ""a,b,c"""\tphone\n')).toBe('\t');
    expect(sniffDelimiter('"multi\nline, with, commas";phone;name\n')).toBe(';');
  });

  it('decides on the header row, not on blank lines or separator-only rows above it', () => {
    expect(findHeaderLine('\r\n,,,\r\n;;\r\n  \t \r\n""\r\nphone\tname\r\n090\tA\r\n')).toEqual({
      text: 'phone\tname',
      counts: { ',': 0, '\t': 1, ';': 0 },
    });
    expect(sniffDelimiter('\n\n,,,,,\nphone;name\n')).toBe(';');
    expect(findHeaderLine('\n , \n')).toBeUndefined();
  });

  it('takes a header cut by the end of the window as it is', () => {
    expect(findHeaderLine('phone\tna')).toEqual({ text: 'phone\tna', counts: { ',': 0, '\t': 1, ';': 0 } });
  });

  it('ranks the separators by count, ties going to comma, then tab, then semicolon', () => {
    expect(rankDelimiters({ ',': 1, '\t': 1, ';': 1 })).toEqual([',', '\t', ';']);
    expect(rankDelimiters({ ',': 1, '\t': 0, ';': 3 })).toEqual([';', ',']);
    expect(rankDelimiters({ ',': 0, '\t': 0, ';': 0 })).toEqual([',']);
  });

  it('takes a less frequent separator when only its split gives an acceptable header', () => {
    const acceptsHeader = (cells: readonly string[]) => cells.includes('Phone');
    const header = 'Phone;Name, Vorname;Betrag, EUR, brutto\n';
    expect(sniffDelimiter(header)).toBe(',');
    expect(sniffDelimiter(header, { acceptsHeader })).toBe(';');
    // Neither split acceptable: the most frequent separator.
    expect(sniffDelimiter('Email;Name, Vorname, Titel\n', { acceptsHeader })).toBe(',');
  });
});

describe('the same list in every encoding and with every separator', () => {
  const rows = [
    ['電話番号', 'お名前', 'メモ'],
    ['090-2020-0001', '山田 太郎', 'カンマ, セミコロン; タブ\tあり'],
    ['090-2020-0002', '"引用"', '改行\r\nあり'],
    ['abc', '不正', ''],
    ['090-2020-0001', '重複', ''],
    ['', '', ''],
    ['090-2020-0003', 'ﾊﾝｶｸ', ''],
  ];
  const render = (delimiter: string, newline: string) =>
    rows
      .map((cells) =>
        cells
          .map((cell) => (/[",;\t\r\n]/.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell))
          .join(delimiter),
      )
      .join(newline) + newline;
  const encodings: [string, string, (text: string) => Buffer][] = [
    ['UTF-8', 'utf-8', (text) => Buffer.from(text)],
    ['UTF-8 with a BOM', 'utf-8', (text) => Buffer.from(`\ufeff${text}`)],
    ['CP932', 'cp932', (text) => iconv.encode(text, 'cp932')],
    ['UTF-16LE with a BOM', 'utf-16le', (text) => Buffer.from(`\ufeff${text}`, 'utf16le')],
    ['UTF-16BE with a BOM', 'utf-16be', (text) => Buffer.from(`\ufeff${text}`, 'utf16le').swap16()],
    ['UTF-16LE', 'utf-16le', (text) => Buffer.from(text, 'utf16le')],
    ['UTF-16BE', 'utf-16be', (text) => Buffer.from(text, 'utf16le').swap16()],
  ];
  const cases = encodings.flatMap(([label, encoding, encode], i) =>
    [',', '\t', ';'].map((delimiter) => ({
      name: `${label}, ${JSON.stringify(delimiter)}-separated`,
      encoding,
      bytes: encode(render(delimiter, i % 2 === 0 ? '\r\n' : '\n')),
    })),
  );

  it.each(cases)('$name', async ({ encoding, bytes }) => {
    const { result, tasks, entries } = await ingestBytes(bytes);
    expect(result).toEqual({
      status: 'completed',
      encoding,
      counts: { dataRows: 5, accepted: 3, rejected: 1, skipped: 1 },
    });
    expect(tasks).toEqual([
      {
        row: 2,
        recipient: '+819020200001',
        name: '山田 太郎',
        variables: { メモ: 'カンマ, セミコロン; タブ\tあり' },
      },
      { row: 3, recipient: '+819020200002', name: '"引用"', variables: { メモ: '改行\r\nあり' } },
      { row: 7, recipient: '+819020200003', name: 'ﾊﾝｶｸ', variables: { メモ: '' } },
    ]);
    expect(entries.map((entry) => [entry.row, entry.code, entry.reason])).toEqual([
      [4, 'invalid-phone', 'invalid phone number'],
      [5, 'duplicate', 'duplicate of row 2'],
    ]);
  });
});
