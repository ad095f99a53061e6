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
 *    minute only to find the first open task near their ends would cost more than the job;
 * 3. find the clients with work they may do now: a running job inside its calling hours (the
 *    job's own, else the client's), the client not paused, and an outstanding task ready now
 *    (or within `lookaheadMs`, so a retry due before the next run finds a broker waiting).
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
import { fleetWorkItem } from '#shared/broker/fleet.ts';
import type { Job } from '#shared/jobs/model.ts';
import { effectiveCallingHours, isOpen } from '#shared/pacing/calling-hours.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { EcsServiceScaler, FleetStore } from './ports.ts';

export interface JobManagerOptions {
  readonly store: FleetStore;
  readonly scaler: EcsServiceScaler;
  readonly clock: Clock;
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
   * instance), so a count that went missing cannot keep a finished job running. Default 10 min.
   */
  readonly fullCheckEveryMs?: number;
}

export interface JobManagerProblem {
  readonly step: 'start' | 'complete' | 'client';
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

/** Builds the job manager's run; each call of the returned function is one scheduled run. */
export function makeRunJobManager(options: JobManagerOptions): () => Promise<JobManagerResult> {
  const { store, scaler, clock } = options;
  if (!Number.isInteger(options.maxBrokers) || options.maxBrokers < 0) {
    throw new InvalidJobManagerOptionsError(
      `maxBrokers must be a whole number ≥ 0, got ${options.maxBrokers}`,
    );
  }
  const lookaheadMs = options.lookaheadMs ?? 60_000;
  const concurrency = options.concurrency ?? 8;
  const fullCheckEveryMs = options.fullCheckEveryMs ?? 10 * 60_000;
  /** When this instance last read each running job's tasks. */
  const checkedAt = new Map<string, number>();

  /** Whether a running job still has work: its counts when they say so, else its tasks. */
  async function hasOpenTask(job: Job, now: number): Promise<boolean> {
    const last = checkedAt.get(job.jobId);
    if (tasksLeft(job) && last !== undefined && now - last < fullCheckEveryMs) return true;
    checkedAt.set(job.jobId, now);
    return store.hasOpenTask(job.jobId);
  }

  return async () => {
    const now = clock.now();
    const desiredVersion = await options.desiredVersion();
    const problems: JobManagerProblem[] = [];

    // 1. Due jobs. The index is eventually consistent: the conditional write is the truth.
    const due = (await store.dueScheduledJobs(now)).filter((job) => job.startAt <= now);
    const started: Job[] = [];
    await forEachLimited(due, concurrency, async (job) => {
      try {
        if (await store.startJob(job, now)) started.push({ ...job, status: 'running', updatedAt: now });
      } catch (error) {
        problems.push({ step: 'start', id: job.jobId, error });
      }
    });

    // 2. Running jobs, including the ones just started (the index may not show them yet).
    const running = new Map<string, Job>();
    for (const job of await store.runningJobs()) if (job.status === 'running') running.set(job.jobId, job);
    for (const job of started) running.set(job.jobId, job);
    const completed: string[] = [];
    const active: Job[] = [];
    await forEachLimited([...running.values()], concurrency, async (job) => {
      try {
        if (await hasOpenTask(job, now)) active.push(job);
        else if (await store.completeJob(job, now)) completed.push(job.jobId);
      } catch (error) {
        problems.push({ step: 'complete', id: job.jobId, error });
      }
    });

    // 3. Clients with work they may do now.
    const jobsByClient = new Map<string, Job[]>();
    for (const job of active)
      jobsByClient.set(job.clientId, [...(jobsByClient.get(job.clientId) ?? []), job]);
    const clients: string[] = [];
    const orphaned: string[] = [];
    await forEachLimited([...jobsByClient], concurrency, async ([clientId, jobs]) => {
      try {
        const profile = await store.client(clientId);
        if (!profile) return;
        const open = profile.paused
          ? []
          : jobs.filter((job) =>
              isOpen(effectiveCallingHours(profile.settings.callingHours, job.callingHours), now),
            );
        const ids = open.map((job) => job.jobId);
        if (ids.length > 0 && (await store.hasReadyTask(clientId, ids, now + lookaheadMs))) {
          clients.push(clientId);
          return;
        }
        if (!(await store.hasOrphanedCalls(clientId, now))) return;
        // May it call now, the broker serves it as usual (adopting first); else it only adopts.
        if (ids.length > 0) clients.push(clientId);
        else orphaned.push(clientId);
      } catch (error) {
        problems.push({ step: 'client', id: clientId, error });
      }
    });
    clients.sort();
    orphaned.sort();
    for (const jobId of checkedAt.keys()) if (!running.has(jobId)) checkedAt.delete(jobId);

    // 4 and 5. A run that finds a newer work list leaves the fleet to the run that wrote it.
    const written = await store.putFleetWork(
      fleetWorkItem({ clients, orphaned, desiredVersion, updatedAt: now }),
    );
    let desiredCount: number | undefined;
    if (written) {
      desiredCount = Math.min(clients.length + orphaned.length, options.maxBrokers);
      await scaler.setDesiredCount(desiredCount);
    }

    return {
      at: now,
      started: started.map((job) => job.jobId).sort(),
      completed: completed.sort(),
      clients,
      orphaned,
      desiredCount,
      desiredVersion,
      problems,
    };
  };
}

/** True when the job's counts say some of its tasks have not ended. */
function tasksLeft(job: Job): boolean {
  const c = job.counts;
  return c !== undefined && c.completed + c.failed + c.cancelled < c.tasks;
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
