/**
 * The suppression list as it reaches a person: a recipient linked to other identifiers is also
 * suppressed by an entry on any of them whose source reaches the person (`isPersonWide`, under the
 * client's `suppressionScope`). Read where a contact starts, beside the recipient's own entry: the
 * recipients' links as they are now (a task's `person` from its ingest is only a hint: a link made
 * since counts too), their persons' members, then the members' entries. A client that never linked
 * anything (no people marker, `personKeys.marker`) reads nothing more.
 *
 * Writers of entries stay as they are: the scope is a reading rule, so changing a client's scopes
 * applies to every entry at once.
 */
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '#shared/jobs/model.ts';
import { personKeys } from '#shared/people/model.ts';
import {
  isPersonWide,
  personSuppressedReason,
  type SuppressionScope,
  type SuppressionSource,
  suppressionReasons,
} from '#shared/suppressions/model.ts';
import type { SuppressionReader } from '#shared/suppressions/ports.ts';
import { batchGetItems } from './dynamo-batch-get.ts';
import { DynamoSuppressionStore } from './dynamo-suppressions.ts';

/** How long a client's scopes and people marker are trusted, ms (a change applies to starts within it). */
const CLIENT_CACHE_MS = 5_000;

type Scopes = Partial<Record<SuppressionSource, SuppressionScope>> | undefined;

export class PersonSuppressions {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #entries: SuppressionReader;
  readonly #clients = new Map<string, { at: number; scopes: Scopes; hasPeople: boolean }>();
  readonly #now: () => number;

  constructor(doc: DynamoDBDocumentClient, controlTable: string, now: () => number = Date.now) {
    this.#doc = doc;
    this.#tableName = controlTable;
    this.#entries = new DynamoSuppressionStore(doc, controlTable);
    this.#now = now;
  }

  /**
   * Of `recipients`, those another identifier of whose person is suppressed person-wide, with the
   * reason their task ends with. `hints`: recipient → the person its task was ingested with.
   */
  async reasons(
    clientId: string,
    recipients: readonly string[],
    hints: ReadonlyMap<string, string> = new Map(),
  ): Promise<ReadonlyMap<string, string>> {
    const out = new Map<string, string>();
    const client = await this.#client(clientId);
    if (recipients.length === 0 || (!client.hasPeople && hints.size === 0)) return out;
    const unique = [...new Set(recipients)];
    // The links as they are now, and (in the same round trip) the members of the hinted persons.
    const [persons, hinted] = await Promise.all([
      this.#personsOf(clientId, unique),
      this.#members(clientId, [...new Set(hints.values())]),
    ]);
    const missing = [...new Set(persons.values())].filter((p) => !hinted.has(p));
    const members =
      missing.length === 0 ? hinted : new Map([...hinted, ...(await this.#members(clientId, missing))]);
    const others = new Map<string, string[]>();
    for (const [recipient, person] of persons)
      others.set(
        recipient,
        (members.get(person) ?? []).filter((id) => id !== recipient),
      );
    const wanted = [...new Set([...others.values()].flat())];
    if (wanted.length === 0) return out;
    const entries = await this.#entries.suppressed(clientId, wanted);
    for (const [recipient, ids] of others) {
      const entry = ids.map((id) => entries.get(id)).find((e) => e && isPersonWide(e.source, client.scopes));
      if (entry) out.set(recipient, personSuppressedReason(entry.source));
    }
    return out;
  }

  /** The linked recipients' persons, as their links are now. */
  async #personsOf(clientId: string, recipients: readonly string[]): Promise<Map<string, string>> {
    const items = await batchGetItems(
      this.#doc,
      this.#tableName,
      recipients.map((id) => personKeys.link(clientId, id)),
      { consistent: true, projection: 'pk, person' },
    );
    const prefix = `PERSON#${clientId}#`;
    return new Map(items.map((item) => [String(item.pk).slice(prefix.length), String(item.person)]));
  }

  /** Each person's identifiers. */
  async #members(clientId: string, persons: readonly string[]): Promise<Map<string, string[]>> {
    if (persons.length === 0) return new Map();
    const items = await batchGetItems(
      this.#doc,
      this.#tableName,
      persons.map((person) => personKeys.members(clientId, person)),
      { consistent: true, projection: 'person, members' },
    );
    return new Map(items.map((item) => [String(item.person), (item.members as string[] | undefined) ?? []]));
  }

  /** The client's scopes and whether it has linked anything, read at most every few seconds. */
  async #client(clientId: string): Promise<{ scopes: Scopes; hasPeople: boolean }> {
    const cached = this.#clients.get(clientId);
    const now = this.#now();
    if (cached && now - cached.at < CLIENT_CACHE_MS) return cached;
    const [settings, marker] = await Promise.all([
      this.#doc.send(
        new GetCommand({
          TableName: this.#tableName,
          Key: keys.client(clientId),
          ProjectionExpression: 'suppressionScope',
        }),
      ),
      this.#doc.send(new GetCommand({ TableName: this.#tableName, Key: personKeys.marker(clientId) })),
    ]);
    const fresh = {
      at: now,
      scopes: settings.Item?.suppressionScope as Scopes,
      hasPeople: marker.Item !== undefined,
    };
    this.#clients.set(clientId, fresh);
    return fresh;
  }
}

/**
 * What a message claim reads of the list (`ClaimerDeps.suppressed`): the recipients' own entries,
 * and their persons' person-wide ones.
 */
export function claimSuppressions(
  doc: DynamoDBDocumentClient,
  controlTable: string,
): (
  clientId: string,
  recipients: readonly string[],
  hints: ReadonlyMap<string, string>,
) => Promise<ReadonlyMap<string, string>> {
  const own = suppressionReasons(new DynamoSuppressionStore(doc, controlTable));
  const throughPersons = new PersonSuppressions(doc, controlTable);
  return async (clientId, recipients, hints) => {
    const [direct, indirect] = await Promise.all([
      own(clientId, recipients),
      throughPersons.reasons(clientId, recipients, hints),
    ]);
    return new Map([...indirect, ...direct]);
  };
}
