/** What the people use cases need of a store (adapter: `shared/adapters/dynamo-people.ts`). */

/** A person as the contacts API shows it. */
export interface Person {
  /** The person's key: `P…` when linked, else the one identifier itself. */
  readonly person: string;
  readonly identifiers: readonly string[];
}

/** What linking a page's groups did. */
export interface LinkOutcome {
  /** identifier → the key of its linked person, for every linked identifier named (a lone unlinked one is absent). */
  readonly persons: ReadonlyMap<string, string>;
  /** Groups left unlinked, and why (a person would hold too many identifiers). */
  readonly refused: readonly { readonly identifiers: readonly string[]; readonly reason: string }[];
}

export interface PeopleStore {
  /**
   * Makes each group's identifiers one person (groups sharing an identifier are one); a group of
   * one is only read. Idempotent: linking what is linked writes nothing.
   */
  link(clientId: string, groups: readonly (readonly string[])[]): Promise<LinkOutcome>;
  /** The person of `identifier`: its key and identifiers (itself alone when unlinked). */
  person(clientId: string, identifier: string): Promise<Person>;
  /** Takes `identifier` out of its person; false when it was not linked. */
  unlink(clientId: string, identifier: string): Promise<boolean>;
}
