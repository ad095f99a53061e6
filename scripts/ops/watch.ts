/**
 * Follows a job by polling `GET …/jobs/{jobId}` with backoff: quick while it moves, slower while
 * it does not (up to a few seconds), back to quick at the next change. A network error or a 5xx
 * is waited out with its own, longer backoff (and said on stderr), up to an outage limit; a 4xx
 * ends the watch, since asking again would get the same answer.
 */
import type { JobView } from '#shared/jobs/api.ts';
import { isTransient, OpsError } from './errors.ts';

export interface Backoff {
  readonly minMs: number;
  readonly maxMs: number;
  readonly factor: number;
}

/** Between polls of a job. */
export const POLL_BACKOFF: Backoff = { minMs: 500, maxMs: 8_000, factor: 1.6 };
/** Between retries after a transient error. */
export const RETRY_BACKOFF: Backoff = { minMs: 1_000, maxMs: 30_000, factor: 2 };

/** The next wait: the minimum after a change (or at first), else the last one grown, capped. */
export function nextDelay(previousMs: number | undefined, changed: boolean, policy: Backoff): number {
  if (previousMs === undefined || changed) return policy.minMs;
  return Math.min(policy.maxMs, Math.round(previousMs * policy.factor));
}

/** What of a job, when it changes, is news for the watcher. */
export function jobSnapshot(job: JobView): string {
  return JSON.stringify([
    job.status,
    job.counts,
    job.waiting?.reason,
    job.waiting?.message,
    job.failureReason,
  ]);
}

export interface WatchDeps {
  readonly fetchJob: () => Promise<JobView>;
  readonly onUpdate: (job: JobView) => void;
  /** A transient error, and how long until the next try. */
  readonly onRetry: (error: Error, delayMs: number) => void;
  readonly sleep: (ms: number) => Promise<void>;
  readonly now: () => number;
  /** Give up (answer `timedOut`) at this time, epoch ms. */
  readonly deadline?: number;
  /** Transient errors in a row for longer than this end the watch. Default 5 minutes. */
  readonly outageLimitMs?: number;
}

export type WatchResult =
  | { readonly kind: 'done'; readonly job: JobView }
  | { readonly kind: 'timed-out'; readonly job: JobView | undefined };

export class JobWatcher {
  readonly #deps: WatchDeps;
  #last: JobView | undefined;

  constructor(deps: WatchDeps) {
    this.#deps = deps;
  }

  /** The job as last seen. */
  get last(): JobView | undefined {
    return this.#last;
  }

  /** Polls until `done(job)`, telling `onUpdate` each time the job changed (and the first time). */
  async until(done: (job: JobView) => boolean): Promise<WatchResult> {
    const { now, sleep, deadline } = this.#deps;
    let delay: number | undefined;
    let seen = this.#last ? jobSnapshot(this.#last) : undefined;
    for (;;) {
      const job = await this.#fetch();
      const snapshot = jobSnapshot(job);
      const changed = snapshot !== seen;
      seen = snapshot;
      this.#last = job;
      if (changed) this.#deps.onUpdate(job);
      if (done(job)) return { kind: 'done', job };
      delay = nextDelay(delay, changed, POLL_BACKOFF);
      if (deadline !== undefined && now() + delay > deadline) return { kind: 'timed-out', job };
      await sleep(delay);
    }
  }

  /** One read of the job, retrying transient errors with backoff, until the outage limit. */
  async #fetch(): Promise<JobView> {
    const { now, sleep, deadline } = this.#deps;
    const limit = this.#deps.outageLimitMs ?? 5 * 60_000;
    let since: number | undefined;
    let delay: number | undefined;
    for (;;) {
      try {
        return await this.#deps.fetchJob();
      } catch (error) {
        if (!isTransient(error)) throw error;
        since ??= now();
        if (now() - since > limit) {
          throw new OpsError(
            `${(error as Error).message}; gave up after ${Math.round(limit / 1000)} s of retries`,
          );
        }
        delay = nextDelay(delay, false, RETRY_BACKOFF);
        if (deadline !== undefined && now() + delay > deadline) throw error;
        this.#deps.onRetry(error as Error, delay);
        await sleep(delay);
      }
    }
  }
}
