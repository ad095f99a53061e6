/**
 * The SES account of one region as the sends see it: its verified identities, whether it may send
 * (sending paused, suspended), the sandbox, and its two quotas, both counted in *recipients*
 * ("Quotas are based on the number of recipients, rather than on the number of messages":
 * https://docs.aws.amazon.com/ses/latest/dg/quotas.html):
 *
 * - the sending rate, `MaxSendRate` recipients a second: a token bucket that holds one second's
 *   worth and refills continuously. A message with more recipients than the bucket holds is let
 *   through when the bucket is full and leaves it in debt, so the rate holds on average;
 * - the daily quota, `Max24HourSend` recipients in any 24 hours (-1: unlimited, as GetAccount
 *   reports it).
 *
 * Mailbox-simulator recipients count against the rate but not the daily quota
 * (https://docs.aws.amazon.com/ses/latest/dg/send-an-email-from-console.html#send-email-simulator).
 * Time is the injected clock's, so tests move it instead of sleeping.
 */
import type { Clock } from '#shared/pacing/clock.ts';

export interface AccountSettings {
  /** Recipients a second (`SendQuota.MaxSendRate`). */
  readonly maxSendRate: number;
  /** Recipients in any 24 hours (`SendQuota.Max24HourSend`); -1 for no limit. */
  readonly max24HourSend: number;
  /** False as after `PutAccountSendingAttributes {SendingEnabled: false}`: sends are `SendingPausedException`. */
  readonly sendingEnabled: boolean;
  /** Sending permanently restricted: sends are `AccountSuspendedException`, enforcement `SHUTDOWN`. */
  readonly suspended: boolean;
  /** A new account: verified recipients only (the simulator excepted), `ProductionAccessEnabled` false. */
  readonly sandbox: boolean;
}

/** Out of the sandbox: the rate and quota AWS long granted first (the quotas page now says "varies"). */
export const PRODUCTION_QUOTAS = { maxSendRate: 14, max24HourSend: 50_000 } as const;
/** In the sandbox: 1 email a second, 200 a day (quotas page). */
export const SANDBOX_QUOTAS = { maxSendRate: 1, max24HourSend: 200 } as const;

const DAY_MS = 24 * 3600 * 1000;

/** What `GetAccount` reports. */
export interface AccountSnapshot extends AccountSettings {
  readonly sentLast24Hours: number;
  readonly identities: readonly string[];
}

export class SesAccount {
  readonly #clock: Clock;
  #settings: AccountSettings;
  #tokens: number;
  #filledAt: number;
  #sends: { at: number; recipients: number }[] = [];
  readonly #identities: Set<string>;

  constructor(clock: Clock, settings: Partial<AccountSettings>, identities: readonly string[]) {
    this.#clock = clock;
    const sandbox = settings.sandbox ?? false;
    this.#settings = {
      ...(sandbox ? SANDBOX_QUOTAS : PRODUCTION_QUOTAS),
      sendingEnabled: true,
      suspended: false,
      sandbox,
      ...settings,
    };
    this.#tokens = this.#capacity();
    this.#filledAt = clock.now();
    this.#identities = new Set(identities.map((identity) => identity.toLowerCase()));
  }

  get settings(): AccountSettings {
    return this.#settings;
  }

  /** Changes the account at run time (a quota raised, sending paused, the account suspended…). */
  set(change: Partial<AccountSettings>): void {
    this.#refill();
    this.#settings = { ...this.#settings, ...change };
    this.#tokens = Math.min(this.#tokens, this.#capacity());
  }

  /** Verifies an address or a domain. */
  verify(identity: string): void {
    this.#identities.add(identity.toLowerCase());
  }

  snapshot(): AccountSnapshot {
    return { ...this.#settings, sentLast24Hours: this.sentLast24Hours(), identities: [...this.#identities] };
  }

  /**
   * The verified identity that covers `address`: the address itself, its domain or a parent
   * domain (a verified domain's subdomains may send too), if any.
   */
  identityOf(address: string): string | undefined {
    const lower = address.toLowerCase();
    if (this.#identities.has(lower)) return lower;
    const labels = lower.slice(lower.lastIndexOf('@') + 1).split('.');
    for (let i = 0; i < labels.length - 1; i++) {
      const domain = labels.slice(i).join('.');
      if (this.#identities.has(domain)) return domain;
    }
    return undefined;
  }

  sentLast24Hours(): number {
    const since = this.#clock.now() - DAY_MS;
    this.#sends = this.#sends.filter((send) => send.at > since);
    return this.#sends.reduce((sum, send) => sum + send.recipients, 0);
  }

  /** Whether `recipients` more fit in the daily quota. */
  quotaAllows(recipients: number): boolean {
    const max = this.#settings.max24HourSend;
    return max < 0 || recipients === 0 || this.sentLast24Hours() + recipients <= max;
  }

  /** Takes `recipients` from the rate's bucket; false (and nothing taken) when they do not fit yet. */
  takeRate(recipients: number): boolean {
    this.#refill();
    const full = this.#tokens >= this.#capacity();
    if (this.#tokens < recipients && !full) return false;
    this.#tokens -= recipients;
    return true;
  }

  /** Counts an accepted message's recipients (those the daily quota counts) against the quota. */
  recordSend(recipients: number): void {
    if (recipients > 0) this.#sends.push({ at: this.#clock.now(), recipients });
  }

  #capacity(): number {
    return Math.max(this.#settings.maxSendRate, Number.MIN_VALUE);
  }

  #refill(): void {
    const now = this.#clock.now();
    const elapsed = Math.max(0, now - this.#filledAt) / 1000;
    this.#tokens = Math.min(this.#capacity(), this.#tokens + elapsed * this.#settings.maxSendRate);
    this.#filledAt = now;
  }
}
