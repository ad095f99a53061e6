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
  /** The broker version that should serve; a broker of another version drains and exits. */
  readonly desiredVersion: string;
  /** Epoch ms of the job manager run that wrote it. */
  readonly updatedAt: number;
}

/** Builds the work list item the job manager writes. */
export function fleetWorkItem(input: {
  clients: readonly string[];
  orphaned?: readonly string[];
  desiredVersion: string;
  updatedAt: number;
}): FleetWork {
  return {
    ...FLEET_WORK_KEY,
    clients: [...input.clients],
    ...(input.orphaned?.length ? { orphaned: [...input.orphaned] } : {}),
    desiredVersion: input.desiredVersion,
    updatedAt: input.updatedAt,
  };
}

/** Reads a stored item as a work list; anything malformed reads as "no work, no drain". */
export function parseFleetWork(item: Record<string, unknown> | undefined): FleetWork | undefined {
  if (item?.pk !== 'FLEET' || item.sk !== 'WORK') return undefined;
  const strings = (value: unknown) =>
    Array.isArray(value) ? value.filter((c): c is string => typeof c === 'string') : [];
  const clients = strings(item.clients);
  const orphaned = strings(item.orphaned);
  const desiredVersion = typeof item.desiredVersion === 'string' ? item.desiredVersion : '';
  const updatedAt = typeof item.updatedAt === 'number' ? item.updatedAt : 0;
  return {
    ...FLEET_WORK_KEY,
    clients,
    ...(orphaned.length > 0 ? { orphaned } : {}),
    desiredVersion,
    updatedAt,
  };
}
