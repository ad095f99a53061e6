/**
 * Client leases in the control table (pk=LEASE#{clientId}, sk=LEASE), with the conditions of
 * `LEASE_CONDITIONS`. Besides owner, token and expiry, the item carries the holder's `endpoint`
 * (where the call-status route nudges it) and `inFlight`, the set of the client's calls in flight
 * (`{jobId}|{taskId}`), kept by the task store in the same transactions that start and settle
 * tasks. A takeover therefore updates owner, token, expiry and endpoint in place rather than
 * replacing the item, so the in-flight set survives for the new holder to adopt.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { FleetWorkReader, LeaseEndpointReader } from '#shared/broker/ports.ts';
import {
  FLEET_WORK_KEY,
  type FleetWork,
  fleetWorkShardKey,
  mergeFleetWork,
  parseFleetWork,
  parseFleetWorkShard,
} from '#shared/fleet/work-list.ts';
import type { CallsInFlightReader } from '#shared/jobs/api.ts';
import { keys } from '#shared/jobs/model.ts';
import {
  canTake,
  isLive,
  type Lease,
  type LeaseStore,
  type RenewRequest,
  type TakeRequest,
  take,
} from '#shared/lease/lease.ts';

const NAMES = { '#pk': 'pk', '#owner': 'owner', '#token': 'token', '#expiresAt': 'expiresAt' } as const;

/**
 * The condition expressions a DynamoDB store uses, with these names:
 * `ExpressionAttributeNames: { '#pk': 'pk', '#owner': 'owner', '#token': 'token', '#expiresAt': 'expiresAt' }`.
 * Every lease write is conditional; a `ConditionalCheckFailedException` is the answer "no",
 * never an error to retry.
 */
export const LEASE_CONDITIONS = {
  /**
   * tryTake, no item read (GetItem, ConsistentRead): `PutItem` of `take(undefined, …)` with this.
   */
  takeAbsent: 'attribute_not_exists(#pk)',
  /**
   * tryTake, item read as `seen`: if `!canTake(seen, …)` answer undefined without writing, else
   * `PutItem` of `take(seen, …)` with this, `:seenOwner`/`:seenToken`/`:seenExpiresAt` from
   * `seen` — a compare-and-set that loses to any renew, release or takeover since the read.
   */
  takeSeen: '#owner = :seenOwner AND #token = :seenToken AND #expiresAt = :seenExpiresAt',
  /**
   * tryRenew: `UpdateItem SET #expiresAt = :expiresAt` (now + leaseMs) with this,
   * `ReturnValues: ALL_NEW` (`:owner`, `:token`, `:now` from the request).
   */
  renew: '#owner = :owner AND #token = :token AND #expiresAt > :now',
  /** release: `UpdateItem SET #expiresAt = :zero` (0) with this. */
  release: '#owner = :owner AND #token = :token',
  /**
   * The `ConditionCheck` on the lease item inside every `TransactWriteItems` that starts work,
   * with `:owner`, `:token = currentToken()` and `:now` = the broker's clock.
   */
  fence: '#owner = :owner AND #token = :token AND #expiresAt > :now',
} as const;

/** A broker's claim on a client, as every work-starting write checks it. */
export interface LeaseFence {
  readonly clientId: string;
  readonly owner: string;
  readonly token: number;
  readonly now: number;
}

/**
 * The condition that the lease item still names this holder and token and has not expired, for
 * a `ConditionCheck` (or an `Update`) on `keys.lease(clientId)` inside a `TransactWriteItems` that
 * starts work. The one place the fence is written: a start and a claim check the same thing.
 */
export function leaseFence(fence: Omit<LeaseFence, 'clientId'>) {
  return {
    ConditionExpression: LEASE_CONDITIONS.fence,
    ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token', '#expiresAt': 'expiresAt' },
    ExpressionAttributeValues: { ':owner': fence.owner, ':token': fence.token, ':now': fence.now },
  };
}

/** {@link leaseFence} as a transaction's `ConditionCheck` item on the client's lease. */
export function leaseFenceCheck(tableName: string, fence: LeaseFence) {
  return { ConditionCheck: { TableName: tableName, Key: keys.lease(fence.clientId), ...leaseFence(fence) } };
}

export interface DynamoLeaseStoreOptions {
  /** Where this broker can be reached; written on every take (brokers only). */
  readonly endpoint?: string;
  /**
   * The item of a lease's subject. Default `keys.lease` (a client's, pk=LEASE#{clientId});
   * the job manager's run lease is `keys.runLease` (`shared/fleet/run-lease.ts`).
   */
  readonly key?: (subject: string) => { readonly pk: string; readonly sk: string };
}

function leaseOf(item: Record<string, unknown> | undefined): Lease | undefined {
  if (!item || typeof item.owner !== 'string') return undefined;
  return {
    clientId: String(item.clientId),
    owner: item.owner,
    expiresAt: Number(item.expiresAt),
    token: Number(item.token),
  };
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof ConditionalCheckFailedException;
}

/** The clients' lease items in the control table (or another subject's, by `key`). */
export class DynamoLeaseStore implements LeaseStore, LeaseEndpointReader, CallsInFlightReader {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  /** Where this broker can be reached, if it says (brokers only). */
  readonly #endpoint: string | undefined;
  readonly #key: (subject: string) => { readonly pk: string; readonly sk: string };

  constructor(doc: DynamoDBDocumentClient, tableName: string, options: DynamoLeaseStoreOptions = {}) {
    this.#doc = doc;
    this.#tableName = tableName;
    this.#endpoint = options.endpoint;
    this.#key = options.key ?? keys.lease;
  }

  /** The stored lease (a consistent read), for tests and operators. */
  async get(clientId: string): Promise<Lease | undefined> {
    return leaseOf(await this.#read(clientId));
  }

  async tryTake(request: TakeRequest): Promise<Lease | undefined> {
    const seen = leaseOf(await this.#read(request.clientId));
    if (!canTake(seen, request.owner, request.now)) return undefined;
    const next = take(seen, request);
    try {
      if (!seen) await this.#takeAbsent(request, next);
      else await this.#takeSeen(request, seen, next);
      return next;
    } catch (error) {
      if (isConditionFailure(error)) return undefined;
      throw error;
    }
  }

  async tryRenew(request: RenewRequest): Promise<Lease | undefined> {
    const expiresAt = request.now + request.leaseMs;
    try {
      const out = await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: this.#key(request.clientId),
          UpdateExpression: 'SET #expiresAt = :expiresAt',
          ConditionExpression: LEASE_CONDITIONS.renew,
          ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token', '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: {
            ':expiresAt': expiresAt,
            ':owner': request.owner,
            ':token': request.token,
            ':now': request.now,
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return leaseOf(out.Attributes);
    } catch (error) {
      if (isConditionFailure(error)) return undefined;
      throw error;
    }
  }

  async release(request: {
    readonly clientId: string;
    readonly owner: string;
    readonly token: number;
  }): Promise<boolean> {
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: this.#key(request.clientId),
          UpdateExpression: 'SET #expiresAt = :zero',
          ConditionExpression: LEASE_CONDITIONS.release,
          ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token', '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: { ':zero': 0, ':owner': request.owner, ':token': request.token },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async callsInFlight(clientId: string): Promise<number> {
    const item = await this.#read(clientId);
    return item?.inFlight instanceof Set ? item.inFlight.size : 0;
  }

  async endpointOf(clientId: string, now: number): Promise<string | undefined> {
    const item = await this.#read(clientId);
    const lease = leaseOf(item);
    if (!isLive(lease, now) || typeof item?.endpoint !== 'string') return undefined;
    return item.endpoint;
  }

  async #read(clientId: string): Promise<Record<string, unknown> | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#tableName, Key: this.#key(clientId), ConsistentRead: true }),
    );
    return out.Item;
  }

  /** A first take: the item is written whole, on condition that there is none. */
  async #takeAbsent(request: TakeRequest, next: Lease): Promise<void> {
    const endpoint = this.#endpoint === undefined ? {} : { endpoint: this.#endpoint };
    await this.#doc.send(
      new PutCommand({
        TableName: this.#tableName,
        Item: { ...this.#key(request.clientId), ...next, ...endpoint },
        ConditionExpression: LEASE_CONDITIONS.takeAbsent,
        ExpressionAttributeNames: { '#pk': NAMES['#pk'] },
      }),
    );
  }

  /** A takeover: updated in place (the in-flight set stays), on condition that nothing changed since `seen`. */
  async #takeSeen(request: TakeRequest, seen: Lease, next: Lease): Promise<void> {
    // A holder without an endpoint must not inherit the previous holder's.
    const endpointUpdate = this.#endpoint === undefined ? ' REMOVE endpoint' : ', endpoint = :endpoint';
    await this.#doc.send(
      new UpdateCommand({
        TableName: this.#tableName,
        Key: this.#key(request.clientId),
        UpdateExpression: `SET #owner = :owner, #token = :token, #expiresAt = :expiresAt, clientId = :clientId${endpointUpdate}`,
        ConditionExpression: LEASE_CONDITIONS.takeSeen,
        ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token', '#expiresAt': 'expiresAt' },
        ExpressionAttributeValues: {
          ':owner': next.owner,
          ':token': next.token,
          ':expiresAt': next.expiresAt,
          ':clientId': next.clientId,
          ':seenOwner': seen.owner,
          ':seenToken': seen.token,
          ':seenExpiresAt': seen.expiresAt,
          ...(this.#endpoint === undefined ? {} : { ':endpoint': this.#endpoint }),
        },
      }),
    );
  }
}

/**
 * Reads the fleet's work list the job manager writes: its head (control table, pk=FLEET, sk=WORK)
 * and, when the list is sharded, each shard it names (`WORK#{i}`), merged. `{ lists: false }`
 * reads the head only (version and time: the drain check on every heartbeat).
 */
export class DynamoFleetWorkReader implements FleetWorkReader {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.#tableName = tableName;
  }

  async read(options?: { readonly lists?: boolean }): Promise<FleetWork | undefined> {
    const head = parseFleetWork(await this.#get(FLEET_WORK_KEY));
    if (!head?.shards || options?.lists === false) return head;
    const shards = await Promise.all(
      Array.from({ length: head.shards }, async (_, i) =>
        parseFleetWorkShard(await this.#get(fleetWorkShardKey(i))),
      ),
    );
    return mergeFleetWork(head, shards);
  }

  async #get(Key: Record<string, string>): Promise<Record<string, unknown> | undefined> {
    return (await this.#doc.send(new GetCommand({ TableName: this.#tableName, Key }))).Item;
  }
}
