/**
 * People: per client, the identifiers (a phone number in E.164, a LINE user id, an email address
 * as `shared/csv/recipients.ts` normalises them) that belong to one customer. Identifiers seen
 * together in a list row, or linked through the contacts API, are one person; linking is
 * transitive. An identifier never linked is a person of its own, whose key is the identifier
 * itself, so a client that never links anything keeps its counters' keys (`docs/people.md`).
 *
 * A linked person's key is written once (`P` + a ULID) and never changes while the person lives:
 * removing an identifier from a person does not move the counters kept under its key. Two persons
 * joined by a row become the one with more members (ties: the smaller key).
 */
import { newUlid } from '#shared/ids.ts';

/** Most identifiers one person holds: a row carries at most three; a person is a customer, not a household. */
export const PERSON_MEMBERS_MAX = 20;

/** What kind of identifier a normalised one is (E.164 starts with `+`; an address has an `@`). */
export type IdentifierKind = 'phone' | 'line' | 'email';

export function identifierKind(identifier: string): IdentifierKind {
  if (identifier.startsWith('+')) return 'phone';
  return identifier.includes('@') ? 'email' : 'line';
}

/** A new linked person's key. */
export function newPersonKey(now: number): string {
  return `P${newUlid(now)}`;
}

/**
 * Where people live in the control table: one partition per identifier and per person, no scan;
 * and a client's marker, written before its first link, so that a client that never linked anything
 * reads no link where a contact starts.
 */
export const personKeys = {
  marker: (clientId: string) => ({ pk: `PERSON#${clientId}`, sk: 'PEOPLE' }),
  link: (clientId: string, identifier: string) => ({ pk: `PERSON#${clientId}#${identifier}`, sk: 'LINK' }),
  members: (clientId: string, person: string) => ({ pk: `PERSON#${clientId}#${person}`, sk: 'MEMBERS' }),
};

/** A linked person as stored: its members and the version each change of them raises. */
export interface StoredPerson {
  readonly person: string;
  readonly members: readonly string[];
  readonly version: number;
}

/** What is known of a group's identifiers before linking them: each one's person, and those persons. */
export interface LinkState {
  /** identifier → its person's key, for the identifiers that are linked. */
  readonly links: ReadonlyMap<string, string>;
  readonly persons: ReadonlyMap<string, StoredPerson>;
}

/** The writes that make a group one person. */
export interface LinkPlan {
  readonly kind: 'link';
  /** The person the group is (kept, or new when `before` is undefined). */
  readonly person: string;
  /** The person's members before (for the version check), undefined for a new person. */
  readonly before: StoredPerson | undefined;
  readonly members: readonly string[];
  /** Links to write: `from` is the person it named (a merge), undefined for a new link. */
  readonly links: readonly { readonly identifier: string; readonly from?: string }[];
  /** Persons merged into `person`: their members items go. */
  readonly dropped: readonly StoredPerson[];
  /**
   * The group's identifiers already linked to `person`, which nothing else writes: a check that
   * they still are (a read taken before another writer moved one must not be written on).
   */
  readonly guards: readonly string[];
}

export type LinkDecision =
  | LinkPlan
  | { readonly kind: 'same'; readonly person: string }
  /** What was read is not one moment's state (another writer moved a link between two reads): read again. */
  | { readonly kind: 'stale' }
  | { readonly kind: 'too-many'; readonly reason: string };

/**
 * How `group` (identifiers seen together) becomes one person, given what is stored: nothing to
 * write when they already are one; a new person when none is linked; else the largest person they
 * touch gains the others' members and the unlinked identifiers.
 */
export function planLink(group: readonly string[], state: LinkState, newKey: () => string): LinkDecision {
  const identifiers = [...new Set(group)];
  const touched = [...new Set(identifiers.flatMap((id) => state.links.get(id) ?? []))]
    .map((key) => state.persons.get(key) ?? { person: key, members: [], version: 0 })
    .sort((a, b) => b.members.length - a.members.length || a.person.localeCompare(b.person));
  const kept = touched[0];
  const unlinked = identifiers.filter((id) => !state.links.has(id));
  if (kept && touched.length === 1 && unlinked.length === 0) return { kind: 'same', person: kept.person };
  const dropped = touched.slice(1);
  const members = [...new Set([...(kept?.members ?? []), ...dropped.flatMap((p) => p.members), ...unlinked])];
  if (members.length > PERSON_MEMBERS_MAX)
    return {
      kind: 'too-many',
      reason: `linking ${identifiers.join(', ')} would make a person of ${members.length} identifiers (at most ${PERSON_MEMBERS_MAX})`,
    };
  const links = [
    ...dropped.flatMap((p) => p.members.map((identifier) => ({ identifier, from: p.person }))),
    ...unlinked.map((identifier) => ({ identifier })),
  ];
  // One identifier written twice (unlinked, yet a member of a person; a member of two persons):
  // the links and the members were read at different moments.
  if (new Set(links.map((l) => l.identifier)).size !== links.length) return { kind: 'stale' };
  const moved = new Set(links.map((l) => l.identifier));
  const guards = kept
    ? identifiers.filter((id) => state.links.get(id) === kept.person && !moved.has(id))
    : [];
  return { kind: 'link', person: kept?.person ?? newKey(), before: kept, members, links, dropped, guards };
}

/**
 * The groups of a page's rows as persons: rows that share an identifier are one group (so a
 * page's rows link in one write each, not in writes that race), each group its identifiers.
 */
export function connectedGroups(rows: readonly (readonly string[])[]): string[][] {
  const parent = new Map<string, string>();
  const find = (id: string): string => {
    let root = id;
    while (parent.get(root) !== root) root = parent.get(root)!;
    parent.set(id, root);
    return root;
  };
  for (const row of rows) {
    for (const id of row) if (!parent.has(id)) parent.set(id, id);
    for (const id of row.slice(1)) parent.set(find(id), find(row[0]!));
  }
  const groups = new Map<string, string[]>();
  for (const id of parent.keys()) {
    const root = find(id);
    groups.set(root, [...(groups.get(root) ?? []), id]);
  }
  return [...groups.values()];
}
