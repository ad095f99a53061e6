/**
 * DynamoDB adapter of the suppression list: one item per entry in the control table
 * (`pk=SUPPRESS#{clientId}`, `sk=recipient`, see `suppressionKeys`), so that a call's start
 * transaction can hold a ConditionCheck on exactly the recipient's item
 * ({@link suppressionConditionCheck}) and a message claim reads a page's entries in BatchGetItems.
 * Every write is an UpdateItem or a DeleteItem (the settling functions may only update).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { ValidationError } from '#shared/jobs/errors.ts';
import {
  AUTOMATIC_SOURCES,
  kindOf,
  SUPPRESSION_SOURCES,
  type SuppressionEntry,
  type SuppressionSource,
  suppressionKeys,
} from '#shared/suppressions/model.ts';
import type { SuppressionStore } from '#shared/suppressions/ports.ts';
import { batchGetItems } from './dynamo-batch-get.ts';
import { type SmallPartitionOptions, SmallPartitions } from './small-partitions.ts';

/** The automatic sources as expression values (`:auto0`, …), and their names in an `IN (…)`. */
const automaticValues = Object.fromEntries(AUTOMATIC_SOURCES.map((source, i) => [`:auto${i}`, source]));
const AUTOMATIC_VALUES = Object.keys(automaticValues).join(', ');

/** BatchGetItem calls of one lookup in flight at once. */
const READS_AT_ONCE = 5;
/** Entries written at once by {@link DynamoSuppressionStore.add}. */
const WRITES_AT_ONCE = 10;

/**
 * The ConditionCheck a start transaction holds so that a suppressed recipient is never contacted:
 * it fails when the recipient's entry exists (`ALL_OLD` hands the entry back with the failure).
 */
export function suppressionConditionCheck(tableName: string, clientId: string, recipient: string) {
  return {
    ConditionCheck: {
      TableName: tableName,
      Key: suppressionKeys.entry(clientId, recipient),
      ConditionExpression: 'attribute_not_exists(pk)',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
    },
  };
}

/** The entry an item stands for. */
export function entryOf(item: Record<string, unknown>): SuppressionEntry {
  const source = String(item.source);
  return {
    recipient: String(item.sk),
    kind: kindOf(String(item.sk)),
    source: (SUPPRESSION_SOURCES as readonly string[]).includes(source)
      ? (source as SuppressionSource)
      : 'api',
    reason: String(item.reason ?? ''),
    addedAt: Number(item.addedAt ?? 0),
  };
}

export class DynamoSuppressionStore implements SuppressionStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #partitions: SmallPartitions;

  constructor(doc: DynamoDBDocumentClient, tableName: string, options: SmallPartitionOptions = {}) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#partitions = new SmallPartitions(doc, tableName, options);
  }

  async add(clientId: string, entries: readonly SuppressionEntry[]): Promise<void> {
    for (let i = 0; i < entries.length; i += WRITES_AT_ONCE)
      await Promise.all(entries.slice(i, i + WRITES_AT_ONCE).map((entry) => this.#put(clientId, entry)));
  }

  async #put(clientId: string, entry: SuppressionEntry): Promise<void> {
    const automatic = AUTOMATIC_SOURCES.includes(entry.source);
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: suppressionKeys.entry(clientId, entry.recipient),
          UpdateExpression: 'SET #source = :source, reason = :reason, addedAt = :addedAt',
          // An automatic entry replaces only another automatic one (AUTOMATIC_SOURCES), never an operator's.
          ...(automatic
            ? { ConditionExpression: `attribute_not_exists(pk) OR #source IN (${AUTOMATIC_VALUES})` }
            : {}),
          ExpressionAttributeNames: { '#source': 'source' },
          ExpressionAttributeValues: {
            ':source': entry.source,
            ':reason': entry.reason,
            ':addedAt': entry.addedAt,
            ...(automatic ? automaticValues : {}),
          },
        }),
      );
    } catch (error) {
      if (!(automatic && error instanceof ConditionalCheckFailedException)) throw error;
    }
  }

  async remove(clientId: string, recipient: string): Promise<boolean> {
    const out = await this.#doc.send(
      new DeleteCommand({
        TableName: this.#tableName,
        Key: suppressionKeys.entry(clientId, recipient),
        ReturnValues: 'ALL_OLD',
      }),
    );
    return out.Attributes !== undefined;
  }

  async removeIfFrom(
    clientId: string,
    recipient: string,
    source: SuppressionSource,
    before: number,
  ): Promise<boolean> {
    try {
      await this.#doc.send(
        new DeleteCommand({
          TableName: this.#tableName,
          Key: suppressionKeys.entry(clientId, recipient),
          ConditionExpression: '#source = :source AND addedAt <= :before',
          ExpressionAttributeNames: { '#source': 'source' },
          ExpressionAttributeValues: { ':source': source, ':before': before },
        }),
      );
      return true;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      return false;
    }
  }

  async suppressed(
    clientId: string,
    recipients: readonly string[],
  ): Promise<ReadonlyMap<string, SuppressionEntry>> {
    const unique = [...new Set(recipients)];
    const found = new Map<string, SuppressionEntry>();
    // A message claim's 500 recipients: the client's whole list in one Query when it is small.
    const all = await this.#partitions.whole(suppressionKeys.pk(clientId), unique.length);
    if (all) {
      const wanted = new Set(unique);
      for (const item of all) if (wanted.has(String(item.sk))) found.set(String(item.sk), entryOf(item));
      return found;
    }
    const chunks: string[][] = [];
    for (let i = 0; i < unique.length; i += 100) chunks.push(unique.slice(i, i + 100));
    for (let i = 0; i < chunks.length; i += READS_AT_ONCE)
      await Promise.all(
        chunks.slice(i, i + READS_AT_ONCE).map(async (chunk) => {
          for (const item of await this.#getItems(clientId, chunk)) found.set(String(item.sk), entryOf(item));
        }),
      );
    return found;
  }

  /** The items of `chunk` (at most 100 recipients) that exist. */
  #getItems(clientId: string, chunk: readonly string[]): Promise<Record<string, unknown>[]> {
    return batchGetItems(
      this.#doc,
      this.#tableName,
      chunk.map((r) => suppressionKeys.entry(clientId, r)),
    );
  }

  async page(
    clientId: string,
    page: { readonly limit: number; readonly next?: string },
  ): Promise<{ readonly entries: readonly SuppressionEntry[]; readonly next?: string }> {
    const pk = suppressionKeys.pk(clientId);
    const start = page.next === undefined ? undefined : { pk, sk: decodePageToken(page.next) };
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': pk },
        Limit: page.limit,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    const last = out.LastEvaluatedKey as { sk: string } | undefined;
    return {
      entries: (out.Items ?? []).map(entryOf),
      ...(last ? { next: Buffer.from(last.sk, 'utf8').toString('base64url') } : {}),
    };
  }
}

function decodePageToken(token: string): string {
  const sk = Buffer.from(token, 'base64url').toString('utf8');
  if (sk === '' || Buffer.from(sk, 'utf8').toString('base64url') !== token)
    throw new ValidationError('invalid suppression query', { next: ['is not a token this API returned'] });
  return sk;
}
