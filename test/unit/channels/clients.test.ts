import { describe, expect, it } from 'vitest';
import type { Channel } from '#shared/channels/channel.ts';
import { ChannelClients } from '#shared/channels/clients.ts';

const channel = (channelId: string, updatedAt = 1): Channel =>
  ({ channelId, accessToken: `token-${channelId}-${updatedAt}`, updatedAt }) as unknown as Channel;

function clients(maxEntries?: number) {
  const closed: string[] = [];
  let made = 0;
  const cache = new ChannelClients<{ token: string; n: number }>({
    create: (c) => ({ token: c.accessToken, n: ++made }),
    close: (client) => closed.push(client.token),
    ...(maxEntries === undefined ? {} : { maxEntries }),
  });
  return { cache, closed, made: () => made };
}

describe('ChannelClients', () => {
  it('keeps one client per channel while the channel is unchanged', () => {
    const { cache, made } = clients();
    const a = cache.for(channel('A'));
    expect(cache.for(channel('A'))).toBe(a);
    expect(cache.for(channel('B'))).not.toBe(a);
    expect(made()).toBe(2);
  });

  it('replaces and closes the client of a channel written since (a new token)', () => {
    const { cache, closed } = clients();
    const old = cache.for(channel('A', 1));
    const fresh = cache.for(channel('A', 2));
    expect(fresh).not.toBe(old);
    expect(fresh.token).toBe('token-A-2');
    expect(closed).toEqual(['token-A-1']);
    expect(cache.isCurrent(channel('A', 2))).toBe(true);
    expect(cache.isCurrent(channel('A', 1))).toBe(false);
  });

  it('evicts and closes the least recently used channel past its bound', () => {
    const { cache, closed } = clients(2);
    cache.for(channel('A'));
    cache.for(channel('B'));
    cache.for(channel('A')); // A used last: B is the oldest
    cache.for(channel('C'));
    expect(closed).toEqual(['token-B-1']);
    cache.close();
    expect(closed.sort()).toEqual(['token-A-1', 'token-B-1', 'token-C-1']);
  });
});
