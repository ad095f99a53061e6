/**
 * What the tests of an AWS stand-in driven by its real SDK client share: the events' consumer that
 * wakes whoever waits for them (`EventInbox`), a clock the test moves (`TestClock`), and the
 * stand-in with its client, started per test and closed after it (`StandInHarness`).
 */

/** Static credentials, as the stand-ins' `LOCAL_*` settings carry them. */
export interface StandInCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** The event destination's consumer: keeps what arrives and wakes whoever waits for it. */
export class EventInbox<E> {
  readonly events: E[] = [];
  readonly #messageIdOf: (event: E) => string;
  #waiters: (() => void)[] = [];

  constructor(messageIdOf: (event: E) => string) {
    this.#messageIdOf = messageIdOf;
  }

  readonly deliver = async (event: E): Promise<void> => {
    this.events.push(event);
    for (const wake of this.#waiters.splice(0)) wake();
  };

  of(messageId: string): E[] {
    return this.events.filter((event) => this.#messageIdOf(event) === messageId);
  }

  /** Resolves with `messageId`'s events once there are `count` of them (a bound only against a hang). */
  async await(messageId: string, count: number): Promise<E[]> {
    const deadline = Date.now() + 20_000;
    while (this.of(messageId).length < count) {
      if (Date.now() > deadline)
        throw new Error(`${messageId}: ${this.of(messageId).length} of ${count} events`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 1_000).unref();
      });
    }
    return this.of(messageId);
  }
}

/** A clock the test moves. */
export class TestClock {
  at = Date.parse('2026-03-02T09:00:00.000Z');
  now(): number {
    return this.at;
  }
  advance(ms: number): void {
    this.at += ms;
  }
}

export interface StandInParts<S, C, E, O> {
  /** Starts the stand-in with its events handed to `deliver` (which `options` may replace). */
  readonly start: (deliver: (event: E) => Promise<void>, options?: O) => Promise<S>;
  /** An SDK client of the stand-in at `endpoint`, with one attempt so no SDK retry hides a refusal. */
  readonly client: (endpoint: string, credentials: StandInCredentials) => C;
  /** Which message an event is of. */
  readonly messageIdOf: (event: E) => string;
  /** The credentials `start`'s client signs with. */
  readonly credentials: StandInCredentials;
}

/**
 * One stand-in per test: `start` it, then `standIn`, `inbox` and `client(...)`; `close` (in
 * `afterEach`) destroys the client and closes the stand-in.
 */
export class StandInHarness<
  S extends { readonly url: string; close(): Promise<void> },
  C extends { destroy(): void },
  E,
  O,
> {
  readonly #parts: StandInParts<S, C, E, O>;
  #standIn: S | undefined;
  #client: C | undefined;
  #inbox: EventInbox<E>;

  constructor(parts: StandInParts<S, C, E, O>) {
    this.#parts = parts;
    this.#inbox = new EventInbox(parts.messageIdOf);
  }

  /** A fresh inbox and stand-in; resolves with a client signing with the stand-in's credentials. */
  async start(options?: O): Promise<C> {
    this.#inbox = new EventInbox(this.#parts.messageIdOf);
    this.#standIn = await this.#parts.start(this.#inbox.deliver, options);
    this.#client = this.client(this.#parts.credentials);
    return this.#client;
  }

  /** The stand-in started last (throws before `start`). */
  get standIn(): S {
    if (this.#standIn === undefined) throw new Error('the stand-in is not started');
    return this.#standIn;
  }

  /** The started stand-in's events. */
  get inbox(): EventInbox<E> {
    return this.#inbox;
  }

  /** Another client of the started stand-in, signing with `credentials`. */
  client(credentials: StandInCredentials): C {
    const { accessKeyId, secretAccessKey } = credentials;
    return this.#parts.client(this.standIn.url, { accessKeyId, secretAccessKey });
  }

  async close(): Promise<void> {
    this.#client?.destroy();
    await this.#standIn?.close();
    this.#standIn = undefined;
    this.#client = undefined;
  }
}
