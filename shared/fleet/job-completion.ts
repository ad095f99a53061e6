/**
 * Step 3 of the job manager's run (`job-manager.ts`, whose module comment tells the why): running
 * jobs with no open task are completed, and those past their end get their expire sweep queued.
 */
import { turnComes } from '#shared/fleet/ready-hints.ts';
import { expireSweepStart } from '#shared/jobs/cancel.ts';
import { endedTasks, type Job, jobHasEnded } from '#shared/jobs/model.ts';
import type { IngestQueue } from '#shared/jobs/ports.ts';
import { BOUNCE_GRACE_MS, reopensAfterSend } from '#shared/jobs/reopen.ts';
import { ARCHIVE_AFTER_COMPLETION_SECONDS, archiveReportStart } from '#shared/jobs/report-archive.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { JobManagerProblem } from './job-manager.ts';
import type { FleetStore } from './ports.ts';
import { forEachLimited, ReadBudget } from './run-budget.ts';

/** Running jobs after step 3: every one seen, those that still have work, and what the step did. */
export interface RunningJobs {
  readonly running: ReadonlyMap<string, Job>;
  readonly active: readonly Job[];
  readonly completed: readonly string[];
  readonly expiring: readonly string[];
}

/** What the step needs: its ports and the job manager's settings (defaults applied). */
export interface JobCompletionOptions {
  readonly store: Pick<FleetStore, 'hasOpenTask' | 'settleClaimPages' | 'completeJob'>;
  readonly sweeps: Pick<IngestQueue, 'send'>;
  readonly clock: Clock;
  readonly concurrency: number;
  readonly fullCheckEveryMs: number;
  readonly runEveryMs: number;
  readonly maxFullChecks: number;
  readonly readForMs: number;
}

/** A run's full checks: a budget of reads, and the period in which each job has its turn. */
interface FullCheck {
  readonly budget: ReadBudget;
  readonly period: number;
}

/**
 * Completes finished jobs, run after run. Remembers, in this instance only, when it last queued
 * each ended job's expire sweep and which full checks a run owes to the next.
 */
export class JobCompletion {
  readonly #options: JobCompletionOptions;
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
   * Jobs whose tasks a bounce may open again, found with nothing open: since when, and their
   * `reopened` then (a move since starts the wait over). In memory, as the rest.
   */
  readonly #quietSince = new Map<string, QuietMark>();

  constructor(options: JobCompletionOptions) {
    this.#options = options;
  }

  /** 3. Completes the running jobs with no open task left; queues the sweep of those past their end. */
  async completeFinished(
    running: ReadonlyMap<string, Job>,
    now: number,
    problems: JobManagerProblem[],
  ): Promise<RunningJobs> {
    const { clock, concurrency, maxFullChecks, readForMs } = this.#options;
    const done = { running, active: [] as Job[], completed: [] as string[], expiring: [] as string[] };
    const check: FullCheck = {
      budget: new ReadBudget(maxFullChecks, clock, now + readForMs),
      period: fullCheckPeriod(
        running.size,
        maxFullChecks,
        this.#options.fullCheckEveryMs,
        this.#options.runEveryMs,
      ),
    };
    await forEachLimited(this.#owedFirst(running), concurrency, (job) =>
      this.#settle(job, check, now, done, problems),
    );
    return done;
  }

  /** Forgets the jobs that no longer run. */
  keepOnly(running: ReadonlyMap<string, Job>): void {
    for (const jobId of this.#sweptAt.keys()) if (!running.has(jobId)) this.#sweptAt.delete(jobId);
    for (const jobId of this.#owedFullChecks) if (!running.has(jobId)) this.#owedFullChecks.delete(jobId);
    for (const jobId of this.#quietSince.keys()) if (!running.has(jobId)) this.#quietSince.delete(jobId);
  }

  /** The full checks owed by earlier runs first, the longest owed first, while this run's reads last. */
  #owedFirst(running: ReadonlyMap<string, Job>): Job[] {
    const owedSince = new Map([...this.#owedFullChecks].map((jobId, i) => [jobId, i]));
    return [...running.values()].sort(
      (a, b) => (owedSince.get(a.jobId) ?? Infinity) - (owedSince.get(b.jobId) ?? Infinity),
    );
  }

  /**
   * One running job: completed when nothing is left open (after {@link BOUNCE_GRACE_MS} for a job
   * whose tasks a bounce may open again), else active (its sweep queued when it has ended).
   */
  async #settle(
    job: Job,
    check: FullCheck,
    now: number,
    done: { active: Job[]; completed: string[]; expiring: string[] },
    problems: JobManagerProblem[],
  ): Promise<void> {
    let open: boolean;
    try {
      if (this.#stillQuiet(job, now)) return;
      open = await this.#hasOpenTask(job, check, now);
      if (!open && (await this.#bounceMayCome(job, now))) return;
      if (!open && (await this.#complete(job, now))) done.completed.push(job.jobId);
    } catch (error) {
      problems.push({ step: 'complete', id: job.jobId, error });
      return;
    }
    if (!open) return;
    done.active.push(job);
    try {
      if (await this.#sweepIfEnded(job, now)) done.expiring.push(job.jobId);
    } catch (error) {
      problems.push({ step: 'expire', id: job.jobId, error });
    }
  }

  /**
   * A job whose tasks may be opened again, found with nothing open: true while its grace runs (from
   * when this instance first found it so), so it is neither completed nor served. Its claim pages
   * are settled when the grace starts: a bounce waits for its task's page to close (a dead broker's
   * is closed only so), and the queue gives it back for no longer than the grace. A job past its
   * end has none (nothing of it can be opened again); a cold instance starts the grace again: it
   * only waits longer.
   */
  async #bounceMayCome(job: Job, now: number): Promise<boolean> {
    if (!reopensAfterSend(job) || jobHasEnded(job, now)) return false;
    const quiet = this.#quietSince.get(job.jobId);
    if (quiet === undefined || !quiet.sameAs(job)) {
      await this.#options.store.settleClaimPages?.(job.clientId, job.jobId);
      this.#quietSince.set(job.jobId, quietMark(job, now));
      return true;
    }
    return now - quiet.at < BOUNCE_GRACE_MS;
  }

  /**
   * In its grace, a job that nothing ended or reopened since it was found quiet is not read again (a
   * full read of a large job each run); at the grace's end it is, once more. Its counts are compared
   * as they were then, not with its tasks: counts that say a task is left (a page not closed yet)
   * do not start the grace over.
   */
  #stillQuiet(job: Job, now: number): boolean {
    const quiet = this.#quietSince.get(job.jobId);
    if (quiet === undefined) return false;
    if (!quiet.sameAs(job)) {
      this.#quietSince.delete(job.jobId);
      return false;
    }
    return now - quiet.at < BOUNCE_GRACE_MS;
  }

  /** Completes a job with nothing left open; true when this run moved it. */
  async #complete(job: Job, now: number): Promise<boolean> {
    const { store, sweeps } = this.#options;
    // Queued before the completion, delayed past it: a completion whose message was lost
    // would leave no run to queue it again (the job is no longer running).
    await sweeps.send(archiveReportStart(job.clientId, job.jobId), {
      delaySeconds: ARCHIVE_AFTER_COMPLETION_SECONDS,
    });
    await store.settleClaimPages?.(job.clientId, job.jobId);
    return store.completeJob(job, now);
  }

  /**
   * Queues the expire sweep of a job past its end, unless this instance queued it less than
   * `fullCheckEveryMs` ago (the sweep is idempotent: a second one ends and counts nothing twice).
   * True when it was queued.
   */
  async #sweepIfEnded(job: Job, now: number): Promise<boolean> {
    if (!jobHasEnded(job, now)) return false;
    const last = this.#sweptAt.get(job.jobId);
    if (last !== undefined && now - last < this.#options.fullCheckEveryMs) return false;
    await this.#options.sweeps.send(expireSweepStart(job.clientId, job.jobId));
    this.#sweptAt.set(job.jobId, now);
    return true;
  }

  /**
   * Whether a running job still has work: its counts while they say so, except in the job's turn
   * of the full check (or when the last run owed it one); else its tasks. A turn that finds the
   * run's reads spent is owed to the next run; a job whose counts say nothing is left is read at once.
   */
  async #hasOpenTask(job: Job, check: FullCheck, now: number): Promise<boolean> {
    if (tasksLeft(job)) {
      const turn =
        this.#owedFullChecks.has(job.jobId) ||
        turnComes(job.jobId, now, check.period, this.#options.runEveryMs);
      if (!turn) return true;
      if (!check.budget.take()) {
        this.#owedFullChecks.add(job.jobId);
        return true;
      }
    }
    this.#owedFullChecks.delete(job.jobId);
    return this.#options.store.hasOpenTask(job.jobId);
  }
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

/** When a job was found with nothing open, and what it then counted. */
interface QuietMark {
  readonly at: number;
  /** Whether `job` still counts what it counted then: no task ended or opened again since. */
  sameAs(job: Job): boolean;
}

function quietMark(job: Job, at: number): QuietMark {
  const reopened = job.reopened;
  const ended = job.counts === undefined ? undefined : endedTasks(job.counts);
  return {
    at,
    sameAs: (now) =>
      now.reopened === reopened && (now.counts === undefined ? undefined : endedTasks(now.counts)) === ended,
  };
}

/** True when the job's counts say some of its tasks have not ended. */
function tasksLeft(job: Job): boolean {
  const c = job.counts;
  return c !== undefined && endedTasks(c) < c.tasks;
}
