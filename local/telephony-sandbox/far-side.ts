/**
 * The far side of a phone line, shared by every telephony emulator (the HTTP contract, Amazon
 * Connect, Twilio): calls that ring, are answered or not, and end; the status events each call
 * goes through; and the faults a real provider shows — lost, late, duplicated and reordered status
 * events, retried deliveries. An emulator's front speaks its provider's wire protocol and tells the
 * far side how one event of a call is delivered (a signed POST, an EventBridge envelope…).
 *
 * It measures from the far side what the broker must guarantee: no recipient rings twice for one
 * attempt, and a client never has more calls in flight, nor starts more per second, than its
 * limits. Randomness is a hash of (seed, key, purpose), not a shared stream, so the same seed
 * gives every call the same outcome and faults whatever order concurrent requests arrive in.
 */
import { createHash, randomUUID } from 'node:crypto';
import type {
  CallSnapshot,
  CallStatus,
  FinalCallStatus,
  ReportedCallStatus,
} from '#shared/telephony/port.ts';
import { isFinal } from '#shared/telephony/port.ts';
import { CallLedger } from './ledger.ts';

/** Wall time and timers; inject a manual one to drive an emulator without sleeping. */
export interface SandboxTime {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const realTime: SandboxTime = {
  now: () => Date.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** How a placed call ends up; `machine` is an answering machine that picks up. */
export type SandboxOutcome = 'answered' | 'busy' | 'no-answer' | 'failed' | 'machine';

/** Relative weights of outcomes for numbers without an override (normalised, need not sum to 1). */
export interface OutcomeDistribution {
  readonly answered: number;
  readonly busy: number;
  readonly noAnswer: number;
  readonly failed: number;
  /** Answering machines (default 0). */
  readonly machine?: number;
}

/** A fixed value, or a uniform draw between `min` and `max` (inclusive, whole units). */
export type Range = number | { readonly min: number; readonly max: number };

/** What a given number does when called (tests force outcomes with these). */
export interface ScriptedCall {
  readonly outcome: SandboxOutcome;
  /** Talk time in call seconds, when answered (by a person or a machine). */
  readonly durationSeconds?: number;
  /** Ring time in call seconds before answer / busy / no-answer. */
  readonly ringSeconds?: number;
  /** `failed`'s reason (default `unreachable`). */
  readonly reason?: string;
  /**
   * Amazon Connect only: the user-defined contact attributes the contact flow sets once a person
   * answers (e.g. `{ switchboard_opt_out: 'true' }`), read back with `GetContactAttributes`.
   */
  readonly contactAttributes?: Readonly<Record<string, string>>;
}

/** Faults, changeable at run time with `setFaults`. Rates are probabilities in [0, 1]. */
export interface TelephonyFaults {
  /** A start answered 503 before any call is created. */
  readonly initiateErrorRate: number;
  /** A new call is placed (it rings) and then answered 500: the ambiguous failure. */
  readonly initiateErrorAfterCreateRate: number;
  /** A start answered 429 (throttled) with `Retry-After: retryAfterSeconds`; nothing is created. */
  readonly rateLimitRate: number;
  readonly retryAfterSeconds: number;
  /** Wall ms the answer to a start is held after the call is placed (client timeouts). */
  readonly initiateDelayMs: number;
  /** A status event is never delivered. */
  readonly callbackLossRate: number;
  /** Wall ms each status event waits before it is sent (late events; a range also reorders them). */
  readonly callbackDelayMs: Range;
  /** A status event is delivered twice. */
  readonly callbackDuplicateRate: number;
  /** A call's status events are held until it ends, then sent in a shuffled order. */
  readonly callbackReorderRate: number;
}

export const NO_FAULTS: TelephonyFaults = {
  initiateErrorRate: 0,
  initiateErrorAfterCreateRate: 0,
  rateLimitRate: 0,
  retryAfterSeconds: 1,
  initiateDelayMs: 0,
  callbackLossRate: 0,
  callbackDelayMs: 0,
  callbackDuplicateRate: 0,
  callbackReorderRate: 0,
};

/** How the far side behaves, common to every emulator. */
export interface FarSideOptions {
  readonly seed?: number;
  /** Default 0.7 answered, 0.1 busy, 0.15 no answer, 0.05 failed. */
  readonly outcomes?: OutcomeDistribution;
  /** Talk time of answered calls, call seconds (default 20–180). */
  readonly durationSeconds?: Range;
  /** Ring time before answer, busy or no answer, call seconds (default 2–10). */
  readonly ringSeconds?: Range;
  /** Call seconds per wall second (default 1): 60 makes a 60 s call last 1 s. */
  readonly timeScale?: number;
  /** Forced behaviour per E.164 number. */
  readonly overrides?: Readonly<Record<string, ScriptedCall>>;
  readonly faults?: Partial<TelephonyFaults>;
  /** Attempts after the first for a status event that gets no 2xx (default 2). */
  readonly callbackRetries?: number;
  /** Wall ms between delivery attempts (default 100). */
  readonly callbackRetryDelayMs?: number;
  readonly time?: SandboxTime;
}

/** One call actually placed: a phone rang (or at least was dialled). */
export interface RingRecord {
  readonly callId: string;
  readonly idempotencyKey: string;
  readonly clientId: string;
  readonly to: string;
  readonly taskId: string;
  readonly attempt: number;
  /** Wall ms. */
  readonly startedAt: number;
  /** Wall ms of the final event; absent while in flight. */
  readonly endedAt?: number;
  readonly outcome?: FinalCallStatus;
}

export type CallbackFate = 'pending' | 'delivered' | 'lost' | 'undeliverable';

/** One status event and what became of its delivery. */
export interface CallbackRecord {
  readonly callId: string;
  readonly clientId: string;
  readonly status: ReportedCallStatus;
  readonly sequence: number;
  readonly fate: CallbackFate;
  /** 2 when the duplicate fault struck. */
  readonly copies: number;
  /** Posts answered 2xx. */
  readonly deliveries: number;
  /** Posts tried, retries included. */
  readonly attempts: number;
  /** Held and sent shuffled with the call's other events. */
  readonly reordered: boolean;
}

export interface ClientStats {
  /** Calls placed. */
  readonly rings: number;
  readonly inFlight: number;
  readonly maxInFlight: number;
  /** Most calls started in any sliding window of 1 s of wall time. */
  readonly maxStartsPerSecond: number;
  readonly outcomes: Readonly<Record<FinalCallStatus, number>>;
  /** Phone number → task id → rings. */
  readonly ringsPerRecipient: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Number, task and attempt that rang more than once: must stay empty (invariant 1). */
  readonly repeatedRings: readonly { to: string; taskId: string; attempt: number; rings: number }[];
  readonly callbacks: {
    readonly events: number;
    readonly delivered: number;
    readonly lost: number;
    readonly duplicated: number;
    readonly undeliverable: number;
  };
}

/** What every emulator offers a test, whatever protocol its front speaks. */
export interface TelephonyEmulator {
  /** Base URL of the emulator's API (`http://127.0.0.1:<port>`). */
  readonly url: string;
  stats(clientId: string): ClientStats;
  rings(): readonly RingRecord[];
  callbacks(): readonly CallbackRecord[];
  /** The far side's own view of a call. */
  call(callId: string): CallSnapshot | undefined;
  setFaults(faults: Partial<TelephonyFaults>): void;
  setOverride(to: string, call: ScriptedCall | undefined): void;
  /** Work not yet done: scheduled timers (call events, late events, retries, held answers), posts in flight. */
  pending(): { readonly timers: number; readonly callbacksInFlight: number };
  /** Resolves once nothing is pending (with a manual `time`, advance it first). */
  settled(): Promise<void>;
  /** Forgets every call, key and record, cancels pending work, restores the starting faults and overrides. */
  reset(): void;
  /** Cancels pending events and deliveries and closes the server. */
  stop(): Promise<void>;
}

/** A call to place, as every front reads it from its own protocol. */
export interface PlaceCall {
  /** The idempotency key (HTTP contract), client token (Connect) or attempt tag (Twilio). */
  readonly key: string;
  /** The request's canonical form: a repeat with the same key and another body is refused. */
  readonly fingerprint: string;
  readonly clientId: string;
  readonly to: string;
  readonly taskId: string;
  readonly attempt: number;
  readonly maxDurationSeconds: number;
  /** Seconds the phone may ring before the call is `no-answer` (none: it rings as scripted). */
  readonly ringTimeoutSeconds?: number;
  /**
   * How one status event of this call is delivered: returns one delivery attempt (true when it
   * got a 2xx). Called once per event, when it happens; the attempt may be called several times
   * (duplicates, retries). Absent: events are only kept (a provider read by polling).
   */
  readonly tell?: (event: FarSideEvent, call: FarSideCall) => Deliver;
}

/** One delivery attempt of one event; true when the listener answered 2xx. Aborted on reset and stop. */
export type Deliver = (signal: AbortSignal) => Promise<boolean>;

/** One status change of a call, as the far side saw it. */
export interface FarSideEvent extends CallSnapshot {
  readonly status: ReportedCallStatus;
  /** True when an answering machine, not a person, answered (on `answered` and the final event). */
  readonly machine: boolean;
}

/** A call on the far side, as fronts read it. */
export interface FarSideCall {
  readonly callId: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly ring: RingRecord;
  readonly startedAt: number;
  readonly machine: boolean;
  /** Wall ms it was answered, once it was. */
  readonly answeredAt?: number;
  readonly snapshot: CallSnapshot;
}

interface PlannedEvent {
  readonly status: ReportedCallStatus;
  readonly afterSeconds: number;
  readonly durationSeconds?: number;
  readonly reason?: string;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type MutableCallback = Mutable<CallbackRecord>;

class CallState implements FarSideCall {
  readonly ring: Mutable<RingRecord>;
  readonly held: Array<{ deliver: Deliver; record: MutableCallback }> = [];
  status: CallStatus = 'queued';
  at: string;
  sequence = 0;
  durationSeconds?: number;
  reason?: string;
  answeredAt?: number;

  readonly input: PlaceCall;
  readonly callId: string;
  readonly startedAt: number;
  readonly reorder: boolean;
  readonly machine: boolean;

  constructor(input: PlaceCall, callId: string, startedAt: number, reorder: boolean, machine: boolean) {
    this.input = input;
    this.callId = callId;
    this.startedAt = startedAt;
    this.reorder = reorder;
    this.machine = machine;
    this.ring = {
      callId,
      idempotencyKey: input.key,
      clientId: input.clientId,
      to: input.to,
      taskId: input.taskId,
      attempt: input.attempt,
      startedAt,
    };
    this.at = new Date(startedAt).toISOString();
  }

  get key(): string {
    return this.input.key;
  }

  get fingerprint(): string {
    return this.input.fingerprint;
  }

  get snapshot(): CallSnapshot {
    return {
      callId: this.callId,
      idempotencyKey: this.key,
      status: this.status,
      at: this.at,
      sequence: this.sequence,
      ...(this.durationSeconds === undefined ? {} : { durationSeconds: this.durationSeconds }),
      ...(this.reason === undefined ? {} : { reason: this.reason }),
    };
  }
}

const DEFAULT_OUTCOMES: OutcomeDistribution = { answered: 0.7, busy: 0.1, noAnswer: 0.15, failed: 0.05 };

/** The far side: calls, their events, their deliveries, the faults and the counts. */
export class FarSide {
  readonly time: SandboxTime;
  readonly #seed: number;
  readonly #timeScale: number;
  readonly #distribution: OutcomeDistribution;
  readonly #durationRange: Range;
  readonly #ringRange: Range;
  readonly #retries: number;
  readonly #retryDelayMs: number;
  readonly #startingFaults: TelephonyFaults;
  readonly #startingOverrides: Readonly<Record<string, ScriptedCall>>;
  readonly #newCallId: () => string;
  #faults: TelephonyFaults;
  #overrides: Map<string, ScriptedCall>;
  #calls = new Map<string, CallState>();
  #byKey = new Map<string, CallState>();
  #requestsPerKey = new Map<string, number>();
  #ringLog: Mutable<RingRecord>[] = [];
  #callbackLog: MutableCallback[] = [];
  readonly #ledger = new CallLedger();
  readonly #timers = new Set<unknown>();
  readonly #deliveries = new Set<AbortController>();
  readonly #held = new Set<{ destroy(): void }>();
  #waiters: Array<() => void> = [];
  #generation = 0;
  #stopped = false;

  constructor(
    options: FarSideOptions,
    newCallId: () => string = () => `CA${randomUUID().replaceAll('-', '')}`,
  ) {
    this.time = options.time ?? realTime;
    this.#seed = options.seed ?? 1;
    this.#timeScale = options.timeScale ?? 1;
    if (!(this.#timeScale > 0)) throw new RangeError(`timeScale must be > 0, got ${this.#timeScale}`);
    this.#distribution = options.outcomes ?? DEFAULT_OUTCOMES;
    this.#durationRange = options.durationSeconds ?? { min: 20, max: 180 };
    this.#ringRange = options.ringSeconds ?? { min: 2, max: 10 };
    this.#retries = options.callbackRetries ?? 2;
    this.#retryDelayMs = options.callbackRetryDelayMs ?? 100;
    this.#startingFaults = { ...NO_FAULTS, ...options.faults };
    this.#startingOverrides = { ...options.overrides };
    this.#newCallId = newCallId;
    this.#faults = this.#startingFaults;
    this.#overrides = new Map(Object.entries(this.#startingOverrides));
  }

  get faults(): TelephonyFaults {
    return this.#faults;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** A repeatable number in [0, 1) for this seed, key and purpose. */
  draw(key: string, purpose: string): number {
    const digest = createHash('sha256').update(`${this.#seed}|${key}|${purpose}`).digest();
    return digest.readUIntBE(0, 6) / 2 ** 48;
  }

  /**
   * Counts a start request under `key` and draws its faults, in the order every front applies
   * them: throttled, unavailable (nothing created), or through (maybe failing after the create).
   */
  startFault(key: string): 'throttled' | 'unavailable' | { readonly failAfterCreate: boolean } {
    const n = (this.#requestsPerKey.get(key) ?? 0) + 1;
    this.#requestsPerKey.set(key, n);
    if (this.draw(key, `request:${n}:429`) < this.#faults.rateLimitRate) return 'throttled';
    if (this.draw(key, `request:${n}:503`) < this.#faults.initiateErrorRate) return 'unavailable';
    return {
      failAfterCreate: this.draw(key, `request:${n}:500`) < this.#faults.initiateErrorAfterCreateRate,
    };
  }

  byKey(key: string): FarSideCall | undefined {
    return this.#byKey.get(key);
  }

  call(callId: string): FarSideCall | undefined {
    return this.#calls.get(callId);
  }

  /** Rings `input.to`: the call's events are planned and happen on the far side's clock. */
  place(input: PlaceCall): FarSideCall {
    const startedAt = this.time.now();
    const scripted = this.#outcomeFor(input.to, input.key);
    const reorder = this.draw(input.key, 'reorder') < this.#faults.callbackReorderRate;
    const call = new CallState(input, this.#newCallId(), startedAt, reorder, scripted.outcome === 'machine');
    this.#calls.set(call.callId, call);
    this.#byKey.set(input.key, call);
    this.#ringLog.push(call.ring);
    this.#ledger.start(input.clientId, startedAt);
    for (const event of this.#plan(input, scripted)) {
      const happen = () => this.#happenTo(call, event);
      if (event.afterSeconds === 0) happen();
      else this.schedule(happen, (event.afterSeconds * 1000) / this.#timeScale);
    }
    return call;
  }

  /** Ends a call that is still ringing or talking (a provider's "stop contact"); false when it had ended. */
  hangUp(callId: string, reason: string): boolean {
    const call = this.#calls.get(callId);
    if (!call || isFinal(call.status)) return false;
    const talked = call.answeredAt === undefined ? undefined : (this.time.now() - call.answeredAt) / 1000;
    const status = talked === undefined ? 'no-answer' : 'completed';
    this.#happenTo(call, {
      status,
      afterSeconds: 0,
      reason,
      ...(talked === undefined ? {} : { durationSeconds: Math.round(talked * this.#timeScale) }),
    });
    return true;
  }

  /** Runs `callback` after `ms` unless the far side is reset or stopped meanwhile. */
  schedule(callback: () => void, ms: number): void {
    const mine = this.#generation;
    const handle = this.time.setTimer(() => {
      this.#timers.delete(handle);
      if (mine === this.#generation && !this.#stopped) callback();
      this.#checkSettled();
    }, ms);
    this.#timers.add(handle);
  }

  /** Holds an answer for `ms` (the slow-answer fault); a reset or stop destroys it instead. */
  holdAnswer(held: { destroy(): void }, ms: number, send: () => void): void {
    this.#held.add(held);
    this.schedule(() => {
      this.#held.delete(held);
      send();
    }, ms);
  }

  stats(clientId: string): ClientStats {
    return statsOf(clientId, this.#ringLog, this.#callbackLog, this.#ledger);
  }

  rings(): readonly RingRecord[] {
    return this.#ringLog.map((ring) => ({ ...ring }));
  }

  callbacks(): readonly CallbackRecord[] {
    return this.#callbackLog.map((record) => ({ ...record }));
  }

  setFaults(change: Partial<TelephonyFaults>): void {
    this.#faults = { ...this.#faults, ...change };
  }

  /** The scripted call for a number, if a test set one. */
  override(to: string): ScriptedCall | undefined {
    return this.#overrides.get(to);
  }

  setOverride(to: string, call: ScriptedCall | undefined): void {
    if (call) this.#overrides.set(to, call);
    else this.#overrides.delete(to);
  }

  pending(): { readonly timers: number; readonly callbacksInFlight: number } {
    return { timers: this.#timers.size, callbacksInFlight: this.#deliveries.size };
  }

  settled(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#waiters.push(resolve);
      this.#checkSettled();
    });
  }

  reset(): void {
    this.#cancelPending();
    this.#faults = this.#startingFaults;
    this.#overrides = new Map(Object.entries(this.#startingOverrides));
    this.#calls = new Map();
    this.#byKey = new Map();
    this.#requestsPerKey = new Map();
    this.#ringLog = [];
    this.#callbackLog = [];
    this.#ledger.clear();
    this.#checkSettled();
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#cancelPending();
    this.#checkSettled();
  }

  /** The parts of {@link TelephonyEmulator} every front exposes as they are. */
  emulatorView(url: string, close: () => Promise<void>): TelephonyEmulator {
    return {
      url,
      stats: (clientId) => this.stats(clientId),
      rings: () => this.rings(),
      callbacks: () => this.callbacks(),
      call: (callId) => this.#calls.get(callId)?.snapshot,
      setFaults: (faults) => this.setFaults(faults),
      setOverride: (to, call) => this.setOverride(to, call),
      pending: () => this.pending(),
      settled: () => this.settled(),
      reset: () => this.reset(),
      stop: async () => {
        if (this.#stopped) return;
        this.stop();
        await close();
      },
    };
  }

  // ---- the call's life ------------------------------------------------------------------

  #pick(range: Range, key: string, purpose: string): number {
    if (typeof range === 'number') return range;
    return range.min + Math.floor(this.draw(key, purpose) * (range.max - range.min + 1));
  }

  #outcomeFor(to: string, key: string): ScriptedCall {
    const scripted = this.#overrides.get(to);
    if (scripted) return scripted;
    const { answered, busy, noAnswer, failed } = this.#distribution;
    const machine = this.#distribution.machine ?? 0;
    const r = this.draw(key, 'outcome') * (answered + busy + noAnswer + failed + machine);
    if (r < answered) return { outcome: 'answered' };
    if (r < answered + busy) return { outcome: 'busy' };
    if (r < answered + busy + noAnswer) return { outcome: 'no-answer' };
    if (r < answered + busy + noAnswer + failed) return { outcome: 'failed' };
    return { outcome: 'machine' };
  }

  #plan(input: PlaceCall, scripted: ScriptedCall): PlannedEvent[] {
    const key = input.key;
    const ring = scripted.ringSeconds ?? this.#pick(this.#ringRange, key, 'ring');
    const timeout = input.ringTimeoutSeconds;
    const ringing: PlannedEvent = { status: 'ringing', afterSeconds: 0 };
    if (scripted.outcome === 'failed') {
      return [{ status: 'failed', afterSeconds: 0, reason: scripted.reason ?? 'unreachable' }];
    }
    if (timeout !== undefined && ring > timeout && scripted.outcome !== 'busy') {
      return [ringing, { status: 'no-answer', afterSeconds: timeout }];
    }
    if (scripted.outcome === 'busy' || scripted.outcome === 'no-answer') {
      return [ringing, { status: scripted.outcome, afterSeconds: ring }];
    }
    const wanted = scripted.durationSeconds ?? this.#pick(this.#durationRange, key, 'duration');
    const talk = Math.min(wanted, input.maxDurationSeconds);
    return [
      ringing,
      { status: 'answered', afterSeconds: ring },
      {
        status: scripted.outcome === 'machine' ? 'voicemail' : 'completed',
        afterSeconds: ring + talk,
        durationSeconds: talk,
        ...(talk < wanted ? { reason: 'max-duration' } : {}),
      },
    ];
  }

  #happenTo(call: CallState, event: PlannedEvent): void {
    // A call ends once. One stopped (`hangUp`) still has the rest of its plan on the timers: those
    // events are void, as a provider says nothing more of a call that has ended (counting its end
    // a second time took another call's place in the ledger, or threw where none was in flight).
    if (isFinal(call.status)) return;
    const now = this.time.now();
    call.status = event.status;
    call.sequence += 1;
    call.at = new Date(now).toISOString();
    if (event.status === 'answered') call.answeredAt = now;
    if (event.durationSeconds !== undefined) call.durationSeconds = event.durationSeconds;
    if (event.reason !== undefined) call.reason = event.reason;
    const final = isFinal(event.status);
    if (final) {
      call.ring.endedAt = now;
      call.ring.outcome = event.status as FinalCallStatus;
      this.#ledger.end(call.ring.clientId);
    }
    const tell = call.input.tell;
    if (!tell) return;
    const told: FarSideEvent = { ...(call.snapshot as FarSideEvent), machine: call.machine };
    const deliver = tell(told, call);
    const record: MutableCallback = {
      callId: call.callId,
      clientId: call.ring.clientId,
      status: event.status,
      sequence: call.sequence,
      fate: 'pending',
      copies: 1,
      deliveries: 0,
      attempts: 0,
      reordered: call.reorder,
    };
    this.#callbackLog.push(record);
    if (!call.reorder) {
      this.#dispatch(call, deliver, record);
      return;
    }
    call.held.push({ deliver, record });
    if (final) {
      const order = call.held
        .map((held) => ({ held, rank: this.draw(call.key, `order:${held.record.sequence}`) }))
        .sort((a, b) => a.rank - b.rank);
      call.held.length = 0;
      for (const { held } of order) this.#dispatch(call, held.deliver, held.record);
    }
  }

  // ---- deliveries -----------------------------------------------------------------------

  #dispatch(call: CallState, deliver: Deliver, record: MutableCallback): void {
    const purpose = `callback:${record.sequence}`;
    if (this.draw(call.key, `${purpose}:lose`) < this.#faults.callbackLossRate) {
      record.fate = 'lost';
      return;
    }
    if (this.draw(call.key, `${purpose}:duplicate`) < this.#faults.callbackDuplicateRate) record.copies = 2;
    let outstanding = record.copies;
    const copyDone = () => {
      outstanding -= 1;
      if (outstanding === 0 && record.deliveries === 0) record.fate = 'undeliverable';
    };
    for (let copy = 0; copy < record.copies; copy++) {
      const delay = this.#pick(this.#faults.callbackDelayMs, call.key, `${purpose}:delay:${copy}`);
      const send = () => this.#post(deliver, record, this.#retries, copyDone);
      if (delay <= 0) send();
      else this.schedule(send, delay);
    }
  }

  #post(deliver: Deliver, record: MutableCallback, retriesLeft: number, done: () => void): void {
    const controller = new AbortController();
    this.#deliveries.add(controller);
    record.attempts += 1;
    deliver(controller.signal)
      .catch(() => false)
      .then((ok) => {
        const current = this.#deliveries.delete(controller);
        if (ok) {
          record.deliveries += 1;
          record.fate = 'delivered';
          done();
        } else if (current && retriesLeft > 0 && !this.#stopped) {
          this.schedule(() => this.#post(deliver, record, retriesLeft - 1, done), this.#retryDelayMs);
        } else {
          done();
        }
        this.#checkSettled();
      });
  }

  #checkSettled(): void {
    if (this.#timers.size > 0 || this.#deliveries.size > 0 || this.#held.size > 0) return;
    const ready = this.#waiters;
    this.#waiters = [];
    for (const resolve of ready) resolve();
  }

  #cancelPending(): void {
    this.#generation += 1;
    for (const handle of this.#timers) this.time.clearTimer(handle);
    this.#timers.clear();
    for (const controller of this.#deliveries) controller.abort();
    this.#deliveries.clear();
    for (const held of this.#held) held.destroy();
    this.#held.clear();
  }
}

function statsOf(
  clientId: string,
  rings: readonly RingRecord[],
  callbacks: readonly CallbackRecord[],
  ledger: CallLedger,
): ClientStats {
  const outcomes: Record<FinalCallStatus, number> = {
    completed: 0,
    busy: 0,
    'no-answer': 0,
    failed: 0,
    voicemail: 0,
  };
  const perRecipient: Record<string, Record<string, number>> = {};
  const perAttempt = new Map<string, { to: string; taskId: string; attempt: number; rings: number }>();
  for (const ring of rings) {
    if (ring.clientId !== clientId) continue;
    if (ring.outcome) outcomes[ring.outcome] += 1;
    const tasks = perRecipient[ring.to] ?? {};
    perRecipient[ring.to] = tasks;
    tasks[ring.taskId] = (tasks[ring.taskId] ?? 0) + 1;
    const id = JSON.stringify([ring.to, ring.taskId, ring.attempt]);
    const entry = perAttempt.get(id) ?? { to: ring.to, taskId: ring.taskId, attempt: ring.attempt, rings: 0 };
    entry.rings += 1;
    perAttempt.set(id, entry);
  }
  const mine = callbacks.filter((record) => record.clientId === clientId);
  const counts = ledger.counts(clientId);
  return {
    rings: counts.starts,
    inFlight: counts.inFlight,
    maxInFlight: counts.maxInFlight,
    maxStartsPerSecond: counts.maxStartsPerWindow,
    outcomes,
    ringsPerRecipient: perRecipient,
    repeatedRings: [...perAttempt.values()].filter((entry) => entry.rings > 1),
    callbacks: {
      events: mine.length,
      delivered: mine.filter((r) => r.fate === 'delivered').length,
      lost: mine.filter((r) => r.fate === 'lost').length,
      duplicated: mine.filter((r) => r.copies > 1).length,
      undeliverable: mine.filter((r) => r.fate === 'undeliverable').length,
    },
  };
}
