/**
 * SES's sending rate is the account's in its region, not a broker's or a client's: every broker
 * that sends email takes an equal share of it. Each says it sends (`EmailSenders.announce`, an
 * entry that lapses unless renewed) while it has sent lately, and reads how many others do; its
 * process-wide {@link SharedRate} is then `MaxSendRate / (others + 1)`. A broker that starts sending
 * announces at once; the others see it at their next refresh ({@link SEND_RATE_REFRESH_MS}), and
 * until then the account may see up to one share too many: SES answers that with 429s, which the
 * pipeline waits out (`docs/email.md`).
 */
import type { Logger } from '#shared/log.ts';
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import type { SharedRate } from '#shared/pacing/shared-rate.ts';

/** How often a broker renews its entry and reads the others'. */
export const SEND_RATE_REFRESH_MS = 10_000;
/** How long a broker counts as sending after its last send (and its entry lasts unrenewed). */
export const SENDING_LAPSES_MS = 30_000;

/** Who sends email in the deployment (`shared/adapters/dynamo-email-senders.ts`). */
export interface EmailSenders {
  /** This broker sends until `until` (ms) unless it says so again. */
  announce(brokerId: string, until: number): Promise<void>;
  /** How many other brokers said they send until after `now`. */
  others(brokerId: string, now: number): Promise<number>;
}

export interface SendRateShareDeps {
  readonly senders: EmailSenders;
  readonly brokerId: string;
  readonly rate: SharedRate;
  /** The account's `MaxSendRate` (recipients a second), as last read. */
  readonly accountRate: () => Promise<number>;
  /** The shared rate's burst at a rate (a request's worth: `defaultBurst`). */
  readonly burstOf: (perSecond: number) => number;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: Logger;
}

/** Keeps one broker's {@link SharedRate} at its share of the account's rate. */
export class SendRateShare {
  readonly #deps: SendRateShareDeps;
  #timer: TimerHandle | undefined;
  #stopped = false;
  #brokers = 1;

  constructor(deps: SendRateShareDeps) {
    this.#deps = deps;
  }

  /** How many brokers the account's rate was last split among (this one included). */
  get brokers(): number {
    return this.#brokers;
  }

  /** Refreshes every {@link SEND_RATE_REFRESH_MS} from now until {@link SendRateShare.stop}. */
  start(): void {
    this.#next();
  }

  /** Stops refreshing; a broker that sent lately says it no longer does, so the others need not wait for its entry to lapse. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#deps.timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.idle) return;
    const { senders, brokerId, clock, logger } = this.#deps;
    await senders.announce(brokerId, clock.now()).catch((error) => {
      logger.warn('a stopping broker could not give up its share of SES’s rate', { error });
    });
  }

  /** True when this broker has not sent for {@link SENDING_LAPSES_MS}: the others no longer count it. */
  get idle(): boolean {
    return this.#deps.clock.now() - this.#deps.rate.lastAskedAt >= SENDING_LAPSES_MS;
  }

  /**
   * One refresh: renews this broker's entry if it sent lately (or is about to: `starting`), counts
   * the others, retunes the shared rate to the share.
   */
  async refresh(starting = false): Promise<void> {
    const { senders, brokerId, rate, clock } = this.#deps;
    const now = clock.now();
    const account = await this.#deps.accountRate();
    try {
      if (starting || !this.idle) await senders.announce(brokerId, now + SENDING_LAPSES_MS);
      this.#brokers = (await senders.others(brokerId, now)) + 1;
    } finally {
      // Unread, the count last read stays (a new account rate still applies).
      const perSecond = Math.max(0.1, account / this.#brokers);
      rate.retune(perSecond, this.#deps.burstOf(perSecond));
    }
  }

  #next(): void {
    if (this.#stopped) return;
    this.#timer = this.#deps.timers.setTimeout(() => void this.#tick(), SEND_RATE_REFRESH_MS);
  }

  async #tick(): Promise<void> {
    try {
      await this.refresh();
    } catch (error) {
      // The share last read stays: a failed read never raises the rate.
      this.#deps.logger.warn('the share of SES’s sending rate was not refreshed', { error });
    }
    this.#next();
  }
}
