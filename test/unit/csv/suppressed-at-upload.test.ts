/**
 * A list's recipients on the client's suppression list are skipped at upload, in the report with
 * row, column and reason (they are checked again where each contact starts: an entry added later
 * still stops the task then).
 */
import { describe, expect, it } from 'vitest';
import { ingestBytes } from './support.ts';

describe('a recipient on the suppression list at upload', () => {
  it('is skipped with its own reason; an opt-out says opted out; the others become tasks', async () => {
    const csv = Buffer.from('電話番号,氏名\n090-1234-5678,A\n080-1111-2222,B\n070-3333-4444,C\n');
    const listed = new Set(['+819012345678', '+818011112222']);
    const { result, tasks, entries } = await ingestBytes(csv, {
      optedOut: ['+818011112222'],
      isSuppressed: async (recipients) => new Set(recipients.filter((r) => listed.has(r))),
    });
    expect(result).toMatchObject({ status: 'completed', counts: { dataRows: 3, accepted: 1, skipped: 2 } });
    expect(tasks.map((t) => t.recipient)).toEqual(['+817033334444']);
    expect(entries.map((e) => [e.row, e.column, e.code, e.reason])).toEqual([
      [2, '電話番号', 'suppressed', 'on the suppression list'],
      [3, '電話番号', 'opted-out', 'opted out'],
    ]);
  });
});
