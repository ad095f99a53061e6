/**
 * The job manager: run every minute (EventBridge on AWS, `local/scheduler.ts` locally).
 *
 * Input: the time of the run. Output: what it started, completed and asked of the fleet.
 * Main course:
 * 1. start due jobs: every `scheduled` job whose `startAt` has come moves to `running`
 *    (a conditional write: of two runs at once, one starts it, the other sees it started);
 * 2. read, in batches, each client with a running job: profile, lease and ready hint
 *    (`shared/fleet/ready-hints.ts`: what the last runs learnt of its tasks);
 * 3. complete running jobs with no open task (`pending`, `in-flight` or `retry-wait`), again
 *    conditionally on `running`, so a job paused or cancelled meanwhile is left alone. A job's
 *    counts move in the same transaction as each task's end, so while they say tasks are left
 *    the tasks are not read; once they say none are (or, in case a count was lost, once every
 *    `fullCheckEveryMs` per job, in turns spread evenly over the runs and derived from the job's
 *    id and the time, so a cold instance reads no more than a warm one; at most
 *    `maxFullChecksPerRun` a run, the period doubled while more would come due), a consistent read of
 *    the tasks decides. Reading a million-task job's shards every minute only to find the first open
 *    task near their ends would cost more than the job.
 *    A running job that has reached its end (`endAt`, see `jobHasEnded`) with tasks left gets its
 *    expire sweep queued on the ingest queue (`shared/jobs/cancel.ts`: its waiting tasks end
 *    `expired`; calls in flight finish), once, then again every `fullCheckEveryMs` while it still
 *    runs (a retry written as the sweep passed its shard is caught then); it completes like any
 *    job once nothing is left open. A paused job is not looked at: it ends once resumed;
 * 4. find the clients with work they may do now: a running job not past its end, inside its
 *    calling hours (the job's own, else the client's), the client not paused, and an outstanding
 *    task ready now (or within `lookaheadMs`, so a retry due before the next run finds a broker
 *    waiting). The outstanding tasks are read only for a client whose hint no longer holds (its
 *    open jobs or its lease changed, the window it read has passed, or its jittered sweep came
 *    due), at most `maxTaskReadsPerRun` clients a run and none after `readForMs` (the rest are listed unread: a broker
 *    too many, never a client forgotten); a hint made right after a change is read again a run
 *    later before it is trusted for longer (the outstanding index is eventually consistent).
 *    Started calls leave the outstanding index, so a client whose open tasks are all in flight
 *    has no ready task: while its broker lives that is right (the broker is protected and ends
 *    them), but if the broker died or lost the lease, nobody would ever reconcile those calls
 *    and the tasks would stay in flight, the job running, for good. So a client whose lease has
 *    expired while it still records calls in flight gets a broker too: in the work list when it
 *    may call now, else (paused, outside its hours) in `orphaned`, taken only to adopt and settle
 *    those calls — reconciling is not starting work, so hours and a pause do not hold it back;
 * 5. write the hints that changed, then the fleet's work list (those clients, which of them a
 *    live broker holds, and the broker version that should serve; sharded when long, so it never
 *    passes an item's size), unless a newer run already wrote one;
 * 6. set the broker service's desired count to the number of those clients, at most
 *    `maxBrokers`. Scale-in only ever removes unprotected (idle) brokers, so lowering it never
 *    cuts a call.
 *
 * Every write is conditional or whole-item and idempotent: running twice at once, or the same
 * run twice (EventBridge delivers at least once), ends in the same state. A run that crashes
 * midway has written at most some hints (each one true of what it read, and checked against
 * fresh marks before use) and, shards before head, part of a work list a minute old at worst.
 */

import { ClientFinder, type ClientsToServe } from '#shared/fleet/clients-to-serve.ts';
import { JobCompletion } from '#shared/fleet/job-completion.ts';
import { type ReadyHint, sameHint } from '#shared/fleet/ready-hints.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { Job } from '#shared/jobs/model.ts';
import type { IngestQueue } from '#shared/jobs/ports.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { FleetError } from './errors.ts';
import type { ClientState, EcsServiceScaler, FleetStore } from './ports.ts';
import { forEachLimited } from './run-budget.ts';

export interface JobManagerOptions {
  readonly store: FleetStore;
  readonly scaler: EcsServiceScaler;
  readonly clock: Clock;
  /** Where a job past its end gets its expire sweep queued (the ingest queue: the ingest runs it). */
  readonly sweeps: Pick<IngestQueue, 'send'>;
  /** Most brokers the service may run (a cost and quota ceiling). */
  readonly maxBrokers: number;
  /**
   * The broker version that should serve: brokers of any other version drain and exit. On AWS,
   * the version of the service's primary deployment, known as soon as a deploy starts rolling.
   */
  readonly desiredVersion: () => string | Promise<string>;
  /** Tasks ready this much later still count as work now. Default: one minute (one run). */
  readonly lookaheadMs?: number;
  /** Store calls in flight at once (per step; they are reads). Default 32. */
  readonly concurrency?: number;
  /**
   * How often a job whose counts say tasks are left has its tasks read anyway (each job in its own
   * turn, the turns spread over the period), so a count that went missing cannot keep a finished
   * job running; and how often a job past its end that still runs gets its expire sweep queued
   * again. Default 10 min.
   */
  readonly fullCheckEveryMs?: number;
  /** How often the job manager is run (its schedule): each job's full check falls in one run a period. Default 1 min. */
  readonly runEveryMs?: number;
  /**
   * How long a client's ready hint is trusted at most (jittered: from half to all of it) though
   * nothing it marks changed: the sweep that finds ready work a writer left no mark of. Default 60 min.
   */
  readonly sweepEveryMs?: number;
  /**
   * How far ahead a read of a client's outstanding tasks looks, so a quiet client is not read every
   * run. Default `sweepEveryMs`: a quiet client is then read again when its jittered sweep comes
   * due (from half to all of it), not all quiet clients of a mass start in the same run.
   */
  readonly horizonMs?: number;
  /**
   * Most clients whose outstanding tasks a run reads (16 queries each); the rest wait for later
   * runs. Default 1,000. With `readForMs`, bounds a run's time whatever happened since the last, so
   * a run always ends, writes what it learnt, and the next one goes on from there.
   */
  readonly maxTaskReadsPerRun?: number;
  /**
   * Most full checks a run makes (a job's tasks read for an open one in its turn, up to 16 queries).
   * When more running jobs than that would come due in a run, the full check's period is doubled
   * (20, 40, 80 minutes…) until they fit with room to spare: every job still has its turn once a
   * period, the run's reads stay bounded, and none is skipped for want of reads. Default 500.
   */
  readonly maxFullChecksPerRun?: number;
  /**
   * No read of tasks starts later than this after the run began, or {@link MIN_READ_MS} after the
   * step's reads began if that is later (so a run whose batch reads were slow still learns
   * something). Default 20 s (the function's timeout is 50 s).
   */
  readonly readForMs?: number;
}

export interface JobManagerProblem {
  readonly step: 'start' | 'complete' | 'expire' | 'client' | 'hints';
  /** The job or client the step was about. */
  readonly id: string;
  readonly error: unknown;
}

export interface JobManagerResult {
  readonly at: number;
  /** Job ids this run moved to `running`. */
  readonly started: readonly string[];
  /** Job ids this run moved to `completed`. */
  readonly completed: readonly string[];
  /** Job ids past their end whose expire sweep this run queued. */
  readonly expiring: readonly string[];
  /** Clients with work now (sorted). */
  readonly clients: readonly string[];
  /** Clients with no work now but calls a dead broker left in flight, to adopt and settle (sorted). */
  readonly orphaned: readonly string[];
  /** Of `clients`, those a live broker held at the run (sorted). */
  readonly served: readonly string[];
  /** Clients whose outstanding tasks this run read (the rest were answered by their hints). */
  readonly read: number;
  /** Clients listed unread because the run's reads ran out (`maxTaskReadsPerRun`). */
  readonly unread: number;
  /** The desired count set, or undefined when a newer run's work list was found and kept. */
  readonly desiredCount: number | undefined;
  readonly desiredVersion: string;
  /** Steps that failed for one job or client; the rest of the run went on. */
  readonly problems: readonly JobManagerProblem[];
  /** Milliseconds each step took, by the run's clock: where a slow run's time went. */
  readonly stepMs: Readonly<Record<JobManagerStep, number>>;
}

/**
 * The steps of a run, in order, as {@link JobManagerResult.stepMs} times them (`start` includes
 * asking for the desired version).
 */
export type JobManagerStep = 'start' | 'running' | 'states' | 'complete' | 'clients' | 'hints' | 'fleet';

export class InvalidJobManagerOptionsError extends FleetError {}

/**
 * The job manager around its ports; {@link run} is one scheduled run. What it must remember
 * between runs is in the clients' ready hints (the store), so a fresh instance costs what a warm
 * one does; only when it last queued each ended job's expire sweep is kept in memory.
 */
export class JobManager {
  readonly #options: JobManagerOptions;
  readonly #store: FleetStore;
  readonly #scaler: EcsServiceScaler;
  readonly #clock: Clock;
  readonly #concurrency: number;
  /**
   * The hint of each client with a running job as this instance last read or wrote it: a warm run
   * reads no hint from the table (only the job manager writes them). Another instance's newer hint
   * is missed until this one reads the client again; each hint is true of what was read under its
   * marks, and is checked against the marks read now, so an older one costs a read, never work.
   */
  readonly #hints = new Map<string, ReadyHint>();
  /** Step 3, with what it remembers between runs. */
  readonly #completion: JobCompletion;
  /** Step 4: the clients that get a broker. */
  readonly #finder: ClientFinder;

  constructor(options: JobManagerOptions) {
    if (!Number.isInteger(options.maxBrokers) || options.maxBrokers < 0) {
      throw new InvalidJobManagerOptionsError(
        `maxBrokers must be a whole number ≥ 0, got ${options.maxBrokers}`,
      );
    }
    const fullChecks = options.maxFullChecksPerRun;
    if (fullChecks !== undefined && !(Number.isInteger(fullChecks) && fullChecks >= 1)) {
      // None a run would leave a job whose count was lost running for ever.
      throw new InvalidJobManagerOptionsError(
        `maxFullChecksPerRun must be a whole number ≥ 1, got ${fullChecks}`,
      );
    }
    this.#options = options;
    this.#store = options.store;
    this.#scaler = options.scaler;
    this.#clock = options.clock;
    this.#concurrency = options.concurrency ?? 32;
    const readForMs = options.readForMs ?? 20_000;
    const lookaheadMs = options.lookaheadMs ?? 60_000;
    const sweepEveryMs = options.sweepEveryMs ?? 60 * 60_000;
    this.#finder = new ClientFinder({
      store: options.store,
      clock: options.clock,
      concurrency: this.#concurrency,
      lookaheadMs,
      sweepEveryMs,
      horizonMs: Math.max(options.horizonMs ?? sweepEveryMs, lookaheadMs),
      maxTaskReads: options.maxTaskReadsPerRun ?? 1_000,
      readForMs,
    });
    const fullCheckEveryMs = options.fullCheckEveryMs ?? 10 * 60_000;
    this.#completion = new JobCompletion({
      store: options.store,
      sweeps: options.sweeps,
      clock: options.clock,
      concurrency: this.#concurrency,
      fullCheckEveryMs,
      runEveryMs: Math.min(options.runEveryMs ?? 60_000, fullCheckEveryMs),
      maxFullChecks: options.maxFullChecksPerRun ?? 500,
      readForMs,
    });
  }

  /** One scheduled run (see the module comment for its steps). */
  async run(): Promise<JobManagerResult> {
    const now = this.#clock.now();
    const stepMs = {} as Record<JobManagerStep, number>;
    let stepStarted = now;
    const timed = async <T>(step: JobManagerStep, work: Promise<T>): Promise<T> => {
      const value = await work;
      const at = this.#clock.now();
      stepMs[step] = at - stepStarted;
      stepStarted = at;
      return value;
    };
    const desiredVersion = await this.#options.desiredVersion();
    const problems: JobManagerProblem[] = [];
    const started = await timed('start', this.#startDueJobs(now, problems));
    const running = await timed('running', this.#runningJobs(started));
    const states = await timed('states', this.#clientStates(running));
    const { active, completed, expiring } = await timed(
      'complete',
      this.#completion.completeFinished(running, now, problems),
    );
    const hints: ReadyHint[] = [];
    const toServe = await timed('clients', this.#finder.find(active, states, hints, now, problems));
    await timed('hints', this.#writeHints(states, hints, problems));
    for (const hint of hints) this.#hints.set(hint.clientId, hint);
    this.#completion.keepOnly(running);
    const desiredCount = await timed('fleet', this.#sizeFleet(toServe, desiredVersion, now));
    return {
      at: now,
      started: started.map((job) => job.jobId).sort(),
      completed: [...completed].sort(),
      expiring: [...expiring].sort(),
      clients: toServe.clients,
      orphaned: toServe.orphaned,
      served: toServe.served,
      read: toServe.read,
      unread: toServe.unread,
      desiredCount,
      desiredVersion,
      problems,
      stepMs,
    };
  }

  /**
   * 2. Profile, lease and hint of each client with a running job: hints from memory when this
   * instance has them (the rest from the table, then remembered); memory kept to these clients.
   */
  async #clientStates(running: ReadonlyMap<string, Job>): Promise<Map<string, ClientState>> {
    const clientIds = new Set([...running.values()].map((job) => job.clientId));
    for (const clientId of this.#hints.keys()) if (!clientIds.has(clientId)) this.#hints.delete(clientId);
    const read = await this.#store.clientStates([...clientIds], {
      hintsOf: [...clientIds].filter((clientId) => !this.#hints.has(clientId)),
    });
    const states = new Map<string, ClientState>();
    for (const [clientId, state] of read) {
      const hint = this.#hints.get(clientId) ?? state.hint;
      if (hint) this.#hints.set(clientId, hint);
      states.set(clientId, { ...state, hint });
    }
    return states;
  }

  /** 1. Due jobs. The index is eventually consistent: the conditional write is the truth. */
  async #startDueJobs(now: number, problems: JobManagerProblem[]): Promise<Job[]> {
    const due = (await this.#store.dueScheduledJobs(now)).filter((job) => job.startAt <= now);
    const started: Job[] = [];
    await forEachLimited(due, this.#concurrency, async (job) => {
      try {
        if (await this.#store.startJob(job, now)) started.push({ ...job, status: 'running', updatedAt: now });
      } catch (error) {
        problems.push({ step: 'start', id: job.jobId, error });
      }
    });
    return started;
  }

  /** Running jobs, including the ones just started (the index may not show them yet). */
  async #runningJobs(started: readonly Job[]): Promise<Map<string, Job>> {
    const running = new Map<string, Job>();
    for (const job of await this.#store.runningJobs())
      if (job.status === 'running') running.set(job.jobId, job);
    for (const job of started) running.set(job.jobId, job);
    return running;
  }

  /** 5. Writes each client's hint that changed (a failure is a problem of the run, not its end). */
  async #writeHints(
    states: ReadonlyMap<string, ClientState>,
    hints: readonly ReadyHint[],
    problems: JobManagerProblem[],
  ): Promise<void> {
    const changed = hints.filter((hint) => !sameHint(states.get(hint.clientId)?.hint, hint));
    try {
      await this.#store.putReadyHints(changed);
    } catch (error) {
      problems.push({ step: 'hints', id: `${changed.length} clients`, error });
    }
  }

  /**
   * 5 and 6. A run that finds a newer work list leaves the fleet to the run that wrote it.
   * Returns the desired count set, or undefined when the work list was not written.
   */
  async #sizeFleet(
    { clients, orphaned, served }: ClientsToServe,
    desiredVersion: string,
    now: number,
  ): Promise<number | undefined> {
    const written = await this.#store.putFleetWork(
      fleetWorkItem({ clients, orphaned, served, desiredVersion, updatedAt: now }),
    );
    if (!written) return undefined;
    const desiredCount = Math.min(clients.length + orphaned.length, this.#options.maxBrokers);
    await this.#scaler.setDesiredCount(desiredCount);
    return desiredCount;
  }
}

/** Builds the job manager's run; each call of the returned function is one scheduled run. */
export function makeRunJobManager(options: JobManagerOptions): () => Promise<JobManagerResult> {
  const manager = new JobManager(options);
  return () => manager.run();
}
