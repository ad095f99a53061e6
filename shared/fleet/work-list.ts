/**
 * The fleet's work list: what the job manager tells brokers every minute. The job manager writes
 * it; brokers only read it, to find clients worth trying to claim and to learn which broker
 * version should be serving.
 *
 * It is stored as a *head* item (`pk=FLEET, sk=WORK`: version, time, and the lists themselves
 * while they are small) and, once the lists outgrow {@link WORK_SHARD_CLIENTS} entries, as
 * `shards` items beside it (`sk=WORK#{i}`), each holding the clients whose id hashes to it. No
 * item grows with the number of clients: a shard holds about {@link WORK_SHARD_CLIENTS} ids
 * (~85 KB at 26 characters, ~170 KB with every one of them also `served`: far from DynamoDB's
 * 400 KB), and more clients make more shards.
 */

/** The control-table key of the work list's head. */
export const FLEET_WORK_KEY = { pk: 'FLEET', sk: 'WORK' } as const;

/** The control-table key of one shard of the work list. */
export const fleetWorkShardKey = (shard: number) => ({ pk: 'FLEET', sk: `WORK#${shard}` }) as const;

/**
 * Most ids a work-list item holds: the head keeps the lists inline up to this many entries, and
 * a sharded list has one shard per this many (hashing spreads them within a few percent).
 */
export const WORK_SHARD_CLIENTS = 3_000;

/** The work list item (control table, `pk=FLEET, sk=WORK`), written whole by the job manager. */
export interface FleetWork {
  readonly pk: 'FLEET';
  readonly sk: 'WORK';
  /**
   * Clients with work they may do now (running job, outstanding task ready, inside hours, not
   * paused); a client whose calls a dead broker left in flight counts too when it may call now.
   */
  readonly clients: readonly string[];
  /**
   * Clients with no work now (paused, or outside their hours) whose expired lease still records
   * calls in flight: their broker died or lost the lease, and the calls end only when a broker
   * takes the client. A broker takes one of these only to adopt and settle those calls, starts
   * nothing, and releases it when they have ended. Absent when there are none.
   */
  readonly orphaned?: readonly string[];
  /**
   * Those of `clients` whose lease was held by a live broker when the list was made: served
   * already, so an idle broker tries them last and only a few of them (each try reads a lease).
   * Absent when there are none.
   */
  readonly served?: readonly string[];
  /**
   * How many shard items hold the lists (`WORK#0` … `WORK#{shards-1}`); absent or 0 when the
   * head holds them. A reader merges the shards into one {@link FleetWork} ({@link mergeFleetWork}).
   */
  readonly shards?: number;
  /** The broker version that should serve; a broker of another version drains and exits. */
  readonly desiredVersion: string;
  /** Epoch ms of the job manager run that wrote it. */
  readonly updatedAt: number;
}

/** Builds the work list item the job manager writes. */
export function fleetWorkItem(input: {
  clients: readonly string[];
  orphaned?: readonly string[];
  served?: readonly string[];
  desiredVersion: string;
  updatedAt: number;
}): FleetWork {
  return {
    ...FLEET_WORK_KEY,
    clients: [...input.clients],
    ...(input.orphaned?.length ? { orphaned: [...input.orphaned] } : {}),
    ...(input.served?.length ? { served: [...input.served] } : {}),
    desiredVersion: input.desiredVersion,
    updatedAt: input.updatedAt,
  };
}

/** One shard item of a sharded work list (`pk=FLEET, sk=WORK#{i}`). */
export interface FleetWorkShard {
  readonly pk: 'FLEET';
  readonly sk: string;
  readonly clients: readonly string[];
  readonly orphaned?: readonly string[];
  readonly served?: readonly string[];
  /** The run that wrote it: a shard is never overwritten by an older run. */
  readonly updatedAt: number;
}

/** The items a work list is stored as: its head, and its shards when the lists are long. */
export interface StoredFleetWork {
  readonly head: FleetWork;
  readonly shards: readonly FleetWorkShard[];
}

/**
 * Splits a work list into what is stored: the head alone while every list fits in one item,
 * else a head without lists and `ceil(entries / shardClients)` shards, each client in the shard
 * its id hashes to (stable from run to run, so an unchanged client stays in its shard).
 */
export function splitFleetWork(work: FleetWork, shardClients = WORK_SHARD_CLIENTS): StoredFleetWork {
  const entries = work.clients.length + (work.orphaned?.length ?? 0);
  if (entries <= shardClients) return { head: work, shards: [] };
  const count = Math.ceil(entries / shardClients);
  const lists = Array.from({ length: count }, () => ({
    clients: [] as string[],
    orphaned: [] as string[],
    served: [] as string[],
  }));
  for (const [name, ids] of [
    ['clients', work.clients],
    ['orphaned', work.orphaned ?? []],
    ['served', work.served ?? []],
  ] as const)
    for (const id of ids) lists[workShardOf(id, count)]![name].push(id);
  const shards = lists.map((list, i) => ({
    ...fleetWorkShardKey(i),
    clients: list.clients,
    ...(list.orphaned.length ? { orphaned: list.orphaned } : {}),
    ...(list.served.length ? { served: list.served } : {}),
    updatedAt: work.updatedAt,
  }));
  const { orphaned: _o, served: _s, ...head } = work;
  return { head: { ...head, clients: [], shards: count }, shards };
}

/** The head's lists with its shards' appended (a shard of another run is still a list of that minute). */
export function mergeFleetWork(head: FleetWork, shards: readonly (FleetWorkShard | undefined)[]): FleetWork {
  if (!head.shards) return head;
  const pick = (name: 'clients' | 'orphaned' | 'served') => [
    ...(head[name] ?? []),
    ...shards.flatMap((shard) => shard?.[name] ?? []),
  ];
  const orphaned = pick('orphaned');
  const served = pick('served');
  return {
    ...head,
    clients: pick('clients'),
    ...(orphaned.length ? { orphaned } : {}),
    ...(served.length ? { served } : {}),
  };
}

/** Reads a stored item as a work-list shard; anything malformed reads as an empty one. */
export function parseFleetWorkShard(item: Record<string, unknown> | undefined): FleetWorkShard | undefined {
  if (item?.pk !== 'FLEET' || typeof item.sk !== 'string' || !item.sk.startsWith('WORK#')) return undefined;
  const orphaned = strings(item.orphaned);
  const served = strings(item.served);
  return {
    pk: 'FLEET',
    sk: item.sk,
    clients: strings(item.clients),
    ...(orphaned.length ? { orphaned } : {}),
    ...(served.length ? { served } : {}),
    updatedAt: typeof item.updatedAt === 'number' ? item.updatedAt : 0,
  };
}

/** Which of `count` shards a client's id goes to (FNV-1a). */
export function workShardOf(clientId: string, count: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < clientId.length; i++) {
    h ^= clientId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % count;
}

const strings = (value: unknown) =>
  Array.isArray(value) ? value.filter((c): c is string => typeof c === 'string') : [];

/** Reads a stored item as a work list; anything malformed reads as "no work, no drain". */
export function parseFleetWork(item: Record<string, unknown> | undefined): FleetWork | undefined {
  if (item?.pk !== 'FLEET' || item.sk !== 'WORK') return undefined;
  const clients = strings(item.clients);
  const orphaned = strings(item.orphaned);
  const served = strings(item.served);
  const shards = typeof item.shards === 'number' && item.shards > 0 ? Math.floor(item.shards) : 0;
  const desiredVersion = typeof item.desiredVersion === 'string' ? item.desiredVersion : '';
  const updatedAt = typeof item.updatedAt === 'number' ? item.updatedAt : 0;
  return {
    ...FLEET_WORK_KEY,
    clients,
    ...(orphaned.length > 0 ? { orphaned } : {}),
    ...(served.length > 0 ? { served } : {}),
    ...(shards > 0 ? { shards } : {}),
    desiredVersion,
    updatedAt,
  };
}
