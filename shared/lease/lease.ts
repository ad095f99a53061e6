/**
 * A client's lease: which broker serves the client now. One record per client with the owner,
 * the expiry and a fencing token that grows with every takeover. The rules are pure functions
 * over the record; {@link LeaseStore} is the port a store implements with conditional writes
 * (DynamoDB: the control table item pk=LEASE#{clientId}, sk=LEASE), and {@link LeaseKeeper}
 * holds a lease for a broker: it heartbeats, and the moment a renewal is refused or cannot be
 * confirmed before expiry it calls itself lost and tells its listeners, so the broker stops
 * starting work. Starting work is fenced anyway: every write that starts work checks
 * owner + token + expiry in the same transaction (`leaseFence` in `shared/adapters/dynamo-leases.ts`).
 */
import type { Clock, TimerHandle, Timers } from '../pacing/clock.ts';
import { LeaseError } from './errors.ts';

export interface Lease {
  readonly clientId: string;
  /** The broker holding it; unique per broker process (never reused after a restart). */
  readonly owner: string;
  /** Epoch ms; the lease is held while `now < expiresAt`. A released lease has expiresAt 0. */
  readonly expiresAt: number;
  /** Fencing token: 1 for the first owner, +1 on every takeover; never decreases. */
  readonly token: number;
}

export class LeaseHeldError extends LeaseError {}

export class LeaseLostError extends LeaseError {}

/** True when `lease` is held at `now` (by anyone). */
export function isLive(lease: Lease | undefined, now: number): boolean {
  return lease !== undefined && now < lease.expiresAt;
}

/** True when `owner` may take the client's lease at `now`: it is free, expired, or already theirs. */
export function canTake(lease: Lease | undefined, owner: string, now: number): boolean {
  return lease === undefined || !isLive(lease, now) || lease.owner === owner;
}

export interface TakeRequest {
  readonly clientId: string;
  readonly owner: string;
  readonly now: number;
  readonly leaseMs: number;
}

/**
 * The record after `owner` takes the lease. The token grows when the owner changes or the lease
 * had expired, so a broker that held an older token can no longer pass a fence; the holder
 * re-taking its live lease keeps its token. Throws {@link LeaseHeldError} if another broker holds it.
 */
export function take(lease: Lease | undefined, request: TakeRequest): Lease {
  const { clientId, owner, now, leaseMs } = request;
  if (lease && lease.clientId !== clientId)
    throw new RangeError(`lease of ${lease.clientId}, not ${clientId}`);
  if (!canTake(lease, owner, now)) {
    throw new LeaseHeldError(`client ${clientId} is leased to ${lease?.owner} until ${lease?.expiresAt}`);
  }
  if (lease && isLive(lease, now) && lease.owner === owner) return { ...lease, expiresAt: now + leaseMs };
  return { clientId, owner, expiresAt: now + leaseMs, token: (lease?.token ?? 0) + 1 };
}

export interface RenewRequest {
  readonly clientId: string;
  readonly owner: string;
  /** The token the holder got when it took the lease. */
  readonly token: number;
  readonly now: number;
  readonly leaseMs: number;
}

/**
 * The record after its holder renews it at `now` for another `leaseMs`: only the holder with the
 * current token, only before expiry. Throws {@link LeaseLostError} otherwise.
 */
export function renew(lease: Lease | undefined, request: RenewRequest): Lease {
  const { owner, token, now, leaseMs } = request;
  if (!lease || lease.clientId !== request.clientId || lease.owner !== owner || lease.token !== token) {
    throw new LeaseLostError(`lease is no longer held by ${owner} with token ${token}`);
  }
  if (!isLive(lease, now)) throw new LeaseLostError(`lease of ${owner} expired at ${lease.expiresAt}`);
  return { ...lease, expiresAt: now + leaseMs };
}

/**
 * The record after its holder releases it: expired at once, owner and token kept (the record is
 * never deleted, so the token keeps growing). Anyone else's release changes nothing.
 */
export function release(lease: Lease | undefined, owner: string, token: number): Lease | undefined {
  if (!lease || lease.owner !== owner || lease.token !== token) return lease;
  return { ...lease, expiresAt: 0 };
}

/** True when a write that starts work for `owner` with `token` may go ahead at `now`. */
export function passesFence(lease: Lease | undefined, owner: string, token: number, now: number): boolean {
  return lease !== undefined && isLive(lease, now) && lease.owner === owner && lease.token === token;
}

/** How often to renew a lease of `leaseMs`: a third of it, so two renewals can fail before expiry. */
export function heartbeatInterval(leaseMs: number): number {
  if (!Number.isFinite(leaseMs) || leaseMs < 3) throw new RangeError(`leaseMs too short: ${leaseMs}`);
  return Math.floor(leaseMs / 3);
}

/**
 * Where leases live. Every method is one conditional write (the DynamoDB store: `LEASE_CONDITIONS`
 * in `shared/adapters/dynamo-leases.ts`) and
 * answers "no" with undefined / false rather than throwing; a throw means "no answer" (network,
 * throttling) and the caller cannot know whether the write happened.
 */
export interface LeaseStore {
  /**
   * Takes the client's lease for `owner` if {@link canTake} at `now`; the written record is
   * `take(current, request)`. Undefined when another broker holds it (or won a race).
   */
  tryTake(request: TakeRequest): Promise<Lease | undefined>;
  /**
   * Extends the lease to `now + leaseMs` if `owner` still holds it with `token` and it has not
   * expired at `now`; the written record is `renew(current, request)`. Undefined otherwise.
   */
  tryRenew(request: RenewRequest): Promise<Lease | undefined>;
  /** Expires the lease at once if `owner` holds it with `token`; true when it did. */
  release(request: {
    readonly clientId: string;
    readonly owner: string;
    readonly token: number;
  }): Promise<boolean>;
}

export type LeaseLostReason = 'refused' | 'expired' | 'released';

export interface LeaseKeeperLogger {
  warn(message: string, detail?: Record<string, unknown>): void;
}

export interface LeaseKeeperOptions {
  readonly clientId: string;
  readonly owner: string;
  readonly leaseMs: number;
  readonly store: LeaseStore;
  readonly clock: Clock;
  readonly timers: Timers;
  /**
   * Give the lease up this long before its recorded expiry, against clock skew between brokers
   * (a taker's clock running ahead). Default leaseMs / 10.
   */
  readonly marginMs?: number;
  /**
   * Longest wait for the store to answer a release, ms; then the lease is left to expire. A
   * broker releases on its way out, and Fargate kills it 120 s after SIGTERM. Default 5,000.
   */
  readonly releaseWaitMs?: number;
  readonly logger?: LeaseKeeperLogger;
}

type KeeperState =
  | { kind: 'idle' }
  | { kind: 'held'; lease: Lease; renewing: boolean }
  | { kind: 'lost'; reason: LeaseLostReason };

/**
 * Holds one client's lease for a broker. After {@link acquire} it renews every
 * {@link heartbeatInterval}; a refused renewal, or no confirmed renewal by expiry (minus the
 * margin), makes it lost at once: {@link currentToken} turns undefined and `onLost` listeners
 * are told synchronously. A renewal that failed to answer is retried until then.
 */
export class LeaseKeeper {
  readonly clientId: string;
  readonly owner: string;
  readonly leaseMs: number;
  readonly #store: LeaseStore;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #marginMs: number;
  readonly #releaseWaitMs: number;
  readonly #logger: LeaseKeeperLogger | undefined;
  readonly #listeners = new Set<(reason: LeaseLostReason) => void>();
  #state: KeeperState = { kind: 'idle' };
  #heartbeat: TimerHandle | undefined;
  #deadline: TimerHandle | undefined;

  constructor(options: LeaseKeeperOptions) {
    this.clientId = options.clientId;
    this.owner = options.owner;
    this.leaseMs = options.leaseMs;
    this.#store = options.store;
    this.#clock = options.clock;
    this.#timers = options.timers;
    this.#marginMs = options.marginMs ?? Math.floor(options.leaseMs / 10);
    this.#releaseWaitMs = options.releaseWaitMs ?? 5_000;
    this.#logger = options.logger;
    const heartbeat = heartbeatInterval(options.leaseMs);
    if (this.#marginMs < 0 || this.#marginMs >= options.leaseMs - heartbeat) {
      throw new RangeError(`marginMs must leave time to renew: ${this.#marginMs} of ${options.leaseMs}`);
    }
  }

  /**
   * Tries once to take the lease; true when held (heartbeats then run until lost or released).
   * A store that does not answer rejects, and the keeper stays idle.
   */
  async acquire(): Promise<boolean> {
    if (this.currentToken() !== undefined) return true;
    const sentAt = this.#clock.now();
    const lease = await this.#store.tryTake({
      clientId: this.clientId,
      owner: this.owner,
      now: sentAt,
      leaseMs: this.leaseMs,
    });
    if (!lease || lease.owner !== this.owner) return false;
    // Expiry counts from when we asked, not when the answer came: the store may have written early.
    this.#hold({ ...lease, expiresAt: Math.min(lease.expiresAt, sentAt + this.leaseMs) });
    return true;
  }

  /** The fencing token to put in every write that starts work; undefined unless held right now. */
  currentToken(): number | undefined {
    const state = this.#state;
    if (state.kind !== 'held') return undefined;
    // A blocked event loop can delay the deadline timer: the clock decides.
    if (this.#clock.now() >= this.#giveUpAt(state.lease)) {
      this.#lose('expired');
      return undefined;
    }
    return state.lease.token;
  }

  /** True while the lease is held (same test as {@link currentToken}). */
  get held(): boolean {
    return this.currentToken() !== undefined;
  }

  /** The lease as last confirmed, while held. */
  get lease(): Lease | undefined {
    return this.#state.kind === 'held' ? this.#state.lease : undefined;
  }

  /** Calls `listener` once each time a held lease is lost; returns an unsubscribe function. */
  onLost(listener: (reason: LeaseLostReason) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Stops heartbeats and releases the lease so another broker can take the client at once.
   * Listeners hear 'released'. Never throws, and waits at most `releaseWaitMs`: an unanswered
   * release simply lets the lease expire.
   */
  async release(): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'held') return;
    this.#lose('released');
    const { clientId } = this;
    const released = this.#store.release({ clientId, owner: this.owner, token: state.lease.token }).then(
      () => 'answered' as const,
      (error: unknown) => {
        this.#logger?.warn('lease release failed; it will expire', { clientId, error });
        return 'answered' as const;
      },
    );
    let timer: TimerHandle | undefined;
    const timedOut = new Promise<'timed-out'>((resolve) => {
      timer = this.#timers.setTimeout(() => resolve('timed-out'), this.#releaseWaitMs);
    });
    const outcome = await Promise.race([released, timedOut]);
    if (timer !== undefined) this.#timers.clearTimeout(timer);
    if (outcome === 'timed-out') {
      this.#logger?.warn('lease release not answered in time; it will expire', {
        clientId,
        waitedMs: this.#releaseWaitMs,
      });
    }
  }

  #giveUpAt(lease: Lease): number {
    return lease.expiresAt - this.#marginMs;
  }

  #hold(lease: Lease): void {
    this.#clearTimers();
    this.#state = { kind: 'held', lease, renewing: false };
    const now = this.#clock.now();
    this.#deadline = this.#timers.setTimeout(
      () => {
        this.#deadline = undefined;
        this.currentToken();
      },
      Math.max(0, this.#giveUpAt(lease) - now),
    );
    this.#scheduleRenew(heartbeatInterval(this.leaseMs));
  }

  #scheduleRenew(delay: number): void {
    if (this.#heartbeat !== undefined) this.#timers.clearTimeout(this.#heartbeat);
    this.#heartbeat = this.#timers.setTimeout(() => {
      this.#heartbeat = undefined;
      void this.#renew();
    }, delay);
  }

  async #renew(): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'held' || state.renewing || this.currentToken() === undefined) return;
    state.renewing = true;
    const sentAt = this.#clock.now();
    let renewed: Lease | undefined;
    try {
      renewed = await this.#store.tryRenew({
        clientId: this.clientId,
        owner: this.owner,
        token: state.lease.token,
        now: sentAt,
        leaseMs: this.leaseMs,
      });
    } catch (error) {
      state.renewing = false;
      if (this.#state !== state) return;
      this.#logger?.warn('lease renewal did not answer; retrying', { clientId: this.clientId, error });
      this.#scheduleRenew(Math.max(1, Math.floor(heartbeatInterval(this.leaseMs) / 3)));
      return;
    }
    state.renewing = false;
    // Lost (deadline passed or released) while the answer was on its way: a late yes is no use.
    if (this.#state !== state) return;
    if (!renewed || renewed.owner !== this.owner || renewed.token !== state.lease.token) {
      this.#lose('refused');
      return;
    }
    this.#hold({ ...renewed, expiresAt: Math.min(renewed.expiresAt, sentAt + this.leaseMs) });
  }

  #lose(reason: LeaseLostReason): void {
    if (this.#state.kind !== 'held') return;
    this.#clearTimers();
    this.#state = { kind: 'lost', reason };
    for (const listener of [...this.#listeners]) {
      try {
        listener(reason);
      } catch (error) {
        this.#logger?.warn('lease-lost listener threw', { clientId: this.clientId, error });
      }
    }
  }

  #clearTimers(): void {
    if (this.#heartbeat !== undefined) this.#timers.clearTimeout(this.#heartbeat);
    if (this.#deadline !== undefined) this.#timers.clearTimeout(this.#deadline);
    this.#heartbeat = undefined;
    this.#deadline = undefined;
  }
}
