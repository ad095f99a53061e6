import { describe, expect, it } from 'vitest';
import { cachedChannels } from '#shared/channels/cache.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { channel, ManualClock } from '../webhooks/fakes.ts';

/** A channel store that counts its reads; `release()` lets held reads finish. */
class CountingStore {
  readonly channels = new Map<string, Channel>();
  readonly reads: string[] = [];
  hold = false;
  #held: (() => void)[] = [];
  async get(channelId: string): Promise<Channel | undefined> {
    this.reads.push(channelId);
    if (this.hold) await new Promise<void>((resolve) => this.#held.push(resolve));
    return this.channels.get(channelId);
  }
  release(): void {
    for (const resolve of this.#held.splice(0)) resolve();
  }
  readsOf(channelId: string): number {
    return this.reads.filter((id) => id === channelId).length;
  }
}

function setup(options: { maxEntries?: number } = {}) {
  const clock = new ManualClock();
  const store = new CountingStore();
  const a = channel({ channelId: 'ch-a' });
  store.channels.set('ch-a', a);
  const cache = cachedChannels(store, { ttlMs: 60_000, negativeTtlMs: 10_000, clock, ...options });
  return { clock, store, cache, a };
}

describe('cachedChannels', () => {
  it('reads a channel once while it is fresh', async () => {
    const { store, cache, clock, a } = setup();
    expect(await cache.get('ch-a')).toEqual(a);
    clock.advance(59_999);
    expect(await cache.get('ch-a')).toEqual(a);
    expect(store.readsOf('ch-a')).toBe(1);
  });

  it('reads it again once the TTL has passed, and sees the change (e.g. a rotated secret)', async () => {
    const { store, cache, clock } = setup();
    await cache.get('ch-a');
    const changed = channel({ channelId: 'ch-a', fallback: 'changed' });
    store.channels.set('ch-a', changed);
    clock.advance(60_000);
    expect(await cache.get('ch-a')).toEqual(changed);
    expect(store.readsOf('ch-a')).toBe(2);
  });

  it('remembers an unknown channel for the shorter negative TTL', async () => {
    const { store, cache, clock } = setup();
    for (let i = 0; i < 50; i++) expect(await cache.get('nope')).toBeUndefined();
    expect(store.readsOf('nope')).toBe(1);
    // Created meanwhile: found once the negative entry expires.
    store.channels.set('nope', channel({ channelId: 'nope' }));
    clock.advance(9_999);
    expect(await cache.get('nope')).toBeUndefined();
    clock.advance(1);
    expect((await cache.get('nope'))?.channelId).toBe('nope');
    expect(store.readsOf('nope')).toBe(2);
  });

  it('lets concurrent requests for one channel share one read', async () => {
    const { store, cache, a } = setup();
    store.hold = true;
    const gets = Array.from({ length: 20 }, () => cache.get('ch-a'));
    store.release();
    expect(await Promise.all(gets)).toEqual(Array(20).fill(a));
    expect(store.readsOf('ch-a')).toBe(1);
  });

  it('does not cache a failed read: the next request tries again', async () => {
    const clock = new ManualClock();
    let calls = 0;
    const cache = cachedChannels(
      {
        async get() {
          calls++;
          if (calls === 1) throw new Error('ProvisionedThroughputExceededException');
          return channel({ channelId: 'ch-a' });
        },
      },
      { clock },
    );
    await expect(cache.get('ch-a')).rejects.toThrow('ProvisionedThroughputExceededException');
    expect((await cache.get('ch-a'))?.channelId).toBe('ch-a');
  });

  it('holds at most maxEntries channels, dropping the oldest', async () => {
    const { store, cache } = setup({ maxEntries: 3 });
    for (const id of ['u1', 'u2', 'u3', 'u4']) await cache.get(id);
    await cache.get('u4');
    await cache.get('u2');
    await cache.get('u3');
    expect(store.readsOf('u2') + store.readsOf('u3') + store.readsOf('u4')).toBe(3);
    await cache.get('u1');
    expect(store.readsOf('u1')).toBe(2);
  });

  it('stays bounded under a flood of distinct unknown ids', async () => {
    const { store, cache } = setup({ maxEntries: 100 });
    await cache.get('ch-a');
    for (let i = 0; i < 1_000; i++) await cache.get(`bogus-${i}`);
    // Only the last 100 are still held: the first ones and the real channel have been evicted.
    await cache.get('bogus-999');
    await cache.get('bogus-0');
    await cache.get('ch-a');
    expect(store.readsOf('bogus-999')).toBe(1);
    expect(store.readsOf('bogus-0')).toBe(2);
    expect(store.readsOf('ch-a')).toBe(2);
  });
});
