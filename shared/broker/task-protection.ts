/**
 * ECS task protection for a broker: on while at least one call is in flight, so a deploy or a
 * scale-in never stops a task mid-call; off when none is, so idle brokers can go. Protection is
 * short and renewed (10 minutes, renewed every 3, by default): a broker that dies stops renewing
 * and its task becomes removable minutes later, well inside CloudFormation's 3-hour patience.
 *
 * The policy is a pure function of what we know; {@link TaskProtectionKeeper} applies it through a
 * port (the ECS agent's `PUT $ECS_AGENT_URI/task-protection/v1/state`), one request at a time,
 * retrying failures with backoff. Failures are logged, never thrown: protection is best effort
 * on top of draining, and a call must not fail because the agent hiccupped.
 */
import type { Clock, TimerHandle, Timers } from '../pacing/clock.ts';

/** Sets the task's protection; `expiresInMinutes` (1 to 2,880) only with `enabled`. */
export interface TaskProtectionPort {
  set(enabled: boolean, expiresInMinutes?: number): Promise<void>;
}

export interface ProtectionPolicy {
  /** How long one request protects the task, in minutes (ECS: 1 to 2,880). */
  readonly expiresInMinutes: number;
  /** Renew this long after the last successful request, ms; well under expiresInMinutes. */
  readonly renewEveryMs: number;
  /**
   * Keep protection this long after the last call ends, ms, so back-to-back calls at a slow
   * line rate do not flip it off and on for every call. 0 = off at once.
   */
  readonly offDelayMs: number;
}

export const DEFAULT_PROTECTION_POLICY: ProtectionPolicy = {
  expiresInMinutes: 10,
  renewEveryMs: 3 * 60_000,
  offDelayMs: 0,
};

export interface ProtectionState {
  readonly inFlight: number;
  /** When calls in flight last fell to zero (for the off delay). */
  readonly idleSince: number | undefined;
  /** The last request ECS accepted. */
  readonly applied: { readonly enabled: false } | { readonly enabled: true; readonly requestedAt: number };
}

export type ProtectionAction =
  | { kind: 'enable'; expiresInMinutes: number }
  | { kind: 'disable' }
  | { kind: 'none'; recheckAt: number | undefined };

/** True when ECS still protects the task at `now`, as far as accepted requests tell. */
export function isProtected(state: ProtectionState, now: number, policy: ProtectionPolicy): boolean {
  return state.applied.enabled && now < state.applied.requestedAt + policy.expiresInMinutes * 60_000;
}

/** What to ask ECS for next, and when to look again if nothing. */
export function nextProtectionAction(
  state: ProtectionState,
  now: number,
  policy: ProtectionPolicy,
): ProtectionAction {
  const on = isProtected(state, now, policy);
  if (state.inFlight > 0) {
    if (!on || !state.applied.enabled) return { kind: 'enable', expiresInMinutes: policy.expiresInMinutes };
    const renewAt = state.applied.requestedAt + policy.renewEveryMs;
    return now >= renewAt
      ? { kind: 'enable', expiresInMinutes: policy.expiresInMinutes }
      : { kind: 'none', recheckAt: renewAt };
  }
  if (!on) return { kind: 'none', recheckAt: undefined };
  const offAt = (state.idleSince ?? now) + policy.offDelayMs;
  return now >= offAt ? { kind: 'disable' } : { kind: 'none', recheckAt: offAt };
}

export interface ProtectionLogger {
  warn(message: string, detail?: Record<string, unknown>): void;
}

export interface TaskProtectionKeeperOptions {
  readonly port: TaskProtectionPort;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: ProtectionLogger;
  readonly policy?: Partial<ProtectionPolicy>;
  /** First retry delay after a failed request, ms; doubles up to maxRetryMs. Default 1,000. */
  readonly retryMs?: number;
  /** Default 30,000. */
  readonly maxRetryMs?: number;
  /** Told of every failed protection request (a metric an alarm watches); must not throw. */
  readonly onFailure?: () => void;
}

/**
 * Keeps the task's protection in line with the calls in flight. Call {@link update} on every
 * change (PacingGate's `onInFlightChange`); call {@link release} when shutting down.
 */
export class TaskProtectionKeeper {
  readonly policy: ProtectionPolicy;
  readonly #port: TaskProtectionPort;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #logger: ProtectionLogger;
  readonly #retryMs: number;
  readonly #maxRetryMs: number;
  readonly #onFailure: (() => void) | undefined;
  #state: ProtectionState = { inFlight: 0, idleSince: undefined, applied: { enabled: false } };
  #busy = false;
  #failures = 0;
  #retryNotBefore = 0;
  #timer: TimerHandle | undefined;
  #releasing = false;
  #stopped = false;
  readonly #settledWaiters: (() => void)[] = [];

  constructor(options: TaskProtectionKeeperOptions) {
    const policy = { ...DEFAULT_PROTECTION_POLICY, ...options.policy };
    if (
      !Number.isInteger(policy.expiresInMinutes) ||
      policy.expiresInMinutes < 1 ||
      policy.expiresInMinutes > 2880
    ) {
      throw new RangeError(
        `expiresInMinutes must be an integer from 1 to 2880, got ${policy.expiresInMinutes}`,
      );
    }
    if (!(policy.renewEveryMs > 0 && policy.renewEveryMs < policy.expiresInMinutes * 60_000)) {
      throw new RangeError(`renewEveryMs must be positive and shorter than the protection`);
    }
    this.policy = policy;
    this.#port = options.port;
    this.#clock = options.clock;
    this.#timers = options.timers;
    this.#logger = options.logger;
    this.#retryMs = options.retryMs ?? 1000;
    this.#maxRetryMs = options.maxRetryMs ?? 30_000;
    this.#onFailure = options.onFailure;
  }

  /** True when the last accepted request still protects the task. */
  get protected(): boolean {
    return isProtected(this.#state, this.#clock.now(), this.policy);
  }

  /** Tells the keeper how many calls are in flight now. Never throws. */
  update(inFlight: number): void {
    if (this.#stopped) return;
    const previous = this.#state.inFlight;
    const idleSince =
      inFlight === 0 ? (previous === 0 ? this.#state.idleSince : this.#clock.now()) : undefined;
    this.#state = { ...this.#state, inFlight, idleSince };
    this.#reconcile();
  }

  /**
   * Turns protection off now (no off delay) and stops the keeper, for a broker that drained and
   * is exiting. Tries up to `attempts` times with backoff; resolves either way, never rejects.
   * A request that never answers would hold it up: the port must time out its own requests.
   */
  async release(attempts = 3): Promise<void> {
    this.#releasing = true;
    this.#state = { ...this.#state, inFlight: 0, idleSince: this.#clock.now() };
    this.#failures = 0;
    this.#retryNotBefore = 0;
    this.#reconcile();
    while (this.#busy || (this.protected && this.#failures < attempts)) {
      await new Promise<void>((resolve) => this.#settledWaiters.push(resolve));
    }
    this.#stop();
  }

  #stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = this.#timers.setTimeout(
      () => {
        this.#timer = undefined;
        this.#reconcile();
      },
      Math.max(0, at - this.#clock.now()),
    );
  }

  #notifySettled(): void {
    for (const resolve of this.#settledWaiters.splice(0)) resolve();
  }

  #reconcile(): void {
    if (this.#busy || this.#stopped) return;
    const now = this.#clock.now();
    const policy = this.#releasing ? { ...this.policy, offDelayMs: 0 } : this.policy;
    const action = nextProtectionAction(this.#state, now, policy);
    if (action.kind === 'none') {
      if (action.recheckAt !== undefined) this.#arm(action.recheckAt);
      this.#notifySettled();
      return;
    }
    if (now < this.#retryNotBefore) {
      this.#arm(this.#retryNotBefore);
      return;
    }
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#busy = true;
    // A port that throws instead of rejecting is treated the same.
    const request = new Promise<void>((resolve) =>
      resolve(
        action.kind === 'enable' ? this.#port.set(true, action.expiresInMinutes) : this.#port.set(false),
      ),
    );
    // Protection counts from when we asked: a slow answer must not stretch our idea of it.
    request
      .then(
        () => {
          this.#failures = 0;
          this.#retryNotBefore = 0;
          this.#state = {
            ...this.#state,
            applied: action.kind === 'enable' ? { enabled: true, requestedAt: now } : { enabled: false },
          };
        },
        (error: unknown) => {
          this.#failures += 1;
          const delay = Math.min(this.#maxRetryMs, this.#retryMs * 2 ** (this.#failures - 1));
          this.#retryNotBefore = this.#clock.now() + delay;
          this.#logger.warn(`task protection ${action.kind} failed; retrying in ${delay} ms`, {
            failures: this.#failures,
            error,
          });
          this.#onFailure?.();
        },
      )
      .finally(() => {
        this.#busy = false;
        this.#reconcile();
        // A failed attempt leaves a timer armed; release() counts it as one try.
        if (this.#failures > 0) this.#notifySettled();
      });
  }
}
