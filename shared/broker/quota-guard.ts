/**
 * The quota check of a client's message jobs, held by its {@link MessageServer} for one channel:
 * LINE's monthly quota and consumption are read before a job starts sending and every
 * `checkMs` while it sends, and a job whose messages left the quota cannot cover is refused (its
 * server pauses it with the reason) unless the client allows partial delivery. The rule itself is
 * `shared/campaign/quota.ts`; this class holds the latest reading and what the admitted jobs still
 * need, counting the server's own sends between readings.
 *
 * A reading that fails is retried (`readAttempts`, with backoff), logged as an error and counted
 * (`LineQuotaUnread`): a job is never admitted without a reading (it waits, neither paused nor
 * sent), and a running job goes on for at most two check intervals on its last reading.
 */
import type { SendObservation, SendPort } from '#shared/campaign/ports.ts';
import {
  messagesLeft,
  type QuotaShortfall,
  quotaPauseReason,
  quotaRemaining,
  quotaShortfalls,
} from '#shared/campaign/quota.ts';
import type { Job } from '#shared/jobs/model.ts';
import { backoffDelay, type MessageQuota, type PreparedSend } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { ClientMetrics } from './broker-metrics.ts';

export interface QuotaGuardSettings {
  /** How often the quota is read while a job sends, ms. */
  readonly checkMs: number;
  /** How old a reading may be to admit a job that has not sent yet, ms. */
  readonly freshMs: number;
  /** Tries per reading before it counts as failed. */
  readonly readAttempts: number;
  /** First wait between tries, ms (full jitter, doubling). */
  readonly retryBaseMs: number;
}

export const DEFAULT_QUOTA_GUARD_SETTINGS: QuotaGuardSettings = {
  checkMs: 60_000,
  freshMs: 5_000,
  readAttempts: 3,
  retryBaseMs: 500,
};

export interface QuotaGuardDeps {
  readonly clientId: string;
  readonly channelId: string;
  readonly read: () => Promise<MessageQuota>;
  /** Whether the client allows partial delivery now (its settings may change while it sends). */
  readonly allowsPartial: () => boolean;
  /** A job the quota cannot cover: pause it with `reason`. Told once per reading. */
  readonly onShort: (jobId: string, reason: string) => void;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
  readonly logger: Logger;
  readonly metrics?: ClientMetrics;
  readonly settings: QuotaGuardSettings;
  readonly random?: () => number;
}

interface Reading {
  readonly quota: MessageQuota;
  readonly at: number;
  /** Recipients in requests in flight while it was read: LINE may have counted them already. */
  readonly inFlight: number;
}

export class QuotaGuard {
  readonly #deps: QuotaGuardDeps;
  #reading: Reading | undefined;
  /** Messages each admitted job still needs, in the order they were admitted. */
  readonly #admitted = new Map<string, number>();
  /** Jobs refused on the current reading. */
  readonly #short = new Set<string>();
  /** Recipients delivered since the reading (LINE's figure does not hold them yet). */
  #sentSinceReading = 0;
  #inFlight = 0;
  #inFlightPeak = 0;
  #reads: Promise<boolean> | undefined;
  #lastReadOk = false;
  /** A job asked for a reading ({@link admits} on none fresh): the server waits for it after the round. */
  #wanted = false;

  constructor(deps: QuotaGuardDeps) {
    this.#deps = deps;
  }

  /** The last reading, if any. */
  get quota(): MessageQuota | undefined {
    return this.#reading?.quota;
  }

  /** Forgets the reading, so that the next {@link ready} reads again (after LINE's monthly 429). */
  invalidate(): void {
    this.#reading = undefined;
  }

  /**
   * Before a round: reads the quota unless the last reading is fresh. False when no usable reading
   * could be had and the client does not allow partial delivery: nothing may be admitted.
   */
  async ready(): Promise<boolean> {
    const { clock, settings } = this.#deps;
    if (this.#reading && clock.now() - this.#reading.at < settings.freshMs) return true;
    return (await this.#refresh()) || this.#deps.allowsPartial();
  }

  /**
   * While sending (called often; reads at most every `checkMs`): refuses the admitted jobs the new
   * reading cannot cover. False when the quota has been unreadable for two intervals and sends
   * must stop (the next round's {@link ready} holds them).
   */
  async check(): Promise<boolean> {
    const { clock, settings } = this.#deps;
    const age = this.#reading ? clock.now() - this.#reading.at : Number.POSITIVE_INFINITY;
    if (age < settings.checkMs) return true;
    if (await this.#refresh()) return true;
    return age < 2 * settings.checkMs || this.#deps.allowsPartial();
  }

  /** Whether `job` may send on the current reading; a job refused is told to `onShort` once. */
  admits(job: Job): boolean {
    if (this.#deps.allowsPartial()) return true;
    if (this.#admitted.has(job.jobId)) return true;
    if (this.#short.has(job.jobId)) return false;
    const reading = this.#reading;
    if (!reading || this.#deps.clock.now() - reading.at >= this.#deps.settings.freshMs) {
      // Not read just before this job's first send: read first (nothing of it is claimed meanwhile).
      this.#wanted = true;
      void this.#refresh();
      return false;
    }
    const needs = [...this.#admitted].map(([jobId, left]) => ({ jobId, left }));
    const remaining = quotaRemaining(reading.quota) - this.#sentSinceReading;
    const [short] = quotaShortfalls(
      remaining,
      [...needs, { jobId: job.jobId, left: messagesLeft(job.counts) }],
      reading.inFlight,
    ).filter((s) => s.jobId === job.jobId);
    if (short === undefined) {
      this.#admitted.set(job.jobId, messagesLeft(job.counts));
      return true;
    }
    this.#refuse(short, reading.quota);
    return false;
  }

  /**
   * After a round: `none` when no job asked for a reading, else how the reading it asked for went
   * (`read`: claim again at once; `unread`: logged and counted, the jobs wait).
   */
  async asked(): Promise<'none' | 'read' | 'unread'> {
    if (!this.#wanted) return 'none';
    this.#wanted = false;
    if (this.#reads) await this.#reads;
    return this.#lastReadOk ? 'read' : 'unread';
  }

  /** The pipeline's send, counting recipients in flight (a reading may already hold them). */
  counting(send: SendPort): SendPort {
    return async (prepared) => {
      const recipients = recipientsOf(prepared);
      this.#inFlight += recipients;
      this.#inFlightPeak = Math.max(this.#inFlightPeak, this.#inFlight);
      try {
        return await send(prepared);
      } finally {
        this.#inFlight -= recipients;
      }
    };
  }

  /** Every request's outcome: what a job delivered no longer needs the quota. */
  observe(observation: SendObservation): void {
    if (observation.outcome !== 'delivered') return;
    this.#sentSinceReading += observation.recipients;
    const jobId = observation.jobId;
    const need = jobId === undefined ? undefined : this.#admitted.get(jobId);
    if (jobId !== undefined && need !== undefined)
      this.#admitted.set(jobId, Math.max(0, need - observation.recipients));
  }

  /** A job no longer sent here (paused, cancelled, done): it needs nothing more. */
  release(jobId: string): void {
    this.#admitted.delete(jobId);
  }

  /** Reads the quota (once at a time); true when it was read. */
  #refresh(): Promise<boolean> {
    this.#reads ??= this.#read().then((ok) => {
      this.#lastReadOk = ok;
      this.#reads = undefined;
      return ok;
    });
    return this.#reads;
  }

  async #read(): Promise<boolean> {
    const { read, clock, sleep, logger, metrics, settings, clientId, channelId } = this.#deps;
    this.#inFlightPeak = this.#inFlight;
    for (let attempt = 0; attempt < settings.readAttempts; attempt++) {
      if (attempt > 0)
        await sleep(backoffDelay(attempt - 1, { baseMs: settings.retryBaseMs, random: this.#deps.random }));
      try {
        const quota = await read();
        this.#reading = { quota, at: clock.now(), inFlight: this.#inFlightPeak };
        this.#sentSinceReading = 0;
        this.#short.clear();
        metrics?.quota(channelId, quota);
        this.#recheck();
        return true;
      } catch (error) {
        if (attempt === settings.readAttempts - 1) {
          logger.error('LINE message quota not read: jobs that need it wait', {
            clientId,
            channelId,
            attempts: settings.readAttempts,
            error,
          });
          metrics?.quota(channelId, 'unread');
        }
      }
    }
    return false;
  }

  /** After a new reading: the admitted jobs it cannot cover any more are refused. */
  #recheck(): void {
    const reading = this.#reading;
    if (!reading || this.#deps.allowsPartial()) return;
    const needs = [...this.#admitted].map(([jobId, left]) => ({ jobId, left }));
    for (const short of quotaShortfalls(quotaRemaining(reading.quota), needs, reading.inFlight)) {
      this.#admitted.delete(short.jobId);
      this.#refuse(short, reading.quota);
    }
  }

  #refuse(short: QuotaShortfall, quota: MessageQuota): void {
    this.#short.add(short.jobId);
    this.#deps.onShort(short.jobId, quotaPauseReason(short, quota));
  }
}

/** Recipients of a request: one for a push, the `to` list of a multicast. */
function recipientsOf(prepared: PreparedSend): number {
  if (prepared.endpoint !== 'multicast') return 1;
  try {
    const to = (JSON.parse(prepared.body) as { to?: unknown }).to;
    return Array.isArray(to) ? to.length : 1;
  } catch {
    return 1;
  }
}
