/**
 * What a call's start reads before its transaction (the person-wide suppressions of its recipient's
 * person: `dynamo-person-suppressions.ts`), started ahead: when the broker takes a task it asks for
 * its reading (`BrokerTaskStore.prepare`), which then runs while the broker waits for the task's
 * call slot (the line's rate spaces starts), and the start finds it done instead of waiting two
 * round trips. A reading is used once, and only while fresh (begun less than
 * {@link READING_FRESH_MS} before the start); a stale one, a failed one or none is read at the
 * start, as before. The person-wide check is a reading before the start either way (the recipient's own entry
 * is checked in the transaction).
 */

/**
 * How long a reading made ahead is used for, ms: a wait for a call slot on a line of one call a
 * second. It widens the window in which an entry on another identifier of the person, written after
 * the reading, does not stop the start (before: the reading's own round trips).
 */
export const READING_FRESH_MS = 1_000;

/** Which attempt of which task a reading is for. */
export interface ReadingKey {
  readonly clientId: string;
  readonly jobId: string;
  readonly taskId: string;
  readonly attempts: number;
}

const keyOf = (k: ReadingKey) => `${k.clientId} ${k.jobId} ${k.taskId} ${k.attempts}`;

export class ReadingsAhead<T extends ReadingKey, R> {
  readonly #read: (task: T) => Promise<R>;
  readonly #now: () => number;
  readonly #readings = new Map<string, { readonly at: number; readonly value: Promise<R> }>();

  constructor(read: (task: T) => Promise<R>, now: () => number) {
    this.#read = read;
    this.#now = now;
  }

  /**
   * Starts the reading for `task` in the background (once; readings gone stale are dropped).
   * Resolves once it is read, never rejects (a failed reading is read again at the start): the
   * broker does not wait for it, a test may.
   */
  prepare(task: T): Promise<void> {
    const now = this.#now();
    for (const [key, reading] of this.#readings)
      if (now - reading.at >= READING_FRESH_MS) this.#readings.delete(key);
    const key = keyOf(task);
    const known = this.#readings.get(key);
    if (known !== undefined) return settledOf(known.value);
    const value = this.#read(task);
    this.#readings.set(key, { at: now, value });
    // Handled here so a failure is no unhandled rejection; the start reads again.
    return settledOf(value);
  }

  /** The reading made ahead for `task` when there is a fresh one (used once), else one made now. */
  async reading(task: T): Promise<R> {
    const key = keyOf(task);
    const ahead = this.#readings.get(key);
    this.#readings.delete(key);
    if (ahead !== undefined && this.#now() - ahead.at < READING_FRESH_MS) {
      try {
        return await ahead.value;
      } catch {
        // Read again below.
      }
    }
    return this.#read(task);
  }
}

function settledOf(value: Promise<unknown>): Promise<void> {
  return value.then(
    () => undefined,
    () => undefined,
  );
}
