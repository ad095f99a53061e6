/**
 * A served client's outstanding tasks as its broker takes them (`serve-client.ts` starts them): read
 * from the outstanding index a batch at a time, skipping those whose job does not run or is past its
 * end, and waiting for the earliest opening of the ones outside their hours.
 */
import { type ClientSettings, type Job, jobHasEnded, type Task } from '#shared/jobs/model.ts';
import { earliestStart, taskZone } from '#shared/jobs/restrictions.ts';
import type { ServeClientDeps } from './serve-client.ts';

/** The next task to start, or how long to wait for one (undefined: until something changes). */
export type NextTask =
  | { readonly kind: 'task'; readonly task: Task; readonly job: Job }
  | { readonly kind: 'wait'; readonly until: number | undefined };

/** The client's outstanding tasks, buffered, with the jobs they belong to. */
export class OutstandingTasks {
  readonly #clientId: string;
  readonly #deps: Pick<ServeClientDeps, 'tasks' | 'clock' | 'settings' | 'logger'>;
  readonly #jobs = new Map<string, { job: Job | undefined; at: number }>();
  #buffer: Task[] = [];

  constructor(clientId: string, deps: Pick<ServeClientDeps, 'tasks' | 'clock' | 'settings' | 'logger'>) {
    this.#clientId = clientId;
    this.#deps = deps;
  }

  /** Gives back a task taken but not started: it is the next one taken. */
  putBack(task: Task): void {
    this.#buffer.unshift(task);
  }

  /** The next task to start (none of `inFlight`), or how long to wait for one. */
  async next(client: ClientSettings, inFlight: (taskId: string) => boolean): Promise<NextTask> {
    const { tasks, clock, settings } = this.#deps;
    let refilled = false;
    let closedUntil: number | undefined;
    for (;;) {
      if (this.#buffer.length === 0) {
        if (refilled) break;
        refilled = true;
        const found = await tasks.outstanding(this.#clientId, clock.now(), settings.batchSize);
        this.#buffer = found.filter((t) => !inFlight(t.taskId));
        if (this.#buffer.length === 0) break;
      }
      const task = this.#buffer.shift()!;
      const job = await this.job(task.jobId);
      // An ended job's tasks wait for the expire sweep; its start would be refused anyway.
      if (job?.status !== 'running' || jobHasEnded(job, clock.now())) continue;
      // Outside its hours or inside a restricted period: wait for the earliest start of any job.
      const now = clock.now();
      const opens = earliestStart(client, job, now, taskZone(client, job, task));
      if (opens !== now) {
        if (opens !== undefined) closedUntil = Math.min(closedUntil ?? opens, opens);
        // Read in its recipient's zone: out of the way until that zone opens (see #defer).
        if (opens !== undefined && job.timeZoneBy === 'recipient') await this.#defer(task, opens);
        continue;
      }
      // Its reading runs while the broker waits for its call slot (the line's rate, the limit).
      void tasks.prepare?.(task);
      return { kind: 'task', task, job };
    }
    const nextReady = await tasks.nextReadyAt(this.#clientId);
    const now = clock.now();
    // Ready now but closed: wait for the hours; ready later: wait for it.
    const until =
      nextReady === undefined
        ? closedUntil
        : nextReady <= now
          ? (closedUntil ?? now + settings.recheckMs)
          : nextReady;
    return { kind: 'wait', until };
  }

  /**
   * Moves a task whose recipient's zone is closed to when it opens, so the next index read finds
   * recipients that may be called now rather than the same closed ones (issue 14 #4). A failure
   * is only logged: the task stays where it was and is checked again.
   */
  async #defer(task: Task, readyAt: number): Promise<void> {
    const { tasks, clock, logger } = this.#deps;
    try {
      await tasks.defer?.(task, readyAt, clock.now());
    } catch (error) {
      logger.warn('could not defer a task to its zone opening', {
        clientId: this.#clientId,
        taskId: task.taskId,
        error,
      });
    }
  }

  /** The job, from a cache trusted `jobCacheMs`. */
  async job(jobId: string): Promise<Job | undefined> {
    const { tasks, clock, settings } = this.#deps;
    const cached = this.#jobs.get(jobId);
    if (cached && clock.now() - cached.at < settings.jobCacheMs) return cached.job;
    const job = await tasks.getJob(this.#clientId, jobId);
    this.#jobs.set(jobId, { job, at: clock.now() });
    return job;
  }
}
