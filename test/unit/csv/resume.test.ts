/**
 * A Lambda run that stops (time is up) hands back a cursor; the next run reads the file from the
 * cursor's byte offset (an S3 ranged GET) and the job ends exactly as if read in one pass.
 */
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import {
  bloomDuplicateFilter,
  type DuplicateFilter,
  DuplicateFilterStateError,
  inMemoryDuplicateFilter,
} from '#shared/csv/duplicates.ts';
import { type IngestCursor, type IngestResult, ingestRows, type TaskDraft } from '#shared/csv/read-list.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { chunked, fixture, ingestBytes } from './support.ts';

/** A CP932 call list with duplicates far apart, opt-outs, bad numbers, blank and multi-line rows. */
function callList(rows: number): Buffer {
  const lines = ['電話番号,お名前,メモ'];
  for (let i = 0; i < rows; i++) {
    const n = i % 7 === 3 ? i - 300 : i; // every 7th row repeats a number from 300 rows earlier
    const number = `090-${String(1000 + (Math.abs(n) % 9000)).padStart(4, '0')}-${String(Math.abs(n)).padStart(4, '0')}`;
    if (i % 97 === 5) lines.push('');
    if (i % 89 === 7) lines.push(`abc-${i},不正 ${i},`);
    else if (i % 61 === 11) lines.push(`${number},"複数行\r\nの名前 ${i}",メモ ${i}`);
    else lines.push(`${number},名前 ${i},"メモ, ${i}"`);
  }
  return iconv.encode(`${lines.join('\r\n')}\r\n`, 'cp932');
}

const OPTED_OUT = new Set(['+819010050005', '+819011230123']);

interface Store {
  readonly tasks: Map<string, TaskDraft>;
  readonly entries: ReportEntry[];
}

function sinks(store: Store) {
  return {
    isOptedOut: async (recipients: readonly string[]) => new Set(recipients.filter((r) => OPTED_OUT.has(r))),
    onBatch: async (page: readonly TaskDraft[]) => {
      for (const task of page) store.tasks.set(task.recipient, task);
    },
    onReport: async (page: readonly ReportEntry[]) => {
      store.entries.push(...page);
    },
  };
}

/** The Bloom filter's "maybe" is confirmed against the tasks stored so far, as DynamoDB would. */
function bloomOver(store: Store, from?: Uint8Array): DuplicateFilter {
  return bloomDuplicateFilter({
    expectedRows: 500,
    falsePositiveRate: 0.2, // high on purpose: many "maybe"s, every one must be confirmed right
    confirm: async (recipients) => {
      const found = new Map<string, number>();
      for (const r of recipients) {
        const task = store.tasks.get(r);
        if (task) found.set(r, task.row);
      }
      return found;
    },
    ...(from ? { from } : {}),
  });
}

async function onePass(bytes: Buffer): Promise<{ result: IngestResult; store: Store }> {
  const store: Store = { tasks: new Map(), entries: [] };
  const result = await ingestRows({
    source: chunked(bytes, 4096),
    channel: 'call',
    defaultRegion: 'JP',
    duplicates: inMemoryDuplicateFilter(),
    batchSize: 50,
    ...sinks(store),
  });
  return { result, store };
}

describe('resuming a paused ingest', () => {
  it('pausing every few pages and resuming from the cursor by byte range gives the one-pass result', async () => {
    const bytes = callList(2000);
    const reference = await onePass(bytes);
    expect(reference.result.status).toBe('completed');
    expect(reference.store.entries.some((entry) => entry.reason.startsWith('duplicate of row'))).toBe(true);
    expect(reference.store.entries.some((entry) => entry.reason === 'opted out')).toBe(true);

    const store: Store = { tasks: new Map(), entries: [] };
    let cursor: IngestCursor | undefined;
    let snapshot: Uint8Array | undefined;
    let runs = 0;
    let result: IngestResult;
    do {
      runs++;
      const duplicates = bloomOver(store, snapshot);
      let pagesThisRun = 0;
      const source = chunked(bytes.subarray(cursor?.byteOffset ?? 0), 1000);
      result = await ingestRows({
        source,
        channel: 'call',
        defaultRegion: 'JP',
        duplicates,
        batchSize: 50,
        ...(cursor ? { resumeFrom: cursor } : {}),
        shouldPause: () => ++pagesThisRun >= 3,
        ...sinks(store),
      });
      if (result.status === 'paused') {
        // What a Lambda would persist: the cursor as JSON, the filter as bytes (e.g. in S3).
        cursor = JSON.parse(JSON.stringify(result.cursor)) as IngestCursor;
        snapshot = duplicates.snapshot();
        expect(cursor.byteOffset).toBeGreaterThan(0);
        expect(cursor.encoding).toBe('cp932');
      }
    } while (result.status === 'paused');

    expect(runs).toBeGreaterThan(5);
    expect(result).toEqual(reference.result);
    expect([...store.tasks.values()].sort((a, b) => a.row - b.row)).toEqual(
      [...reference.store.tasks.values()].sort((a, b) => a.row - b.row),
    );
    expect(store.entries).toEqual(reference.store.entries);
    const { counts } = result;
    expect(counts.accepted + counts.rejected + counts.skipped).toBe(counts.dataRows);
  });

  it('a UTF-16 file resumes by reading again from the start and skipping through the cursor row', async () => {
    const bytes = fixture('utf16le-bom.csv');
    const reference = await ingestBytes(bytes, { batchSize: 1 });
    const first = await ingestBytes(bytes, { batchSize: 1, shouldPause: () => true });
    expect(first.result.status).toBe('paused');
    if (first.result.status !== 'paused') return;
    expect(first.result.cursor).toMatchObject({ byteOffset: 0, row: 2, encoding: 'utf-16le' });
    const duplicates = inMemoryDuplicateFilter();
    await duplicates.admit(first.tasks.map((task) => ({ recipient: task.recipient, row: task.row })));
    const rest = await ingestBytes(bytes, { batchSize: 1, resumeFrom: first.result.cursor, duplicates });
    expect(rest.result).toEqual(reference.result);
    expect([...first.tasks, ...rest.tasks]).toEqual(reference.tasks);
    expect([...first.entries, ...rest.entries]).toEqual(reference.entries);
  });

  it('a semicolon- or tab-separated file keeps its separator in the cursor, so a ranged read splits alike', async () => {
    for (const delimiter of [';', '\t'] as const) {
      const bytes = iconv.encode(iconv.decode(callList(300), 'cp932').replaceAll(',', delimiter), 'cp932');
      const reference = await onePass(bytes);
      expect(reference.result).toMatchObject({ status: 'completed', counts: { dataRows: 300 } });

      const store: Store = { tasks: new Map(), entries: [] };
      const duplicates = inMemoryDuplicateFilter();
      let cursor: IngestCursor | undefined;
      let result: IngestResult;
      do {
        result = await ingestRows({
          source: chunked(bytes.subarray(cursor?.byteOffset ?? 0), 1000),
          channel: 'call',
          defaultRegion: 'JP',
          duplicates,
          batchSize: 50,
          ...(cursor ? { resumeFrom: cursor } : {}),
          shouldPause: () => true,
          ...sinks(store),
        });
        if (result.status === 'paused') {
          cursor = JSON.parse(JSON.stringify(result.cursor)) as IngestCursor;
          expect(cursor).toMatchObject({ delimiter, encoding: 'cp932' });
        }
      } while (result.status === 'paused');
      expect(result).toEqual(reference.result);
      expect(store.entries).toEqual(reference.store.entries);
    }
  });

  it('a cursor saved before separators were detected (no delimiter) resumes a comma-separated file', async () => {
    const bytes = callList(200);
    const first = await ingestBytes(bytes, { batchSize: 50, shouldPause: () => true });
    if (first.result.status !== 'paused') throw new Error('expected a pause');
    const { delimiter, ...oldCursor } = first.result.cursor;
    expect(delimiter).toBe(',');
    const duplicates = inMemoryDuplicateFilter();
    await duplicates.admit(first.tasks.map((task) => ({ recipient: task.recipient, row: task.row })));
    const rest = await ingestBytes(bytes.subarray(oldCursor.byteOffset), {
      resumeFrom: oldCursor,
      duplicates,
    });
    const reference = await ingestBytes(bytes);
    expect(rest.result).toEqual(reference.result);
    expect([...first.tasks, ...rest.tasks]).toEqual(reference.tasks);
  });

  it('refuses to resume with a duplicate filter that was not restored from the snapshot', async () => {
    const bytes = callList(200);
    const first = await ingestBytes(bytes, { batchSize: 50, shouldPause: () => true });
    expect(first.result.status).toBe('paused');
    if (first.result.status !== 'paused') return;
    const { cursor } = first.result;
    await expect(
      ingestRows({
        source: chunked(bytes.subarray(cursor.byteOffset)),
        channel: 'call',
        defaultRegion: 'JP',
        duplicates: inMemoryDuplicateFilter(),
        resumeFrom: cursor,
        isOptedOut: async () => new Set(),
        onBatch: async () => {},
        onReport: async () => {},
      }),
    ).rejects.toThrow(DuplicateFilterStateError);
  });

  it('pauses only where more rows follow, so the last run completes rather than leaving an empty remainder', async () => {
    const csv = Buffer.from('phone\n090-1111-0001\n090-1111-0002\n\n\n');
    const { result } = await ingestBytes(csv, { batchSize: 2, shouldPause: () => true });
    expect(result).toEqual({
      status: 'completed',
      encoding: 'ascii',
      counts: { dataRows: 2, accepted: 2, rejected: 0, skipped: 0 },
    });
  });
});

describe('retrying after a crash, from a snapshot taken before the crashed run stored its tasks', () => {
  /** The snapshot with every bit set: the Bloom filter says "maybe" to every recipient from then on. */
  function saturated(snapshot: Uint8Array): Uint8Array {
    const bytes = Uint8Array.from(snapshot);
    bytes.fill(0xff, 16); // past the 16-byte header (magic, bit count, hash count, item count)
    return bytes;
  }

  it("a Bloom false positive that finds the row's own task (written by the crashed run) is not a duplicate of itself", async () => {
    // Rows 2-8: A B | C D | C A | E, in pages of 2. Row 6 repeats row 4, row 7 repeats row 2.
    const numbers = ['0001', '0002', '0003', '0004', '0003', '0001', '0005'];
    const bytes = Buffer.from(`phone\n${numbers.map((n) => `090-3030-${n}`).join('\n')}\n`);
    const store: Store = { tasks: new Map(), entries: [] };
    const common = { channel: 'call' as const, defaultRegion: 'JP', batchSize: 2, ...sinks(store) };

    // Run 1 stores rows 2-3 and pauses: the cursor and the filter's snapshot are saved.
    const first = bloomOver(store);
    const paused = await ingestRows({
      ...common,
      source: chunked(bytes),
      duplicates: first,
      shouldPause: () => true,
    });
    if (paused.status !== 'paused') throw new Error('expected a pause');
    const { cursor } = paused;
    const snapshot = first.snapshot();

    // Run 2 stores the tasks of rows 4-5, then dies before saving a new cursor.
    await expect(
      ingestRows({
        ...common,
        source: chunked(bytes.subarray(cursor.byteOffset)),
        duplicates: bloomOver(store, snapshot),
        resumeFrom: cursor,
        onBatch: async (page) => {
          await common.onBatch(page);
          throw new Error('Lambda timed out');
        },
      }),
    ).rejects.toThrow('Lambda timed out');
    expect([...store.tasks.values()].map((task) => task.row)).toEqual([2, 3, 4, 5]);

    // The retry starts from the same cursor, with a filter that says "maybe" to everyone.
    const retry = await ingestRows({
      ...common,
      source: chunked(bytes.subarray(cursor.byteOffset)),
      duplicates: bloomOver(store, saturated(snapshot)),
      resumeFrom: cursor,
    });
    expect(retry).toEqual({
      status: 'completed',
      encoding: 'ascii',
      counts: { dataRows: 7, accepted: 5, rejected: 0, skipped: 2 },
    });
    expect([...store.tasks.values()].map((task) => task.row)).toEqual([2, 3, 4, 5, 8]);
    expect(store.entries).toEqual([
      {
        row: 6,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 4',
        column: 'phone',
        value: '090-3030-0003',
      },
      {
        row: 7,
        outcome: 'skipped',
        code: 'duplicate',
        reason: 'duplicate of row 2',
        column: 'phone',
        value: '090-3030-0001',
      },
    ]);
  });
});

describe('stopping early releases the source', () => {
  function trackedSource(bytes: Uint8Array, chunk: number, failAt?: number) {
    const state = { closed: false, served: 0 };
    const iterable: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => ({
        async next() {
          if (failAt !== undefined && state.served >= failAt) throw new Error('connection reset by peer');
          if (state.served >= bytes.length) return { done: true, value: undefined };
          const value = bytes.slice(state.served, state.served + chunk);
          state.served += value.length;
          return { done: false, value };
        },
        async return() {
          state.closed = true;
          return { done: true, value: undefined };
        },
      }),
    };
    return { iterable, state };
  }

  const ports = {
    channel: 'call' as const,
    defaultRegion: 'JP',
    isOptedOut: async () => new Set<string>(),
    onReport: async () => {},
  };

  it('a pause closes the source stream (an S3 body would otherwise hold its socket)', async () => {
    const { iterable, state } = trackedSource(callList(5000), 512);
    const result = await ingestRows({
      ...ports,
      source: iterable,
      duplicates: inMemoryDuplicateFilter(),
      batchSize: 20,
      shouldPause: () => true,
      onBatch: async () => {},
    });
    expect(result.status).toBe('paused');
    expect(state.closed).toBe(true);
    expect(state.served).toBeLessThan(callList(5000).length / 2);
  });

  it('a failing sink rejects the ingest and closes the source', async () => {
    const { iterable, state } = trackedSource(callList(5000), 512);
    await expect(
      ingestRows({
        ...ports,
        source: iterable,
        duplicates: inMemoryDuplicateFilter(),
        batchSize: 20,
        onBatch: async () => {
          throw new Error('ProvisionedThroughputExceededException');
        },
      }),
    ).rejects.toThrow('ProvisionedThroughputExceededException');
    expect(state.closed).toBe(true);
  });

  it('a source that breaks mid-file rejects the ingest (the caller retries from its last cursor)', async () => {
    const { iterable } = trackedSource(callList(2000), 512, 20_000);
    await expect(
      ingestRows({
        ...ports,
        source: iterable,
        duplicates: inMemoryDuplicateFilter(),
        onBatch: async () => {},
      }),
    ).rejects.toThrow('connection reset by peer');
  });
});

describe('a quote that never closes in a big file', () => {
  it('fails the job at that row, after storing the rows before it, without reading the rest into memory', async () => {
    const good = Array.from({ length: 30 }, (_, i) => `090-2222-${String(i).padStart(4, '0')},row ${i}`);
    const rest = Array.from({ length: 5000 }, (_, i) => `090-3333-${String(i).padStart(4, '0')},after`);
    const csv = Buffer.from(
      ['phone,name', ...good, '090-4444-0000,"opens and never closes', ...rest, ''].join('\n'),
    );
    const { result, tasks } = await ingestBytes(csv, { limits: { maxRecordBytes: 16 * 1024 }, batchSize: 7 });
    expect(result).toEqual({
      status: 'failed',
      counts: { dataRows: 30, accepted: 30, rejected: 0, skipped: 0 },
      failure: {
        code: 'unreadable-row',
        reason:
          'row 32 is longer than 16384 bytes: a quote is probably never closed, so the rest of the file cannot be read',
      },
    });
    expect(tasks).toHaveLength(30);
  });

  it('the record limit measures the record, not the chunks: big chunks of a good file do not trip it', async () => {
    const rows = Array.from(
      { length: 20_000 },
      (_, i) => `090-5555-${String(i % 10_000).padStart(4, '0')},row ${i}`,
    );
    const csv = Buffer.from(['phone,name', ...rows, ''].join('\n'));
    const { result } = await ingestBytes(csv, { limits: { maxRecordBytes: 4096 }, chunkSize: 256 * 1024 });
    expect(result).toMatchObject({
      status: 'completed',
      counts: { dataRows: 20_000, accepted: 10_000, skipped: 10_000 },
    });
  });
});
