/**
 * SQS's `SendMessageBatch` takes at most 10 entries a call and at most 256 KiB of them in all:
 * every queue adapter splits what it sends here, each under a byte budget of its own.
 */

/** The most entries one `SendMessageBatch` call takes. */
export const SQS_MAX_BATCH_ENTRIES = 10;

export interface BatchLimits {
  readonly maxEntries: number;
  /** The most bytes a batch's items may add up to (by `sizeOf`). */
  readonly maxBytes: number;
}

/**
 * Splits `items` into batches, in order, none over `maxEntries` items nor over `maxBytes` by
 * `sizeOf`; an item larger than `maxBytes` is sent alone rather than dropped.
 */
export function splitSendBatches<T>(
  items: readonly T[],
  sizeOf: (item: T) => number,
  limits: BatchLimits,
): T[][] {
  const batches: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (current.length > 0 && (current.length === limits.maxEntries || bytes + size > limits.maxBytes)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}
