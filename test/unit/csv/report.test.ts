import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { type ReportEntry, reportCell, reportCsv, reportValue } from '#shared/csv/report.ts';

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

const entries: ReportEntry[] = [
  {
    row: 3,
    outcome: 'rejected',
    code: 'invalid-phone',
    reason: 'invalid phone number',
    column: '電話番号',
    value: '=HYPERLINK("http://evil.example","click")',
  },
  { row: 4, outcome: 'rejected', code: 'ragged-row', reason: 'expected 3 columns, got 2' },
  {
    row: 7,
    outcome: 'skipped',
    code: 'duplicate',
    reason: 'duplicate of row 3',
    column: '電話番号',
    value: '+81 90 1234 5678',
  },
  {
    row: 9,
    outcome: 'rejected',
    code: 'invalid-phone',
    reason: 'invalid phone number',
    column: 'tel',
    value: '@SUM(A1)',
  },
  {
    row: 10,
    outcome: 'rejected',
    code: 'invalid-phone',
    reason: 'invalid phone number',
    column: 'tel',
    value: '-1, "quoted"\nnext',
  },
];

describe('reportCsv', () => {
  it('writes UTF-8 with a BOM, a header, CRLF lines, and defuses cells Excel would run as formulas', async () => {
    const bytes = await collect(reportCsv(entries));
    expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(bytes.toString('utf8')).toBe(
      '\ufeffrow,column,reason,value\r\n' +
        `3,電話番号,invalid phone number,"'=HYPERLINK(""http://evil.example"",""click"")"\r\n` +
        '4,,"expected 3 columns, got 2",\r\n' +
        "7,電話番号,duplicate of row 3,'+81 90 1234 5678\r\n" +
        "9,tel,invalid phone number,'@SUM(A1)\r\n" +
        `10,tel,invalid phone number,"'-1, ""quoted""\nnext"\r\n`,
    );
  });

  it('reads back as the same rows with a CSV parser, no cell starting a formula', async () => {
    const bytes = await collect(reportCsv(entries, { header: ['行', '列', '理由', '値'] }));
    const rows: string[][] = parse(bytes, { bom: true });
    expect(rows[0]).toEqual(['行', '列', '理由', '値']);
    expect(rows.slice(1).map((row) => row[0])).toEqual(['3', '4', '7', '9', '10']);
    for (const row of rows) for (const cell of row) expect(cell).not.toMatch(/^[=+\-@]/);
  });

  it('streams many entries in chunks', async () => {
    async function* many(): AsyncGenerator<ReportEntry> {
      for (let row = 2; row < 20_002; row++) {
        yield { row, outcome: 'rejected', code: 'phone-empty', reason: 'phone is empty', column: '電話番号' };
      }
    }
    let chunks = 0;
    let lines = 0;
    for await (const chunk of reportCsv(many())) {
      chunks++;
      lines += Buffer.from(chunk).toString('utf8').split('\r\n').length - 1;
    }
    expect(lines).toBe(20_001);
    expect(chunks).toBeGreaterThan(5);
  });
});

describe('reportCell and reportValue', () => {
  it('leaves ordinary cells alone', () => {
    expect(reportCell('090-1234-5678')).toBe('090-1234-5678');
    expect(reportCell(12)).toBe('12');
    expect(reportCell(undefined)).toBe('');
    expect(reportCell('\tcmd')).toBe("'\tcmd");
  });

  it('shortens long values by characters, not bytes', () => {
    expect(reportValue('長'.repeat(150))).toBe(`${'長'.repeat(99)}…`);
    expect(reportValue('short')).toBe('short');
  });
});
