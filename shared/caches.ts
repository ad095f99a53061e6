/**
 * Two in-memory caches of things that are costly to make (SDK clients, keep-alive senders,
 * providers): {@link VersionedCache}, bounded, for values made from something that changes (a
 * channel, a client's settings), and {@link oncePerKey}, for the few values a key set as small as
 * the AWS regions needs.
 */

export interface VersionedCacheOptions<V> {
  /** Values kept at most; past it, the least recently used one is closed and dropped. */
  readonly maxEntries: number;
  /** Releases a value that is replaced or evicted (closes its sockets). */
  readonly close?: (value: V) => void;
}

/**
 * One value per key, kept while the key's version stays the same: a new version gets a new value
 * and the old one is closed; past `maxEntries` keys, the least recently used one is closed and
 * dropped, so a long-lived process does not keep every key's value for ever.
 */
export class VersionedCache<V> {
  readonly #options: VersionedCacheOptions<V>;
  /** By key, least recently used first (a Map keeps insertion order). */
  readonly #entries = new Map<string, { version: unknown; value: V }>();

  constructor(options: VersionedCacheOptions<V>) {
    this.#options = options;
  }

  /** The value of `key` at `version`: the one kept, or one made by `create` (closing the one it replaces). */
  get(key: string, version: unknown, create: () => V): V {
    const entry = this.#entries.get(key);
    this.#entries.delete(key);
    if (entry && entry.version === version) {
      this.#entries.set(key, entry);
      return entry.value;
    }
    if (entry) this.#options.close?.(entry.value);
    const value = create();
    this.#entries.set(key, { version, value });
    this.#evict();
    return value;
  }

  /** Whether the value kept for `key` was made at `version`. */
  isCurrent(key: string, version: unknown): boolean {
    return this.#entries.get(key)?.version === version;
  }

  /** Closes and drops every value. */
  close(): void {
    for (const { value } of this.#entries.values()) this.#options.close?.(value);
    this.#entries.clear();
  }

  #evict(): void {
    while (this.#entries.size > this.#options.maxEntries) {
      const [oldest, entry] = this.#entries.entries().next().value!;
      this.#entries.delete(oldest);
      this.#options.close?.(entry.value);
    }
  }
}

/** `make` memoised per key: each key's value made on its first use and kept (for small key sets: regions). */
export function oncePerKey<K, V>(make: (key: K) => V): (key: K) => V {
  const made = new Map<K, V>();
  return (key) => {
    if (made.has(key)) return made.get(key)!;
    const value = make(key);
    made.set(key, value);
    return value;
  };
}
