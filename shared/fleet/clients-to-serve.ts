/**
 * Step 4 of the job manager's run (`job-manager.ts`): which clients get a broker, as each client's
 * answer comes in (from its hint, from a read of its tasks, or unread when the run's reads ran out).
 */
import type { Job } from '#shared/jobs/model.ts';
import type { ClientState } from './ports.ts';

/** Clients that get a broker: to work now, or only to adopt and settle orphaned calls (all sorted). */
export interface ClientsToServe {
  readonly clients: readonly string[];
  readonly orphaned: readonly string[];
  readonly served: readonly string[];
  readonly read: number;
  readonly unread: number;
}

/** The clients placed so far in one run: to work, orphaned, and those a live broker holds. */
export class ClientPlacement {
  readonly #states: ReadonlyMap<string, ClientState>;
  readonly #now: number;
  readonly #clients: string[] = [];
  readonly #orphaned: string[] = [];
  readonly #served: string[] = [];

  constructor(states: ReadonlyMap<string, ClientState>, now: number) {
    this.#states = states;
    this.#now = now;
  }

  /**
   * Places a client: in the work list when it has a task ready; else, when a dead broker left
   * calls in flight, in the work list if it may call now (the broker serves it as usual, adopting
   * first), in `orphaned` if not (the broker only adopts).
   */
  place(clientId: string, ready: boolean, open: readonly Job[]): void {
    const lease = this.#states.get(clientId)?.lease;
    const live = lease !== undefined && this.#now < lease.expiresAt;
    if (ready) {
      this.#clients.push(clientId);
      if (live) this.#served.push(clientId);
      return;
    }
    if (!lease || live || lease.inFlight === 0) return;
    if (open.length > 0) this.#clients.push(clientId);
    else this.#orphaned.push(clientId);
  }

  /** The clients placed, each list sorted, with the run's count of clients read and left unread. */
  result(read: number, unread: number): ClientsToServe {
    return {
      clients: [...this.#clients].sort(),
      orphaned: [...this.#orphaned].sort(),
      served: [...this.#served].sort(),
      read,
      unread,
    };
  }
}
