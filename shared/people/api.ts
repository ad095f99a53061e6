/**
 * People's operator use cases (`/clients/{clientId}/people`): look up the person of an identifier,
 * link identifiers into one person, take one out of its person.
 *
 * Input: the client id of the route (IAM, or the console's tenancy check, decided who may name it),
 * the identifier of the path or the request's body. An identifier is written as a list's cell
 * would be: a phone number (national numbers in the client's `defaultRegion`), a LINE user id or an
 * email address. A bad one is a `ValidationError` naming its field (`identifiers[1]`), an unknown
 * client a `ClientNotFoundError`.
 */

import { readIdentifierList } from '#shared/csv/read-identifier-list.ts';
import type { TaskDraft } from '#shared/csv/read-list.ts';
import {
  normalizeEmailRecipient,
  normalizeLineUserId,
  normalizePhoneNumber,
} from '#shared/csv/recipients.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { ClientNotFoundError, emptyFieldErrors, ValidationError } from '#shared/jobs/errors.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { HISTORY_LIMIT, type HistoryEntry, historyEntry, type PersonTaskReader } from './history.ts';
import { type IdentifierKind, identifierKind, PERSON_MEMBERS_MAX } from './model.ts';
import type { PeopleStore, Person } from './ports.ts';

/** Rows linked per store call during an upload. */
const PEOPLE_UPLOAD_PAGE = 100;

/** What an upload did: rows linked, and each row that was not (row, column, reason). */
export interface PeopleUploadAnswer {
  readonly dataRows: number;
  /** Rows with two or more identifiers, made one person. */
  readonly linked: number;
  readonly rejected: number;
  readonly problems: readonly ReportEntry[];
}

/** A person as the API shows it: its key, and each identifier with its kind. */
export interface PersonView {
  readonly person: string;
  readonly identifiers: readonly { readonly identifier: string; readonly kind: IdentifierKind }[];
}

/** A person and their history: each task of theirs, newest job first (`shared/people/history.ts`). */
export interface PersonHistoryView extends PersonView {
  readonly history: readonly HistoryEntry[];
  /** There are older tasks than the {@link HISTORY_LIMIT} shown. */
  readonly more: boolean;
}

export interface PeopleApiDeps {
  readonly clients: { get(clientId: string): Promise<ClientSettings | undefined> };
  readonly store: PeopleStore;
  readonly tasks: PersonTaskReader;
}

export class PeopleApi {
  readonly #deps: PeopleApiDeps;

  constructor(deps: PeopleApiDeps) {
    this.#deps = deps;
  }

  /** The person of `input` (itself alone when it is linked to nothing). */
  async get(clientId: string, input: string): Promise<PersonView> {
    const region = (await this.#client(clientId)).defaultRegion;
    const identifier = readOne(input, region);
    return viewOf(await this.#deps.store.person(clientId, identifier));
  }

  /** The person of `input` and every task of theirs, newest job first, on every channel. */
  async history(clientId: string, input: string): Promise<PersonHistoryView> {
    const region = (await this.#client(clientId)).defaultRegion;
    const person = viewOf(await this.#deps.store.person(clientId, readOne(input, region)));
    const identifiers = person.identifiers.map((i) => i.identifier);
    const { tasks, more } = await this.#deps.tasks.latest(clientId, identifiers, HISTORY_LIMIT);
    return { ...person, history: tasks.map(historyEntry), more };
  }

  /** `{"identifiers": [a, b, …]}`: makes them one person (joining the persons they are). */
  async link(clientId: string, body: unknown): Promise<PersonView> {
    const region = (await this.#client(clientId)).defaultRegion;
    const identifiers = readIdentifiers(body, region);
    const { refused } = await this.#deps.store.link(clientId, [identifiers]);
    if (refused.length > 0) throw new ValidationError('invalid link', { identifiers: [refused[0]!.reason] });
    return viewOf(await this.#deps.store.person(clientId, identifiers[0]!));
  }

  /**
   * A CSV of people, a row each: every identifier column of a row (phone, LINE user id, email
   * headers, as a job's list) becomes one person. Read as a job's list is; a bad row is reported
   * with its row, column and reason, and the good ones are linked.
   */
  async upload(clientId: string, bytes: Uint8Array): Promise<PeopleUploadAnswer> {
    const region = (await this.#client(clientId)).defaultRegion;
    let linked = 0;
    const refused: ReportEntry[] = [];
    const { result, problems } = await readIdentifierList({
      bytes,
      region,
      // Every row read, a repeated identifier too: its row may bring another identifier along.
      onBatch: async (_accepted, page) => {
        const rows = page.read.filter((draft) => (draft.identifiers ?? []).length > 0);
        if (rows.length === 0) return;
        const outcome = await this.#deps.store.link(clientId, rows.map(identifiersOf));
        for (const draft of rows) {
          const reason = outcome.refused.find((group) => group.identifiers.includes(draft.recipient))?.reason;
          if (reason === undefined) linked++;
          else refused.push({ row: draft.row, outcome: 'rejected', code: 'person-too-large', reason });
        }
      },
      pageSize: PEOPLE_UPLOAD_PAGE,
    });
    if (result.status === 'failed' && result.failure.code !== 'no-usable-rows')
      throw new ValidationError('the list of people cannot be read', { file: [result.failure.reason] });
    const { counts } = result;
    return {
      dataRows: counts.dataRows,
      linked,
      rejected: counts.rejected + refused.length,
      // A repeated identifier is no problem here: its row was linked all the same.
      problems: [...problems.filter((p) => p.code !== 'duplicate'), ...refused].sort((a, b) => a.row - b.row),
    };
  }

  /** Takes `input` out of its person; the others stay one person. */
  async unlink(clientId: string, input: string): Promise<{ identifier: string; unlinked: boolean }> {
    const region = (await this.#client(clientId)).defaultRegion;
    const identifier = readOne(input, region);
    return { identifier, unlinked: await this.#deps.store.unlink(clientId, identifier) };
  }

  async #client(clientId: string): Promise<ClientSettings> {
    const client = await this.#deps.clients.get(clientId);
    if (!client) throw new ClientNotFoundError(`no client ${clientId}`);
    return client;
  }
}

function identifiersOf(draft: TaskDraft): string[] {
  return [draft.recipient, ...(draft.identifiers ?? [])];
}

function viewOf(person: Person): PersonView {
  return {
    person: person.person,
    identifiers: person.identifiers.map((identifier) => ({ identifier, kind: identifierKind(identifier) })),
  };
}

/** The body's identifiers, each read; every bad one named at its index. */
function readIdentifiers(body: unknown, region: string): string[] {
  const list = (body as { identifiers?: unknown } | undefined)?.identifiers;
  if (!Array.isArray(list) || list.length < 2 || list.length > PERSON_MEMBERS_MAX)
    throw new ValidationError('invalid link', {
      identifiers: [
        `must be a list of 2 to ${PERSON_MEMBERS_MAX} phone numbers, LINE user ids or email addresses`,
      ],
    });
  const errors = emptyFieldErrors();
  const read = list.flatMap((value, i) => {
    const checked =
      typeof value === 'string'
        ? readIdentifier(value, region)
        : { ok: false as const, reason: 'must be text' };
    if (checked.ok) return [checked.identifier];
    errors[`identifiers[${i}]`] = [checked.reason];
    return [];
  });
  if (Object.keys(errors).length > 0) throw new ValidationError('invalid link', errors);
  return [...new Set(read)];
}

function readOne(input: string, region: string): string {
  const checked = readIdentifier(input, region);
  if (!checked.ok) throw new ValidationError('invalid identifier', { identifier: [checked.reason] });
  return checked.identifier;
}

/** An identifier as a list's cell would be read: an address (has `@`), a LINE user id, else a phone number. */
export function readIdentifier(
  input: string,
  region: string,
): { ok: true; identifier: string } | { ok: false; reason: string } {
  const text = input.trim();
  if (text.includes('@')) {
    const email = normalizeEmailRecipient(text);
    return email.ok ? { ok: true, identifier: email.recipient } : { ok: false, reason: email.reason };
  }
  const line = normalizeLineUserId(text);
  if (line.ok) return { ok: true, identifier: line.recipient };
  const phone = normalizePhoneNumber(text, region as Parameters<typeof normalizePhoneNumber>[1]);
  if (phone.ok) return { ok: true, identifier: phone.recipient };
  return {
    ok: false,
    reason: `${JSON.stringify(input)} is not a phone number (${phone.reason}), a LINE user id (U + 32 hex digits) or an email address`,
  };
}
