/**
 * Each committed fixture (see scripts/make-csv-fixtures.ts) with the exact tasks, report and
 * counts it must produce, as one table of cases. Fixtures are fed in 7-byte chunks, so chunk
 * edges fall inside multi-byte characters, CRLF pairs and quoted cells.
 */
import { createReadStream, readdirSync } from 'node:fs';
import { join } from 'node:path';
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { inMemoryDuplicateFilter } from '#shared/csv/duplicates.ts';
import type { TextEncodingName } from '#shared/csv/encoding.ts';
import {
  type IngestCounts,
  type IngestFailureCode,
  type IngestResult,
  ingestRows,
  type TaskDraft,
} from '#shared/csv/read-list.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { FIXTURES, fixture, ingestBytes, type RunOptions } from './support.ts';

const phone = '電話番号';
const zero: IngestCounts = { dataRows: 0, accepted: 0, rejected: 0, skipped: 0 };

/** One fixture file and everything ingest must make of it. */
interface FixtureCase {
  /** The file under test/fixtures/csv. */
  readonly file: string;
  /** What the file is, and what ingest does with it: the test's name. */
  readonly does: string;
  /** The job's side (default: a `call` job, region JP, nobody opted out). */
  readonly options?: RunOptions;
  readonly result: IngestResult;
  /** The accepted rows, in order. */
  readonly tasks: readonly TaskDraft[];
  /** The rejected and skipped rows with their reasons, in order. */
  readonly entries: readonly ReportEntry[];
}

const completed = (encoding: TextEncodingName, counts: IngestCounts): IngestResult => ({
  status: 'completed',
  encoding,
  counts,
});
const failed = (code: IngestFailureCode, reason: string): IngestResult => ({
  status: 'failed',
  counts: zero,
  failure: { code, reason },
});
const invalidPhone = (row: number, column: string, value: string): ReportEntry => ({
  row,
  outcome: 'rejected',
  code: 'invalid-phone',
  reason: 'invalid phone number',
  column,
  value,
});
const duplicateOf = (first: number, row: number, column: string, value: string): ReportEntry => ({
  row,
  outcome: 'skipped',
  code: 'duplicate',
  reason: `duplicate of row ${first}`,
  column,
  value,
});
const ragged = (row: number, expected: number, got: number): ReportEntry => ({
  row,
  outcome: 'rejected',
  code: 'ragged-row',
  reason: `expected ${expected} columns, got ${got}`,
});
const phoneEmpty = (row: number, column: string): ReportEntry => ({
  row,
  outcome: 'rejected',
  code: 'phone-empty',
  reason: 'phone is empty',
  column,
});
const noPhoneColumn = (found: string) =>
  failed(
    'no-recipient-column',
    `no phone number column (name it 電話番号, 携帯電話番号, TEL or phone): ${found}`,
  );
const invalidLineUserId = (row: number, value: string): ReportEntry => ({
  row,
  outcome: 'rejected',
  code: 'invalid-line-user-id',
  reason: 'invalid LINE user id (expected U and 32 hex digits)',
  column: 'userId',
  value,
});

const CASES: readonly FixtureCase[] = [
  // Spreadsheet exports that read, row by row.
  {
    file: 'sjis-japanese-headers.csv',
    does: 'reads Excel Shift_JIS (CP932) with Japanese headers, full-width numbers, a duplicate and an opt-out',
    options: { optedOut: ['+818099990000'] },
    result: completed('cp932', { dataRows: 8, accepted: 4, rejected: 2, skipped: 2 }),
    tasks: [
      {
        row: 2,
        recipient: '+819012345678',
        name: '山田 太郎',
        variables: { 会社名: '山田商店', メモ: '初回のお客様' },
      },
      {
        row: 3,
        recipient: '+818011112222',
        name: '鈴木 花子',
        variables: { 会社名: '㈱ＡＢＣ', メモ: '全角の番号①' },
      },
      {
        row: 4,
        recipient: '+81312345678',
        name: '佐藤 一郎',
        variables: { 会社名: '佐藤工業', メモ: '固定電話' },
      },
      {
        row: 5,
        recipient: '+819012340000',
        name: '高橋 次郎',
        variables: { 会社名: '', メモ: 'Excelで先頭の0が消えた番号' },
      },
    ],
    entries: [
      duplicateOf(2, 6, phone, '090-1234-5678'),
      {
        row: 7,
        outcome: 'skipped',
        code: 'opted-out',
        reason: 'opted out',
        column: phone,
        value: '080-9999-0000',
      },
      invalidPhone(8, phone, '090-123-456'),
      phoneEmpty(9, phone),
    ],
  },
  {
    file: 'utf8-bom.csv',
    does: 'reads Excel "CSV UTF-8" with its BOM and English headers',
    result: completed('utf-8', { dataRows: 5, accepted: 4, rejected: 1, skipped: 0 }),
    tasks: [
      { row: 2, recipient: '+819022223333', name: 'Alice', variables: { Plan: 'gold' } },
      { row: 3, recipient: '+819022224444', name: 'Bob', variables: { Plan: 'silver' } },
      { row: 4, recipient: '+14155552671', name: 'Carol', variables: { Plan: 'gold' } },
      { row: 6, recipient: '+819022225555', name: '山本 五郎', variables: { Plan: 'ゴールド' } },
    ],
    entries: [invalidPhone(5, 'Phone Number', 'not a number')],
  },
  {
    file: 'crlf-quoted.csv',
    does: 'keeps commas, doubled quotes and line breaks inside quoted cells, one spreadsheet row per record',
    result: completed('ascii', { dataRows: 7, accepted: 5, rejected: 1, skipped: 1 }),
    tasks: [
      {
        row: 2,
        recipient: '+819033330001',
        name: 'Tanaka, Ichiro',
        variables: { address: '1-2-3 Shibuya, Tokyo', note: 'says "hello"' },
      },
      {
        row: 3,
        recipient: '+819033330002',
        name: 'Sato',
        variables: { address: 'Line one\r\nLine two\r\nLine three', note: 'multi-line address' },
      },
      {
        row: 4,
        recipient: '+819033330003',
        name: 'Ito',
        variables: { address: '=HYPERLINK("http://example.com")', note: 'looks like a formula' },
      },
      { row: 7, recipient: '+819033330005', name: 'Endo', variables: { address: '', note: '' } },
      {
        row: 8,
        recipient: '+819033330006',
        name: 'Last',
        variables: { address: 'no line break, at the end', note: 'fin' },
      },
    ],
    entries: [duplicateOf(4, 5, 'phone', '090-3333-0003'), ragged(6, 4, 5)],
  },
  {
    file: 'blank-lines.csv',
    does: 'skips blank lines and empty ",," rows silently, still counting them as spreadsheet rows',
    result: completed('utf-8', { dataRows: 4, accepted: 4, rejected: 0, skipped: 0 }),
    tasks: [
      { row: 3, recipient: '+819044440001', name: '一', variables: {} },
      { row: 6, recipient: '+819044440002', name: '二', variables: {} },
      { row: 9, recipient: '+819044440003', name: '三\n\n(blank lines inside quotes)', variables: {} },
      { row: 11, recipient: '+819044440004', name: '四', variables: {} },
    ],
    entries: [],
  },
  {
    file: 'invalid-and-duplicates.csv',
    does: 'rejects each kind of bad number with its reason and folds every spelling of one number into duplicates',
    result: completed('utf-8', { dataRows: 13, accepted: 2, rejected: 8, skipped: 3 }),
    tasks: [
      { row: 2, recipient: '+819055550001', name: '正しい', variables: {} },
      { row: 13, recipient: '+819055550003', name: '小数点つき', variables: {} },
    ],
    entries: [
      invalidPhone(3, '携帯電話番号', 'abc'),
      invalidPhone(4, '携帯電話番号', '090-5555-001'),
      {
        row: 5,
        outcome: 'rejected',
        code: 'phone-scientific-notation',
        reason:
          'invalid phone number: Excel saved it in scientific notation and its digits are lost; format the column as text',
        column: '携帯電話番号',
        value: '9.05555E+09',
      },
      phoneEmpty(6, '携帯電話番号'),
      invalidPhone(7, '携帯電話番号', '１２３４'),
      invalidPhone(8, '携帯電話番号', '090-5555-0001 内線12'),
      duplicateOf(2, 9, '携帯電話番号', '090-5555-0001'),
      duplicateOf(2, 10, '携帯電話番号', '+81 90 5555 0001'),
      duplicateOf(2, 11, '携帯電話番号', '819055550001'),
      ragged(12, 2, 1),
      ragged(14, 2, 3),
    ],
  },
  {
    file: 'line-user-ids.csv',
    does: 'reads a message job list of LINE user ids',
    options: { channel: 'line', defaultRegion: undefined },
    result: completed('utf-8', { dataRows: 6, accepted: 2, rejected: 3, skipped: 1 }),
    tasks: [
      {
        row: 2,
        recipient: 'U4af4980629a0b2c7b4c8e2c1f1d0a9e3',
        name: '佐藤',
        variables: { coupon: 'SPRING10' },
      },
      { row: 6, recipient: 'Ub1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6', name: '鈴木', variables: { coupon: '=1+1' } },
    ],
    entries: [
      invalidLineUserId(3, 'U4AF4980629A0B2C7B4C8E2C1F1D0A9E3'),
      invalidLineUserId(4, 'user123'),
      {
        row: 5,
        outcome: 'rejected',
        code: 'line-user-id-empty',
        reason: 'LINE user id is empty',
        column: 'userId',
      },
      duplicateOf(2, 7, 'userId', 'U4af4980629a0b2c7b4c8e2c1f1d0a9e3'),
    ],
  },
  {
    file: 'unclosed-quote.csv',
    does: 'rejects the row whose quote never closes, keeping the rows before it',
    result: completed('ascii', { dataRows: 2, accepted: 1, rejected: 1, skipped: 0 }),
    tasks: [{ row: 2, recipient: '+819066660001', name: 'One', variables: { note: 'ok' } }],
    entries: [
      {
        row: 3,
        outcome: 'rejected',
        code: 'unclosed-quote',
        reason: 'a quoted cell is never closed: the row runs to the end of the file',
      },
    ],
  },
  {
    file: 'row-too-long.csv',
    does: 'rejects a row over the 8 KiB row limit and reads on',
    result: completed('utf-8', { dataRows: 3, accepted: 2, rejected: 1, skipped: 0 }),
    tasks: [
      { row: 2, recipient: '+819077770001', name: 'One', variables: { note: 'short' } },
      { row: 4, recipient: '+819077770003', name: 'Three', variables: { note: 'ok' } },
    ],
    entries: [
      {
        row: 3,
        outcome: 'rejected',
        code: 'row-too-long',
        reason: 'row too long (9019 bytes; the limit is 8192)',
      },
    ],
  },
  {
    file: 'utf16le-bom.csv',
    does: 'reads UTF-16LE with a BOM',
    result: completed('utf-16le', { dataRows: 4, accepted: 3, rejected: 1, skipped: 0 }),
    tasks: [
      { row: 2, recipient: '+819088880001', name: '一郎', variables: {} },
      { row: 3, recipient: '+819088880002', name: '二郎', variables: {} },
      { row: 5, recipient: '+819088880004', name: '四郎', variables: {} },
    ],
    entries: [invalidPhone(4, phone, 'bad')],
  },

  // Tab- and semicolon-separated exports, wide headers, other encodings.
  {
    file: 'utf16le-bom-tab.csv',
    does: 'reads Excel "Unicode text" (UTF-16LE with a BOM, tab-separated), commas kept inside cells',
    result: completed('utf-16le', { dataRows: 4, accepted: 2, rejected: 1, skipped: 1 }),
    tasks: [
      {
        row: 2,
        recipient: '+819012120001',
        name: '山田 太郎',
        variables: { 住所: '東京都千代田区1-1, 2F', メモ: '初回' },
      },
      {
        row: 3,
        recipient: '+819012120002',
        name: '鈴木\t花子',
        variables: { 住所: '大阪府, 北区', メモ: '改行\r\nあり' },
      },
    ],
    entries: [invalidPhone(4, phone, 'abc'), duplicateOf(2, 5, phone, '090-1212-0001')],
  },
  {
    file: 'tab-separated.csv',
    does: 'reads a .tsv saved as .csv (UTF-8, tab-separated)',
    result: completed('utf-8', { dataRows: 2, accepted: 2, rejected: 0, skipped: 0 }),
    tasks: [
      { row: 2, recipient: '+819013130001', name: 'Alice', variables: { company: 'Acme, Inc.' } },
      { row: 3, recipient: '+819013130002', name: '佐藤', variables: { company: 'Quoted\tTab' } },
    ],
    entries: [],
  },
  {
    file: 'semicolon-excel-eu.csv',
    does: 'reads European Excel (semicolons), even with more commas than semicolons in its header',
    result: completed('utf-8', { dataRows: 4, accepted: 2, rejected: 1, skipped: 1 }),
    tasks: [
      {
        row: 2,
        recipient: '+819014140001',
        variables: { 'Name, Vorname': 'Müller, Anna', 'Betrag, EUR, brutto': '12,50' },
      },
      {
        row: 3,
        recipient: '+819014140002',
        variables: { 'Name, Vorname': 'Schmidt; Hans', 'Betrag, EUR, brutto': '7,00' },
      },
    ],
    entries: [duplicateOf(2, 4, 'Phone', '090-1414-0001'), invalidPhone(5, 'Phone', 'keine Nummer')],
  },
  {
    file: 'trailing-empty-header.csv',
    does: 'ignores empty cells at the end of the header: rows that end early or late by empty cells are not ragged',
    result: completed('utf-8', { dataRows: 5, accepted: 3, rejected: 2, skipped: 0 }),
    tasks: [
      { row: 2, recipient: '+819015150001', name: '一', variables: { メモ: 'a' } },
      { row: 3, recipient: '+819015150002', name: '二', variables: { メモ: 'b' } },
      { row: 4, recipient: '+819015150003', name: '三', variables: { メモ: 'c' } },
    ],
    // A named column is missing, and a value sits under no header: these stay ragged.
    entries: [ragged(5, 3, 2), ragged(6, 3, 5)],
  },
  ...(
    [
      ['utf16le-no-bom.csv', 'utf-16le', 'UTF-16LE'],
      ['utf16be-no-bom.csv', 'utf-16be', 'UTF-16BE'],
    ] as const
  ).map(
    ([file, encoding, name]): FixtureCase => ({
      file,
      does: `reads ${name} without a BOM instead of refusing it as binary`,
      result: completed(encoding, { dataRows: 3, accepted: 2, rejected: 1, skipped: 0 }),
      tasks: [
        { row: 2, recipient: '+819016160001', name: '一郎', variables: {} },
        { row: 3, recipient: '+819016160002', name: '二郎', variables: {} },
      ],
      entries: [invalidPhone(4, phone, 'bad')],
    }),
  ),
  {
    file: 'sjis-halfwidth-katakana.csv',
    does: 'reads Shift_JIS whose only non-ASCII is half-width katakana that is also valid UTF-8',
    result: completed('cp932', { dataRows: 3, accepted: 3, rejected: 0, skipped: 0 }),
    tasks: [
      { row: 2, recipient: '+819017170001', name: 'ﾐｶ', variables: { kana: 'ﾕｷ' } },
      { row: 3, recipient: '+819017170002', name: 'ﾅｵ', variables: { kana: 'ﾃｽﾄｰ' } },
      { row: 4, recipient: '+819017170003', name: 'ﾃｽﾄｰ', variables: { kana: 'ﾐｶ' } },
    ],
    entries: [],
  },

  // Files that fail the whole job with one reason, emitting nothing.
  ...(
    [
      ['binary-png.csv', 'not a CSV file: it is a PNG image'],
      [
        'binary-xlsx.csv',
        'not a CSV file: it is an Excel workbook (.xlsx) or another zip archive; save it as "CSV UTF-8" first',
      ],
      ['binary-random.csv', 'not a CSV file: it contains NUL bytes (a binary file)'],
    ] as const
  ).map(
    ([file, reason]): FixtureCase => ({
      file,
      does: 'is refused as not a CSV, with nothing emitted',
      result: failed('not-csv', reason),
      tasks: [],
      entries: [],
    }),
  ),
  {
    file: 'header-only.csv',
    does: 'a header-only file has no data rows',
    result: failed('no-data-rows', 'the file has a header row but no data rows'),
    tasks: [],
    entries: [],
  },
  {
    file: 'no-phone-column.csv',
    does: 'a list without a phone column names the headers it found',
    result: noPhoneColumn('the header row has 氏名, 住所, メモ'),
    tasks: [],
    entries: [],
  },
  {
    file: 'no-header.csv',
    does: 'a list without a header row says the first row looks like data',
    result: noPhoneColumn(
      'the header row has 090-1234-5678, 山田; the first row looks like data: the file needs a header row',
    ),
    tasks: [],
    entries: [],
  },
  {
    file: 'utf8-bom.csv',
    does: 'a message job on a phone list says it needs a LINE user id column',
    options: { channel: 'line' },
    result: failed(
      'no-recipient-column',
      'no LINE user id column (name it userId or line_user_id): the header row has Phone Number, Name, Plan',
    ),
    tasks: [],
    entries: [],
  },
];

describe('fixtures: the report each customer file produces', () => {
  it.each(CASES)('$file: $does', async ({ file, options, result, tasks, entries }) => {
    const run = await ingestBytes(fixture(file), options);
    expect(run.result).toEqual(result);
    expect(run.tasks).toEqual(tasks);
    expect(run.entries).toEqual(entries);
  });

  it('has a case for every committed fixture', () => {
    const files = readdirSync(FIXTURES).filter((name) => name.endsWith('.csv'));
    expect(new Set(CASES.map((c) => c.file))).toEqual(new Set(files));
  });
});

describe('lists that fail the whole job with one reason', () => {
  it.each([
    [
      'tab-separated',
      Buffer.from('email\tname\r\na@example.com\tA\r\n'),
      'the header row has email, name (read as tab-separated)',
    ],
    [
      'semicolon-separated Shift_JIS',
      iconv.encode('氏名;住所\r\n山田;東京\r\n', 'cp932'),
      'the header row has 氏名, 住所 (read as semicolon-separated)',
    ],
    [
      'UTF-16LE tab-separated',
      Buffer.from('\ufeff氏名\t住所\r\n山田\t東京\r\n', 'utf16le'),
      'the header row has 氏名, 住所 (read as tab-separated)',
    ],
    [
      'comma-separated with semicolons in the header',
      Buffer.from('email,name;kana\na@example.com,A;a\n'),
      'the header row has email, name;kana (read as comma-separated; it also has semicolons)',
    ],
    [
      'tab-separated without a header row',
      Buffer.from('090-1234-5678\t山田\n080-1111-2222\t鈴木\n'),
      'the header row has 090-1234-5678, 山田 (read as tab-separated); the first row looks like data: the file needs a header row',
    ],
  ])('a %s list without a phone column says how its header was split', async (_, bytes, found) => {
    const { result } = await ingestBytes(bytes);
    expect(result).toEqual(noPhoneColumn(found));
  });

  it('a list where no row is usable fails, with the full report still emitted', async () => {
    const csv = Buffer.from('電話番号,氏名\n090-1234-5678,A\nabc,B\n090-1234-5678,C\n');
    const { result, tasks, entries } = await ingestBytes(csv, { optedOut: ['+819012345678'] });
    expect(result).toEqual({
      status: 'failed',
      counts: { dataRows: 3, accepted: 0, rejected: 1, skipped: 2 },
      failure: {
        code: 'no-usable-rows',
        reason: 'none of the 3 data rows can be used: 1 rejected, 2 skipped',
      },
    });
    expect(tasks).toEqual([]);
    expect(entries.map((entry) => [entry.row, entry.reason])).toEqual([
      [2, 'opted out'],
      [3, 'invalid phone number'],
      [4, 'opted out'],
    ]);
  });

  it('an empty file and a file of blank lines fail as empty', async () => {
    expect((await ingestBytes(Buffer.alloc(0))).result).toEqual(failed('empty-file', 'the file is empty'));
    expect((await ingestBytes(Buffer.from('\r\n\r\n,,\r\n'))).result).toEqual(
      failed('empty-file', 'the file has only blank lines'),
    );
  });
});

describe('fixtures: chunking does not change the outcome', () => {
  it.each([1, 2, 3, 64 * 1024])('Shift_JIS fixture in %i-byte chunks', async (chunkSize) => {
    const reference = await ingestBytes(fixture('sjis-japanese-headers.csv'), {
      optedOut: ['+818099990000'],
    });
    const run = await ingestBytes(fixture('sjis-japanese-headers.csv'), {
      optedOut: ['+818099990000'],
      chunkSize,
    });
    expect(run).toEqual(reference);
  });

  it('reads a file stream as S3 or fs would hand it over', async () => {
    const tasks: TaskDraft[] = [];
    const result = await ingestRows({
      source: createReadStream(join(FIXTURES, 'crlf-quoted.csv'), { highWaterMark: 5 }),
      channel: 'call',
      defaultRegion: 'JP',
      isOptedOut: async () => new Set(),
      duplicates: inMemoryDuplicateFilter(),
      onBatch: async (page) => {
        tasks.push(...page);
      },
      onReport: async () => {},
    });
    expect(result.counts).toEqual({ dataRows: 7, accepted: 5, rejected: 1, skipped: 1 });
    expect(tasks.map((task) => task.row)).toEqual([2, 3, 4, 7, 8]);
  });
});
