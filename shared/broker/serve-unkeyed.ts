/**
 * Serving a client's jobs on one channel whose service takes no idempotency key — `email` (Amazon
 * SES, `shared/adapters/ses-transport.ts`) or `sms` (End User Messaging SMS,
 * `shared/adapters/sms-transport.ts`) — under its lease: the message pipeline
 * (`shared/campaign/pipeline.ts`) over the channel's tasks the lease holder claims, sending through
 * the client's transport, beside its calls and its LINE jobs. One server per channel and lease.
 *
 * Main course, as for LINE (`serve-messages.ts`): a session on the store (claims fenced by the
 * lease, only the client's running jobs of the channel inside their hours) → the pipeline until the
 * tasks run dry → again while any is ready. A job that stops `running` stops the round; losing the
 * lease or {@link UnkeyedServer.stop} stops it the same way. What the service says of the account:
 * - its quota is used up (SES's daily quota, SMS's monthly spend limit) → the round's running jobs
 *   are paused, with the service's reason;
 * - it holds every send (SES paused or suspended, SMS access denied) → every job of the channel of
 *   the client waits (`heldBackoffMs`), logged as an error.
 */
import { type PipelineTotals, runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { JobProgress, ReportSink, TaskSource } from '#shared/campaign/ports.ts';
import type { MessageTransport } from '#shared/campaign/transport.ts';
import type { ClientSettings, UnkeyedChannel } from '#shared/jobs/model.ts';
import { SendingRounds, type SendingRoundsDeps } from './sending-rounds.ts';
import type { ServeEnd } from './serve-client.ts';

export interface UnkeyedServeSettings {
  /** Senders (requests in flight). */
  readonly concurrency: number;
  /** Claimed tasks held ahead of the senders. */
  readonly queueCapacity: number;
  /** How long a send the service did not answer waits for its event before it ends in doubt, ms. */
  readonly inDoubtWaitMs: number;
  /** After the service held every send (paused, suspended), try again after this long, ms. Default 15 min. */
  readonly heldBackoffMs: number;
  /** How often the jobs being sent are checked for pause / cancel, ms. Default 250. */
  readonly jobCheckMs: number;
  /** How long the client's settings are trusted while sending, ms. Default 5,000. */
  readonly clientCheckMs: number;
}

/** Email: SES answers in tens of ms, a bulk send is 50 recipients. */
export const DEFAULT_EMAIL_SETTINGS: UnkeyedServeSettings = {
  concurrency: 16,
  queueCapacity: 1_000,
  inDoubtWaitMs: 10 * 60_000,
  heldBackoffMs: 15 * 60_000,
  jobCheckMs: 250,
  clientCheckMs: 5_000,
};

/**
 * SMS: one recipient a request, paced by the origination identity's parts per second (a few to a
 * few hundred), so fewer senders and a shorter queue than email's. The queue bounds the claim page
 * (at most half of it is claimed at once), and a job's counts move as a page closes: at 3 parts a
 * second, two-part texts, a page of 20 is about 13 s of sending, so the job's progress moves that
 * often (a page of 100 took over a minute; a page item is a fraction of a cent against the texts).
 */
export const DEFAULT_SMS_SETTINGS: UnkeyedServeSettings = {
  ...DEFAULT_EMAIL_SETTINGS,
  concurrency: 8,
  queueCapacity: 40,
};

/** A channel of the broker served by {@link UnkeyedServer}: its transport per client, and how it is served. */
export interface UnkeyedSide<T extends object> {
  readonly transportFor: (client: ClientSettings) => Promise<MessageTransport<T>>;
  readonly settings: UnkeyedServeSettings;
}

/** The store, lease, client, clock and logger of {@link SendingRoundsDeps}, and the channel's service. */
export interface UnkeyedServerDeps<T extends object> extends SendingRoundsDeps {
  readonly transportFor: UnkeyedSide<T>['transportFor'];
  readonly settings: UnkeyedServeSettings;
  readonly channel: UnkeyedChannel;
  /** The service as operators know it, for what the logs and pauses say: `SES`, `End User Messaging SMS`. */
  readonly service: string;
  readonly onProgress?: (progress: readonly JobProgress[]) => void;
}

/** Serves one client's jobs of one channel while its lease is held; make one per channel and lease. */
export class UnkeyedServer<T extends object> {
  readonly clientId: string;
  readonly #deps: UnkeyedServerDeps<T>;
  readonly #rounds: SendingRounds;
  /** The earliest time a task this server released waits until (see {@link UnkeyedServer.#nextRelease}). */
  #releasedUntil: number | undefined;

  constructor(deps: UnkeyedServerDeps<T>) {
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
        await this.#pauseRound(totals.stopDetail ?? `${this.#deps.service}'s sending quota is used up`);
        continue;
      }
      if (totals.stoppedBy === 'held') {
        this.#deps.logger.error(
          `${this.#deps.service} holds every send of the account; ${this.#deps.channel} jobs wait`,
          {
            clientId: this.clientId,
            reason: totals.stopDetail,
          },
        );
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

  /** The session's report, noting when each task given back to wait (or moved on) is ready again. */
  #noteReleases(report: ReportSink): ReportSink {
    return {
      write: (outcomes) => {
        for (const o of outcomes) {
          // A task moved to its job's next channel is ready there at once: another server's to send.
          if (o.kind !== 'released' || (o.retryAfterMs === undefined && o.moveTo === undefined)) continue;
          const readyAt = o.at + (o.retryAfterMs ?? 0);
          this.#releasedUntil = Math.min(this.#releasedUntil ?? readyAt, readyAt);
        }
        return report.write(outcomes);
      },
    };
  }

  /** The client's transport, or undefined (logged) when it has no settings for the channel or the service cannot be read. */
  async #transport(): Promise<MessageTransport<T> | undefined> {
    const client = this.#rounds.client.current;
    const { channel, service } = this.#deps;
    if (!client[channel]) return undefined;
    try {
      return await this.#deps.transportFor(client);
    } catch (error) {
      this.#deps.logger.error(`the client's ${channel} jobs are not served: ${service} cannot be used`, {
        clientId: this.clientId,
        error,
      });
      return undefined;
    }
  }

  /** Pauses the round's running jobs with the service's reason (its quota). */
  async #pauseRound(reason: string): Promise<void> {
    const { store, logger } = this.#deps;
    for (const jobId of this.#rounds.sessionJobs()) {
      try {
        if (await store.pauseJob(this.clientId, jobId, reason))
          logger.warn(`${this.#deps.channel} job paused`, { clientId: this.clientId, jobId, reason });
      } catch (error) {
        logger.error(`${this.#deps.channel} job not paused`, {
          clientId: this.clientId,
          jobId,
          reason,
          error,
        });
      }
    }
  }

  async #round(transport: MessageTransport<T>): Promise<PipelineTotals> {
    const { clock, timers, logger, settings, channel } = this.#deps;
    return this.#rounds.round({
      accept: (job, on) => on === channel && this.#rounds.maySend(job),
      run: async (session, signal) => {
        const totals = await runMessagePipeline<T>({
          // The session claims from the channel's jobs only, whose tasks carry the job's content.
          source: session.source as TaskSource<object> as TaskSource<T>,
          report: this.#noteReleases(session.report),
          batches: session.batches,
          transport,
          concurrency: settings.concurrency,
          queueCapacity: settings.queueCapacity,
          inDoubtWaitMs: settings.inDoubtWaitMs,
          clock,
          timers,
          signal,
          log: logger,
          ...(this.#deps.onProgress ? { onProgress: this.#deps.onProgress } : {}),
        });
        if (totals.claimed > 0) logger.info(`${channel} round done`, { clientId: this.clientId, ...totals });
        return totals;
      },
    });
  }
}
