/**
 * One job-manager run at a time, without reserved concurrency. Reserving even 1 unit fails a
 * deploy into an account whose concurrency quota leaves less than 100 units unreserved (new
 * accounts often start at 10 or 50), so the job manager holds a lease instead: the same lease
 * record brokers hold per client (`shared/lease/lease.ts`), here with the run's id as owner and
 * the process's name as subject (`keys.runLease`, pk=RUN#job-manager).
 *
 * Input: the run's id (unique per invocation), the work. Output: the work's result, or `skipped`.
 * Main course:
 * 1. take the run lease for `leaseMs` (one conditional write: of two overlapping runs, one wins);
 *    none: the run does nothing and says so (the next minute's run makes good what it missed);
 * 2. run the work;
 * 3. release the lease (expired at once), whatever the work did, so the next run need not wait.
 *
 * No heartbeat: `leaseMs` is longer than the function may run ({@link runLeaseMs}), so a run that
 * Lambda stops at its timeout, unreleased, cannot overlap the next one, and its lease expires
 * before the next minute's run comes.
 */
import type { LeaseStore } from '#shared/lease/lease.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';

/** The run lease's subject: the job manager's. */
export const JOB_MANAGER_RUN = 'job-manager';

/** Kept past the function's timeout against clock skew between two runs' hosts. */
export const RUN_LEASE_MARGIN_MS = 5_000;

/** The run lease's length for a function that may run `timeoutSeconds`. */
export function runLeaseMs(timeoutSeconds: number): number {
  return timeoutSeconds * 1000 + RUN_LEASE_MARGIN_MS;
}

/** What a run that asked for the lease did: ran the work, or nothing (another run holds it). */
export type RunAlone<T> = { readonly ran: true; readonly result: T } | { readonly ran: false };

export interface RunLeaseOptions {
  /** The lease records; the subject is `name` (DynamoDB: `keys.runLease`). */
  readonly store: LeaseStore;
  readonly clock: Clock;
  /** The process that must run alone. Default {@link JOB_MANAGER_RUN}. */
  readonly name?: string;
  /** Longer than one run may last: {@link runLeaseMs} of the function's timeout. */
  readonly leaseMs: number;
  readonly log?: Logger;
}

export class RunLease {
  readonly #options: RunLeaseOptions;
  readonly #name: string;

  constructor(options: RunLeaseOptions) {
    this.#options = options;
    this.#name = options.name ?? JOB_MANAGER_RUN;
  }

  /**
   * Runs `work` if run `owner` takes the lease, then releases it (also when `work` throws).
   * A store that does not answer the take rejects: nothing ran, and the caller fails.
   */
  async runAlone<T>(owner: string, work: () => Promise<T>): Promise<RunAlone<T>> {
    const { store, clock, leaseMs } = this.#options;
    const lease = await store.tryTake({ clientId: this.#name, owner, now: clock.now(), leaseMs });
    if (!lease || lease.owner !== owner) return { ran: false };
    try {
      return { ran: true, result: await work() };
    } finally {
      await this.#release(owner, lease.token);
    }
  }

  /** Releases the lease; a release that fails leaves it to expire (logged, never thrown). */
  async #release(owner: string, token: number): Promise<void> {
    try {
      await this.#options.store.release({ clientId: this.#name, owner, token });
    } catch (error) {
      this.#options.log?.warn('run lease release failed; it will expire', { lease: this.#name, error });
    }
  }
}
