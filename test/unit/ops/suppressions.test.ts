/**
 * The operator CLI's suppression commands: what each takes on the command line, and how their
 * answers print (the list as a table; an upload's count and bad rows with row, column and reason).
 */
import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../scripts/ops/args.ts';
import { UsageError } from '../../../scripts/ops/errors.ts';
import { formatSuppressions, formatSuppressionUpload } from '../../../scripts/ops/format.ts';

function command(argv: string[]) {
  const line = parseCommandLine(argv);
  if (line.kind !== 'command') throw new Error(`not a command: ${line.kind}`);
  return { name: line.command.name, positionals: line.positionals, options: line.options };
}

describe('suppressions commands', () => {
  it('add, remove, list and upload read their recipients and options', () => {
    expect(
      command(['suppressions', 'add', '--client', 'c1', '090-1234-5678', 'U1', '--reason', 'asked']),
    ).toEqual({
      name: 'suppressions add',
      positionals: ['090-1234-5678', 'U1'],
      options: { client: 'c1', reason: 'asked' },
    });
    expect(command(['suppressions', 'remove', '--client', 'c1', '09012345678']).positionals).toEqual([
      '09012345678',
    ]);
    expect(command(['suppressions', 'list', '--client', 'c1', '--limit', '10']).options).toEqual({
      client: 'c1',
      limit: '10',
    });
    expect(command(['suppressions', 'upload', '--client', 'c1', '--csv', 'dnc.csv']).options).toEqual({
      client: 'c1',
      csv: 'dnc.csv',
    });
  });

  it('refuse a missing recipient, a second one to remove, an upload without its file', () => {
    for (const argv of [
      ['suppressions', 'add', '--client', 'c1'],
      ['suppressions', 'remove', '--client', 'c1', 'a', 'b'],
      ['suppressions', 'upload', '--client', 'c1'],
    ])
      expect(() => parseCommandLine(argv)).toThrow(UsageError);
  });

  it('print the list as a table, and an upload with its bad rows', () => {
    const list = formatSuppressions({
      suppressions: [
        {
          recipient: '+819012345678',
          input: '090-1234-5678',
          suppressed: true,
          kind: 'phone',
          source: 'api',
          reason: 'asked',
          addedAt: '2026-11-25T00:00:00.000Z',
        },
        { recipient: '+818000000000', suppressed: false },
      ],
      next: 'abc',
    });
    expect(list.split('\n')[0]).toMatch(/^RECIPIENT\s+SUPPRESSED\s+SOURCE\s+SINCE\s+REASON\s+AS TYPED/);
    expect(list).toContain('+819012345678');
    expect(list).toMatch(/more: --next abc$/);
    const upload = formatSuppressionUpload({
      dataRows: 3,
      added: 1,
      rejected: 1,
      skipped: 1,
      problems: [
        {
          row: 3,
          outcome: 'rejected',
          code: 'invalid-phone',
          reason: 'invalid phone number',
          column: '電話番号',
          value: 'abc',
        },
        { row: 4, outcome: 'skipped', code: 'duplicate', reason: 'duplicate of row 2', column: '電話番号' },
      ],
    });
    expect(upload.split('\n')[0]).toBe('1 added of 3 rows (1 rejected, 1 skipped)');
    expect(upload).toMatch(/3\s+rejected\s+電話番号\s+invalid phone number\s+abc/);
  });
});
