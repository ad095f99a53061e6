/**
 * TODAY'S DESIGN, KEPT FOR bench/fleet-scale.ts ONLY: shared/fleet/job-manager.ts as it was at commit 148f9e7 (before
 * issue #16 item 3), so the bench measures it side by side with the design that replaced it. Not
 * used by anything deployed; do not fix or extend it.
 */
/**
 * The job manager: run every minute (EventBridge on AWS, `local/scheduler.ts` locally).
 *
 * Input: the time of the run. Output: what it started, completed and asked of the fleet.
 * Main course:
 * 1. start due jobs: every `scheduled` job whose `startAt` has come moves to `running`
 *    (a conditional write: of two runs at once, one starts it, the other sees it started);
 * 2. complete running jobs with no open task (`pending`, `in-flight` or `retry-wait`), again
 *    conditionally on `running`, so a job paused or cancelled meanwhile is left alone. A job's
 *    counts move in the same transaction as each task's end, so while they say tasks are left
 *    the tasks are not read; once they say none are (or every `fullCheckEveryMs`, in case a count
 *    was lost), a consistent read of the tasks decides. Reading a million-task job's shards every
 *    minute only to find the first open task near their ends would cost more than the job.
 *    A running job that has reached its end (`endAt`, see `jobHasEnded`) with tasks left gets its
 *    expire sweep queued on the ingest queue (`shared/jobs/cancel.ts`: its waiting tasks end
 *    `expired`; calls in flight finish), once, then again every `fullCheckEveryMs` while it still
 *    runs (a retry written as the sweep passed its shard is caught then); it completes like any
 *    job once nothing is left open. A paused job is not looked at: it ends once resumed;
 * 3. find the clients with work they may do now: a running job not past its end, inside its
 *    calling hours (the job's own, else the client's), the client not paused, and an outstanding
 *    task ready now (or within `lookaheadMs`, so a retry due before the next run finds a broker
 *    waiting).
 *    Started calls leave the outstanding index, so a client whose open tasks are all in flight
 *    has no ready task: while its broker lives that is right (the broker is protected and ends
 *    them), but if the broker died or lost the lease, nobody would ever reconcile those calls
 *    and the tasks would stay in flight, the job running, for good. So a client whose lease has
 *    expired while it still records calls in flight gets a broker too: in the work list when it
 *    may call now, else (paused, outside its hours) in `orphaned`, taken only to adopt and settle
 *    those calls — reconciling is not starting work, so hours and a pause do not hold it back;
 * 4. write the fleet's work list (those clients and the broker version that should serve),
 *    unless a newer run already wrote one;
 * 5. set the broker service's desired count to the number of those clients, at most
 *    `maxBrokers`. Scale-in only ever removes unprotected (idle) brokers, so lowering it never
 *    cuts a call.
 *
 * Every write is conditional or whole-item and idempotent: running twice at once, or the same
 * run twice (EventBridge delivers at least once), ends in the same state.
 */
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { expireSweepStart } from '#shared/jobs/cancel.ts';
import { endedTasks, type Job, jobHasEnded } from '#shared/jobs/model.ts';
import type { IngestQueue } from '#shared/jobs/ports.ts';
import { jobMayStartSomewhere } from '#shared/jobs/restrictions.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { EcsServiceScaler, FleetStore } from './ports.ts';

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
  /** Store calls in flight at once (per step). Default 8. */
  readonly concurrency?: number;
  /**
   * How often a job whose counts say tasks are left has its tasks read anyway (per job manager
   * instance), so a count that went missing cannot keep a finished job running; and how often a
   * job past its end that still runs gets its expire sweep queued again. Default 10 min.
   */
  readonly fullCheckEveryMs?: number;
}

export interface JobManagerProblem {
  readonly step: 'start' | 'complete' | 'expire' | 'client';
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
  /** The desired count set, or undefined when a newer run's work list was found and kept. */
  readonly desiredCount: number | undefined;
  readonly desiredVersion: string;
  /** Steps that failed for one job or client; the rest of the run went on. */
  readonly problems: readonly JobManagerProblem[];
}

export class InvalidJobManagerOptionsError extends Error {
  override name = 'InvalidJobManagerOptionsError';
}

/** Running jobs after step 2: every one seen, those that still have work, and what the step did. */
interface RunningJobs {
  readonly running: ReadonlyMap<string, Job>;
  readonly active: readonly Job[];
  readonly completed: readonly string[];
  readonly expiring: readonly string[];
}

/** Clients that get a broker: to work now, or only to adopt and settle orphaned calls (both sorted). */
interface ClientsToServe {
  readonly clients: readonly string[];
  readonly orphaned: readonly string[];
}

/**
 * The job manager around its ports; {@link run} is one scheduled run. Between runs it remembers
 * when it last read each running job's tasks.
 */
export class JobManager {
  readonly #options: JobManagerOptions;
  readonly #store: FleetStore;
  readonly #scaler: EcsServiceScaler;
  readonly #clock: Clock;
  readonly #lookaheadMs: number;
  readonly #concurrency: number;
  readonly #fullCheckEveryMs: number;
  /** When this instance last read each running job's tasks. */
  readonly #checkedAt = new Map<string, number>();
  /** When this instance last queued the expire sweep of each running job past its end. */
  readonly #sweptAt = new Map<string, number>();

  constructor(options: JobManagerOptions) {
    if (!Number.isInteger(options.maxBrokers) || options.maxBrokers < 0) {
      throw new InvalidJobManagerOptionsError(
        `maxBrokers must be a whole number ≥ 0, got ${options.maxBrokers}`,
      );
    }
    this.#options = options;
    this.#store = options.store;
    this.#scaler = options.scaler;
    this.#clock = options.clock;
    this.#lookaheadMs = options.lookaheadMs ?? 60_000;
    this.#concurrency = options.concurrency ?? 8;
    this.#fullCheckEveryMs = options.fullCheckEveryMs ?? 10 * 60_000;
  }

  /** One scheduled run (see the module comment for its steps). */
  async run(): Promise<JobManagerResult> {
    const now = this.#clock.now();
    const desiredVersion = await this.#options.desiredVersion();
    const problems: JobManagerProblem[] = [];
    const started = await this.#startDueJobs(now, problems);
    const { running, active, completed, expiring } = await this.#completeFinishedJobs(started, now, problems);
    const { clients, orphaned } = await this.#clientsToServe(active, now, problems);
    for (const seen of [this.#checkedAt, this.#sweptAt])
      for (const jobId of seen.keys()) if (!running.has(jobId)) seen.delete(jobId);
    const desiredCount = await this.#sizeFleet(clients, orphaned, desiredVersion, now);
    return {
      at: now,
      started: started.map((job) => job.jobId).sort(),
      completed: [...completed].sort(),
      expiring: [...expiring].sort(),
      clients,
      orphaned,
      desiredCount,
      desiredVersion,
      problems,
    };
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

  /** 2. Running jobs, including the ones just started (the index may not show them yet). */
  async #completeFinishedJobs(
    started: readonly Job[],
    now: number,
    problems: JobManagerProblem[],
  ): Promise<RunningJobs> {
    const running = new Map<string, Job>();
    for (const job of await this.#store.runningJobs())
      if (job.status === 'running') running.set(job.jobId, job);
    for (const job of started) running.set(job.jobId, job);
    const completed: string[] = [];
    const expiring: string[] = [];
    const active: Job[] = [];
    await forEachLimited([...running.values()], this.#concurrency, async (job) => {
      let open: boolean;
      try {
        open = await this.#hasOpenTask(job, now);
        if (!open && (await this.#store.completeJob(job, now))) completed.push(job.jobId);
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

  /** Whether a running job still has work: its counts when they say so, else its tasks. */
  async #hasOpenTask(job: Job, now: number): Promise<boolean> {
    const last = this.#checkedAt.get(job.jobId);
    if (tasksLeft(job) && last !== undefined && now - last < this.#fullCheckEveryMs) return true;
    this.#checkedAt.set(job.jobId, now);
    return this.#store.hasOpenTask(job.jobId);
  }

  /** 3. Clients with work they may do now, and clients with only orphaned calls to settle. */
  async #clientsToServe(
    active: readonly Job[],
    now: number,
    problems: JobManagerProblem[],
  ): Promise<ClientsToServe> {
    const jobsByClient = new Map<string, Job[]>();
    for (const job of active)
      jobsByClient.set(job.clientId, [...(jobsByClient.get(job.clientId) ?? []), job]);
    const clients: string[] = [];
    const orphaned: string[] = [];
    await forEachLimited([...jobsByClient], this.#concurrency, async ([clientId, jobs]) => {
      try {
        const profile = await this.#store.client(clientId);
        if (!profile) return;
        // A job past its end starts nothing more: it may only have calls in flight to settle.
        const open = profile.paused
          ? []
          : jobs.filter((job) =>
              // Its end, its hours, restricted periods and holidays: the broker's own rule (for a
              // job read in its recipients' zones, their tasks' readyAt says who is open).
              jobMayStartSomewhere(profile.settings, job, now),
            );
        const ids = open.map((job) => job.jobId);
        if (ids.length > 0 && (await this.#store.hasReadyTask(clientId, ids, now + this.#lookaheadMs))) {
          clients.push(clientId);
          return;
        }
        if (!(await this.#store.hasOrphanedCalls(clientId, now))) return;
        // May it call now, the broker serves it as usual (adopting first); else it only adopts.
        if (ids.length > 0) clients.push(clientId);
        else orphaned.push(clientId);
      } catch (error) {
        problems.push({ step: 'client', id: clientId, error });
      }
    });
    clients.sort();
    orphaned.sort();
    return { clients, orphaned };
  }

  /**
   * 4 and 5. A run that finds a newer work list leaves the fleet to the run that wrote it.
   * Returns the desired count set, or undefined when the work list was not written.
   */
  async #sizeFleet(
    clients: readonly string[],
    orphaned: readonly string[],
    desiredVersion: string,
    now: number,
  ): Promise<number | undefined> {
    const written = await this.#store.putFleetWork(
      fleetWorkItem({ clients, orphaned, desiredVersion, updatedAt: now }),
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
