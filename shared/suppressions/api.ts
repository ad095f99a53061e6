/**
 * The suppression list's operator use cases (`/clients/{clientId}/suppressions`): look up, page,
 * add, remove, and upload a CSV of recipients.
 *
 * Input: the client id of the route (IAM, or the console's tenancy check, decided who may name it),
 * the request's query or body. Output: the answers below; a bad request is a `ValidationError`
 * naming the field (`recipients[2]`, `reason`, `limit`), an unknown client a `ClientNotFoundError`.
 *
 * An upload is read by the call lists' ingest (`shared/csv/read-list.ts`): the same encodings,
 * separators and headers (`phone`/`電話番号`… or `userId`/`LINEユーザーID`…), a `reason`/`理由`
 * column kept as each entry's reason; bad rows are reported with row, column and reason, the good
 * ones added.
 */

import { readIdentifierList } from '#shared/csv/read-identifier-list.ts';
import type { TaskDraft } from '#shared/csv/read-list.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { ClientNotFoundError, emptyFieldErrors, ValidationError } from '#shared/jobs/errors.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import {
  entryReason,
  kindOf,
  readSuppressionRecipient,
  SUPPRESSION_BATCH_MAX,
  SUPPRESSION_REASON_MAX,
  type SuppressionEntry,
  type SuppressionSource,
} from './model.ts';
import type { SuppressionStore } from './ports.ts';

/** Page size of the list when `limit` is not given, and its largest. */
export const SUPPRESSION_PAGE_DEFAULT = 50;
export const SUPPRESSION_PAGE_MAX = 500;
/** Entries written per store call during an upload. */
const UPLOAD_PAGE = 100;
/** Headers (compared case-insensitively, without spaces) of an upload's reason column. */
const REASON_HEADERS = ['reason', '理由', '備考', 'note'];

/** An entry as the API shows it. */
export interface SuppressionView {
  readonly recipient: string;
  /** What the operator typed, when it differs from `recipient`. */
  readonly input?: string;
  readonly suppressed: boolean;
  readonly kind?: SuppressionEntry['kind'];
  readonly source?: SuppressionSource;
  readonly reason?: string;
  readonly addedAt?: string;
}

export interface SuppressionsAnswer {
  readonly suppressions: readonly SuppressionView[];
  readonly next?: string;
}

/** What an upload did: entries added, and each row that was not (row, column, reason, value). */
export interface SuppressionUploadAnswer {
  readonly dataRows: number;
  readonly added: number;
  readonly rejected: number;
  readonly skipped: number;
  readonly problems: readonly ReportEntry[];
}

export interface SuppressionsApiDeps {
  readonly clients: { get(clientId: string): Promise<ClientSettings | undefined> };
  readonly store: SuppressionStore;
  readonly clock: { now(): number };
}

type Query = Readonly<Record<string, string | undefined>>;

/** The suppression list's use cases; see the module comment. */
export class SuppressionsApi {
  readonly #deps: SuppressionsApiDeps;

  constructor(deps: SuppressionsApiDeps) {
    this.#deps = deps;
  }

  /** `?recipient=a,b` looks those up; else `?limit=&next=` pages through the list. */
  async find(clientId: string, query: Query): Promise<SuppressionsAnswer> {
    const client = await this.#client(clientId);
    const errors = emptyFieldErrors();
    for (const key of Object.keys(query))
      if (!['recipient', 'limit', 'next'].includes(key)) errors[key] = ['is not a known parameter'];
    if (query.recipient !== undefined) {
      if (query.limit !== undefined || query.next !== undefined)
        errors[query.limit !== undefined ? 'limit' : 'next'] = ['pages the list: not with recipient'];
      const inputs = splitList(query.recipient);
      const read = readRecipients(inputs, client.defaultRegion, 'recipient', errors);
      if (Object.keys(errors).length > 0) throw new ValidationError('invalid suppression query', errors);
      const found = await this.#deps.store.suppressed(
        clientId,
        read.map((r) => r.recipient),
      );
      return {
        suppressions: read.map(({ input, recipient }) => {
          const entry = found.get(recipient);
          const typed = input !== recipient ? { input } : {};
          return entry ? { ...view(entry), ...typed } : { recipient, ...typed, suppressed: false };
        }),
      };
    }
    const limit = query.limit === undefined ? SUPPRESSION_PAGE_DEFAULT : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > SUPPRESSION_PAGE_MAX)
      errors.limit = [`must be a whole number from 1 to ${SUPPRESSION_PAGE_MAX}`];
    if (query.next === '') errors.next = ['is not a token this API returned'];
    if (Object.keys(errors).length > 0) throw new ValidationError('invalid suppression query', errors);
    const page = await this.#deps.store.page(clientId, {
      limit,
      ...(query.next === undefined ? {} : { next: query.next }),
    });
    return { suppressions: page.entries.map(view), ...(page.next ? { next: page.next } : {}) };
  }

  /** Adds `{recipients: [...], reason?}` (or `{recipient}`) to the list, source `api`. */
  async add(clientId: string, body: unknown): Promise<SuppressionsAnswer> {
    const client = await this.#client(clientId);
    const { inputs, reason } = readAddBody(body);
    const errors = emptyFieldErrors();
    const read = readRecipients(inputs, client.defaultRegion, 'recipients', errors);
    if (Object.keys(errors).length > 0) throw new ValidationError('invalid suppression', errors);
    const now = this.#deps.clock.now();
    const entries = uniqueBy(read, (r) => r.recipient).map(
      (r): SuppressionEntry => ({
        recipient: r.recipient,
        kind: r.kind,
        source: 'api',
        reason: entryReason(reason, 'api'),
        addedAt: now,
      }),
    );
    await this.#deps.store.add(clientId, entries);
    return { suppressions: entries.map(view) };
  }

  /** Takes one recipient off the list (written as a list row would be). */
  async remove(clientId: string, input: string): Promise<SuppressionView> {
    const client = await this.#client(clientId);
    const read = readSuppressionRecipient(input, client.defaultRegion);
    if (!read.ok) throw new ValidationError('invalid suppression', { recipient: [read.reason] });
    const removed = await this.#deps.store.remove(clientId, read.recipient);
    return {
      recipient: read.recipient,
      ...(input !== read.recipient ? { input } : {}),
      suppressed: false,
      ...(removed ? {} : { reason: 'was not on the list' }),
    };
  }

  /** Reads an uploaded CSV (see the module comment) and adds its good rows, source `csv`. */
  async upload(clientId: string, bytes: Uint8Array, query: Query): Promise<SuppressionUploadAnswer> {
    const client = await this.#client(clientId);
    const errors = emptyFieldErrors();
    for (const key of Object.keys(query)) if (key !== 'reason') errors[key] = ['is not a known parameter'];
    if (query.reason !== undefined && [...query.reason].length > SUPPRESSION_REASON_MAX)
      errors.reason = [`must be at most ${SUPPRESSION_REASON_MAX} characters`];
    if (Object.keys(errors).length > 0) throw new ValidationError('invalid suppression upload', errors);
    const writer = new UploadWriter(this.#deps, clientId, query.reason);
    const { result, problems } = await readIdentifierList({
      bytes,
      region: client.defaultRegion,
      onBatch: (drafts) => writer.write(drafts),
      pageSize: UPLOAD_PAGE,
    });
    if (result.status === 'failed' && result.failure.code !== 'no-usable-rows')
      throw new ValidationError('the suppression list cannot be read', { file: [result.failure.reason] });
    const { counts } = result;
    return {
      dataRows: counts.dataRows,
      added: writer.added,
      rejected: counts.rejected,
      skipped: counts.skipped,
      problems,
    };
  }

  async #client(clientId: string): Promise<ClientSettings> {
    const client = await this.#deps.clients.get(clientId);
    if (!client) throw new ClientNotFoundError(`no client ${clientId}`);
    return client;
  }
}

/** Writes an upload's accepted rows as entries, a page at a time. */
class UploadWriter {
  readonly #deps: SuppressionsApiDeps;
  readonly #clientId: string;
  readonly #reason: string | undefined;
  added = 0;

  constructor(deps: SuppressionsApiDeps, clientId: string, reason: string | undefined) {
    this.#deps = deps;
    this.#clientId = clientId;
    this.#reason = reason;
  }

  async write(drafts: readonly TaskDraft[]): Promise<void> {
    if (drafts.length === 0) return;
    const now = this.#deps.clock.now();
    const entries = drafts.map(
      (d): SuppressionEntry => ({
        recipient: d.recipient,
        kind: kindOf(d.recipient),
        source: 'csv',
        reason: entryReason(reasonColumn(d.variables) ?? this.#reason, 'csv'),
        addedAt: now,
      }),
    );
    await this.#deps.store.add(this.#clientId, entries);
    this.added += entries.length;
  }
}

function reasonColumn(variables: Readonly<Record<string, string>>): string | undefined {
  for (const [header, value] of Object.entries(variables))
    if (REASON_HEADERS.includes(header.normalize('NFKC').toLowerCase().replace(/\s/g, ''))) return value;
  return undefined;
}

function view(entry: SuppressionEntry): SuppressionView {
  return {
    recipient: entry.recipient,
    suppressed: true,
    kind: entry.kind,
    source: entry.source,
    reason: entry.reason,
    addedAt: new Date(entry.addedAt).toISOString(),
  };
}

function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

type Read = { input: string; recipient: string; kind: SuppressionEntry['kind'] };

/** Reads each input; errors go under `field` (`recipients[i]` for a list). */
function readRecipients(
  inputs: readonly string[],
  region: string,
  field: string,
  errors: Record<string, string[]>,
): Read[] {
  if (inputs.length === 0) errors[field] = ['must name a phone number or a LINE user id'];
  else if (inputs.length > SUPPRESSION_BATCH_MAX)
    errors[field] = [`may name at most ${SUPPRESSION_BATCH_MAX} recipients at once`];
  const read: Read[] = [];
  inputs.forEach((input, i) => {
    const r = readSuppressionRecipient(input, region);
    if (r.ok) read.push({ input, recipient: r.recipient, kind: r.kind });
    else {
      const key = field === 'recipients' ? `recipients[${i}]` : field;
      errors[key] = [...(errors[key] ?? []), r.reason];
    }
  });
  return read;
}

/** The add body: `{recipients: string[], reason?}` or `{recipient: string, reason?}`. */
function readAddBody(body: unknown): { inputs: string[]; reason?: string } {
  const errors = emptyFieldErrors();
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ValidationError('invalid suppression', { body: ['must be a JSON object'] });
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b))
    if (!['recipients', 'recipient', 'reason'].includes(key)) errors[key] = ['is not a known field'];
  let inputs: string[] = [];
  if (b.recipient !== undefined && b.recipients !== undefined)
    errors.recipient = ['give recipient or recipients, not both'];
  else if (typeof b.recipient === 'string') inputs = [b.recipient.trim()];
  else if (Array.isArray(b.recipients) && b.recipients.every((r) => typeof r === 'string'))
    inputs = (b.recipients as string[]).map((r) => r.trim());
  else errors.recipients = ['must be a list of phone numbers, LINE user ids or email addresses'];
  if (b.reason !== undefined && typeof b.reason !== 'string') errors.reason = ['must be a string'];
  else if (typeof b.reason === 'string' && [...b.reason].length > SUPPRESSION_REASON_MAX)
    errors.reason = [`must be at most ${SUPPRESSION_REASON_MAX} characters`];
  if (Object.keys(errors).length > 0) throw new ValidationError('invalid suppression', errors);
  return { inputs, ...(typeof b.reason === 'string' ? { reason: b.reason } : {}) };
}

function uniqueBy<T>(items: readonly T[], key: (item: T) => string): T[] {
  const seen = new Map<string, T>();
  for (const item of items) if (!seen.has(key(item))) seen.set(key(item), item);
  return [...seen.values()];
}
