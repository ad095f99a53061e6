/**
 * The suppression list as it reaches a person: a task whose recipient is linked to other
 * identifiers (`Task.person`) is also suppressed by an entry on any of them whose source reaches the
 * person (`isPersonWide`, under the client's `suppressionScope`). Read where a contact starts, beside
 * the recipient's own entry: the person's members (one item per person), then their entries.
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

/** How long a client's scopes are trusted, ms (a change applies to starts within it). */
const SCOPE_CACHE_MS = 5_000;

type Scopes = Partial<Record<SuppressionSource, SuppressionScope>> | undefined;

export class PersonSuppressions {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #entries: SuppressionReader;
  readonly #scopes = new Map<string, { at: number; scopes: Scopes }>();
  readonly #now: () => number;

  constructor(doc: DynamoDBDocumentClient, controlTable: string, now: () => number = Date.now) {
    this.#doc = doc;
    this.#tableName = controlTable;
    this.#entries = new DynamoSuppressionStore(doc, controlTable);
    this.#now = now;
  }

  /**
   * Of `persons` (recipient → the key of its linked person), the recipients another identifier of
   * whose person is suppressed person-wide, with the reason their task ends with.
   */
  async reasons(
    clientId: string,
    persons: ReadonlyMap<string, string>,
  ): Promise<ReadonlyMap<string, string>> {
    const out = new Map<string, string>();
    if (persons.size === 0) return out;
    const members = await this.#members(clientId, [...new Set(persons.values())]);
    const others = new Map<string, string[]>();
    for (const [recipient, person] of persons)
      others.set(
        recipient,
        (members.get(person) ?? []).filter((id) => id !== recipient),
      );
    const wanted = [...new Set([...others.values()].flat())];
    if (wanted.length === 0) return out;
    const [entries, scopes] = await Promise.all([
      this.#entries.suppressed(clientId, wanted),
      this.#scopesOf(clientId),
    ]);
    for (const [recipient, ids] of others) {
      const entry = ids.map((id) => entries.get(id)).find((e) => e && isPersonWide(e.source, scopes));
      if (entry) out.set(recipient, personSuppressedReason(entry.source));
    }
    return out;
  }

  /** Each person's identifiers. */
  async #members(clientId: string, persons: readonly string[]): Promise<Map<string, string[]>> {
    const items = await batchGetItems(
      this.#doc,
      this.#tableName,
      persons.map((person) => personKeys.members(clientId, person)),
      { consistent: true, projection: 'person, members' },
    );
    return new Map(items.map((item) => [String(item.person), (item.members as string[] | undefined) ?? []]));
  }

  async #scopesOf(clientId: string): Promise<Scopes> {
    const cached = this.#scopes.get(clientId);
    const now = this.#now();
    if (cached && now - cached.at < SCOPE_CACHE_MS) return cached.scopes;
    const out = await this.#doc.send(
      new GetCommand({
        TableName: this.#tableName,
        Key: keys.client(clientId),
        ProjectionExpression: 'suppressionScope',
      }),
    );
    const scopes = out.Item?.suppressionScope as Scopes;
    this.#scopes.set(clientId, { at: now, scopes });
    return scopes;
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
  persons: ReadonlyMap<string, string>,
) => Promise<ReadonlyMap<string, string>> {
  const own = suppressionReasons(new DynamoSuppressionStore(doc, controlTable));
  const throughPersons = new PersonSuppressions(doc, controlTable);
  return async (clientId, recipients, persons) => {
    const [direct, indirect] = await Promise.all([
      own(clientId, recipients),
      throughPersons.reasons(clientId, persons),
    ]);
    return new Map([...indirect, ...direct]);
  };
}
