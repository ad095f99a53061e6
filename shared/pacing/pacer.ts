/**
 * The broker's pacing: when may the client's next call start? The limits combine — calls in
 * flight against the contract's concurrent-call limit, starts per second against the line's rate
 * ({@link TokenBucket}), and calling hours when the contract has them — into one decision, and
 * {@link PacingGate} turns decisions into something the broker awaits: it wakes the moment a call
 * ends (an event) or when the rate or hours timer is due, never on a polling loop.
 *
 * The broker (`ClientServer`) gives its pacer no hours: a job's own hours replace the client's and
 * a recipient's zone may differ, so hours, restricted periods and holidays are checked per task by
 * `mayStartNow` (`shared/jobs/restrictions.ts`) before each start.
 */
import { type CallingHours, isOpen, nextOpening, parseCallingHours } from './calling-hours.ts';
import type { Clock, TimerHandle, Timers } from './clock.ts';
import { MAX_TIMER_MS } from './clock.ts';
import { PacingError } from './errors.ts';
import { TokenBucket } from './token-bucket.ts';

export interface PacingContract {
  /** Calls in flight at once, integer >= 1. */
  readonly maxConcurrentCalls: number;
  /** Call starts per second the line takes; fractions allowed (0.5 = one every 2 s). */
  readonly callsPerSecond: number;
  /** Extra spacing between starts, ms, against jitter on the far side (see TokenBucket). Default 0. */
  readonly rateMarginMs?: number;
  /** When calls may start; always, when absent. */
  readonly callingHours?: CallingHours;
}

export type WaitReason = 'limit' | 'rate' | 'closed';

/**
 * `wait.until` is when to ask again: for `limit` it is Infinity (ask again when a call ends), for
 * `closed` it is Infinity when the hours never open.
 */
export type PacingDecision = { kind: 'start' } | { kind: 'wait'; until: number; reason: WaitReason };

export class InvalidContractError extends PacingError {}

/** One client's pacing state. Not shared between clients: a broker makes one per lease it holds. */
export class Pacer {
  #contract: PacingContract;
  #bucket: TokenBucket;

  constructor(contract: PacingContract) {
    validateContract(contract);
    this.#contract = contract;
    this.#bucket = new TokenBucket(bucketOptions(contract));
  }

  get contract(): PacingContract {
    return this.#contract;
  }

  /**
   * Takes a new contract while in use (the client's settings changed while served): the limit
   * applies from the next decision, the new rate from the last start (see {@link TokenBucket.retuned}).
   */
  retune(contract: PacingContract): void {
    validateContract(contract);
    this.#contract = contract;
    this.#bucket = this.#bucket.retuned(bucketOptions(contract));
  }

  /**
   * May a call start at `now` with `inFlight` calls running? A `start` answer takes the rate
   * token, so ask once per call you will start, and count the call in flight at once.
   * Closed hours come first (the longest wait), then the concurrent limit, then the rate.
   */
  decide(now: number, inFlight: number): PacingDecision {
    const hours = this.#contract.callingHours;
    if (hours && !isOpen(hours, now)) {
      return { kind: 'wait', until: nextOpening(hours, now) ?? Number.POSITIVE_INFINITY, reason: 'closed' };
    }
    if (inFlight >= this.#contract.maxConcurrentCalls) {
      return { kind: 'wait', until: Number.POSITIVE_INFINITY, reason: 'limit' };
    }
    if (!this.#bucket.tryTake(now)) {
      return { kind: 'wait', until: now + this.#bucket.msUntilNextToken(now), reason: 'rate' };
    }
    return { kind: 'start' };
  }
}

function bucketOptions(contract: PacingContract) {
  return { ratePerSecond: contract.callsPerSecond, burst: 1, marginMs: contract.rateMarginMs ?? 0 };
}

/** Throws {@link InvalidContractError} (or the hours' own error) for a contract that cannot pace. */
function validateContract(contract: PacingContract): void {
  if (!Number.isInteger(contract.maxConcurrentCalls) || contract.maxConcurrentCalls < 1) {
    throw new InvalidContractError(
      `maxConcurrentCalls must be an integer >= 1, got ${contract.maxConcurrentCalls}`,
    );
  }
  if (!Number.isFinite(contract.callsPerSecond) || contract.callsPerSecond <= 0) {
    throw new InvalidContractError(
      `callsPerSecond must be a positive number, got ${contract.callsPerSecond}`,
    );
  }
  // Fail at start-up, not at the first decision (throws InvalidCallingHoursError).
  if (contract.callingHours) parseCallingHours(contract.callingHours);
}

/** A call's place among the client's calls in flight; release it once when the call ends. */
export interface CallSlot {
  /** Frees the slot and lets the next waiting call start at once. Idempotent. */
  release(): void;
}

export interface PacingGateOptions {
  readonly pacer: Pacer;
  readonly clock: Clock;
  readonly timers: Timers;
  /** Told every change of the number of calls in flight (e.g. to drive task protection); must not throw. */
  readonly onInFlightChange?: (inFlight: number) => void;
}

interface Waiter {
  resolve(slot: CallSlot): void;
  reject(reason: unknown): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/**
 * Hands out call slots at the pace a {@link Pacer} allows. Waiters are served in order. A
 * released slot re-runs the decision synchronously, so the next call starts in the same tick a
 * call ends when the rate allows; otherwise one timer is armed for the rate or the opening hour.
 */
export class PacingGate {
  readonly #pacer: Pacer;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #onInFlightChange: ((inFlight: number) => void) | undefined;
  readonly #waiters: Waiter[] = [];
  readonly #idleWaiters: (() => void)[] = [];
  #inFlight = 0;
  #timer: TimerHandle | undefined;
  #lastWait: Extract<PacingDecision, { kind: 'wait' }> | undefined;

  constructor(options: PacingGateOptions) {
    this.#pacer = options.pacer;
    this.#clock = options.clock;
    this.#timers = options.timers;
    this.#onInFlightChange = options.onInFlightChange;
  }

  /** Calls in flight now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Why the first waiter is waiting, if one is (for logs and metrics). */
  get waitingFor(): Extract<PacingDecision, { kind: 'wait' }> | undefined {
    return this.#waiters.length > 0 ? this.#lastWait : undefined;
  }

  /**
   * Resolves with a slot when a call may start; the caller starts exactly one call with it.
   * Rejects with the signal's reason when `signal` aborts first (e.g. the lease was lost).
   */
  acquire(signal?: AbortSignal): Promise<CallSlot> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<CallSlot>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, signal, onAbort: undefined };
      if (signal) {
        waiter.onAbort = () => {
          const index = this.#waiters.indexOf(waiter);
          if (index >= 0) this.#waiters.splice(index, 1);
          reject(signal.reason);
          this.#pump();
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.push(waiter);
      this.#pump();
    });
  }

  /**
   * Counts a call that is already in flight without pacing it, e.g. one found running when a
   * broker takes a client over; the limit then applies to it like any other.
   */
  adopt(): CallSlot {
    return this.#newSlot();
  }

  /** Takes the client's new contract and re-decides at once (see {@link Pacer.retune}). */
  retune(contract: PacingContract): void {
    this.#pacer.retune(contract);
    this.#pump();
  }

  /** Re-decides now; for when something outside the gate changed (e.g. new calling hours). */
  wake(): void {
    this.#pump();
  }

  /** Resolves when no call is in flight (a draining broker awaits this). */
  idle(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #newSlot(): CallSlot {
    let released = false;
    this.#setInFlight(this.#inFlight + 1);
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#setInFlight(this.#inFlight - 1);
        if (this.#inFlight === 0) for (const resolve of this.#idleWaiters.splice(0)) resolve();
        this.#pump();
      },
    };
  }

  #setInFlight(value: number): void {
    this.#inFlight = value;
    this.#onInFlightChange?.(value);
  }

  #pump(): void {
    if (this.#timer !== undefined) {
      this.#timers.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    while (this.#waiters.length > 0) {
      const now = this.#clock.now();
      const decision = this.#pacer.decide(now, this.#inFlight);
      if (decision.kind === 'wait') {
        this.#lastWait = decision;
        if (Number.isFinite(decision.until)) {
          // At least 1 ms, so a decision that rounds to "now" cannot spin.
          const delay = Math.min(Math.max(1, decision.until - now), MAX_TIMER_MS);
          this.#timer = this.#timers.setTimeout(() => {
            this.#timer = undefined;
            this.#pump();
          }, delay);
        }
        return;
      }
      const waiter = this.#waiters.shift()!;
      if (waiter.signal && waiter.onAbort) waiter.signal.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(this.#newSlot());
    }
  }
}
