import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { splitSendBatches } from '#shared/adapters/sqs-batches.ts';

/** Items that are their own size, so a batch's bytes are its sum. */
const split = (sizes: readonly number[], maxEntries: number, maxBytes: number) =>
  splitSendBatches(sizes, (size) => size, { maxEntries, maxBytes });
const sum = (batch: readonly number[]) => batch.reduce((a, b) => a + b, 0);

describe('splitSendBatches', () => {
  it('makes no batch of no items', () => {
    expect(split([], 10, 100)).toEqual([]);
  });

  it('starts a new batch at the entry limit', () => {
    expect(split([1, 1, 1, 1, 1, 1, 1], 3, 100)).toEqual([[1, 1, 1], [1, 1, 1], [1]]);
  });

  it('fills a batch up to the byte limit exactly, then starts another', () => {
    expect(split([40, 60, 1, 99, 2], 10, 100)).toEqual([[40, 60], [1, 99], [2]]);
  });

  it('sends an item over the byte limit alone rather than dropping it', () => {
    expect(split([5, 500, 5], 10, 100)).toEqual([[5], [500], [5]]);
  });

  it('keeps every item, in order, each batch within both limits unless it holds one oversize item', () => {
    const limits = fc.record({
      maxEntries: fc.integer({ min: 1, max: 12 }),
      maxBytes: fc.integer({ min: 1, max: 300 }),
    });
    fc.assert(
      fc.property(
        fc.array(fc.nat({ max: 400 }), { maxLength: 60 }),
        limits,
        (sizes, { maxEntries, maxBytes }) => {
          const batches = split(sizes, maxEntries, maxBytes);
          expect(batches.flat()).toEqual(sizes);
          for (const batch of batches) {
            expect(batch.length).toBeGreaterThan(0);
            expect(batch.length).toBeLessThanOrEqual(maxEntries);
            if (batch.length > 1) expect(sum(batch)).toBeLessThanOrEqual(maxBytes);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
