import { describe, expect, it } from 'vitest';
import { ChannelNotOwnError, OwnChannels } from '#shared/broker/own-channel.ts';
import type { Channel } from '#shared/channels/channel.ts';

const channel = (channelId: string, clientId: string): Channel => ({
  channelId,
  clientId,
  secrets: [{ value: 'secret' }],
  accessToken: `token-${channelId}`,
  autoAnswer: 'reply',
  rules: [],
  updatedAt: 1,
});

const stored = new Map([
  ['ch-a', channel('ch-a', 'client-a')],
  ['ch-b', channel('ch-b', 'client-b')],
]);
const own = new OwnChannels({ get: async (channelId) => stored.get(channelId) });

describe("a client's message channel", () => {
  it('is given to the client that owns it, with its access token', async () => {
    expect((await own.of('client-a', 'ch-a')).accessToken).toBe('token-ch-a');
  });

  it("is refused to another client whose settings name it: nothing is sent through another's account", async () => {
    await expect(own.of('client-a', 'ch-b')).rejects.toThrow(ChannelNotOwnError);
    await expect(own.of('client-a', 'ch-b')).rejects.toThrow(
      "the message channel ch-b is not client client-a's: nothing is sent through it",
    );
  });

  it('is refused when it does not exist (it may be registered later)', async () => {
    await expect(own.of('client-a', 'ch-none')).rejects.toThrow(
      "the client's message channel ch-none does not exist",
    );
  });

  it('is read each time: a channel that changed hands is refused from then on', async () => {
    const live = new Map([['ch', channel('ch', 'client-a')]]);
    const channels = new OwnChannels({ get: async (id) => live.get(id) });
    await expect(channels.of('client-a', 'ch')).resolves.toMatchObject({ clientId: 'client-a' });
    live.set('ch', channel('ch', 'client-b'));
    await expect(channels.of('client-a', 'ch')).rejects.toThrow(ChannelNotOwnError);
  });
});
