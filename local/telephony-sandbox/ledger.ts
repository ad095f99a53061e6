/**
 * The far side's own count of a client's calls: how many were in flight at once and how many
 * started in any sliding window. Invariant 3 (limits) is measured here, by the provider, not by
 * the broker about itself.
 */

/** The sliding window "starts per second" is measured over, in wall-time milliseconds. */
export const START_WINDOW_MS = 1_000;

export interface LedgerCounts {
  readonly starts: number;
  readonly inFlight: number;
  readonly maxInFlight: number;
  /** The most starts inside any window of {@link START_WINDOW_MS} (half-open, so starts exactly 1 s apart are in different windows). */
  readonly maxStartsPerWindow: number;
}

interface ClientCounts {
  starts: number;
  inFlight: number;
  maxInFlight: number;
  maxStartsPerWindow: number;
  /** Start times inside the window ending at the latest start, oldest first. */
  recentStarts: number[];
}

/** Live counts per client, fed in the order things happen (times never go backwards). */
export class CallLedger {
  readonly #clients = new Map<string, ClientCounts>();

  #client(clientId: string): ClientCounts {
    let counts = this.#clients.get(clientId);
    if (!counts) {
      counts = { starts: 0, inFlight: 0, maxInFlight: 0, maxStartsPerWindow: 0, recentStarts: [] };
      this.#clients.set(clientId, counts);
    }
    return counts;
  }

  /** A call of `clientId` was placed at `at` (wall ms). */
  start(clientId: string, at: number): void {
    const c = this.#client(clientId);
    c.starts += 1;
    c.inFlight += 1;
    c.maxInFlight = Math.max(c.maxInFlight, c.inFlight);
    const recent = c.recentStarts;
    while (recent.length > 0 && recent[0]! <= at - START_WINDOW_MS) recent.shift();
    recent.push(at);
    c.maxStartsPerWindow = Math.max(c.maxStartsPerWindow, recent.length);
  }

  /** A call of `clientId` reached its final status. */
  end(clientId: string): void {
    const c = this.#client(clientId);
    if (c.inFlight === 0) throw new RangeError(`client ${clientId} has no call in flight to end`);
    c.inFlight -= 1;
  }

  counts(clientId: string): LedgerCounts {
    const c = this.#clients.get(clientId);
    if (!c) return { starts: 0, inFlight: 0, maxInFlight: 0, maxStartsPerWindow: 0 };
    return {
      starts: c.starts,
      inFlight: c.inFlight,
      maxInFlight: c.maxInFlight,
      maxStartsPerWindow: c.maxStartsPerWindow,
    };
  }

  clear(): void {
    this.#clients.clear();
  }
}
