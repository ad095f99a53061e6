import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batchEntries } from '#shared/adapters/sqs-event-queue.ts';
import type { QueueEntry } from '#shared/webhooks/queue-message.ts';

const KIB = 1024;
const LIMIT = 256 * KIB;

function entries(sizes: readonly number[], char = 'x'): QueueEntry[] {
  return sizes.map((size, i) => ({ groupId: `ch:U${i % 3}`, dedupeId: `e${i}`, body: char.repeat(size) }));
}

const bytes = (batch: readonly QueueEntry[]) => batch.reduce((n, e) => n + Buffer.byteLength(e.body), 0);

describe('batchEntries', () => {
  it('sends nothing for nothing', () => {
    expect(batchEntries([])).toEqual([]);
  });

  it('puts at most 10 entries in a batch', () => {
    const batches = batchEntries(entries(Array(25).fill(100)));
    expect(batches.map((b) => b.length)).toEqual([10, 10, 5]);
  });

  it('keeps a batch at or under 256 KiB of bodies', () => {
    const batches = batchEntries(entries([100 * KIB, 100 * KIB, 56 * KIB, 1]));
    expect(batches.map((b) => b.length)).toEqual([3, 1]);
    expect(bytes(batches[0]!)).toBe(LIMIT);
  });

  it('counts bytes, not characters: emoji bodies split sooner', () => {
    // 30,000 emoji of 4 bytes each: 120,000 bytes an entry, two fit, three do not.
    const batches = batchEntries(entries([30_000, 30_000, 30_000], '👋'));
    expect(batches.map((b) => b.length)).toEqual([2, 1]);
  });

  it('sends an entry bigger than a batch alone rather than dropping it', () => {
    const batches = batchEntries(entries([10, LIMIT + 1, 10]));
    expect(batches.map((b) => b.map((e) => e.dedupeId))).toEqual([['e0'], ['e1'], ['e2']]);
  });

  it('keeps every entry, in order, within both limits', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 120 * KIB }), { maxLength: 40 }), (sizes) => {
        const input = entries(sizes);
        const batches = batchEntries(input);
        expect(batches.flat()).toEqual(input);
        for (const batch of batches) {
          expect(batch.length).toBeGreaterThan(0);
          expect(batch.length).toBeLessThanOrEqual(10);
          expect(bytes(batch)).toBeLessThanOrEqual(LIMIT);
        }
      }),
      { numRuns: 200 },
    );
  });
});
