/**
 * What a scheduled or running job waits for now, and a running call job's client live against its
 * limits: what the operator API (`api.ts`) adds to a job as it shows it.
 */
import type { JobsApiDeps } from './api.ts';
import type { ClientSettings, Job } from './model.ts';
import { type JobWaiting, jobWaitingFor, nextTaskWait } from './waiting.ts';

/** The client's calls in flight and its limits, as a running call job's page shows them. */
export interface JobLive {
  readonly callsInFlight: number;
  readonly maxConcurrentCalls: number;
  readonly callsPerSecond: number;
}

/** Reads a job's `waiting` and `live` (see {@link JobLive}) from the client's settings and lease. */
export class JobLiveReader {
  readonly #deps: Pick<JobsApiDeps, 'clients' | 'calls' | 'heads' | 'clock'>;

  constructor(deps: Pick<JobsApiDeps, 'clients' | 'calls' | 'heads' | 'clock'>) {
    this.#deps = deps;
  }

  /** What the job waits for now; a read that fails leaves it unsaid rather than fail the request. */
  async waitingOf(job: Job): Promise<JobWaiting | undefined> {
    return (await this.liveOf(job)).waiting;
  }

  /**
   * What a scheduled or running job waits for and, for a running call job, the client's calls in
   * flight against its limits (the lease item and the client's settings: two reads, never the
   * job's tasks), which the console charts.
   */
  async liveOf(job: Job, nextTask = false): Promise<{ waiting?: JobWaiting; live?: JobLive }> {
    if (job.status !== 'scheduled' && job.status !== 'running') return {};
    const client = await this.#deps.clients.get(job.clientId);
    if (!client) return {};
    const callsInFlight =
      job.channel === 'call' && job.status === 'running'
        ? await this.#deps.calls?.callsInFlight(job.clientId).catch(() => undefined)
        : undefined;
    const now = this.#deps.clock.now();
    const waiting =
      jobWaitingFor({ job, client, now, ...(callsInFlight === undefined ? {} : { callsInFlight }) }) ??
      (nextTask && !callsInFlight ? await this.#nextTaskWait(job, client, now) : undefined);
    const live: JobLive | undefined =
      callsInFlight === undefined
        ? undefined
        : {
            callsInFlight,
            maxConcurrentCalls: client.maxConcurrentCalls,
            callsPerSecond: client.callsPerSecond,
          };
    return { ...(waiting ? { waiting } : {}), ...(live ? { live } : {}) };
  }

  /**
   * A running job held back by its first waiting task only (`waiting.ts`), read when nothing else
   * holds it: a call job's, or a message job's whose recipients a contact limit holds (their
   * chunks are spilled into tasks, deferred in the same index).
   */
  async #nextTaskWait(job: Job, client: ClientSettings, now: number): Promise<JobWaiting | undefined> {
    if (job.status !== 'running' || !this.#deps.heads) return undefined;
    const next = await this.#deps.heads.nextOf(job.clientId, job.jobId).catch(() => undefined);
    return nextTaskWait(job, client, next, now);
  }
}
