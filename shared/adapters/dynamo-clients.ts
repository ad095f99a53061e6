/**
 * DynamoDB adapter of the {@link ClientStore}: a client's settings as one control-table item
 * (`CLIENT#{clientId}` / `PROFILE`), written as an update so a pause set by its own route stays.
 * Each client item is also an entry of the `byStatus` index under `statusKey = CLIENTS` (sorted by
 * client id): the administrators' list of every client is one Query of that partition, a page at
 * a time, never a scan.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ValidationError } from '#shared/jobs/errors.ts';
import { type ClientSettings, keys } from '#shared/jobs/model.ts';
import type { ClientStore } from '#shared/jobs/ports.ts';

/** Clients' settings in the control table, each also an entry of the administrators' list. */
export class DynamoClientStore implements ClientStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.#tableName = tableName;
  }

  async get(clientId: string): Promise<ClientSettings | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#tableName, Key: keys.client(clientId) }),
    );
    return out.Item ? settingsOf(out.Item) : undefined;
  }

  async list({ limit, next }: { readonly limit: number; readonly next?: string }): Promise<{
    clients: ClientSettings[];
    next?: string;
  }> {
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tableName,
        IndexName: BY_STATUS_INDEX,
        KeyConditionExpression: 'statusKey = :clients',
        ExpressionAttributeValues: { ':clients': CLIENT_LIST_KEY },
        Limit: limit,
        ...(next === undefined ? {} : { ExclusiveStartKey: clientPageKey(next) }),
      }),
    );
    const clients = (out.Items ?? []).map(settingsOf);
    const last = out.LastEvaluatedKey?.dueKey;
    return { clients, ...(typeof last === 'string' ? { next: last } : {}) };
  }

  async put(settings: ClientSettings): Promise<ClientSettings> {
    // An update, not a put: a pause set by its own route stays unless the settings name it.
    const out = await this.#doc.send(
      new UpdateCommand({
        TableName: this.#tableName,
        Key: keys.client(settings.clientId),
        ...settingsUpdate(settings),
        ReturnValues: 'ALL_NEW',
      }),
    );
    return settingsOf(out.Attributes ?? {});
  }

  async setPaused(clientId: string, paused: boolean, now: number): Promise<ClientSettings | undefined> {
    try {
      const out = await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: keys.client(clientId),
          // The list entry too: a client saved before the list existed joins it here.
          UpdateExpression: 'SET paused = :paused, updatedAt = :now, statusKey = :list, dueKey = :clientId',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: {
            ':paused': paused,
            ':now': now,
            ':list': CLIENT_LIST_KEY,
            ':clientId': clientId,
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return settingsOf(out.Attributes ?? {});
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return undefined;
      throw error;
    }
  }
}

/** The update that writes these settings and the list entry, and removes the cleared optional ones. */
function settingsUpdate(settings: ClientSettings): {
  UpdateExpression: string;
  ExpressionAttributeNames: Record<string, string>;
  ExpressionAttributeValues: Record<string, unknown>;
} {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const set: string[] = [];
  for (const [field, value] of Object.entries({ ...settings, ...listEntry(settings.clientId) })) {
    if (value === undefined) continue;
    names[`#${field}`] = field;
    values[`:${field}`] = value;
    set.push(`#${field} = :${field}`);
  }
  const remove = CLIENT_OPTIONAL_FIELDS.filter((field) => settings[field] === undefined);
  for (const field of remove) names[`#${field}`] = field;
  return {
    UpdateExpression: `SET ${set.join(', ')}${remove.length > 0 ? ` REMOVE ${remove.map((f) => `#${f}`).join(', ')}` : ''}`,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

/** Settings a `PUT /clients/{id}` may leave out: removed when it does (`paused` is kept). */
/** The optional fields of a type. */
type OptionalKeys<T> = { [K in keyof T]-?: undefined extends T[K] ? K : never }[keyof T];

/**
 * The settings a PUT without them clears (REMOVE). Every optional field of {@link ClientSettings}
 * must be named here, the compiler sees to it: `true` to clear it, `false` to keep it (`paused` has
 * its own routes and survives a PUT that leaves it out).
 */
const CLEARED_WHEN_ABSENT: Record<OptionalKeys<ClientSettings>, boolean> = {
  messageChannelId: true,
  email: true,
  sms: true,
  jobDefaults: true,
  paused: false,
  telephony: true,
  restrictedPeriods: true,
  holidays: true,
  contactLimits: true,
  suppressionScope: true,
  outcomeWebhook: true,
  allowPartialDelivery: true,
};

const CLIENT_OPTIONAL_FIELDS = (Object.keys(CLEARED_WHEN_ABSENT) as OptionalKeys<ClientSettings>[]).filter(
  (field) => CLEARED_WHEN_ABSENT[field],
);

const BY_STATUS_INDEX = 'byStatus';
/** The `byStatus` partition that lists every client (jobs use `JOBSTATUS#…` partitions). */
const CLIENT_LIST_KEY = 'CLIENTS';

function listEntry(clientId: string) {
  return { statusKey: CLIENT_LIST_KEY, dueKey: clientId };
}

/** The settings of a stored client item: its keys and its index entry are storage only. */
function settingsOf(item: Record<string, unknown>): ClientSettings {
  const { pk: _pk, sk: _sk, statusKey: _statusKey, dueKey: _dueKey, ...settings } = item;
  return withoutRetiredFields(settings) as unknown as ClientSettings;
}

/**
 * The settings without what a client item may still hold from before a field was retired: an
 * email `configurationSet` (every email names the stack's now), so that saving a client unchanged
 * is never refused for a field the operator cannot see.
 */
function withoutRetiredFields(settings: Record<string, unknown>): Record<string, unknown> {
  const email = settings.email as Record<string, unknown> | undefined;
  if (email?.configurationSet === undefined) return settings;
  const { configurationSet: _retired, ...rest } = email;
  return { ...settings, email: rest };
}

/** The page after the client `next` (a client id this store returned). */
function clientPageKey(next: string): Record<string, unknown> {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(next))
    throw new ValidationError('invalid query', { next: ['is not a token this API returned'] });
  return { ...keys.client(next), ...listEntry(next) };
}
