/**
 * "Is this recipient already a task of this job, and from which row?" — answered exactly, in
 * memory for small jobs, or in fixed memory for a million rows: a Bloom filter answers "surely
 * not" on its own and sends every "maybe" to the caller, who confirms it against the tasks it
 * has stored (by the task's deterministic key, see {@link recipientTaskId}). A Bloom false
 * positive therefore costs one lookup, never a wrong answer.
 */
import { uuidV5 } from '#shared/ids.ts';
import { CsvError } from './errors.ts';

export interface DuplicateCandidate {
  readonly recipient: string;
  readonly row: number;
}

/** The dedupe port of {@link ingestRows}. */
export interface DuplicateFilter {
  /**
   * Takes recipients about to become tasks (distinct, in row order) and returns those that
   * already became a task of this job from an earlier row, each with that row (always smaller
   * than the candidate's). Every recipient not returned becomes a task: the filter remembers it
   * from then on.
   */
  admit(candidates: readonly DuplicateCandidate[]): Promise<ReadonlyMap<string, number>>;
  /** How many recipients the filter remembers: one per accepted task, checked on resume. */
  readonly size: number;
  /** The filter's state, to store beside a paused ingest's cursor and restore on resume. */
  snapshot(): Uint8Array;
}

export class DuplicateFilterStateError extends CsvError {}

/**
 * The deterministic id of the task for `recipient` in job `jobId`: the key a Bloom filter's
 * "maybe" is confirmed by, and what makes re-writing a page after a crash idempotent.
 */
export function recipientTaskId(jobId: string, recipient: string): string {
  return uuidV5(`job-recipient:${jobId}:${recipient}`);
}

/** An exact filter holding every recipient in a Map: simple, but memory grows with the job. */
export function inMemoryDuplicateFilter(options: { readonly from?: Uint8Array } = {}): DuplicateFilter {
  const firstRows = new Map<string, number>();
  if (options.from) {
    const entries: unknown = JSON.parse(Buffer.from(options.from).toString('utf8'));
    if (!Array.isArray(entries))
      throw new DuplicateFilterStateError('not an in-memory duplicate filter snapshot');
    for (const entry of entries) {
      if (!Array.isArray(entry) || typeof entry[0] !== 'string' || typeof entry[1] !== 'number') {
        throw new DuplicateFilterStateError('not an in-memory duplicate filter snapshot');
      }
      firstRows.set(entry[0], entry[1]);
    }
  }
  return {
    async admit(candidates) {
      const earlier = new Map<string, number>();
      for (const { recipient, row } of candidates) {
        const first = firstRows.get(recipient);
        if (first !== undefined && first < row) earlier.set(recipient, first);
        else firstRows.set(recipient, row); // new, or its own row again (a page handed again)
      }
      return earlier;
    },
    get size() {
      return firstRows.size;
    },
    snapshot() {
      return Buffer.from(JSON.stringify([...firstRows]), 'utf8');
    },
  };
}

/**
 * Looks recipients up among the job's stored tasks: returns those that have a task, each with
 * its row. Called with at most {@link CONFIRM_BATCH} recipients (one BatchGetItem).
 */
export type ConfirmStoredTasks = (recipients: readonly string[]) => Promise<ReadonlyMap<string, number>>;

/** Recipients per confirm call: DynamoDB's BatchGetItem takes up to 100 keys. */
export const CONFIRM_BATCH = 100;

export interface BloomSizing {
  /** Rows the job is expected to have; more still works, with more confirm lookups. */
  readonly expectedRows: number;
  /** Share of new recipients that cost a confirm lookup; 0.001 by default. */
  readonly falsePositiveRate?: number;
}

/**
 * An exact filter in fixed memory (about 1.8 MB for a million rows at 0.1%). Exactness holds
 * because the caller's tasks are stored before the next page is admitted: {@link ingestRows}
 * awaits `onBatch` for a page before it admits the next one, and within a page recipients are
 * distinct.
 *
 * A stored task is an earlier occurrence only when its row is before the candidate's. A run that
 * crashed after storing a page leaves tasks the snapshot it is retried from does not know: when
 * the Bloom filter's "maybe" finds such a task, it is the candidate row's own task (same row, same
 * deterministic key), written again by the retry, not a duplicate of it.
 */
export function bloomDuplicateFilter(
  options: BloomSizing & { readonly confirm: ConfirmStoredTasks; readonly from?: Uint8Array },
): DuplicateFilter {
  const bloom = options.from ? BloomFilter.fromBytes(options.from) : BloomFilter.sized(options);
  return {
    async admit(candidates) {
      const maybe = candidates
        .filter(({ recipient }) => bloom.mightContain(recipient))
        .map((c) => c.recipient);
      const rows = new Map(candidates.map((c) => [c.recipient, c.row]));
      const earlier = new Map<string, number>();
      for (let i = 0; i < maybe.length; i += CONFIRM_BATCH) {
        for (const [recipient, row] of await options.confirm(maybe.slice(i, i + CONFIRM_BATCH))) {
          const own = rows.get(recipient);
          if (own !== undefined && row < own) earlier.set(recipient, row);
        }
      }
      for (const { recipient } of candidates) if (!earlier.has(recipient)) bloom.add(recipient);
      return earlier;
    },
    get size() {
      return bloom.count;
    },
    snapshot() {
      return bloom.toBytes();
    },
  };
}

const MAGIC = 0x53424246; // "SBBF"
const HEADER_BYTES = 16;

/** A plain Bloom filter over strings, double-hashed with two 32-bit MurmurHash3 values. */
export class BloomFilter {
  readonly bitCount: number;
  readonly hashCount: number;
  #count: number;
  readonly #bits: Uint8Array;

  private constructor(bitCount: number, hashCount: number, count: number, bits: Uint8Array) {
    this.bitCount = bitCount;
    this.hashCount = hashCount;
    this.#count = count;
    this.#bits = bits;
  }

  /** A filter for `expectedRows` items at `falsePositiveRate` (optimal bits and hash count). */
  static sized({ expectedRows, falsePositiveRate = 0.001 }: BloomSizing): BloomFilter {
    if (!(expectedRows >= 0) || !(falsePositiveRate > 0 && falsePositiveRate < 1)) {
      throw new RangeError(`bad Bloom filter sizing: ${expectedRows} rows at ${falsePositiveRate}`);
    }
    const n = Math.max(1, expectedRows);
    const bitCount = Math.min(
      2 ** 32 - 8,
      Math.max(64, Math.ceil((-n * Math.log(falsePositiveRate)) / Math.LN2 ** 2)),
    );
    const hashCount = Math.max(1, Math.round((bitCount / n) * Math.LN2));
    return new BloomFilter(bitCount, hashCount, 0, new Uint8Array(Math.ceil(bitCount / 8)));
  }

  static fromBytes(bytes: Uint8Array): BloomFilter {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (bytes.byteLength < HEADER_BYTES || view.getUint32(0) !== MAGIC) {
      throw new DuplicateFilterStateError('not a Bloom duplicate filter snapshot');
    }
    const bitCount = view.getUint32(4);
    const hashCount = view.getUint32(8);
    const count = view.getUint32(12);
    if (bytes.byteLength !== HEADER_BYTES + Math.ceil(bitCount / 8) || hashCount < 1) {
      throw new DuplicateFilterStateError('truncated Bloom duplicate filter snapshot');
    }
    return new BloomFilter(bitCount, hashCount, count, bytes.slice(HEADER_BYTES));
  }

  /** Items added so far. */
  get count(): number {
    return this.#count;
  }

  add(item: string): void {
    this.#positions(item, (bit) => {
      this.#bits[bit >>> 3]! |= 1 << (bit & 7);
      return true;
    });
    this.#count++;
  }

  /** False means surely never added; true means maybe. */
  mightContain(item: string): boolean {
    return this.#positions(item, (bit) => (this.#bits[bit >>> 3]! & (1 << (bit & 7))) !== 0);
  }

  toBytes(): Uint8Array {
    const bytes = new Uint8Array(HEADER_BYTES + this.#bits.length);
    const view = new DataView(bytes.buffer);
    view.setUint32(0, MAGIC);
    view.setUint32(4, this.bitCount);
    view.setUint32(8, this.hashCount);
    view.setUint32(12, this.#count);
    bytes.set(this.#bits, HEADER_BYTES);
    return bytes;
  }

  /** Visits the item's bit positions until `visit` returns false; says whether all returned true. */
  #positions(item: string, visit: (bit: number) => boolean): boolean {
    const h1 = murmur3(item, 0x9747b28c);
    const h2 = murmur3(item, 0x5bd1e995) | 1;
    for (let i = 0; i < this.hashCount; i++) {
      const bit = (((h1 + Math.imul(i, h2)) >>> 0) % this.bitCount) >>> 0;
      if (!visit(bit)) return false;
    }
    return true;
  }
}

/** MurmurHash3 (x86, 32-bit) over the string's UTF-16 code units. */
function murmur3(text: string, seed: number): number {
  let h = seed >>> 0;
  const mix = (k0: number): void => {
    let k = Math.imul(k0, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  };
  let i = 0;
  for (; i + 1 < text.length; i += 2) mix(text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16));
  if (i < text.length) {
    let k = Math.imul(text.charCodeAt(i), 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
  }
  h ^= text.length * 2;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
