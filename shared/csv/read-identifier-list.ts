/**
 * A list that is not a job's (a suppression list, a list of people's identifiers), read by the
 * call lists' reader (`read-list.ts`: the same encodings, separators and headers): a list of phone
 * numbers as a call list, one of LINE user ids as a LINE list, one of addresses as an email list —
 * the first whose recipient column the header has.
 */
import { inMemoryDuplicateFilter } from './duplicates.ts';
import { type IngestResult, ingestRows, type PageRead, type TaskDraft } from './read-list.ts';
import type { ReportEntry } from './report.ts';

export interface IdentifierListInput {
  readonly bytes: Uint8Array;
  /** Region of phone numbers written without a country code (the client's `defaultRegion`). */
  readonly region: string;
  /** A page of rows: the accepted ones (a recipient once), and every row read (`page.read`). */
  readonly onBatch: (drafts: readonly TaskDraft[], page: PageRead) => Promise<void>;
  readonly pageSize: number;
}

/** Reads the list; the rows it rejected or skipped (row, column, reason) are `problems`. */
export async function readIdentifierList(
  input: IdentifierListInput,
): Promise<{ result: IngestResult; problems: ReportEntry[] }> {
  let problems: ReportEntry[] = [];
  let result: IngestResult | undefined;
  for (const channel of ['call', 'line', 'email'] as const) {
    problems = [];
    const found = problems;
    result = await ingestRows({
      source: (async function* () {
        yield input.bytes;
      })(),
      channel,
      defaultRegion: input.region,
      // Every row of the file counts, opted out or not.
      isOptedOut: async () => new Set<string>(),
      duplicates: inMemoryDuplicateFilter(),
      onBatch: input.onBatch,
      onReport: async (entries) => {
        found.push(...entries);
      },
      batchSize: input.pageSize,
    });
    // A header without this channel's column fails before any row is read: try the next.
    if (result.status !== 'failed' || result.failure.code !== 'no-recipient-column') break;
  }
  return { result: result!, problems };
}
