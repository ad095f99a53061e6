/** Helpers for the CSV ingest tests: fixture bytes, chunked sources, and a recording run. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DuplicateFilter, inMemoryDuplicateFilter } from '#shared/csv/duplicates.ts';
import {
  type IngestResult,
  type IngestRowsInput,
  ingestRows,
  type TaskDraft,
} from '#shared/csv/read-list.ts';
import type { ReportEntry } from '#shared/csv/report.ts';

export const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'csv');

export function fixture(name: string): Buffer {
  return readFileSync(join(FIXTURES, name));
}

/** The bytes as a stream of `size`-byte chunks, so that chunk edges fall inside characters and records. */
export async function* chunked(bytes: Uint8Array, size = 7): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.slice(i, i + size);
}

export interface Recorded {
  readonly result: IngestResult;
  readonly tasks: TaskDraft[];
  readonly entries: ReportEntry[];
  /** Sizes of the pages handed to onBatch / onReport. */
  readonly batches: number[];
}

export type RunOptions = Partial<Omit<IngestRowsInput, 'source' | 'onBatch' | 'onReport' | 'isOptedOut'>> & {
  readonly optedOut?: readonly string[];
  readonly chunkSize?: number;
};

/** Runs {@link ingestRows} over `bytes` with recording sinks and an opt-out list. */
export async function ingestBytes(bytes: Uint8Array, options: RunOptions = {}): Promise<Recorded> {
  const tasks: TaskDraft[] = [];
  const entries: ReportEntry[] = [];
  const batches: number[] = [];
  const optedOut = new Set(options.optedOut ?? []);
  const duplicates: DuplicateFilter = options.duplicates ?? inMemoryDuplicateFilter();
  const result = await ingestRows({
    channel: 'call',
    defaultRegion: 'JP',
    ...options,
    duplicates,
    source: chunked(bytes, options.chunkSize),
    isOptedOut: async (recipients) => new Set(recipients.filter((r) => optedOut.has(r))),
    onBatch: async (page) => {
      batches.push(page.length);
      tasks.push(...page);
    },
    onReport: async (page) => {
      entries.push(...page);
    },
  });
  return { result, tasks, entries, batches };
}
