/**
 * The faults SES shows a sender, by rate (drawn from an injected `random`) or forced for the next
 * N requests or events:
 *
 * - `answer-lost`: the send is done (the message accepted, its events published) but the socket is
 *   destroyed before any answer: the ambiguous failure, with no idempotency key to retry under;
 * - `internal-failure` (500 `InternalFailure`) and `service-unavailable` (503 `ServiceUnavailable`):
 *   nothing is sent;
 * - `throttled`: 429 `TooManyRequestsException` whatever the account's rate, for a burst of
 *   `throttleBurst` consecutive sends;
 * - events `lost`, `duplicated` (delivered twice) and `reordered` (a message's events sent in a
 *   shuffled order, each after its own delay), and `eventDelayMs` for every event.
 *
 * Send faults apply to `SendEmail` and `SendBulkEmail` only.
 */

export type SendFault = 'answer-lost' | 'internal-failure' | 'service-unavailable' | 'throttled';
export type EventFault = 'lost' | 'duplicated' | 'reordered';

/** A fixed number of ms, or a uniform draw between `min` and `max`. */
export type DelayRange = number | { readonly min: number; readonly max: number };

/** Probabilities in [0, 1] per send request, per event or (reordered) per message. */
export interface SesFaultRates {
  readonly answerLost: number;
  readonly internalFailure: number;
  readonly serviceUnavailable: number;
  readonly throttled: number;
  /** Sends throttled in a row once the `throttled` fault strikes (default 1). */
  readonly throttleBurst: number;
  readonly eventLost: number;
  readonly eventDuplicated: number;
  readonly eventReordered: number;
  /** Wall ms each event waits before its first delivery attempt (default 0). */
  readonly eventDelayMs: DelayRange;
}

export const NO_SES_FAULTS: SesFaultRates = {
  answerLost: 0,
  internalFailure: 0,
  serviceUnavailable: 0,
  throttled: 0,
  throttleBurst: 1,
  eventLost: 0,
  eventDuplicated: 0,
  eventReordered: 0,
  eventDelayMs: 0,
};

/** Ms a reordered event waits at most when no `eventDelayMs` is set: enough to change the order. */
const REORDER_SPREAD_MS = 30;

export class SesFaults {
  readonly #random: () => number;
  readonly #starting: SesFaultRates;
  #rates: SesFaultRates;
  #forced = new Map<SendFault | EventFault, number>();
  #burstLeft = 0;

  constructor(rates: Partial<SesFaultRates> = {}, random: () => number = Math.random) {
    this.#random = random;
    this.#starting = { ...NO_SES_FAULTS, ...rates };
    this.#rates = this.#starting;
  }

  get rates(): SesFaultRates {
    return this.#rates;
  }

  set(change: Partial<SesFaultRates>): void {
    this.#rates = { ...this.#rates, ...change };
  }

  /** The next `times` sends (or events, or messages for `reordered`) meet `fault`. */
  force(fault: SendFault | EventFault, times = 1): void {
    this.#forced.set(fault, (this.#forced.get(fault) ?? 0) + times);
  }

  /** Back to the starting rates, nothing forced. */
  reset(): void {
    this.#rates = this.#starting;
    this.#forced.clear();
    this.#burstLeft = 0;
  }

  /** The fault that refuses this send before anything is done, if one strikes. */
  drawRefusal(): Exclude<SendFault, 'answer-lost'> | undefined {
    if (this.#burstLeft > 0) {
      this.#burstLeft -= 1;
      return 'throttled';
    }
    for (const fault of ['throttled', 'internal-failure', 'service-unavailable'] as const) {
      if (this.#take(fault)) return this.#struck(fault);
    }
    if (this.#random() < this.#rates.throttled) return this.#struck('throttled');
    if (this.#random() < this.#rates.internalFailure) return 'internal-failure';
    if (this.#random() < this.#rates.serviceUnavailable) return 'service-unavailable';
    return undefined;
  }

  /** Whether the answer to a send that was accepted is lost. */
  drawAnswerLoss(): boolean {
    return this.#take('answer-lost') || this.#random() < this.#rates.answerLost;
  }

  drawEvent(fault: 'lost' | 'duplicated'): boolean {
    const rate = fault === 'lost' ? this.#rates.eventLost : this.#rates.eventDuplicated;
    return this.#take(fault) || this.#random() < rate;
  }

  /** Whether this message's events are sent shuffled. */
  drawReorder(): boolean {
    return this.#take('reordered') || this.#random() < this.#rates.eventReordered;
  }

  /** Ms an event waits before its first attempt; a reordered one always waits a little. */
  delayMs(reordered: boolean): number {
    const range = this.#rates.eventDelayMs;
    if (typeof range === 'number') {
      return reordered && range === 0 ? Math.floor(this.#random() * REORDER_SPREAD_MS) : range;
    }
    return range.min + Math.floor(this.#random() * (range.max - range.min + 1));
  }

  /** `items` in a random order (a reordered message's events). */
  shuffle<T>(items: readonly T[]): T[] {
    const shuffled = [...items];
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = Math.floor(this.#random() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
    }
    return shuffled;
  }

  #struck<F extends SendFault>(fault: F): F {
    if (fault === 'throttled') this.#burstLeft = Math.max(0, this.#rates.throttleBurst - 1);
    return fault;
  }

  #take(fault: SendFault | EventFault): boolean {
    const left = this.#forced.get(fault) ?? 0;
    if (left <= 0) return false;
    this.#forced.set(fault, left - 1);
    return true;
  }
}
