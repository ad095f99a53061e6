/**
 * Step 4 of the job manager's run (`job-manager.ts`, whose module comment tells the why): which
 * clients get a broker, as each client's answer comes in (from its hint, from a read of its tasks,
 * or unread when the run's reads ran out).
 */
import {
  jitteredDue,
  jobsMark,
  leaseMark,
  type ReadyHint,
  readyFromHint,
} from '#shared/fleet/ready-hints.ts';
import type { Job } from '#shared/jobs/model.ts';
import { jobMayStartSomewhere } from '#shared/jobs/restrictions.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { JobManagerProblem } from './job-manager.ts';
import type { ClientState, FleetStore } from './ports.ts';
import { forEachLimited, ReadBudget } from './run-budget.ts';

/** Clients that get a broker: to work now, or only to adopt and settle orphaned calls (all sorted). */
export interface ClientsToServe {
  readonly clients: readonly string[];
  readonly orphaned: readonly string[];
  readonly served: readonly string[];
  readonly read: number;
  readonly unread: number;
}

/** What the step needs: its ports and the job manager's settings (defaults applied). */
export interface ClientFinderOptions {
  readonly store: Pick<FleetStore, 'nextReadyAt'>;
  readonly clock: Clock;
  readonly concurrency: number;
  readonly lookaheadMs: number;
  readonly sweepEveryMs: number;
  readonly horizonMs: number;
  readonly maxTaskReads: number;
  readonly readForMs: number;
}

/** A client whose tasks must be read: its open jobs, the marks read now, and its turn in the reads. */
interface ClientToRead {
  readonly clientId: string;
  readonly open: readonly Job[];
  readonly marks: { readonly jobs: string; readonly lease: string };
  readonly rank: number;
}

/**
 * Finds, in one run, the clients that get a broker: from each client's ready hint while it holds,
 * else from a read of its outstanding tasks (a new hint), while the run's reads last.
 */
export class ClientFinder {
  readonly #options: ClientFinderOptions;

  constructor(options: ClientFinderOptions) {
    this.#options = options;
  }

  /** Clients with work they may do now, and clients with only orphaned calls to settle. */
  async find(
    active: readonly Job[],
    states: ReadonlyMap<string, ClientState>,
    hints: ReadyHint[],
    now: number,
    problems: JobManagerProblem[],
  ): Promise<ClientsToServe> {
    const placement = new ClientPlacement(states, now);
    const toRead: ClientToRead[] = [];
    for (const [clientId, jobs] of jobsByClient(active)) {
      try {
        const read = this.#placeFromHint(clientId, jobs, states.get(clientId), now, placement);
        if (read) toRead.push(read);
      } catch (error) {
        problems.push({ step: 'client', id: clientId, error });
      }
    }
    // First what the hints answer, then reads, changed clients first, while the budget lasts.
    toRead.sort((a, b) => a.rank - b.rank);
    const { read, unread } = await this.#readClients(toRead, { states, hints, placement, problems }, now);
    return placement.result(read, unread);
  }

  /**
   * Places a client that may start nothing now, or whose hint answers for it; else returns the
   * read it needs, ranked: a client whose marks changed first, then one without a hint, then the rest.
   */
  #placeFromHint(
    clientId: string,
    jobs: readonly Job[],
    state: ClientState | undefined,
    now: number,
    placement: ClientPlacement,
  ): ClientToRead | undefined {
    const profile = state?.profile;
    if (!profile) return undefined;
    // A job past its end starts nothing more: it may only have calls in flight to settle.
    const open = profile.paused
      ? []
      : jobs.filter((job) =>
          // Its end, its hours, restricted periods and holidays: the broker's own rule (for a
          // job read in its recipients' zones, their tasks' readyAt says who is open).
          jobMayStartSomewhere(profile.settings, job, now),
        );
    if (open.length === 0) {
      placement.place(clientId, false, open);
      return undefined;
    }
    const marks = { jobs: jobsMark(open), lease: leaseMark(state.lease, now) };
    const ready = readyFromHint(state.hint, marks, now, now + this.#options.lookaheadMs);
    if (ready !== undefined) {
      placement.place(clientId, ready, open);
      return undefined;
    }
    const changed =
      state.hint !== undefined &&
      (state.hint.jobsMark !== marks.jobs || state.hint.leaseMark !== marks.lease);
    return { clientId, open, marks, rank: changed ? 0 : state.hint ? 2 : 1 };
  }

  /**
   * Reads the clients' tasks while the run's budget lasts and places each by what it found; a
   * client left unread is placed as ready (a broker too many, never a client forgotten).
   */
  async #readClients(
    toRead: readonly ClientToRead[],
    run: {
      readonly states: ReadonlyMap<string, ClientState>;
      readonly hints: ReadyHint[];
      readonly placement: ClientPlacement;
      readonly problems: JobManagerProblem[];
    },
    now: number,
  ): Promise<{ read: number; unread: number }> {
    const budget = new ReadBudget(
      this.#options.maxTaskReads,
      this.#options.clock,
      now + this.#options.readForMs,
    );
    let read = 0;
    let unread = 0;
    await forEachLimited(toRead, this.#options.concurrency, async ({ clientId, open, marks }) => {
      if (!budget.take()) {
        unread += 1;
        run.placement.place(clientId, true, open);
        return;
      }
      try {
        const hint = run.states.get(clientId)?.hint;
        const found = await this.#readClient(clientId, open, marks, hint, now);
        read += 1;
        run.hints.push(found.hint);
        run.placement.place(clientId, found.readyNow, open);
      } catch (error) {
        run.problems.push({ step: 'client', id: clientId, error });
      }
    });
    return { read, unread };
  }

  /**
   * Reads one client's outstanding tasks and makes its new hint. It stands until the sweep when its
   * marks had not changed since the last reading, or when it found a task ready now (a task the
   * index has not caught up with cannot make that answer wrong). Else it stands one run: a task
   * written just before the read may not be indexed yet, so "nothing ready" is read once more
   * before it is trusted.
   */
  async #readClient(
    clientId: string,
    open: readonly Job[],
    marks: { jobs: string; lease: string },
    hint: ReadyHint | undefined,
    now: number,
  ): Promise<{ hint: ReadyHint; readyNow: boolean }> {
    const next = await this.#options.store.nextReadyAt(
      clientId,
      open.map((job) => job.jobId),
      now + this.#options.horizonMs,
    );
    const readyNow = next !== undefined && next <= now + this.#options.lookaheadMs;
    const confirmed = readyNow || (hint?.jobsMark === marks.jobs && hint.leaseMark === marks.lease);
    return {
      readyNow,
      hint: {
        clientId,
        checkedAt: now,
        expiresAt: confirmed ? jitteredDue(clientId, now, this.#options.sweepEveryMs) : now + 1,
        jobsMark: marks.jobs,
        leaseMark: marks.lease,
        ...(next === undefined ? {} : { nextReadyAt: next }),
        quietUntil: now + this.#options.horizonMs,
      },
    };
  }
}

/** The jobs of each client, in the order they came. */
function jobsByClient(jobs: readonly Job[]): Map<string, Job[]> {
  const byClient = new Map<string, Job[]>();
  for (const job of jobs) byClient.set(job.clientId, [...(byClient.get(job.clientId) ?? []), job]);
  return byClient;
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
