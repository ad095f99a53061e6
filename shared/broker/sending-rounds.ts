/**
 * What a message channel's server (LINE's `serve-messages.ts`, email's `serve-email.ts`) does the
 * same under a client's lease: it holds the client's settings, runs rounds of the pipeline over a
 * fresh session of the store (claims fenced by the lease) while a watch stops the round when one
 * of its jobs may no longer be sent, and ends serving `lost` or `stopped` when the lease is lost or
 * {@link SendingRounds.stop} is called.
 */
import type { PipelineTotals } from '#shared/campaign/pipeline.ts';
import type { ClientSettings, Job, JobChannel } from '#shared/jobs/model.ts';
import { mayStartNow } from '#shared/jobs/restrictions.ts';
import type { LeaseKeeper } from '#shared/lease/lease.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { HeldClientSettings } from './client-settings.ts';
import { SendingJobsWatcher } from './sending-jobs-watch.ts';
import type { ServeEnd } from './serve-client.ts';
import type { MessageTaskStore } from './serve-messages.ts';

/** One lease's session of the store (see {@link MessageTaskStore.session}). */
export type MessageSession = ReturnType<MessageTaskStore['session']>;

export interface SendingRoundsDeps {
  readonly store: MessageTaskStore;
  readonly keeper: LeaseKeeper;
  /** The client's settings when the lease was taken, and how to read them again while sending. */
  readonly client: ClientSettings;
  readonly readClient?: () => Promise<ClientSettings | undefined>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: Logger;
  readonly settings: {
    /** How long the client's settings are trusted while sending, ms. */
    readonly clientCheckMs: number;
    /** How often the jobs being sent are checked for pause / cancel, ms. */
    readonly jobCheckMs: number;
  };
  /** Told when sending starts (1) and ends (0): task protection. Must not throw. */
  readonly onActiveChange?: (active: 0 | 1) => void;
}

/** One round: which jobs it sends, what the watch does besides, and the pipeline run itself. */
export interface RoundPlan {
  /**
   * The jobs the session claims from, and of each the tasks on which channel (the server's, of
   * jobs that may send now: {@link SendingRounds.maySend}).
   */
  readonly accept: (job: Job, channel: JobChannel) => boolean;
  /** Before each look of the watch, after the client's settings are read again. */
  readonly beforeEachLook?: (abort: AbortController) => void;
  /** A job of the round that left `running`. */
  readonly onEnded?: (jobId: string) => void;
  /** The pipeline over the session; resolves once every claimed task is written. */
  readonly run: (session: MessageSession, signal: AbortSignal) => Promise<PipelineTotals>;
}

export class SendingRounds {
  readonly clientId: string;
  /** The client's settings, read again while sending. */
  readonly client: HeldClientSettings;
  readonly #deps: SendingRoundsDeps;
  #stopping = false;
  #lost = false;
  #current: AbortController | undefined;
  #sessionJobs: (() => readonly string[]) | undefined;

  constructor(deps: SendingRoundsDeps) {
    this.#deps = deps;
    this.clientId = deps.keeper.clientId;
    this.client = new HeldClientSettings(
      {
        read: deps.readClient ?? (() => Promise.resolve(deps.client)),
        clock: deps.clock,
        logger: deps.logger,
        maxAgeMs: deps.settings.clientCheckMs,
      },
      deps.client,
    );
  }

  /** Stops starting sends; the round in flight ends once its sends are recorded. */
  stop(): void {
    this.#stopping = true;
    this.#current?.abort();
  }

  /** Stops the round in flight (a job of it may no longer be sent). */
  abortRound(): void {
    this.#current?.abort();
  }

  /** The jobs of the round in flight, or of the last one. */
  sessionJobs(): readonly string[] {
    return this.#sessionJobs?.() ?? [];
  }

  /**
   * A job of this client changed (pause, cancel): if it is being sent and no longer running, no new
   * send of it starts from now on (`onEnded` is told first).
   */
  async jobChanged(jobId: string, onEnded?: (jobId: string) => void): Promise<void> {
    if (!this.sessionJobs().includes(jobId)) return;
    const job = await this.#deps.store.getJob(this.clientId, jobId);
    if (job?.status !== 'running') {
      onEnded?.(jobId);
      this.abortRound();
    }
  }

  /** Runs `rounds` while the lease is watched: its loss stops the round in flight. */
  async serve(rounds: () => Promise<ServeEnd>): Promise<ServeEnd> {
    const unsubscribe = this.#deps.keeper.onLost(() => {
      this.#lost = true;
      this.#current?.abort();
    });
    try {
      return await rounds();
    } finally {
      unsubscribe();
    }
  }

  /** Whether rounds may go on: the lease is held and nobody called {@link stop}. */
  get going(): boolean {
    return !this.#stopping && !this.#lost;
  }

  /** `lost` or `stopped` when serving must end so, else undefined. */
  interrupted(): ServeEnd | undefined {
    if (this.#lost) return { kind: 'lost' };
    return this.#stopping ? { kind: 'stopped' } : undefined;
  }

  /** One pipeline run over a fresh session, watched; resolves once every claimed task is written. */
  async round(plan: RoundPlan): Promise<PipelineTotals> {
    const { store, keeper } = this.#deps;
    const session = store.session(
      {
        clientId: this.clientId,
        owner: keeper.owner,
        token: () => (this.#lost ? undefined : keeper.currentToken()),
      },
      plan.accept,
    );
    const abort = new AbortController();
    this.#current = abort;
    this.#sessionJobs = () => session.jobs();
    const watcher = this.#watch(session.jobs, abort, plan);
    this.#deps.onActiveChange?.(1);
    try {
      const totals = await plan.run(session, abort.signal);
      if (session.fenced()) this.#lost = true;
      return totals;
    } finally {
      watcher.stop();
      this.#current = undefined;
      this.#deps.onActiveChange?.(0);
    }
  }

  /** Messages go out only while the client is not paused, inside the job's (or the client's) hours. */
  maySend(job: Job): boolean {
    return mayStartNow(this.client.current, job, this.#deps.clock.now());
  }

  /** Polls the jobs being sent; one that is no longer running, or may not be sent now, stops the round. */
  #watch(jobs: () => readonly string[], abort: AbortController, plan: RoundPlan): SendingJobsWatcher {
    const { store, timers, logger, settings } = this.#deps;
    return new SendingJobsWatcher({
      clientId: this.clientId,
      store,
      timers,
      everyMs: settings.jobCheckMs,
      logger,
      jobs,
      abort,
      beforeEach: async () => {
        await this.client.fresh();
        plan.beforeEachLook?.(abort);
      },
      maySend: (job) => this.maySend(job),
      clientPaused: () => this.client.current.paused === true,
      ...(plan.onEnded ? { onEnded: plan.onEnded } : {}),
    });
  }
}
