/**
 * Serving a client's `email` jobs under its lease: the message pipeline (`shared/campaign/
 * pipeline.ts`) over the email tasks the lease holder claims, sending through the client's SES
 * transport (`shared/adapters/ses-transport.ts`), beside its calls and its LINE jobs.
 *
 * Main course, as for LINE (`serve-messages.ts`): a session on the store (claims fenced by the
 * lease, only the client's running email jobs inside their hours) → the pipeline until the tasks run
 * dry → again while any is ready. A job that stops `running` stops the round; losing the lease or
 * {@link EmailServer.stop} stops it the same way. What SES says of the account:
 * - the daily quota is used up → the round's running email jobs are paused, with SES's reason;
 * - sending is paused or the account suspended → every email job of the client waits
 *   (`heldBackoffMs`), logged as an error.
 */
import { type PipelineTotals, runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { JobProgress, ReportSink, TaskSource } from '#shared/campaign/ports.ts';
import type { MessageTransport } from '#shared/campaign/transport.ts';
import type { EmailTemplate } from '#shared/email/template.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { SendingRounds, type SendingRoundsDeps } from './sending-rounds.ts';
import type { ServeEnd } from './serve-client.ts';

export interface EmailServeSettings {
  /** Senders (requests in flight). Default 16: SES answers in tens of ms, a bulk send is 50 recipients. */
  readonly emailConcurrency: number;
  /** Claimed tasks held ahead of the senders. Default 1,000. */
  readonly emailQueueCapacity: number;
  /** How long an email SES did not answer waits for its SEND event before it ends in doubt, ms. */
  readonly inDoubtWaitMs: number;
  /** After SES held every send (paused, suspended), try again after this long, ms. Default 15 min. */
  readonly heldBackoffMs: number;
  /** How often the jobs being sent are checked for pause / cancel, ms. Default 250. */
  readonly jobCheckMs: number;
  /** How long the client's settings are trusted while sending, ms. Default 5,000. */
  readonly clientCheckMs: number;
}

export const DEFAULT_EMAIL_SETTINGS: EmailServeSettings = {
  emailConcurrency: 16,
  emailQueueCapacity: 1_000,
  inDoubtWaitMs: 10 * 60_000,
  heldBackoffMs: 15 * 60_000,
  jobCheckMs: 250,
  clientCheckMs: 5_000,
};

/** The store, lease, client, clock and logger of {@link SendingRoundsDeps}, and SES. */
export interface EmailServerDeps extends SendingRoundsDeps {
  /** The client's SES transport (its From, configuration set; the account's rate). */
  readonly transportFor: (client: ClientSettings) => Promise<MessageTransport<EmailTemplate>>;
  readonly settings: EmailServeSettings;
  readonly onProgress?: (progress: readonly JobProgress[]) => void;
}

/** Serves one client's email jobs while its lease is held; make one per lease. */
export class EmailServer {
  readonly clientId: string;
  readonly #deps: EmailServerDeps;
  readonly #rounds: SendingRounds;
  /** The earliest time a task this server released waits until (see {@link EmailServer.#nextRelease}). */
  #releasedUntil: number | undefined;

  constructor(deps: EmailServerDeps) {
    this.#deps = deps;
    this.#rounds = new SendingRounds(deps);
    this.clientId = this.#rounds.clientId;
  }

  stop(): void {
    this.#rounds.stop();
  }

  /** A job of this client changed (pause, cancel): if it is being sent and no longer running, stop. */
  async jobChanged(jobId: string): Promise<void> {
    await this.#rounds.jobChanged(jobId);
  }

  serve(): Promise<ServeEnd> {
    return this.#rounds.serve(() => this.#serveRounds());
  }

  async #serveRounds(): Promise<ServeEnd> {
    const { clock, settings } = this.#deps;
    while (this.#rounds.going) {
      const transport = await this.#transport();
      if (!transport) return { kind: 'no-work', nextReadyAt: clock.now() + settings.heldBackoffMs };
      const totals = await this.#round(transport);
      const interrupted = this.#rounds.interrupted();
      if (interrupted) return interrupted;
      if (totals.stoppedBy === 'daily-quota') {
        await this.#pauseRound(totals.stopDetail ?? "SES's daily sending quota is used up");
        continue;
      }
      if (totals.stoppedBy === 'held') {
        this.#deps.logger.error('SES holds every send of the account; email jobs wait', {
          clientId: this.clientId,
          reason: totals.stopDetail,
        });
        return { kind: 'no-work', nextReadyAt: clock.now() + settings.heldBackoffMs };
      }
      if (totals.stoppedBy === 'drained' && totals.claimed === 0) break;
    }
    return this.#rounds.interrupted() ?? { kind: 'no-work', nextReadyAt: this.#nextRelease() };
  }
  /**
   * When the earliest task this server gave back to wait (a throttled send, one awaiting its SEND
   * event) is ready again: the broker serves the client again then, not after its idle back-off.
   */
  #nextRelease(): number | undefined {
    const next = this.#releasedUntil;
    this.#releasedUntil = undefined;
    // Already past (the last round outlasted the wait): at once. Each release is used once, so a
    // client whose tasks cannot be claimed when ready falls back to the broker's idle back-off.
    return next === undefined ? undefined : Math.max(next, this.#deps.clock.now());
  }

  /** The session's report, noting when each task given back to wait is ready again. */
  #noteReleases(report: ReportSink): ReportSink {
    return {
      write: (outcomes) => {
        for (const o of outcomes) {
          if (o.kind !== 'released' || o.retryAfterMs === undefined) continue;
          const readyAt = o.at + o.retryAfterMs;
          this.#releasedUntil = Math.min(this.#releasedUntil ?? readyAt, readyAt);
        }
        return report.write(outcomes);
      },
    };
  }

  /** The client's transport, or undefined (logged) when it has no email settings or SES cannot be read. */
  async #transport(): Promise<MessageTransport<EmailTemplate> | undefined> {
    const client = this.#rounds.client.current;
    if (!client.email) return undefined;
    try {
      return await this.#deps.transportFor(client);
    } catch (error) {
      this.#deps.logger.error("the client's email jobs are not served: SES cannot be used", {
        clientId: this.clientId,
        error,
      });
      return undefined;
    }
  }

  /** Pauses the round's running email jobs with SES's reason (the daily quota). */
  async #pauseRound(reason: string): Promise<void> {
    const { store, logger } = this.#deps;
    for (const jobId of this.#rounds.sessionJobs()) {
      try {
        if (await store.pauseJob(this.clientId, jobId, reason))
          logger.warn('email job paused', { clientId: this.clientId, jobId, reason });
      } catch (error) {
        logger.error('email job not paused', { clientId: this.clientId, jobId, reason, error });
      }
    }
  }

  async #round(transport: MessageTransport<EmailTemplate>): Promise<PipelineTotals> {
    const { clock, timers, logger, settings } = this.#deps;
    return this.#rounds.round({
      accept: (job) => job.channel === 'email' && this.#rounds.maySend(job),
      run: async (session, signal) => {
        const totals = await runMessagePipeline<EmailTemplate>({
          // The session claims from email jobs only, whose tasks carry the job's email.
          source: session.source as TaskSource<object> as TaskSource<EmailTemplate>,
          report: this.#noteReleases(session.report),
          batches: session.batches,
          transport,
          concurrency: settings.emailConcurrency,
          queueCapacity: settings.emailQueueCapacity,
          inDoubtWaitMs: settings.inDoubtWaitMs,
          clock,
          timers,
          signal,
          log: logger,
          ...(this.#deps.onProgress ? { onProgress: this.#deps.onProgress } : {}),
        });
        if (totals.claimed > 0) logger.info('email round done', { clientId: this.clientId, ...totals });
        return totals;
      },
    });
  }
}
