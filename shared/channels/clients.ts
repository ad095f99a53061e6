/**
 * One client per LINE channel (a Messaging API client, a keep-alive sender), kept while the
 * channel is unchanged: keep-alive pays off across a burst of webhooks or a campaign. A channel
 * written since (a new access token, a rotated secret: its `updatedAt` moved) gets a new client and
 * the old one is closed; past `maxEntries` channels, the least recently used one is closed and
 * dropped, so a container serving many channels does not keep every one's sockets for ever.
 */
import type { Channel } from './channel.ts';

export interface ChannelClientsOptions<T> {
  /** Builds the client of a channel as it is now. */
  readonly create: (channel: Channel) => T;
  /** Releases a client that is replaced or evicted (closes its sockets). */
  readonly close?: (client: T) => void;
  /** Channels kept at most. Default 100. */
  readonly maxEntries?: number;
}

export class ChannelClients<T> {
  readonly #options: ChannelClientsOptions<T>;
  readonly #maxEntries: number;
  /** By channel id, least recently used first (a Map keeps insertion order). */
  readonly #entries = new Map<string, { version: number; client: T }>();

  constructor(options: ChannelClientsOptions<T>) {
    this.#options = options;
    this.#maxEntries = options.maxEntries ?? 100;
  }

  /** The channel's client, new if the channel changed since the last one was made. */
  for(channel: Channel): T {
    const entry = this.#entries.get(channel.channelId);
    this.#entries.delete(channel.channelId);
    if (entry && entry.version === channel.updatedAt) {
      this.#entries.set(channel.channelId, entry);
      return entry.client;
    }
    if (entry) this.#options.close?.(entry.client);
    const client = this.#options.create(channel);
    this.#entries.set(channel.channelId, { version: channel.updatedAt, client });
    this.#evict();
    return client;
  }

  /** Whether the last client made for the channel is for it as it is now. */
  isCurrent(channel: Channel): boolean {
    return this.#entries.get(channel.channelId)?.version === channel.updatedAt;
  }

  /** Closes every client. */
  close(): void {
    for (const { client } of this.#entries.values()) this.#options.close?.(client);
    this.#entries.clear();
  }

  #evict(): void {
    while (this.#entries.size > this.#maxEntries) {
      const [oldest, entry] = this.#entries.entries().next().value!;
      this.#entries.delete(oldest);
      this.#options.close?.(entry.client);
    }
  }
}
