/** ingestRows: line endings, options, and the page contract the DynamoDB-backed ports rely on. */
import { describe, expect, it } from 'vitest';
import { type DuplicateFilter, inMemoryDuplicateFilter } from '#shared/csv/duplicates.ts';
import { IngestInputError, ingestRows } from '#shared/csv/read-list.ts';
import { quoteClosedAcrossLines } from '#shared/csv/records.ts';
import { chunked, ingestBytes } from './support.ts';

describe('line endings', () => {
  it('reads old Mac CR-only files and files mixing CRLF and LF', async () => {
    for (const csv of [
      'phone,name\r090-1111-0001,A\r\r090-1111-0002,"B\rb"\r090-1111-0003,C',
      'phone,name\r\n090-1111-0001,A\n\r\n090-1111-0002,"B\rb"\n090-1111-0003,C\r\n',
    ]) {
      const { result, tasks } = await ingestBytes(Buffer.from(csv));
      expect(result.counts).toEqual({ dataRows: 3, accepted: 3, rejected: 0, skipped: 0 });
      expect(tasks.map((task) => [task.row, task.name])).toEqual([
        [2, 'A'],
        [4, 'B\rb'],
        [5, 'C'],
      ]);
    }
  });
});

describe('quotes', () => {
  it("rejects a row whose quote is closed in the wrong place lines later: other rows' people never become its text", async () => {
    const csv = 'phone,name\n090-1111-2222,"abc\n090-1111-3333,d\n090-1111-4444,"e"\n090-1111-5555,f\n';
    const { result, tasks, entries } = await ingestBytes(Buffer.from(csv));
    expect(tasks.map((t) => [t.row, t.recipient, t.name])).toEqual([[3, '+819011115555', 'f']]);
    expect(entries).toEqual([expect.objectContaining({ row: 2, outcome: 'rejected', code: 'bad-quote' })]);
    expect(entries[0]!.reason).toContain('3 lines from here were read as one row');
    expect(result.counts).toMatchObject({ dataRows: 2, accepted: 1, rejected: 1 });
    expect(quoteClosedAcrossLines('1,"abc\n2,d\n3,"e"\n', ',')).toBe(3);
    // A stray quote earlier on the row does not hide the one that swallows the next rows.
    const earlier =
      'name,phone,memo\n"Taro" Sato,09011112222,"call after 6\nHanako Ito,08033334444,VIP\nJiro Abe,07055556666,"new"\n';
    expect(quoteClosedAcrossLines(earlier.split('\n').slice(1).join('\n'), ',')).toBe(3);
    const swallowed = await ingestBytes(Buffer.from(earlier));
    expect(swallowed.tasks).toEqual([]);
    expect(swallowed.entries).toEqual([expect.objectContaining({ row: 2, code: 'bad-quote' })]);
  });

  it(`reads a quoted header or number with a space outside its quotes, and Excel's ="0…" numbers`, async () => {
    const csv = '"電話番号", "氏名"\n"090-1111-2222", 山田\n "09011113333",鈴木\n="09011114444" ,"佐藤"\n';
    const { tasks, entries } = await ingestBytes(Buffer.from(csv));
    expect(entries).toEqual([]);
    expect(tasks.map((t) => [t.recipient, t.name])).toEqual([
      ['+819011112222', '山田'],
      ['+819011113333', '鈴木'],
      ['+819011114444', '佐藤'],
    ]);
    const second = await ingestBytes(Buffer.from('"氏名", "電話番号"\n山田, "090-1111-2222"\n'));
    expect(second.tasks.map((t) => [t.recipient, t.name])).toEqual([['+819011112222', '山田']]);
  });

  it('keeps well-quoted cells over several lines (one starting with a quote too), and stray quotes in a one-line cell', async () => {
    const csv = [
      'phone,name,memo',
      '090-1111-2222,A,"line 1\nline 2, ""quoted"""',
      '090-1111-3333,B,"""Hi""\nthere"',
      `090-1111-4444,C,5'11" tall`,
      '',
    ].join('\n');
    const { tasks, entries } = await ingestBytes(Buffer.from(csv));
    expect(entries).toEqual([]);
    expect(tasks.map((t) => t.variables.memo)).toEqual([
      'line 1\nline 2, "quoted"',
      '"Hi"\nthere',
      `5'11" tall`,
    ]);
    expect(quoteClosedAcrossLines('1,"""Hi""\nthere"\n', ',')).toBeUndefined();
    expect(quoteClosedAcrossLines('1;"a\nb";"c"\r\n', ';')).toBeUndefined();
  });
});

describe('options', () => {
  it('uses the recipient column the job names, keeping the alias-matching column as a variable', async () => {
    const csv = Buffer.from('電話番号,自宅の番号\n090-1111-0001,03-1234-5678\n');
    const { tasks } = await ingestBytes(csv, { recipientColumn: '自宅の番号' });
    // The other number is the same person's too: the row links them.
    expect(tasks).toEqual([
      {
        row: 2,
        recipient: '+81312345678',
        variables: { 電話番号: '090-1111-0001' },
        identifiers: ['+819011110001'],
      },
    ]);
  });

  it('keeps a column named __proto__ as an ordinary variable', async () => {
    const { tasks } = await ingestBytes(Buffer.from('phone,__proto__\n090-1111-0001,x\n'));
    expect(Object.getPrototypeOf(tasks[0]!.variables)).toBe(Object.prototype);
    expect(Object.entries(tasks[0]!.variables)).toEqual([['__proto__', 'x']]);
  });

  it.each([
    [
      { channel: 'call' as const, defaultRegion: undefined },
      'a call job needs a known default region, got undefined',
    ],
    [{ channel: 'call' as const, defaultRegion: 'XX' }, 'a call job needs a known default region, got "XX"'],
    [{ channel: 'fax' as never, defaultRegion: 'JP' }, 'unknown channel "fax"'],
    [{ channel: 'call' as const, defaultRegion: 'JP', batchSize: 0 }, 'bad batchSize 0'],
  ])('refuses bad arguments before reading: %j', async (options, message) => {
    const run = ingestRows({
      source: chunked(Buffer.from('phone\n090-1111-0001\n')),
      isOptedOut: async () => new Set(),
      duplicates: inMemoryDuplicateFilter(),
      onBatch: async () => {},
      onReport: async () => {},
      ...options,
    });
    await expect(run).rejects.toThrow(IngestInputError);
    await expect(run).rejects.toThrow(message);
  });
});

describe('the page contract', () => {
  const rows = (n: number, repeatEvery: number): Buffer =>
    Buffer.from(
      `phone\n${Array.from({ length: n }, (_, i) => `090-1${String(i % repeatEvery).padStart(3, '0')}-0000`).join('\n')}\n`,
    );

  it('asks about opt-outs for at most 100 distinct recipients at a time, each recipient once per page', async () => {
    const asked: string[][] = [];
    const tasks: number[] = [];
    await ingestRows({
      source: chunked(rows(1200, 400), 999),
      channel: 'call',
      defaultRegion: 'JP',
      duplicates: inMemoryDuplicateFilter(),
      batchSize: 500,
      isOptedOut: async (recipients) => {
        asked.push([...recipients]);
        return new Set();
      },
      onBatch: async (page) => {
        tasks.push(page.length);
      },
      onReport: async () => {},
    });
    expect(asked.map((batch) => batch.length)).toEqual([100, 100, 100, 100, 100, 100, 100, 100, 100, 100]);
    for (const batch of asked) expect(new Set(batch).size).toBe(batch.length);
    // Every page read is handed over, the last two with nothing accepted (all duplicates).
    expect(tasks).toEqual([400, 0, 0]);
  });

  it("stores a page's tasks before checking the next page's duplicates (what keeps the Bloom filter exact)", async () => {
    const log: string[] = [];
    const inner = inMemoryDuplicateFilter();
    const duplicates: DuplicateFilter = {
      admit: async (candidates) => {
        log.push(`admit ${candidates[0]?.row}`);
        return inner.admit(candidates);
      },
      get size() {
        return inner.size;
      },
      snapshot: () => inner.snapshot(),
    };
    await ingestRows({
      source: chunked(rows(9, 100), 5),
      channel: 'call',
      defaultRegion: 'JP',
      duplicates,
      batchSize: 4,
      isOptedOut: async () => new Set(),
      onBatch: async (page) => {
        await new Promise((resolve) => setImmediate(resolve));
        log.push(`stored ${page[0]?.row}..${page.at(-1)?.row}`);
      },
      onReport: async () => {},
    });
    expect(log).toEqual(['admit 2', 'stored 2..5', 'admit 6', 'stored 6..9', 'admit 10', 'stored 10..10']);
  });
});
