/**
 * What the running SES and SMS stand-ins (`ses-emulator.ts`, `sms-emulator.ts`) share: their URL,
 * their faults, what they accepted, the events published with what became of them, and a close
 * that stops the deliveries still to come before the server.
 */
import type { SesFaults } from './ses/faults.ts';

/** The pieces a running stand-in reads: its faults, its operations' outbox, its event publisher. */
export interface StandInParts<Sent, Published> {
  readonly faults: SesFaults;
  readonly operations: { sent(): readonly Sent[] };
  readonly publisher: { log(): readonly Published[]; idle(): Promise<void>; stop(): void };
}

export class RunningStandIn<Sent, Published> {
  readonly url: string;
  /** `faults.set({ … rates })`, `faults.force('answer-lost' | 'throttled' | 'lost' | …, n)`, `faults.reset()`. */
  readonly faults: Pick<SesFaults, 'set' | 'force' | 'reset' | 'rates'>;
  readonly #parts: StandInParts<Sent, Published>;
  readonly #close: () => Promise<void>;

  constructor(url: string, parts: StandInParts<Sent, Published>, close: () => Promise<void>) {
    this.url = url;
    this.faults = parts.faults;
    this.#parts = parts;
    this.#close = close;
  }

  /** Everything accepted, in order: what a demo shows. */
  sent(): readonly Sent[] {
    return this.#parts.operations.sent();
  }

  /** Every event published, with what became of its delivery. */
  events(): readonly Published[] {
    return this.#parts.publisher.log();
  }

  /** Resolves once every event was delivered, lost or given up. */
  idle(): Promise<void> {
    return this.#parts.publisher.idle();
  }

  /** Stops deliveries still to come and the server. */
  async close(): Promise<void> {
    this.#parts.publisher.stop();
    await this.#close();
  }
}
