/**
 * A served client's settings, read again once they are a few seconds old, so that what an
 * operator changes while a broker holds the client (calling hours, contract limits, a pause of
 * the client) applies within seconds rather than from the client's next lease.
 */
import type { ClientSettings } from '#shared/jobs/model.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';

export interface HeldClientSettingsDeps {
  readonly read: () => Promise<ClientSettings | undefined>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How long a read is trusted, ms. */
  readonly maxAgeMs: number;
}

export class HeldClientSettings {
  readonly #deps: HeldClientSettingsDeps;
  #current: ClientSettings;
  #readAt: number;

  constructor(deps: HeldClientSettingsDeps, initial: ClientSettings) {
    this.#deps = deps;
    this.#current = initial;
    this.#readAt = deps.clock.now();
  }

  /** The settings as last read. */
  get current(): ClientSettings {
    return this.#current;
  }

  /**
   * The settings, read again when older than `maxAgeMs`; `changed` when the read found new ones.
   * A failed read keeps the last settings (logged): a store hiccup must not stop a client.
   */
  async fresh(): Promise<{ readonly settings: ClientSettings; readonly changed: boolean }> {
    const { read, clock, logger, maxAgeMs } = this.#deps;
    const held = this.#current;
    if (clock.now() - this.#readAt < maxAgeMs) return { settings: held, changed: false };
    let found: ClientSettings | undefined;
    try {
      found = await read();
    } catch (error) {
      logger.warn('client settings not read again; keeping the last ones', {
        clientId: held.clientId,
        error,
      });
    }
    this.#readAt = clock.now();
    if (!found || (found.updatedAt === held.updatedAt && found.paused === held.paused)) {
      return { settings: held, changed: false };
    }
    this.#current = found;
    return { settings: found, changed: true };
  }

  /** Goes back to `previous` (new settings the caller could not apply); read again next time. */
  keep(previous: ClientSettings): void {
    this.#current = previous;
  }
}
