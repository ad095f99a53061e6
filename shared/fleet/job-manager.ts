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

import { ClientPlacement, type ClientsToServe } from '#shared/fleet/client-placement.ts';
import {
  jitteredDue,
  jobsMark,
  leaseMark,
  type ReadyHint,
  readyFromHint,
  sameHint,
  turnComes,
} from '#shared/fleet/ready-hints.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { expireSweepStart } from '#shared/jobs/cancel.ts';
import { endedTasks, type Job, jobHasEnded } from '#shared/jobs/model.ts';
import type { IngestQueue } from '#shared/jobs/ports.ts';
import { ARCHIVE_AFTER_COMPLETION_SECONDS, archiveReportStart } from '#shared/jobs/report-archive.ts';
import { jobMayStartSomewhere } from '#shared/jobs/restrictions.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { ClientState, EcsServiceScaler, FleetStore } from './ports.ts';

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

export class InvalidJobManagerOptionsError extends Error {
  override name = 'InvalidJobManagerOptionsError';
}

/** Running jobs after step 3: every one seen, those that still have work, and what the step did. */
interface RunningJobs {
  readonly running: ReadonlyMap<string, Job>;
  readonly active: readonly Job[];
  readonly completed: readonly string[];
  readonly expiring: readonly string[];
}

/** A client whose tasks must be read: its open jobs, the marks read now, and its turn in the reads. */
interface ClientToRead {
  readonly clientId: string;
  readonly open: readonly Job[];
  readonly marks: { readonly jobs: string; readonly lease: string };
  readonly rank: number;
}

/** The least time a step may spend reading tasks, however long the run took to get there. */
const MIN_READ_MS = 5_000;

/** The reads a run may still make: a count, and a time after which none starts. */
class ReadBudget {
  #left: number;
  readonly #clock: Clock;
  readonly #until: number;
  constructor(limit: number, clock: Clock, until: number) {
    this.#left = limit;
    this.#clock = clock;
    this.#until = Math.max(until, clock.now() + MIN_READ_MS);
  }
  take(): boolean {
    if (this.#left <= 0 || this.#clock.now() >= this.#until) return false;
    this.#left -= 1;
    return true;
  }
}

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
  readonly #lookaheadMs: number;
  readonly #concurrency: number;
  readonly #fullCheckEveryMs: number;
  readonly #runEveryMs: number;
  readonly #sweepEveryMs: number;
  readonly #horizonMs: number;
  readonly #maxTaskReads: number;
  readonly #maxFullChecks: number;
  readonly #readForMs: number;
  /** When this instance last queued the expire sweep of each running job past its end. */
  readonly #sweptAt = new Map<string, number>();
  /**
   * Running jobs whose full-check turn came in a run whose reads ran out (by count or by time):
   * checked first in the next run, so a run that keeps running out of time does not skip the same
   * jobs (the last in the listing) turn after turn. Kept in memory: a cold instance forgets them,
   * and they wait for their next turn.
   */
  readonly #owedFullChecks = new Set<string>();
  /**
   * The hint of each client with a running job as this instance last read or wrote it: a warm run
   * reads no hint from the table (only the job manager writes them). Another instance's newer hint
   * is missed until this one reads the client again; each hint is true of what was read under its
   * marks, and is checked against the marks read now, so an older one costs a read, never work.
   */
  readonly #hints = new Map<string, ReadyHint>();

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
    this.#lookaheadMs = options.lookaheadMs ?? 60_000;
    this.#concurrency = options.concurrency ?? 32;
    this.#fullCheckEveryMs = options.fullCheckEveryMs ?? 10 * 60_000;
    this.#runEveryMs = Math.min(options.runEveryMs ?? 60_000, this.#fullCheckEveryMs);
    this.#sweepEveryMs = options.sweepEveryMs ?? 60 * 60_000;
    this.#horizonMs = Math.max(options.horizonMs ?? this.#sweepEveryMs, this.#lookaheadMs);
    this.#maxTaskReads = options.maxTaskReadsPerRun ?? 1_000;
    this.#maxFullChecks = options.maxFullChecksPerRun ?? 500;
    this.#readForMs = options.readForMs ?? 20_000;
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
      this.#completeFinishedJobs(running, now, problems),
    );
    const hints: ReadyHint[] = [];
    const toServe = await timed('clients', this.#clientsToServe(active, states, hints, now, problems));
    await timed('hints', this.#writeHints(states, hints, problems));
    for (const hint of hints) this.#hints.set(hint.clientId, hint);
    for (const jobId of this.#sweptAt.keys()) if (!running.has(jobId)) this.#sweptAt.delete(jobId);
    for (const jobId of this.#owedFullChecks) if (!running.has(jobId)) this.#owedFullChecks.delete(jobId);
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

  /** 3. Completes the running jobs with no open task left; queues the sweep of those past their end. */
  async #completeFinishedJobs(
    running: ReadonlyMap<string, Job>,
    now: number,
    problems: JobManagerProblem[],
  ): Promise<RunningJobs> {
    const completed: string[] = [];
    const expiring: string[] = [];
    const active: Job[] = [];
    const budget = new ReadBudget(this.#maxFullChecks, this.#clock, now + this.#readForMs);
    const period = fullCheckPeriod(
      running.size,
      this.#maxFullChecks,
      this.#fullCheckEveryMs,
      this.#runEveryMs,
    );
    // The full checks owed by earlier runs first, the longest owed first, while this run's reads last.
    const owedSince = new Map([...this.#owedFullChecks].map((jobId, i) => [jobId, i]));
    const owedFirst = [...running.values()].sort(
      (a, b) => (owedSince.get(a.jobId) ?? Infinity) - (owedSince.get(b.jobId) ?? Infinity),
    );
    await forEachLimited(owedFirst, this.#concurrency, async (job) => {
      let open: boolean;
      try {
        open = await this.#hasOpenTask(job, { budget, period }, now);
        if (!open) {
          // Queued before the completion, delayed past it: a completion whose message was lost
          // would leave no run to queue it again (the job is no longer running).
          await this.#options.sweeps.send(archiveReportStart(job.clientId, job.jobId), {
            delaySeconds: ARCHIVE_AFTER_COMPLETION_SECONDS,
          });
          await this.#store.settleClaimPages?.(job.clientId, job.jobId);
          if (await this.#store.completeJob(job, now)) completed.push(job.jobId);
        }
      } catch (error) {
        problems.push({ step: 'complete', id: job.jobId, error });
        return;
      }
      if (!open) return;
      active.push(job);
      try {
        if (await this.#sweepIfEnded(job, now)) expiring.push(job.jobId);
      } catch (error) {
        problems.push({ step: 'expire', id: job.jobId, error });
      }
    });
    return { running, active, completed, expiring };
  }

  /**
   * Queues the expire sweep of a job past its end, unless this instance queued it less than
   * `fullCheckEveryMs` ago (the sweep is idempotent: a second one ends and counts nothing twice).
   * True when it was queued.
   */
  async #sweepIfEnded(job: Job, now: number): Promise<boolean> {
    if (!jobHasEnded(job, now)) return false;
    const last = this.#sweptAt.get(job.jobId);
    if (last !== undefined && now - last < this.#fullCheckEveryMs) return false;
    await this.#options.sweeps.send(expireSweepStart(job.clientId, job.jobId));
    this.#sweptAt.set(job.jobId, now);
    return true;
  }

  /**
   * Whether a running job still has work: its counts while they say so, except in the job's turn
   * of the full check (or when the last run owed it one); else its tasks. A turn that finds the
   * run's reads spent is owed to the next run; a job whose counts say nothing is left is read at once.
   */
  async #hasOpenTask(
    job: Job,
    check: { readonly budget: ReadBudget; readonly period: number },
    now: number,
  ): Promise<boolean> {
    if (tasksLeft(job)) {
      const turn =
        this.#owedFullChecks.has(job.jobId) || turnComes(job.jobId, now, check.period, this.#runEveryMs);
      if (!turn) return true;
      if (!check.budget.take()) {
        this.#owedFullChecks.add(job.jobId);
        return true;
      }
    }
    this.#owedFullChecks.delete(job.jobId);
    return this.#store.hasOpenTask(job.jobId);
  }

  /** 4. Clients with work they may do now, and clients with only orphaned calls to settle. */
  async #clientsToServe(
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
    const ready = readyFromHint(state.hint, marks, now, now + this.#lookaheadMs);
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
    const budget = new ReadBudget(this.#maxTaskReads, this.#clock, now + this.#readForMs);
    let read = 0;
    let unread = 0;
    await forEachLimited(toRead, this.#concurrency, async ({ clientId, open, marks }) => {
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
    const next = await this.#store.nextReadyAt(
      clientId,
      open.map((job) => job.jobId),
      now + this.#horizonMs,
    );
    const readyNow = next !== undefined && next <= now + this.#lookaheadMs;
    const confirmed = readyNow || (hint?.jobsMark === marks.jobs && hint.leaseMark === marks.lease);
    return {
      readyNow,
      hint: {
        clientId,
        checkedAt: now,
        expiresAt: confirmed ? jitteredDue(clientId, now, this.#sweepEveryMs) : now + 1,
        jobsMark: marks.jobs,
        leaseMark: marks.lease,
        ...(next === undefined ? {} : { nextReadyAt: next }),
        quietUntil: now + this.#horizonMs,
      },
    };
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

/**
 * The full check's period for `running` jobs: `base`, doubled until the jobs whose turn falls in
 * one run fit `budget` with room for the turns' spread (they are placed by a hash: `running` × run /
 * period on average, plus four standard deviations), so a run's share practically never passes its
 * budget. Doubling, not a period fitted to the count: turns move only when the number of running
 * jobs crosses a power of two. Before, a fixed period at 25,000 running jobs made 2,500 due a run
 * against 1,000 reads, and the same ones — the newest, last in the list — were skipped every turn.
 */
export function fullCheckPeriod(running: number, budget: number, base: number, runEveryMs: number): number {
  const due = (period: number) => (running * runEveryMs) / period;
  let period = base;
  while (due(period) + 4 * Math.sqrt(due(period)) > budget && period < 2 ** 40) period *= 2;
  return period;
}

/** The jobs of each client, in the order they came. */
function jobsByClient(jobs: readonly Job[]): Map<string, Job[]> {
  const byClient = new Map<string, Job[]>();
  for (const job of jobs) byClient.set(job.clientId, [...(byClient.get(job.clientId) ?? []), job]);
  return byClient;
}

/** True when the job's counts say some of its tasks have not ended. */
function tasksLeft(job: Job): boolean {
  const c = job.counts;
  return c !== undefined && endedTasks(c) < c.tasks;
}

/** Runs `fn` over `items`, at most `limit` at a time. */
async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
