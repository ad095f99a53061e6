/**
 * Each committed fixture (see scripts/make-csv-fixtures.ts) with the exact tasks, report and
 * counts it must produce. Fixtures are fed in 7-byte chunks, so chunk edges fall inside
 * multi-byte characters, CRLF pairs and quoted cells.
 */
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { inMemoryDuplicateFilter } from '#shared/csv/duplicates.ts';
import { ingestRows, type TaskDraft } from '#shared/csv/ingest.ts';
import { FIXTURES, fixture, ingestBytes } from './support.ts';

const phone = '電話番号';

describe('fixtures: the report each customer file produces', () => {
  it('reads Excel Shift_JIS (CP932) with Japanese headers, full-width numbers, a duplicate and an opt-out', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('sjis-japanese-headers.csv'), {
      optedOut: ['+818099990000'],
    });
    expect(result).toEqual({
      status: 'completed',
      encoding: 'cp932',
      counts: { dataRows: 8, accepted: 4, rejected: 2, skipped: 2 },
    });
    expect(tasks).toEqual([
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
    ]);
    expect(entries).toEqual([
      {
        row: 6,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 2',
        column: phone,
        value: '090-1234-5678',
      },
      {
        row: 7,
        outcome: 'skipped',
        code: 'opted-out',
        reason: 'opted out',
        column: phone,
        value: '080-9999-0000',
      },
      {
        row: 8,
        outcome: 'rejected',
        code: 'invalid-phone',
        reason: 'invalid phone number',
        column: phone,
        value: '090-123-456',
      },
      { row: 9, outcome: 'rejected', code: 'phone-empty', reason: 'phone is empty', column: phone },
    ]);
  });

  it('reads Excel "CSV UTF-8" with its BOM and English headers', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('utf8-bom.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 5, accepted: 4, rejected: 1, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819022223333', name: 'Alice', variables: { Plan: 'gold' } },
      { row: 3, recipient: '+819022224444', name: 'Bob', variables: { Plan: 'silver' } },
      { row: 4, recipient: '+14155552671', name: 'Carol', variables: { Plan: 'gold' } },
      { row: 6, recipient: '+819022225555', name: '山本 五郎', variables: { Plan: 'ゴールド' } },
    ]);
    expect(entries).toEqual([
      {
        row: 5,
        outcome: 'rejected',
        code: 'invalid-phone',
        reason: 'invalid phone number',
        column: 'Phone Number',
        value: 'not a number',
      },
    ]);
  });

  it('keeps commas, doubled quotes and line breaks inside quoted cells, one spreadsheet row per record', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('crlf-quoted.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'ascii',
      counts: { dataRows: 7, accepted: 5, rejected: 1, skipped: 1 },
    });
    expect(tasks).toEqual([
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
    ]);
    expect(entries).toEqual([
      {
        row: 5,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 4',
        column: 'phone',
        value: '090-3333-0003',
      },
      { row: 6, outcome: 'rejected', code: 'ragged-row', reason: 'expected 4 columns, got 5' },
    ]);
  });

  it('skips blank lines and empty ",," rows silently, still counting them as spreadsheet rows', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('blank-lines.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 4, accepted: 4, rejected: 0, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 3, recipient: '+819044440001', name: '一', variables: {} },
      { row: 6, recipient: '+819044440002', name: '二', variables: {} },
      { row: 9, recipient: '+819044440003', name: '三\n\n(blank lines inside quotes)', variables: {} },
      { row: 11, recipient: '+819044440004', name: '四', variables: {} },
    ]);
    expect(entries).toEqual([]);
  });

  it('rejects each kind of bad number with its reason and folds every spelling of one number into duplicates', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('invalid-and-duplicates.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 13, accepted: 2, rejected: 8, skipped: 3 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819055550001', name: '正しい', variables: {} },
      { row: 13, recipient: '+819055550003', name: '小数点つき', variables: {} },
    ]);
    const column = '携帯電話番号';
    const invalid = {
      outcome: 'rejected',
      code: 'invalid-phone',
      reason: 'invalid phone number',
      column,
    } as const;
    const duplicate = {
      outcome: 'skipped',
      code: 'duplicate',
      reason: 'duplicate of row 2',
      column,
    } as const;
    expect(entries).toEqual([
      { row: 3, ...invalid, value: 'abc' },
      { row: 4, ...invalid, value: '090-5555-001' },
      {
        row: 5,
        outcome: 'rejected',
        code: 'phone-scientific-notation',
        reason:
          'invalid phone number: Excel saved it in scientific notation and its digits are lost; format the column as text',
        column,
        value: '9.05555E+09',
      },
      { row: 6, outcome: 'rejected', code: 'phone-empty', reason: 'phone is empty', column },
      { row: 7, ...invalid, value: '１２３４' },
      { row: 8, ...invalid, value: '090-5555-0001 内線12' },
      { row: 9, ...duplicate, value: '090-5555-0001' },
      { row: 10, ...duplicate, value: '+81 90 5555 0001' },
      { row: 11, ...duplicate, value: '819055550001' },
      { row: 12, outcome: 'rejected', code: 'ragged-row', reason: 'expected 2 columns, got 1' },
      { row: 14, outcome: 'rejected', code: 'ragged-row', reason: 'expected 2 columns, got 3' },
    ]);
  });

  it('reads a message job list of LINE user ids', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('line-user-ids.csv'), {
      channel: 'message',
      defaultRegion: undefined,
    });
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 6, accepted: 2, rejected: 3, skipped: 1 },
    });
    expect(tasks).toEqual([
      {
        row: 2,
        recipient: 'U4af4980629a0b2c7b4c8e2c1f1d0a9e3',
        name: '佐藤',
        variables: { coupon: 'SPRING10' },
      },
      { row: 6, recipient: 'Ub1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6', name: '鈴木', variables: { coupon: '=1+1' } },
    ]);
    const invalid = {
      outcome: 'rejected',
      code: 'invalid-line-user-id',
      reason: 'invalid LINE user id (expected U and 32 hex digits)',
      column: 'userId',
    } as const;
    expect(entries).toEqual([
      { row: 3, ...invalid, value: 'U4AF4980629A0B2C7B4C8E2C1F1D0A9E3' },
      { row: 4, ...invalid, value: 'user123' },
      {
        row: 5,
        outcome: 'rejected',
        code: 'line-user-id-empty',
        reason: 'LINE user id is empty',
        column: 'userId',
      },
      {
        row: 7,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 2',
        column: 'userId',
        value: 'U4af4980629a0b2c7b4c8e2c1f1d0a9e3',
      },
    ]);
  });

  it('rejects the row whose quote never closes, keeping the rows before it', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('unclosed-quote.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'ascii',
      counts: { dataRows: 2, accepted: 1, rejected: 1, skipped: 0 },
    });
    expect(tasks).toEqual([{ row: 2, recipient: '+819066660001', name: 'One', variables: { note: 'ok' } }]);
    expect(entries).toEqual([
      {
        row: 3,
        outcome: 'rejected',
        code: 'unclosed-quote',
        reason: 'a quoted cell is never closed: the row runs to the end of the file',
      },
    ]);
  });

  it('rejects a row over the 8 KiB row limit and reads on', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('row-too-long.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 3, accepted: 2, rejected: 1, skipped: 0 },
    });
    expect(tasks.map((task) => task.row)).toEqual([2, 4]);
    expect(entries).toEqual([
      {
        row: 3,
        outcome: 'rejected',
        code: 'row-too-long',
        reason: 'row too long (9019 bytes; the limit is 8192)',
      },
    ]);
  });

  it('reads UTF-16LE with a BOM', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('utf16le-bom.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-16le',
      counts: { dataRows: 4, accepted: 3, rejected: 1, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819088880001', name: '一郎', variables: {} },
      { row: 3, recipient: '+819088880002', name: '二郎', variables: {} },
      { row: 5, recipient: '+819088880004', name: '四郎', variables: {} },
    ]);
    expect(entries).toEqual([
      {
        row: 4,
        outcome: 'rejected',
        code: 'invalid-phone',
        reason: 'invalid phone number',
        column: phone,
        value: 'bad',
      },
    ]);
  });
});

describe('fixtures: tab- and semicolon-separated exports, wide headers, other encodings', () => {
  it('reads Excel "Unicode text" (UTF-16LE with a BOM, tab-separated), commas kept inside cells', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('utf16le-bom-tab.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-16le',
      counts: { dataRows: 4, accepted: 2, rejected: 1, skipped: 1 },
    });
    expect(tasks).toEqual([
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
    ]);
    expect(entries).toEqual([
      {
        row: 4,
        outcome: 'rejected',
        code: 'invalid-phone',
        reason: 'invalid phone number',
        column: phone,
        value: 'abc',
      },
      {
        row: 5,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 2',
        column: phone,
        value: '090-1212-0001',
      },
    ]);
  });

  it('reads a .tsv saved as .csv (UTF-8, tab-separated)', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('tab-separated.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 2, accepted: 2, rejected: 0, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819013130001', name: 'Alice', variables: { company: 'Acme, Inc.' } },
      { row: 3, recipient: '+819013130002', name: '佐藤', variables: { company: 'Quoted\tTab' } },
    ]);
    expect(entries).toEqual([]);
  });

  it('reads European Excel (semicolons), even with more commas than semicolons in its header', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('semicolon-excel-eu.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 4, accepted: 2, rejected: 1, skipped: 1 },
    });
    expect(tasks).toEqual([
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
    ]);
    expect(entries).toEqual([
      {
        row: 4,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 2',
        column: 'Phone',
        value: '090-1414-0001',
      },
      {
        row: 5,
        outcome: 'rejected',
        code: 'invalid-phone',
        reason: 'invalid phone number',
        column: 'Phone',
        value: 'keine Nummer',
      },
    ]);
  });

  it('ignores empty cells at the end of the header: rows that end early or late by empty cells are not ragged', async () => {
    const { result, tasks, entries } = await ingestBytes(fixture('trailing-empty-header.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'utf-8',
      counts: { dataRows: 5, accepted: 3, rejected: 2, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819015150001', name: '一', variables: { メモ: 'a' } },
      { row: 3, recipient: '+819015150002', name: '二', variables: { メモ: 'b' } },
      { row: 4, recipient: '+819015150003', name: '三', variables: { メモ: 'c' } },
    ]);
    expect(entries).toEqual([
      // A named column is missing, and a value sits under no header: these stay ragged.
      { row: 5, outcome: 'rejected', code: 'ragged-row', reason: 'expected 3 columns, got 2' },
      { row: 6, outcome: 'rejected', code: 'ragged-row', reason: 'expected 3 columns, got 5' },
    ]);
  });

  it.each([
    ['utf16le-no-bom.csv', 'utf-16le'],
    ['utf16be-no-bom.csv', 'utf-16be'],
  ])('reads %s (UTF-16 without a BOM) instead of refusing it as binary', async (name, encoding) => {
    const { result, tasks, entries } = await ingestBytes(fixture(name));
    expect(result).toEqual({
      status: 'completed',
      encoding,
      counts: { dataRows: 3, accepted: 2, rejected: 1, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819016160001', name: '一郎', variables: {} },
      { row: 3, recipient: '+819016160002', name: '二郎', variables: {} },
    ]);
    expect(entries).toEqual([
      {
        row: 4,
        outcome: 'rejected',
        code: 'invalid-phone',
        reason: 'invalid phone number',
        column: phone,
        value: 'bad',
      },
    ]);
  });

  it('reads Shift_JIS whose only non-ASCII is half-width katakana that is also valid UTF-8', async () => {
    const { result, tasks } = await ingestBytes(fixture('sjis-halfwidth-katakana.csv'));
    expect(result).toEqual({
      status: 'completed',
      encoding: 'cp932',
      counts: { dataRows: 3, accepted: 3, rejected: 0, skipped: 0 },
    });
    expect(tasks).toEqual([
      { row: 2, recipient: '+819017170001', name: 'ﾐｶ', variables: { kana: 'ﾕｷ' } },
      { row: 3, recipient: '+819017170002', name: 'ﾅｵ', variables: { kana: 'ﾃｽﾄｰ' } },
      { row: 4, recipient: '+819017170003', name: 'ﾃｽﾄｰ', variables: { kana: 'ﾐｶ' } },
    ]);
  });
});

describe('fixtures: files that fail the whole job with one reason', () => {
  const zero = { dataRows: 0, accepted: 0, rejected: 0, skipped: 0 };

  it.each([
    ['binary-png.csv', 'not a CSV file: it is a PNG image'],
    [
      'binary-xlsx.csv',
      'not a CSV file: it is an Excel workbook (.xlsx) or another zip archive; save it as "CSV UTF-8" first',
    ],
    ['binary-random.csv', 'not a CSV file: it contains NUL bytes (a binary file)'],
  ])('%s is refused as not a CSV, with nothing emitted', async (name, reason) => {
    const { result, tasks, entries } = await ingestBytes(fixture(name));
    expect(result).toEqual({ status: 'failed', counts: zero, failure: { code: 'not-csv', reason } });
    expect(tasks).toEqual([]);
    expect(entries).toEqual([]);
  });

  it('a header-only file has no data rows', async () => {
    const { result } = await ingestBytes(fixture('header-only.csv'));
    expect(result).toEqual({
      status: 'failed',
      counts: zero,
      failure: { code: 'no-data-rows', reason: 'the file has a header row but no data rows' },
    });
  });

  it('a list without a phone column names the headers it found', async () => {
    const { result, entries } = await ingestBytes(fixture('no-phone-column.csv'));
    expect(result).toEqual({
      status: 'failed',
      counts: zero,
      failure: {
        code: 'no-recipient-column',
        reason:
          'no phone number column (name it 電話番号, 携帯電話番号, TEL or phone): the header row has 氏名, 住所, メモ',
      },
    });
    expect(entries).toEqual([]);
  });

  it('a list without a header row says the first row looks like data', async () => {
    const { result } = await ingestBytes(fixture('no-header.csv'));
    expect(result).toEqual({
      status: 'failed',
      counts: zero,
      failure: {
        code: 'no-recipient-column',
        reason:
          'no phone number column (name it 電話番号, 携帯電話番号, TEL or phone): the header row has 090-1234-5678, 山田; ' +
          'the first row looks like data: the file needs a header row',
      },
    });
  });

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
    expect(result).toEqual({
      status: 'failed',
      counts: zero,
      failure: {
        code: 'no-recipient-column',
        reason: `no phone number column (name it 電話番号, 携帯電話番号, TEL or phone): ${found}`,
      },
    });
  });

  it('a message job on a phone list says it needs a LINE user id column', async () => {
    const { result } = await ingestBytes(fixture('utf8-bom.csv'), { channel: 'message' });
    expect(result).toEqual({
      status: 'failed',
      counts: zero,
      failure: {
        code: 'no-recipient-column',
        reason:
          'no LINE user id column (name it userId or line_user_id): the header row has Phone Number, Name, Plan',
      },
    });
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
    expect((await ingestBytes(Buffer.alloc(0))).result).toEqual({
      status: 'failed',
      counts: zero,
      failure: { code: 'empty-file', reason: 'the file is empty' },
    });
    expect((await ingestBytes(Buffer.from('\r\n\r\n,,\r\n'))).result).toEqual({
      status: 'failed',
      counts: zero,
      failure: { code: 'empty-file', reason: 'the file has only blank lines' },
    });
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
