/**
 * Serving a client's `message` jobs under its lease: the message pipeline (producer → bounded
 * queue → paced senders → batched reporter, see `shared/campaign/pipeline.ts`) over the tasks the
 * lease holder claims, sending through the client's LINE channel.
 *
 * Main course: open a session on the store (claims fenced by the lease) → run the pipeline until
 * the client's message tasks run dry → again while any is ready. A job that stops `running` (pause,
 * cancel) stops the pipeline at once — no new request starts; requests in flight finish and are
 * recorded; claimed tasks not sent go back with their attempt — and serving goes on with the
 * client's other jobs. Losing the lease, or {@link MessageServer.stop}, stops it the same way.
 *
 * LINE's monthly quota (`quota-guard.ts`): read before a job's first send and every `quotaCheckMs`
 * while it sends; a job whose messages left it cannot cover is paused with the reason (`Job.
 * pausedReason`), unless the client sets `allowPartialDelivery`: then what the quota allows goes
 * out and the tasks LINE refuses for the monthly limit end `failed` with the reason.
 *
 * LINE's own check (`shared/campaign/message-check.ts`), when the channel's send carries its
 * validation endpoints: a job's message is validated once, before the job's first send; one LINE
 * refuses has every task failed unsent with LINE's reason, which is recorded on the job
 * (`MessageTaskStore.refuseJob`), so that the job ends `failed` with it once no task is left.
 */

import { MessageCheck } from '#shared/campaign/message-check.ts';
import {
  type MessagePipelineOptions,
  type PipelineTotals,
  runMessagePipeline,
} from '#shared/campaign/pipeline.ts';
import type {
  BatchLedger,
  JobProgress,
  ReportSink,
  SendObservation,
  SendPort,
  TaskSource,
  ValidatePort,
} from '#shared/campaign/ports.ts';
import { MONTHLY_LIMIT_PAUSE_REASON } from '#shared/campaign/quota.ts';
import type { Job, JobChannel } from '#shared/jobs/model.ts';
import type { MessageQuota } from '#shared/line/messaging-client.ts';
import { LINE_RATE_LIMITS } from '#shared/line/rate-limits.ts';
import type { ClientMetrics } from './broker-metrics.ts';
import { DEFAULT_QUOTA_GUARD_SETTINGS, QuotaGuard } from './quota-guard.ts';
import { type MessageSession, SendingRounds, type SendingRoundsDeps } from './sending-rounds.ts';
import type { ServeEnd } from './serve-client.ts';

/** The store's side: a session per lease, and job reads. */
export interface MessageTaskStore {
  session(
    lease: { clientId: string; owner: string; token(): number | undefined },
    accept: (job: Job, channel: JobChannel) => boolean,
  ): {
    readonly source: TaskSource;
    readonly report: ReportSink;
    readonly batches: BatchLedger;
    fenced(): boolean;
    jobs(): readonly string[];
  };
  getJob(clientId: string, jobId: string): Promise<Job | undefined>;
  /** Pauses a running job, saying why (`Job.pausedReason`); false when it was not running. */
  pauseJob(clientId: string, jobId: string, reason: string): Promise<boolean>;
  /**
   * Records on a running job that LINE refused its message (`Job.failureReason`): its tasks fail
   * unsent, and the job ends `failed` with the reason instead of `completed`. False when the job
   * was not running or already had a reason. Absent: the tasks still fail, the job completes.
   */
  refuseJob?(clientId: string, jobId: string, reason: string): Promise<boolean>;
}

export interface MessageServeSettings {
  /** The channel's push requests per second (LINE: 2,000/s). */
  readonly messageRatePerSecond: number;
  /** The channel's multicast requests per second, its own bucket (LINE: 200/s). */
  readonly multicastRatePerSecond: number;
  /** Senders (requests in flight). Default 128. */
  readonly messageConcurrency: number;
  /** Claimed tasks held ahead of the senders. Default 2,000. */
  readonly messageQueueCapacity: number;
  /** How often the jobs being sent are checked for pause / cancel, ms. Default 250. */
  readonly jobCheckMs: number;
  /** After LINE's monthly quota is used up, try the client again after this long, ms. Default 1 h. */
  readonly quotaBackoffMs: number;
  /** How long the client's settings (hours, pause) are trusted while sending, ms. Default 5,000. */
  readonly clientCheckMs: number;
  /** How often LINE's monthly quota is read while a channel sends, ms. Default 1 min. */
  readonly quotaCheckMs: number;
  /** How old a quota reading may be when a job starts sending, ms. Default 5 s. */
  readonly quotaFreshMs: number;
}

export const DEFAULT_MESSAGE_SETTINGS: MessageServeSettings = {
  messageRatePerSecond: LINE_RATE_LIMITS.push,
  multicastRatePerSecond: LINE_RATE_LIMITS.multicast,
  messageConcurrency: 128,
  messageQueueCapacity: 2_000,
  jobCheckMs: 250,
  quotaBackoffMs: 3_600_000,
  clientCheckMs: 5_000,
  quotaCheckMs: DEFAULT_QUOTA_GUARD_SETTINGS.checkMs,
  quotaFreshMs: DEFAULT_QUOTA_GUARD_SETTINGS.freshMs,
};

/** The store, lease, client, clock and logger of {@link SendingRoundsDeps}, and LINE. */
export interface MessageServerDeps extends SendingRoundsDeps {
  /** The Messaging API send of a LINE channel (its access token, keep-alive connections). */
  readonly sendFor: (channelId: string) => Promise<SendPort>;
  readonly settings: MessageServeSettings;
  /** Told the counts written, per job, at most once a second. */
  readonly onProgress?: (progress: readonly JobProgress[]) => void;
  /** The client's figures for CloudWatch: messages sent, 429s, the monthly quota. */
  readonly metrics?: ClientMetrics;
  /** Reads the channel's monthly quota (Messaging API): the quota check and its metric. None: no check. */
  readonly readQuota?: (channelId: string) => Promise<MessageQuota>;
}

/** Serves one client's message jobs while its lease is held; make one per lease. */
export class MessageServer {
  readonly clientId: string;
  readonly #deps: MessageServerDeps;
  readonly #rounds: SendingRounds;
  readonly #quota: QuotaGuard | undefined;
  /** LINE's check of each job's message, made at the first round whose send can validate. */
  #check: MessageCheck | undefined;
  /**
   * A task of a fallback job moved on to its next channel since the last serve ended: the broker
   * serves the client again at once, so that channel's server takes it without the idle back-off.
   */
  #moved = false;
  #validate: ValidatePort | undefined;

  constructor(deps: MessageServerDeps) {
    this.#deps = deps;
    this.#rounds = new SendingRounds(deps);
    this.clientId = this.#rounds.clientId;
    const channelId = deps.client.messageChannelId;
    const read = deps.readQuota;
    this.#quota =
      channelId && read
        ? new QuotaGuard({
            clientId: this.clientId,
            channelId,
            read: () => read(channelId),
            allowsPartial: () => this.#rounds.client.current.allowPartialDelivery === true,
            onShort: (jobId, reason) => void this.#pauseJob(jobId, reason),
            clock: deps.clock,
            sleep: (ms) => new Promise((resolve) => deps.timers.setTimeout(resolve, ms)),
            logger: deps.logger,
            ...(deps.metrics ? { metrics: deps.metrics } : {}),
            settings: {
              ...DEFAULT_QUOTA_GUARD_SETTINGS,
              checkMs: deps.settings.quotaCheckMs,
              freshMs: deps.settings.quotaFreshMs,
            },
          })
        : undefined;
  }

  /** Stops starting sends; {@link serve} resolves once the sends in flight are recorded. */
  stop(): void {
    this.#rounds.stop();
  }

  /**
   * A job of this client changed (the operator API's nudge on pause / cancel): if it is one being
   * sent and no longer running, no new send of it starts from now on.
   */
  async jobChanged(jobId: string): Promise<void> {
    await this.#rounds.jobChanged(jobId, (ended) => this.#quota?.release(ended));
  }

  /** Sends until no message task is ready, the lease is lost, or {@link stop} was called. */
  serve(): Promise<ServeEnd> {
    this.#moved = false;
    return this.#rounds.serve(() => this.#serveRounds());
  }

  async #serveRounds(): Promise<ServeEnd> {
    const { client, logger, clock } = this.#deps;
    if (!client.messageChannelId) return { kind: 'no-work', nextReadyAt: undefined };
    while (this.#rounds.going) {
      const channelSend = await this.#channelSend(client.messageChannelId);
      if (!channelSend) return { kind: 'no-work', nextReadyAt: undefined };
      const totals = await this.#round(client.messageChannelId, channelSend);
      const interrupted = this.#rounds.interrupted();
      if (interrupted) return interrupted;
      // A job whose tasks came up without a fresh reading of LINE's quota asked for one (read only
      // when something is to be sent): claim again once it is in, or wait when it could not be had.
      const asked = this.#quota ? await this.#quota.asked() : 'none';
      if (asked === 'unread' && this.#rounds.client.current.allowPartialDelivery !== true) {
        return { kind: 'no-work', nextReadyAt: clock.now() + this.#deps.settings.quotaCheckMs };
      }
      if (totals.stoppedBy === 'monthly-quota' && (await this.#pauseAtMonthlyLimit())) continue;
      if (totals.stoppedBy === 'monthly-quota') {
        logger.error("LINE's monthly message quota is used up; message jobs wait", {
          clientId: this.clientId,
          channelId: client.messageChannelId,
        });
        return { kind: 'no-work', nextReadyAt: clock.now() + this.#deps.settings.quotaBackoffMs };
      }
      if (totals.stoppedBy === 'drained' && totals.claimed === 0 && asked !== 'read') break;
    }
    return this.#rounds.interrupted() ?? this.#noWork();
  }

  /** No message task is ready now: again at once if a task moved to another channel, else at the broker's pace. */
  #noWork(): ServeEnd {
    const moved = this.#moved;
    this.#moved = false;
    return { kind: 'no-work', nextReadyAt: moved ? this.#deps.clock.now() : undefined };
  }

  /**
   * Pauses a job the quota cannot cover, with the reason, and stops the round if it is sending it.
   * A pause that cannot be written is logged: the job stays refused by the guard meanwhile.
   */
  async #pauseJob(jobId: string, reason: string): Promise<boolean> {
    const { store, logger } = this.#deps;
    this.#quota?.release(jobId);
    try {
      const paused = await store.pauseJob(this.clientId, jobId, reason);
      if (paused) logger.warn('message job paused', { clientId: this.clientId, jobId, reason });
      if (this.#rounds.sessionJobs().includes(jobId)) this.#rounds.abortRound();
      return true;
    } catch (error) {
      logger.error('message job not paused', { clientId: this.clientId, jobId, reason, error });
      return false;
    }
  }

  /**
   * LINE answered the monthly limit and the client does not allow partial delivery: the jobs of the
   * round are paused with the reason (a later reading decides about the others). False when the
   * client allows it, or a pause could not be written: then the client waits, as before.
   */
  async #pauseAtMonthlyLimit(): Promise<boolean> {
    if (!this.#quota || this.#rounds.client.current.allowPartialDelivery === true) return false;
    this.#quota.invalidate();
    let all = true;
    for (const jobId of this.#rounds.sessionJobs()) {
      const job = await this.#deps.store.getJob(this.clientId, jobId).catch(() => undefined);
      if (job?.status === 'running') all = (await this.#pauseJob(jobId, MONTHLY_LIMIT_PAUSE_REASON)) && all;
    }
    return all;
  }

  /**
   * LINE's check for this round: asks through the round's channel send (a channel whose token
   * changed validates with the new one), remembering verdicts per job across rounds.
   */
  #checkFor(channelSend: SendPort): MessageCheck | undefined {
    this.#validate = channelSend.validate;
    if (this.#validate === undefined) return undefined;
    this.#check ??= new MessageCheck({
      validate: (endpoint, messages) => this.#validate!(endpoint, messages),
      onRefused: (jobId, reason) => void this.#refuseJob(jobId, reason),
      log: this.#deps.logger,
    });
    return this.#check;
  }

  /** Records LINE's refusal on the job (logged when it cannot be written: its tasks fail anyway). */
  async #refuseJob(jobId: string, reason: string): Promise<void> {
    const { store, logger } = this.#deps;
    try {
      if (await store.refuseJob?.(this.clientId, jobId, reason))
        logger.warn('message job refused by LINE; it fails once its tasks have', {
          clientId: this.clientId,
          jobId,
          reason,
        });
    } catch (error) {
      logger.error("LINE's refusal not recorded on the job", { clientId: this.clientId, jobId, error });
    }
  }

  /**
   * The send of the client's channel, or undefined (logged) when it cannot be had: the channel does
   * not exist, is another client's (`sendFor` refuses it), or could not be read now. The client's
   * message jobs wait for the next turn; its calls are served meanwhile.
   */
  async #channelSend(channelId: string): Promise<SendPort | undefined> {
    try {
      return await this.#deps.sendFor(channelId);
    } catch (error) {
      this.#deps.logger.error("the client's message jobs are not served: its channel cannot be used", {
        clientId: this.clientId,
        channelId,
        error,
      });
      return undefined;
    }
  }

  /** One pipeline run over a fresh session, over the LINE jobs that may send now and the quota admits. */
  #round(channelId: string, channelSend: SendPort): Promise<PipelineTotals> {
    const quota = this.#quota;
    return this.#rounds.round({
      // The quota guard weighs a job's outstanding tasks against LINE's quota: a job that only falls
      // back to LINE would be paused whole for tasks that may never come to LINE.
      accept: (job, on) =>
        on === 'line' &&
        this.#rounds.maySend(job) &&
        (job.channel !== 'line' || (quota?.admits(job) ?? true)),
      ...(quota
        ? {
            beforeEachLook: (abort: AbortController) => void this.#checkQuota(quota, abort),
            onEnded: (jobId: string) => quota.release(jobId),
          }
        : {}),
      run: async (session, signal) => {
        const totals = await runMessagePipeline(
          this.#pipelineOptions(session, channelId, channelSend, signal),
        );
        if (totals.claimed > 0) this.#logRound(totals);
        return totals;
      },
    });
  }

  /** The round's pipeline: the session's tasks, sent through the channel at the settings' rates. */
  #pipelineOptions(
    session: MessageSession,
    channelId: string,
    channelSend: SendPort,
    signal: AbortSignal,
  ): MessagePipelineOptions {
    const { clock, timers, logger, settings } = this.#deps;
    const quota = this.#quota;
    const check = this.#checkFor(channelSend);
    const observe = this.#observer(channelId);
    const report = session.report;
    return {
      source: session.source,
      report: {
        write: (outcomes) => {
          if (outcomes.some((o) => o.moveTo !== undefined)) this.#moved = true;
          return report.write(outcomes);
        },
      },
      batches: session.batches,
      send: quota ? quota.counting(channelSend) : channelSend,
      rate: {
        perSecond: settings.messageRatePerSecond,
        multicastPerSecond: settings.multicastRatePerSecond,
      },
      concurrency: settings.messageConcurrency,
      queueCapacity: settings.messageQueueCapacity,
      clock,
      timers,
      signal,
      log: logger,
      ...(this.#deps.onProgress ? { onProgress: this.#deps.onProgress } : {}),
      ...(observe ? { observe } : {}),
      ...(check ? { check } : {}),
      monthlyLimit: this.#rounds.client.current.allowPartialDelivery === true ? 'fail-tasks' : 'stop',
    };
  }

  /** What each send tells the quota guard and the metrics; undefined when neither listens. */
  #observer(channelId: string): ((o: SendObservation) => void) | undefined {
    const quota = this.#quota;
    const metrics = this.#deps.metrics;
    if (!quota && !metrics) return undefined;
    return (o) => {
      quota?.observe(o);
      metrics?.sent(channelId, o);
    };
  }

  #logRound(totals: PipelineTotals): void {
    this.#deps.logger.info('message round done', {
      clientId: this.clientId,
      claimed: totals.claimed,
      delivered: totals.delivered,
      failed: totals.failed,
      skipped: totals.skipped,
      released: totals.released,
      requests: totals.requests,
      stoppedBy: totals.stoppedBy,
    });
  }

  /** Reads the quota when due (the guard pauses what it cannot cover); stops the round when it stays unreadable. */
  async #checkQuota(quota: QuotaGuard, abort: AbortController): Promise<void> {
    if (!(await quota.check())) {
      this.#deps.logger.error(
        'LINE message quota unreadable for two intervals: sends stop until it is read',
        {
          clientId: this.clientId,
        },
      );
      abort.abort();
    }
  }
}
