/**
 * The fleet's work list: what the job manager tells brokers every minute, in one control-table
 * item. The job manager writes it (whole item, `PutItem`); brokers only read it, to find clients
 * worth trying to claim and to learn which broker version should be serving.
 */

/** The control-table key of the work list. */
export const FLEET_WORK_KEY = { pk: 'FLEET', sk: 'WORK' } as const;

/** The work list item (control table, `pk=FLEET, sk=WORK`), written whole by the job manager. */
export interface FleetWork {
  readonly pk: 'FLEET';
  readonly sk: 'WORK';
  /** Clients with work they may do now (running job, outstanding task ready, inside hours). */
  readonly clients: readonly string[];
  /** The broker version that should serve; a broker of another version drains and exits. */
  readonly desiredVersion: string;
  /** Epoch ms of the job manager run that wrote it. */
  readonly updatedAt: number;
}

/** Builds the work list item the job manager writes. */
export function fleetWorkItem(input: {
  clients: readonly string[];
  desiredVersion: string;
  updatedAt: number;
}): FleetWork {
  return {
    ...FLEET_WORK_KEY,
    clients: [...input.clients],
    desiredVersion: input.desiredVersion,
    updatedAt: input.updatedAt,
  };
}

/** Reads a stored item as a work list; anything malformed reads as "no work, no drain". */
export function parseFleetWork(item: Record<string, unknown> | undefined): FleetWork | undefined {
  if (item?.pk !== 'FLEET' || item.sk !== 'WORK') return undefined;
  const clients = Array.isArray(item.clients)
    ? item.clients.filter((c): c is string => typeof c === 'string')
    : [];
  const desiredVersion = typeof item.desiredVersion === 'string' ? item.desiredVersion : '';
  const updatedAt = typeof item.updatedAt === 'number' ? item.updatedAt : 0;
  return { ...FLEET_WORK_KEY, clients, desiredVersion, updatedAt };
}
