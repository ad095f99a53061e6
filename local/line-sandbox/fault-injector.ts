/**
 * The LINE sandbox's fault injection, kept apart from LINE's contract: which fault strikes the
 * next request (a queue of next faults, then probabilities), and the injected delays, which are
 * the only real timers in the sandbox (so `stop` can cut them short).
 */
import type { SendEndpoint } from '#shared/line/messaging-client.ts';
import { type Answer, internalError, monthlyLimitReached, rateLimited } from './answers.ts';

/** One fault, applied to one request. */
export type Fault =
  /** Answer 500 without delivering. */
  | { readonly kind: 'status500' }
  /** Wait this long (real time), then handle the request normally, even if the caller gave up. */
  | { readonly kind: 'delay'; readonly ms: number }
  /** Handle the request (recording any delivery), then destroy the socket without answering. */
  | { readonly kind: 'dropAfterDeliver' }
  /** Answer 429 without delivering: the rate limit, or (`monthly`) the monthly quota used up. */
  | { readonly kind: 'status429'; readonly monthly?: boolean };

/**
 * A queued fault, optionally only for one endpoint. `validate` (the validation endpoints) is struck
 * only by a fault queued for it, so queued send faults and probabilities keep meaning sends.
 */
export type QueuedFault = Fault & { readonly endpoint?: SendEndpoint | 'validate' };

/** Chance, per request, of each fault (checked in this order; at most one applies). */
export interface FaultProbabilities {
  readonly status500?: number;
  readonly status429?: number;
  readonly dropAfterDeliver?: number;
  readonly delay?: { readonly probability: number; readonly ms: number };
}

export interface FaultControls {
  /** Queues faults for the next requests, in order (each is used once). */
  enqueue(...faults: QueuedFault[]): void;
  /** Queues `count` 429 answers. */
  burst429(count: number, endpoint?: SendEndpoint): void;
  /** Random faults from now on (replaces the previous probabilities). */
  setProbabilities(probabilities: FaultProbabilities): void;
  /** Drops queued faults and probabilities. */
  clear(): void;
  /** Queued faults not used yet. */
  pending(): number;
}

interface PendingDelay {
  readonly timer: NodeJS.Timeout;
  readonly resolve: () => void;
}

/** Picks and applies the faults of a LINE sandbox's send requests. */
export class FaultInjector {
  readonly #random: () => number;
  readonly #delays = new Set<PendingDelay>();
  #queue: QueuedFault[] = [];
  #probabilities: FaultProbabilities;

  constructor(probabilities: FaultProbabilities, random: () => number) {
    this.#probabilities = probabilities;
    this.#random = random;
  }

  /** The controls a test or benchmark holds (plain functions: they may be passed around unbound). */
  controls(): FaultControls {
    return {
      enqueue: (...faults) => this.#enqueue(faults),
      burst429: (count, endpoint) => this.#burst429(count, endpoint),
      setProbabilities: (p) => {
        this.#probabilities = p;
      },
      clear: () => {
        this.#queue = [];
        this.#probabilities = {};
      },
      pending: () => this.#queue.length,
    };
  }

  /** The fault for the next request to `endpoint`: the first queued one for it, else a random one. */
  pick(endpoint: SendEndpoint): Fault | undefined {
    const index = this.#queue.findIndex((f) => f.endpoint === undefined || f.endpoint === endpoint);
    if (index >= 0) return this.#queue.splice(index, 1)[0];
    const p = this.#probabilities;
    if (this.#chance(p.status500)) return { kind: 'status500' };
    if (this.#chance(p.status429)) return { kind: 'status429' };
    if (this.#chance(p.dropAfterDeliver)) return { kind: 'dropAfterDeliver' };
    if (p.delay && this.#chance(p.delay.probability)) return { kind: 'delay', ms: p.delay.ms };
    return undefined;
  }

  /** The first fault queued for exactly `endpoint`, if any (no probabilities). */
  pickQueued(endpoint: SendEndpoint | 'validate'): Fault | undefined {
    const index = this.#queue.findIndex((f) => f.endpoint === endpoint);
    return index >= 0 ? this.#queue.splice(index, 1)[0] : undefined;
  }

  /**
   * Applies what strikes before the request is handled: waits out a delay, and gives the answer
   * of a 500 or 429 (nothing delivered). `undefined`: handle the request.
   */
  async before(fault: Fault | undefined): Promise<Answer | undefined> {
    if (fault?.kind === 'delay') await this.#sleep(fault.ms);
    if (fault?.kind === 'status500') return internalError();
    if (fault?.kind === 'status429') return fault.monthly ? monthlyLimitReached() : rateLimited();
    return undefined;
  }

  /** Ends every injected delay now. */
  releaseDelays(): void {
    for (const entry of this.#delays) {
      clearTimeout(entry.timer);
      entry.resolve();
    }
    this.#delays.clear();
  }

  #enqueue(faults: readonly QueuedFault[]): void {
    this.#queue.push(...faults);
  }

  #burst429(count: number, endpoint: SendEndpoint | undefined): void {
    for (let i = 0; i < count; i++)
      this.#queue.push({ kind: 'status429', ...(endpoint ? { endpoint } : {}) });
  }

  #chance(p: number | undefined): boolean {
    return p !== undefined && p > 0 && this.#random() < p;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry: PendingDelay = {
        timer: setTimeout(() => {
          this.#delays.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      this.#delays.add(entry);
    });
  }
}
