/**
 * DynamoDB adapter of the {@link PeopleStore}: a link item per identifier and a members item per
 * linked person in the control table (`shared/people/model.ts`'s `personKeys`). A group is linked
 * in one transaction fenced by what was read (new links must not exist, moved links must still name
 * their old person, a person's members must be at the version read), and read again and planned
 * again when another writer got there first.
 */
import { randomUUID } from 'node:crypto';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import {
  connectedGroups,
  type LinkPlan,
  type LinkState,
  newPersonKey,
  personKeys,
  planLink,
  type StoredPerson,
} from '#shared/people/model.ts';
import type { LinkOutcome, PeopleStore, Person } from '#shared/people/ports.ts';
import { batchGetItems } from './dynamo-batch-get.ts';

/** Groups linked at once. */
const LINKS_AT_ONCE = 8;
/** Times a group is read and planned again after another writer changed it first. */
const CONFLICT_RETRIES = 5;

/**
 * The ConditionCheck a start holds so that its counters are kept under the person the identifier
 * is at that moment: its link still names `person` (or, when `person` is the identifier itself,
 * there is no link). It fails when a link was made or moved since the task's person was read.
 */
export function personLinkCheck(tableName: string, clientId: string, identifier: string, person: string) {
  const unlinked = person === identifier;
  return {
    ConditionCheck: {
      TableName: tableName,
      Key: personKeys.link(clientId, identifier),
      ConditionExpression: unlinked ? 'attribute_not_exists(pk)' : 'person = :person',
      ...(unlinked ? {} : { ExpressionAttributeValues: { ':person': person } }),
    },
  };
}

export class DynamoPeopleStore implements PeopleStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #now: () => number;
  /** Clients whose marker this store wrote (or found). */
  readonly #marked = new Set<string>();

  constructor(doc: DynamoDBDocumentClient, tableName: string, now: () => number = Date.now) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#now = now;
  }

  async link(clientId: string, groups: readonly (readonly string[])[]): Promise<LinkOutcome> {
    const identifiers = [...new Set(groups.flat())];
    const state = await this.#state(clientId, identifiers);
    // Groups that touch one known person (through different identifiers) are linked as one: they
    // would all write its members item, and race each other.
    const components = connectedGroups(
      groups.map((group) => [...group, ...group.flatMap((id) => personToken(state.links.get(id)))]),
    ).map((component) => component.filter((id) => !id.startsWith(PERSON_TOKEN)));
    const persons = new Map(state.links);
    const refused: { identifiers: readonly string[]; reason: string }[] = [];
    const linking = components.filter((c) => c.length > 1);
    if (linking.length > 0) await this.#markClient(clientId);
    for (let i = 0; i < linking.length; i += LINKS_AT_ONCE) {
      const done = await Promise.all(
        linking.slice(i, i + LINKS_AT_ONCE).map((c) => this.#linkOne(clientId, c, state)),
      );
      done.forEach((outcome, j) => {
        if (outcome.kind === 'too-many')
          refused.push({ identifiers: linking[i + j]!, reason: outcome.reason });
        else for (const id of outcome.members) persons.set(id, outcome.person);
      });
    }
    return { persons, refused };
  }

  async person(clientId: string, identifier: string): Promise<Person> {
    const state = await this.#state(clientId, [identifier]);
    const key = state.links.get(identifier);
    const stored = key === undefined ? undefined : state.persons.get(key);
    return stored
      ? { person: stored.person, identifiers: stored.members }
      : { person: identifier, identifiers: [identifier] };
  }

  /** The client's marker (`personKeys.marker`), written once before its first link: starts then read links. */
  async #markClient(clientId: string): Promise<void> {
    if (this.#marked.has(clientId)) return;
    await this.#doc.send(
      new UpdateCommand({
        TableName: this.#tableName,
        Key: personKeys.marker(clientId),
        UpdateExpression: 'SET since = if_not_exists(since, :now)',
        ExpressionAttributeValues: { ':now': this.#now() },
      }),
    );
    this.#marked.add(clientId);
  }

  /** Waits a little longer each time another writer won (full jitter from 20 ms, at most 1 s). */
  async #backOff(attempt: number): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(1_000, 20 * 2 ** attempt)));
  }

  async unlink(clientId: string, identifier: string): Promise<boolean> {
    for (let attempt = 0; attempt <= CONFLICT_RETRIES; attempt++) {
      const state = await this.#state(clientId, [identifier]);
      const key = state.links.get(identifier);
      if (key === undefined) return false;
      const stored = state.persons.get(key) ?? { person: key, members: [identifier], version: 0 };
      const rest = stored.members.filter((id) => id !== identifier);
      const items = [
        {
          Delete: {
            TableName: this.#tableName,
            Key: personKeys.link(clientId, identifier),
            ConditionExpression: 'person = :person',
            ExpressionAttributeValues: { ':person': key },
          },
        },
        this.#membersWrite(clientId, stored, rest),
      ];
      if (await this.#transact(items)) return true;
      await this.#backOff(attempt);
    }
    throw new Error(`unlinking ${identifier} kept conflicting with other writers`);
  }

  /** Links one group, planning again from a fresh read while another writer wins the race. */
  async #linkOne(
    clientId: string,
    group: readonly string[],
    first: LinkState,
  ): Promise<
    { kind: 'too-many'; reason: string } | { kind: 'linked'; person: string; members: readonly string[] }
  > {
    let state = first;
    for (let attempt = 0; attempt <= CONFLICT_RETRIES; attempt++) {
      const decision = planLink(group, state, () => newPersonKey(this.#now()));
      if (decision.kind === 'too-many') return decision;
      if (decision.kind === 'same') {
        const members = state.persons.get(decision.person)?.members ?? group;
        return { kind: 'linked', person: decision.person, members };
      }
      if (decision.kind === 'link' && (await this.#transact(this.#planItems(clientId, decision))))
        return { kind: 'linked', person: decision.person, members: decision.members };
      await this.#backOff(attempt);
      state = await this.#state(clientId, group);
    }
    throw new Error(`linking ${group.join(', ')} kept conflicting with other writers`);
  }

  /** The transaction of a plan: the links, the kept person's members, the merged persons gone. */
  #planItems(clientId: string, plan: LinkPlan): Record<string, unknown>[] {
    const links = plan.links.map(({ identifier, from }) => ({
      Put: {
        TableName: this.#tableName,
        Item: { ...personKeys.link(clientId, identifier), person: plan.person },
        ConditionExpression: from === undefined ? 'attribute_not_exists(pk)' : 'person = :from',
        ...(from === undefined ? {} : { ExpressionAttributeValues: { ':from': from } }),
      },
    }));
    const before = plan.before ?? { person: plan.person, members: [], version: 0 };
    const dropped = plan.dropped.map((p) => ({
      Delete: {
        TableName: this.#tableName,
        Key: personKeys.members(clientId, p.person),
        ...versionCondition(p),
      },
    }));
    const guards = plan.guards.map((identifier) => ({
      ConditionCheck: {
        TableName: this.#tableName,
        Key: personKeys.link(clientId, identifier),
        ConditionExpression: 'person = :person',
        ExpressionAttributeValues: { ':person': plan.person },
      },
    }));
    return [...links, ...guards, this.#membersWrite(clientId, before, plan.members), ...dropped];
  }

  /** The person's members item set to `members` (deleted when none is left), at the version read. */
  #membersWrite(clientId: string, before: StoredPerson, members: readonly string[]): Record<string, unknown> {
    const Key = personKeys.members(clientId, before.person);
    if (members.length === 0)
      return { Delete: { TableName: this.#tableName, Key, ...versionCondition(before) } };
    return {
      Put: {
        TableName: this.#tableName,
        Item: { ...Key, person: before.person, members: [...members], version: before.version + 1 },
        ...versionCondition(before),
      },
    };
  }

  /** True when written; false when a condition failed or another transaction held an item. */
  async #transact(items: readonly Record<string, unknown>[]): Promise<boolean> {
    try {
      await this.#doc.send(
        new TransactWriteCommand({
          ClientRequestToken: randomUUID(),
          TransactItems: items as NonNullable<
            ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']
          >,
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof TransactionCanceledException) return false;
      throw error;
    }
  }

  /** The links of `identifiers` and the persons they name, read consistently. */
  async #state(clientId: string, identifiers: readonly string[]): Promise<LinkState> {
    const unique = [...new Set(identifiers)];
    const linkItems = await batchGetItems(
      this.#doc,
      this.#tableName,
      unique.map((id) => personKeys.link(clientId, id)),
      { consistent: true },
    );
    const prefix = `PERSON#${clientId}#`;
    const links = new Map(
      linkItems.map((item) => [String(item.pk).slice(prefix.length), String(item.person)]),
    );
    const keys = [...new Set(links.values())];
    const personItems = await batchGetItems(
      this.#doc,
      this.#tableName,
      keys.map((key) => personKeys.members(clientId, key)),
      { consistent: true },
    );
    const persons = new Map<string, StoredPerson>(
      // A link whose person's members item is gone (a merge deleted it after the link was read, or
      // it never was): the person as its links read show it, not yet stored (version 0).
      keys.map((key) => [
        key,
        { person: key, members: [...links].filter(([, p]) => p === key).map(([id]) => id), version: 0 },
      ]),
    );
    for (const item of personItems) {
      const person = String(item.person);
      persons.set(person, {
        person,
        members: (item.members as string[]) ?? [],
        version: Number(item.version ?? 0),
      });
    }
    return { links, persons };
  }
}

/** One identifier's person key as it is now (the identifier itself when unlinked): a start whose link check failed reads it. */
export async function readPersonOf(
  doc: DynamoDBDocumentClient,
  tableName: string,
  clientId: string,
  identifier: string,
): Promise<string> {
  const out = await doc.send(
    new GetCommand({
      TableName: tableName,
      Key: personKeys.link(clientId, identifier),
      ConsistentRead: true,
      ProjectionExpression: 'person',
    }),
  );
  return out.Item ? String(out.Item.person) : identifier;
}

/** What marks a person's key among a group's identifiers while groups are joined by the persons they touch. */
const PERSON_TOKEN = '\u0000person:';

function personToken(person: string | undefined): string[] {
  return person === undefined ? [] : [`${PERSON_TOKEN}${person}`];
}

/** A members item's write held to the version read (none when it did not exist). */
function versionCondition(person: StoredPerson) {
  return person.version === 0
    ? { ConditionExpression: 'attribute_not_exists(pk)' }
    : {
        ConditionExpression: 'version = :version',
        ExpressionAttributeValues: { ':version': person.version },
      };
}
