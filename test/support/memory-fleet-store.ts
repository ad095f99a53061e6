/**
 * An in-memory {@link FleetStore} with the DynamoDB adapter's semantics (conditional job
 * transitions, newest work list wins). Every call yields to the event loop first, so two runs
 * of the job manager interleave as they would against the real table.
 */

import type { ClientProfile, ClientState, FleetStore, JobRef } from '#shared/fleet/ports.ts';
import type { ReadyHint } from '#shared/fleet/ready-hints.ts';
import type { FleetWork } from '#shared/fleet/work-list.ts';
import { type Job, keys, type Task } from '#shared/jobs/model.ts';

const OPEN_STATES = new Set<Task['state']>(['pending', 'in-flight', 'retry-wait']);
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

export class MemoryFleetStore implements FleetStore {
  readonly jobs = new Map<string, Job>();
  readonly tasks = new Map<string, Task>();
  readonly clients = new Map<string, ClientProfile>();
  /** Leases by client: their expiry and the calls they record in flight (`{jobId}|{taskId}`). */
  readonly leases = new Map<
    string,
    { readonly expiresAt: number; readonly inFlight: readonly string[]; readonly token?: number }
  >();
  /** Ready hints by client, as the job manager wrote them. */
  readonly hints = new Map<string, ReadyHint>();
  /** Clients whose outstanding tasks were read (`nextReadyAt`), in order. */
  readonly taskReads: string[] = [];
  work: FleetWork | undefined;
  /** Job transitions that were written (not refused), in order. */
  readonly transitions: { jobId: string; to: Job['status'] }[] = [];

  putJob(job: Job): void {
    this.jobs.set(job.jobId, job);
  }

  putTask(task: Task): void {
    this.tasks.set(`${task.jobId}/${task.taskId}`, task);
  }

  async dueScheduledJobs(now: number): Promise<Job[]> {
    await tick();
    return [...this.jobs.values()].filter(
      (job) => keys.jobStatusIndex(job)?.statusKey.startsWith('JOBSTATUS#scheduled#') && job.startAt <= now,
    );
  }

  async runningJobs(): Promise<Job[]> {
    await tick();
    return [...this.jobs.values()].filter((job) => job.status === 'running');
  }

  async startJob(ref: JobRef, now: number): Promise<boolean> {
    await tick();
    return this.transition(ref.jobId, 'scheduled', 'running', now, (job) => job.startAt <= now);
  }

  async completeJob(ref: JobRef, now: number): Promise<boolean> {
    await tick();
    return this.transition(ref.jobId, 'running', 'completed', now, (job) => job.reopened === ref.reopened);
  }

  /** Jobs whose claim pages were settled (`settleClaimPages`), in order. */
  readonly settledPages: string[] = [];

  async settleClaimPages(_clientId: string, jobId: string): Promise<void> {
    this.settledPages.push(jobId);
  }

  /** Reads of a job's tasks for an open one (`hasOpenTask`). */
  openTaskReads = 0;

  async hasOpenTask(jobId: string): Promise<boolean> {
    this.openTaskReads++;
    await tick();
    return [...this.tasks.values()].some((task) => task.jobId === jobId && OPEN_STATES.has(task.state));
  }

  async nextReadyAt(clientId: string, jobIds: readonly string[], until: number): Promise<number | undefined> {
    await tick();
    this.taskReads.push(clientId);
    const ready = [...this.tasks.values()]
      .filter(
        (task) =>
          task.clientId === clientId &&
          jobIds.includes(task.jobId) &&
          keys.outstandingIndex(task) !== undefined &&
          task.readyAt <= until,
      )
      .map((task) => task.readyAt);
    return ready.length > 0 ? Math.min(...ready) : undefined;
  }

  async clientStates(
    clientIds: readonly string[],
    options: { readonly hintsOf?: readonly string[] } = {},
  ): Promise<Map<string, ClientState>> {
    await tick();
    const hinted = new Set(options.hintsOf ?? clientIds);
    return new Map(
      clientIds.map((id) => {
        const lease = this.leases.get(id);
        return [
          id,
          {
            profile: this.clients.get(id),
            lease: lease && {
              token: lease.token ?? 1,
              expiresAt: lease.expiresAt,
              inFlight: lease.inFlight.length,
            },
            hint: hinted.has(id) ? this.hints.get(id) : undefined,
          },
        ] as const;
      }),
    );
  }

  async putReadyHints(hints: readonly ReadyHint[]): Promise<void> {
    await tick();
    for (const hint of hints) this.hints.set(hint.clientId, hint);
  }

  async putFleetWork(work: FleetWork): Promise<boolean> {
    await tick();
    if (this.work && this.work.updatedAt > work.updatedAt) return false;
    this.work = work;
    return true;
  }

  private transition(
    jobId: string,
    from: Job['status'],
    to: Job['status'],
    now: number,
    also: (job: Job) => boolean = () => true,
  ): boolean {
    const job = this.jobs.get(jobId);
    if (!job || job.status !== from || !also(job)) return false;
    this.jobs.set(jobId, { ...job, status: to, updatedAt: now });
    this.transitions.push({ jobId, to });
    return true;
  }
}
