/**
 * DynamoDB adapter of the {@link SmsNumberDirectory}: which clients send texts from a number, read
 * from the clients' settings in the control table. Every client item is an entry of the `byStatus`
 * index under `statusKey = CLIENTS` (`shared/adapters/dynamo-clients.ts`, which writes it), so the
 * directory is one paged Query of that partition, projected to `clientId` and `sms`, kept in memory.
 *
 * A customer's text back is rare next to the texts sent, and a client's origination identity rarely
 * changes, so the map is read at most once every `maxAgeMs` (default 60 s); a number it does not know
 * makes it read again when the map is older than `missRefreshMs` (default 5 s), so a number a client
 * has just been given is found without waiting out the minute.
 *
 * A number is known when a client's `sms.originationIdentity` is the number itself (E.164). An
 * identity named by its id, its ARN or a pool would need the service's DescribePhoneNumbers /
 * ListPoolOriginationIdentities to resolve: such clients are not found here (docs/sms.md).
 */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Clock } from '#shared/pacing/clock.ts';
import type { SmsNumberDirectory } from '#shared/sms/inbound-opt-outs.ts';

/** The control table's index and its partition listing every client (as `dynamo-clients.ts` writes them). */
export const CLIENTS_INDEX = 'byStatus';
export const CLIENT_LIST_KEY = 'CLIENTS';

const E164 = /^\+[1-9][0-9]{1,18}$/;

export interface DynamoSmsNumberOptions {
  readonly clock: Clock;
  /** Ms a map read is used for at most (default 60 000). */
  readonly maxAgeMs?: number;
  /** Ms after a read before a number it did not know makes it read again (default 5 000). */
  readonly missRefreshMs?: number;
}

export class DynamoSmsNumberDirectory implements SmsNumberDirectory {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #clock: Clock;
  readonly #maxAgeMs: number;
  readonly #missRefreshMs: number;
  #map: { readonly at: number; readonly clients: ReadonlyMap<string, readonly string[]> } | undefined;
  #reading: Promise<ReadonlyMap<string, readonly string[]>> | undefined;

  constructor(doc: DynamoDBDocumentClient, controlTable: string, options: DynamoSmsNumberOptions) {
    this.#doc = doc;
    this.#tableName = controlTable;
    this.#clock = options.clock;
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#missRefreshMs = options.missRefreshMs ?? 5_000;
  }

  async clientsOf(number: string): Promise<readonly string[]> {
    const now = this.#clock.now();
    const map = this.#map;
    if (map && now - map.at < this.#maxAgeMs) {
      const found = map.clients.get(number);
      if (found || now - map.at < this.#missRefreshMs) return found ?? [];
    }
    return (await this.#read()).get(number) ?? [];
  }

  /** One read at a time: invocations of a batch that miss together share it. */
  #read(): Promise<ReadonlyMap<string, readonly string[]>> {
    this.#reading ??= this.#query().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #query(): Promise<ReadonlyMap<string, readonly string[]>> {
    const at = this.#clock.now();
    const clients = new Map<string, string[]>();
    let start: Record<string, unknown> | undefined;
    do {
      const out = await this.#doc.send(
        new QueryCommand({
          TableName: this.#tableName,
          IndexName: CLIENTS_INDEX,
          KeyConditionExpression: 'statusKey = :clients',
          ProjectionExpression: 'clientId, sms',
          ExpressionAttributeValues: { ':clients': CLIENT_LIST_KEY },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const identity = (item.sms as { originationIdentity?: unknown } | undefined)?.originationIdentity;
        if (typeof item.clientId !== 'string' || typeof identity !== 'string' || !E164.test(identity))
          continue;
        clients.set(identity, [...(clients.get(identity) ?? []), item.clientId]);
      }
      start = out.LastEvaluatedKey;
    } while (start);
    this.#map = { at, clients };
    return clients;
  }
}
