/** What the suppression list's use cases need of a store (adapter: `shared/adapters/dynamo-suppressions.ts`). */
import type { SuppressionEntry, SuppressionSource } from './model.ts';

/** Adds entries; an entry already on the list is replaced (its source, reason and time are the latest). */
export interface SuppressionWriter {
  add(clientId: string, entries: readonly SuppressionEntry[]): Promise<void>;
}

/** Which of some recipients are on a client's list, with their entries (the claim and the ingest read it). */
export interface SuppressionReader {
  /** The entries of those of `recipients` that are on the list (any number of recipients). */
  suppressed(clientId: string, recipients: readonly string[]): Promise<ReadonlyMap<string, SuppressionEntry>>;
}

export interface SuppressionStore extends SuppressionWriter, SuppressionReader {
  /** Removes an entry; false when it was not on the list. */
  remove(clientId: string, recipient: string): Promise<boolean>;
  /**
   * Removes an entry only if it came from `source` and was added at or before `before` (a LINE
   * follow takes back its own unfollow, never an operator's entry); false when nothing was removed.
   */
  removeIfFrom(
    clientId: string,
    recipient: string,
    source: SuppressionSource,
    before: number,
  ): Promise<boolean>;
  /** A page of the list in recipient order; `next` is opaque (a bad one is a `ValidationError`). */
  page(
    clientId: string,
    page: { readonly limit: number; readonly next?: string },
  ): Promise<{ readonly entries: readonly SuppressionEntry[]; readonly next?: string }>;
}
