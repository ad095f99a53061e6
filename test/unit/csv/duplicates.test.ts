import { describe, expect, it } from 'vitest';
import {
  BloomFilter,
  bloomDuplicateFilter,
  DuplicateFilterStateError,
  inMemoryDuplicateFilter,
  recipientTaskId,
} from '#shared/csv/duplicates.ts';

const number = (i: number): string => `+8190${String(10_000_000 + i)}`;

/** A Bloom-backed filter whose confirm looks at a task store, recording what it was asked. */
function bloomWithStore(options: { expectedRows: number; falsePositiveRate?: number; from?: Uint8Array }) {
  const stored = new Map<string, number>();
  const asked: string[][] = [];
  const filter = bloomDuplicateFilter({
    ...options,
    confirm: async (recipients) => {
      asked.push([...recipients]);
      return new Map(recipients.filter((r) => stored.has(r)).map((r) => [r, stored.get(r)!]));
    },
  });
  /** Admits a page and stores its new recipients as tasks, as ingestRows + onBatch do. */
  const page = async (rows: [string, number][]) => {
    const earlier = await filter.admit(rows.map(([recipient, row]) => ({ recipient, row })));
    for (const [recipient, row] of rows) if (!earlier.has(recipient)) stored.set(recipient, row);
    return earlier;
  };
  return { filter, page, asked, stored };
}

describe('inMemoryDuplicateFilter', () => {
  it('answers the first row of each recipient already admitted, and survives a snapshot', async () => {
    const filter = inMemoryDuplicateFilter();
    expect(
      await filter.admit([
        { recipient: 'a', row: 2 },
        { recipient: 'b', row: 3 },
      ]),
    ).toEqual(new Map());
    const restored = inMemoryDuplicateFilter({ from: filter.snapshot() });
    expect(restored.size).toBe(2);
    expect(
      await restored.admit([
        { recipient: 'b', row: 9 },
        { recipient: 'c', row: 10 },
      ]),
    ).toEqual(new Map([['b', 3]]));
    expect(() => inMemoryDuplicateFilter({ from: Buffer.from('{"not":"entries"}') })).toThrow(
      DuplicateFilterStateError,
    );
  });

  it('does not call a row a duplicate of itself when the same page is admitted again', async () => {
    const filter = inMemoryDuplicateFilter();
    const page = [
      { recipient: 'a', row: 2 },
      { recipient: 'b', row: 3 },
    ];
    await filter.admit(page);
    expect(await filter.admit(page)).toEqual(new Map());
    expect(await filter.admit([{ recipient: 'a', row: 4 }])).toEqual(new Map([['a', 2]]));
    expect(filter.size).toBe(2);
  });
});

describe('bloomDuplicateFilter', () => {
  it('is exact even when the Bloom filter is far too small: false positives only cost confirm lookups', async () => {
    const { page, asked } = bloomWithStore({ expectedRows: 10, falsePositiveRate: 0.5 });
    const firstPage: [string, number][] = Array.from({ length: 300 }, (_, i) => [number(i), i + 2]);
    expect(await page(firstPage)).toEqual(new Map());
    const secondPage: [string, number][] = Array.from({ length: 300 }, (_, i) => [number(i * 2), i + 1000]);
    const earlier = await page(secondPage);
    const expected = new Map<string, number>();
    for (let i = 0; i < 300; i++) if (i * 2 < 300) expected.set(number(i * 2), i * 2 + 2);
    expect(earlier).toEqual(expected);
    expect(asked.flat().length).toBeGreaterThan(expected.size); // the filter said "maybe" to new numbers too
    expect(Math.max(...asked.map((batch) => batch.length))).toBeLessThanOrEqual(100);
  });

  it('asks nothing when it can be sure', async () => {
    const { page, asked } = bloomWithStore({ expectedRows: 1000 });
    await page(Array.from({ length: 100 }, (_, i): [string, number] => [number(i), i + 2]));
    expect(asked.flat()).toEqual([]);
  });

  it('continues from a snapshot: same answers, same size', async () => {
    const first = bloomWithStore({ expectedRows: 1000, falsePositiveRate: 0.01 });
    await first.page(Array.from({ length: 500 }, (_, i): [string, number] => [number(i), i + 2]));
    const snapshot = first.filter.snapshot();
    const second = bloomDuplicateFilter({
      expectedRows: 1,
      from: snapshot,
      confirm: async (recipients) =>
        new Map(recipients.filter((r) => first.stored.has(r)).map((r) => [r, first.stored.get(r)!])),
    });
    expect(second.size).toBe(500);
    expect(await second.admit([{ recipient: number(42), row: 900 }])).toEqual(new Map([[number(42), 44]]));
    expect(second.size).toBe(500);
    expect(() =>
      bloomDuplicateFilter({
        expectedRows: 1,
        from: snapshot.subarray(0, 20),
        confirm: async () => new Map(),
      }),
    ).toThrow(DuplicateFilterStateError);
  });

  it("answers only earlier rows: a stored task of the candidate's own row (or a later one) is not a duplicate", async () => {
    // Every bit set: the Bloom filter says "maybe" to every recipient.
    const snapshot = BloomFilter.sized({ expectedRows: 10 }).toBytes();
    snapshot.fill(0xff, 16);
    // What a crashed run left behind: tasks the snapshot does not know.
    const stored = new Map([
      [number(1), 3],
      [number(2), 5],
      [number(3), 9],
    ]);
    const filter = bloomDuplicateFilter({
      expectedRows: 1,
      from: snapshot,
      confirm: async (recipients) =>
        new Map(recipients.filter((r) => stored.has(r)).map((r) => [r, stored.get(r)!])),
    });
    const earlier = await filter.admit([
      { recipient: number(1), row: 5 }, // stored from row 3: a duplicate of it
      { recipient: number(2), row: 5 }, // its own task, written by the crashed run
      { recipient: number(3), row: 7 }, // a later row's task: this row comes first
      { recipient: number(4), row: 8 }, // nothing stored: a false positive
    ]);
    expect(earlier).toEqual(new Map([[number(1), 3]]));
    expect(filter.size).toBe(3);
  });

  it('holds a million rows in about 1.8 MB at 0.1% false positives', () => {
    const bloom = BloomFilter.sized({ expectedRows: 1_000_000 });
    expect(bloom.toBytes().byteLength).toBeLessThan(1.9 * 1024 * 1024);
    expect(bloom.hashCount).toBe(10);
  });

  it('keeps its false positive rate near the target', () => {
    const bloom = BloomFilter.sized({ expectedRows: 20_000, falsePositiveRate: 0.01 });
    for (let i = 0; i < 20_000; i++) bloom.add(number(i));
    for (let i = 0; i < 20_000; i++) expect(bloom.mightContain(number(i))).toBe(true);
    let falsePositives = 0;
    for (let i = 20_000; i < 40_000; i++) if (bloom.mightContain(number(i))) falsePositives++;
    expect(falsePositives / 20_000).toBeLessThan(0.02);
  });
});

describe('recipientTaskId', () => {
  it('is the same for the same job and recipient, and differs otherwise', () => {
    const id = recipientTaskId('01JOB', '+819012345678');
    expect(recipientTaskId('01JOB', '+819012345678')).toBe(id);
    expect(recipientTaskId('01JOB', '+819012345679')).not.toBe(id);
    expect(recipientTaskId('01JOC', '+819012345678')).not.toBe(id);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
