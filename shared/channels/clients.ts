/**
 * One client per LINE channel (a Messaging API client, a keep-alive sender), kept while the
 * channel is unchanged: keep-alive pays off across a burst of webhooks or a campaign. A channel
 * written since (a new access token, a rotated secret: its `updatedAt` moved) gets a new client and
 * the old one is closed; past `maxEntries` channels, the least recently used one is closed and
 * dropped, so a container serving many channels does not keep every one's sockets for ever.
 */
import { VersionedCache } from '#shared/caches.ts';
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
  readonly #create: (channel: Channel) => T;
  /** By channel id, at the channel's `updatedAt`. */
  readonly #cache: VersionedCache<T>;

  constructor(options: ChannelClientsOptions<T>) {
    this.#create = options.create;
    this.#cache = new VersionedCache({
      maxEntries: options.maxEntries ?? 100,
      ...(options.close ? { close: options.close } : {}),
    });
  }

  /** The channel's client, new if the channel changed since the last one was made. */
  for(channel: Channel): T {
    return this.#cache.get(channel.channelId, channel.updatedAt, () => this.#create(channel));
  }

  /** Whether the last client made for the channel is for it as it is now. */
  isCurrent(channel: Channel): boolean {
    return this.#cache.isCurrent(channel.channelId, channel.updatedAt);
  }

  /** Closes every client. */
  close(): void {
    this.#cache.close();
  }
}
