/**
 * The watch over the jobs a message round is sending (LINE's in `serve-messages.ts`, email's in
 * `serve-email.ts`): a job that stops running, or may not be sent now, stops the round.
 */
import type { Job } from '#shared/jobs/model.ts';
import type { Logger } from '#shared/log.ts';
import type { TimerHandle, Timers } from '#shared/pacing/clock.ts';
import type { MessageTaskStore } from './serve-messages.ts';

export interface SendingJobsWatch {
  readonly clientId: string;
  readonly store: Pick<MessageTaskStore, 'getJob'>;
  readonly timers: Timers;
  readonly everyMs: number;
  readonly logger: Logger;
  /** The jobs being sent now. */
  readonly jobs: () => readonly string[];
  /** Aborted when one of them may no longer be sent. */
  readonly abort: AbortController;
  /** Before each look (the client's settings read again, a quota check). */
  readonly beforeEach?: () => Promise<void>;
  readonly maySend: (job: Job) => boolean;
  readonly clientPaused: () => boolean;
  /** A job that left `running`. */
  readonly onEnded?: (jobId: string) => void;
}

/**
 * Polls the jobs a message round is sending (every `everyMs`, from its construction): one that is no
 * longer running, or may not be sent now (the client paused, outside its hours), stops the round.
 */
export class SendingJobsWatcher {
  readonly #watch: SendingJobsWatch;
  #handle: TimerHandle | undefined;
  #done = false;

  constructor(watch: SendingJobsWatch) {
    this.#watch = watch;
    this.#handle = watch.timers.setTimeout(() => void this.#tick(), watch.everyMs);
  }

  /** Stops polling (the round is over). */
  stop(): void {
    this.#done = true;
    if (this.#handle !== undefined) this.#watch.timers.clearTimeout(this.#handle);
  }

  async #tick(): Promise<void> {
    const watch = this.#watch;
    const { store, timers, logger, clientId } = watch;
    try {
      await watch.beforeEach?.();
      for (const jobId of watch.jobs()) {
        const job = await store.getJob(clientId, jobId);
        const maySend = job !== undefined && watch.maySend(job);
        if (job?.status !== 'running' || !maySend) {
          if (job?.status !== 'running') watch.onEnded?.(jobId);
          logger.info('job no longer sending; stopping its sends', {
            clientId,
            jobId,
            status: job?.status,
            clientPaused: watch.clientPaused(),
            maySend,
          });
          watch.abort.abort();
          return;
        }
      }
    } catch (error) {
      logger.warn('job status not read', { clientId, error });
    }
    if (!this.#done) this.#handle = timers.setTimeout(() => void this.#tick(), watch.everyMs);
  }
}
