import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { reportCell, reportValue } from '#shared/csv/report.ts';

/** Cells an operator's list may hold, as a report entry's `value` or `column` shows them. */
const hostile = [
  '=HYPERLINK("http://evil.example","click")',
  '+81 90 1234 5678',
  '@SUM(A1)',
  '-1, "quoted"\nnext',
  'expected 3 columns, got 2',
];

describe('reportCell and reportValue', () => {
  it('defuses cells Excel would run as formulas and quotes commas, quotes and line breaks', () => {
    expect(hostile.map(reportCell)).toEqual([
      `"'=HYPERLINK(""http://evil.example"",""click"")"`,
      "'+81 90 1234 5678",
      "'@SUM(A1)",
      `"'-1, ""quoted""\nnext"`,
      '"expected 3 columns, got 2"',
    ]);
  });

  it('reads back as the same cells with a CSV parser, none starting a formula', () => {
    const [row] = parse(`${hostile.map(reportCell).join(',')}\r\n`) as string[][];
    expect(row).toHaveLength(hostile.length);
    expect(row?.map((cell) => cell.replace(/^'/, ''))).toEqual(hostile);
    for (const cell of row ?? []) expect(cell).not.toMatch(/^[=+\-@]/);
  });

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
