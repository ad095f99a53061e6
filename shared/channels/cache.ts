/**
 * A per-container cache of channels in front of the channel store: webhooks of one channel arrive
 * in bursts, and reading the secret for each would add a DynamoDB round trip to LINE's 2-second
 * budget. Unknown channels are cached too (briefly), so a flood of bad ids cannot drain the table.
 */
import type { Channel } from './channel.ts';

export interface ChannelLookup {
  /**
   * The channel; with `maxAgeMs`, a cached copy older than that is read again (a secret may have
   * been rotated since: the receiver asks so once before refusing a signature).
   */
  get(channelId: string, options?: { readonly maxAgeMs?: number }): Promise<Channel | undefined>;
}

export interface ChannelCacheOptions {
  readonly ttlMs?: number;
  readonly negativeTtlMs?: number;
  readonly maxEntries?: number;
  readonly clock?: { now(): number };
}

/** Wraps a lookup with a bounded, time-limited cache (insertion order evicts the oldest). */
export function cachedChannels(store: ChannelLookup, options: ChannelCacheOptions = {}): ChannelLookup {
  const ttlMs = options.ttlMs ?? 60_000;
  const negativeTtlMs = options.negativeTtlMs ?? 10_000;
  const maxEntries = options.maxEntries ?? 1_000;
  const clock = options.clock ?? { now: () => Date.now() };
  const entries = new Map<string, { channel: Channel | undefined; loadedAt: number; expiresAt: number }>();
  const pending = new Map<string, Promise<Channel | undefined>>();

  return {
    async get(channelId, getOptions) {
      const now = clock.now();
      const hit = entries.get(channelId);
      const fresh = getOptions?.maxAgeMs === undefined || now - (hit?.loadedAt ?? 0) <= getOptions.maxAgeMs;
      if (hit && hit.expiresAt > now && fresh) return hit.channel;
      const inFlight = pending.get(channelId);
      if (inFlight) return inFlight;
      const load = store
        .get(channelId)
        .then((channel) => {
          entries.delete(channelId);
          const loadedAt = clock.now();
          entries.set(channelId, {
            channel,
            loadedAt,
            expiresAt: loadedAt + (channel ? ttlMs : negativeTtlMs),
          });
          while (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
          return channel;
        })
        .finally(() => pending.delete(channelId));
      pending.set(channelId, load);
      return load;
    },
  };
}
