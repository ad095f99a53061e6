/**
 * At-least-once delivery of a stand-in's events to their consumer (`deliver`), as the SES and SMS
 * stand-ins' event destinations do it: a `deliver` that rejects is tried again with exponential
 * backoff, and the faults (`./ses/faults.ts`) lose, duplicate, delay and reorder events. Without
 * faults one batch's events arrive in the order given, one after the other.
 */
import type { TimerHandle, Timers } from '#shared/pacing/clock.ts';
import type { SesFaults } from './ses/faults.ts';

/** One event handed to the consumer, and what became of it. */
export interface PublishedDelivery<E> {
  readonly event: E;
  readonly fate: 'pending' | 'delivered' | 'lost' | 'undeliverable';
  /** Calls of `deliver`, retries and duplicates included. */
  readonly attempts: number;
  /** Calls that resolved: 2 when the event was duplicated. */
  readonly deliveries: number;
  readonly reordered: boolean;
}

/** The record the deliverer updates as it goes: a published event's mutable fields. */
export type DeliveryRecord<E> = { -readonly [K in keyof PublishedDelivery<E>]: PublishedDelivery<E>[K] };

export interface EventRetry {
  /** Calls of `deliver` per event copy before it is given up (default 8). */
  readonly attempts?: number;
  /** Ms before the first retry, doubling after each (default 50, at most `maxDelayMs`, default 2 000). */
  readonly firstDelayMs?: number;
  readonly maxDelayMs?: number;
}

export interface EventDelivererOptions<E> {
  readonly deliver: (event: E) => Promise<void>;
  readonly faults: SesFaults;
  readonly timers: Timers;
  readonly retry?: EventRetry;
}

/**
 * Delivers batches of event records, each updated in place with its fate, attempts and deliveries.
 *
 * @example
 * const deliverer = new EventDeliverer({ deliver, faults, timers });
 * const reordered = faults.drawReorder();
 * const records = events.map((event) => ({ event, fate: 'pending', attempts: 0, deliveries: 0, reordered }) as const);
 * deliverer.deliver(records, reordered);
 * await deliverer.idle();
 */
export class EventDeliverer<E> {
  readonly #options: EventDelivererOptions<E>;
  readonly #sleeping = new Map<TimerHandle, () => void>();
  #running = 0;
  #waiters: (() => void)[] = [];
  #stopped = false;

  constructor(options: EventDelivererOptions<E>) {
    this.#options = options;
  }

  /** Whether `stop` was called: nothing more is delivered. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * Delivers one batch: in order, each after its own delay, unless the batch is `reordered` (drawn
   * by the caller, which records it): then shuffled, all at once, each after its own delay.
   */
  deliver(records: readonly DeliveryRecord<E>[], reordered: boolean): void {
    const { faults } = this.#options;
    if (reordered) {
      for (const record of faults.shuffle(records)) this.#track(this.#dispatch(record, faults.delayMs(true)));
    } else {
      this.#track(
        (async () => {
          for (const record of records) await this.#dispatch(record, faults.delayMs(false));
        })(),
      );
    }
  }

  /** Resolves once no event waits for a delivery, a retry or a delay. */
  idle(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
      this.#checkIdle();
    });
  }

  /** Stops every wait and delivery still to come. */
  stop(): void {
    this.#stopped = true;
    for (const [handle, wake] of this.#sleeping) {
      this.#options.timers.clearTimeout(handle);
      wake();
    }
    this.#sleeping.clear();
  }

  /** One event: maybe lost, maybe twice, each copy tried until `deliver` resolves or attempts run out. */
  async #dispatch(record: DeliveryRecord<E>, delayMs: number): Promise<void> {
    const { faults } = this.#options;
    if (faults.drawEvent('lost')) {
      record.fate = 'lost';
      return;
    }
    const copies = faults.drawEvent('duplicated') ? 2 : 1;
    if (delayMs > 0) await this.#sleep(delayMs);
    for (let copy = 0; copy < copies; copy++) await this.#attempt(record);
    if (record.fate === 'pending') record.fate = 'undeliverable';
  }

  async #attempt(record: DeliveryRecord<E>): Promise<void> {
    const { attempts = 8, firstDelayMs = 50, maxDelayMs = 2_000 } = this.#options.retry ?? {};
    for (let n = 0; n < attempts && !this.#stopped; n++) {
      if (n > 0) await this.#sleep(Math.min(maxDelayMs, firstDelayMs * 2 ** (n - 1)));
      if (this.#stopped) return;
      record.attempts += 1;
      try {
        await this.#options.deliver(structuredClone(record.event));
        record.deliveries += 1;
        record.fate = 'delivered';
        return;
      } catch {
        // tried again after the backoff, as EventBridge retries a failed target (or SNS a subscriber)
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const handle = this.#options.timers.setTimeout(() => {
        this.#sleeping.delete(handle);
        resolve();
      }, ms);
      this.#sleeping.set(handle, resolve);
    });
  }

  #track(work: Promise<void>): void {
    this.#running += 1;
    void work.finally(() => {
      this.#running -= 1;
      this.#checkIdle();
    });
  }

  #checkIdle(): void {
    if (this.#running > 0) return;
    const ready = this.#waiters;
    this.#waiters = [];
    for (const resolve of ready) resolve();
  }
}
