import { describe, expect, it } from 'vitest';
import { type ChannelAdminStore, ChannelsApi } from '#shared/channels/api.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { InvalidChannelError } from '#shared/channels/channel-input.ts';

const NOW = Date.UTC(2026, 10, 26);

function setup() {
  const channels = new Map<string, Channel>();
  const store: ChannelAdminStore = {
    get: async (id) => channels.get(id),
    listByClient: async (clientId) => [...channels.values()].filter((c) => c.clientId === clientId),
    putIfUnchanged: async (channel, seen) => {
      const stored = channels.get(channel.channelId);
      if (stored ? stored.updatedAt !== seen || stored.clientId !== channel.clientId : seen !== undefined)
        return false;
      channels.set(channel.channelId, channel);
      return true;
    },
  };
  return { api: new ChannelsApi(store, () => NOW), channels };
}

async function fieldErrors(promise: Promise<unknown>): Promise<Record<string, string[]>> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof InvalidChannelError) return { ...error.fieldErrors };
    throw error;
  }
  throw new Error('expected an InvalidChannelError');
}

const body = { channelSecret: 'c0ffee00c0ffee00c0ffee00c0ffee00', accessToken: 'token-0123456789' };

describe('the channels API on messy input', () => {
  it('refuses an unknown field at its name instead of dropping it (a typo never passes for the default)', async () => {
    const { api } = setup();
    expect(
      await fieldErrors(
        api.put('acme', '1656000001', {
          ...body,
          autoAnswr: 'reply',
          rules: [{ match: 'contains', pattern: 'hi', answer: 'hello', ignorecase: true }],
        }),
      ),
    ).toEqual({ autoAnswr: ['is not a known field'], 'rules.0.ignorecase': ['is not a known field'] });
  });

  it("takes a GET's answer back as a PUT, keeping the secret and the token", async () => {
    const { api, channels } = setup();
    await api.put('acme', '1656000001', { ...body, greeting: 'Welcome' });
    const view = await api.get('acme', '1656000001');
    await api.put('acme', '1656000001', { ...view, greeting: 'Welcome back' });
    expect(channels.get('1656000001')).toMatchObject({
      greeting: 'Welcome back',
      accessToken: body.accessToken,
      secrets: [{ value: body.channelSecret }],
    });
  });

  it('refuses a rotated secret with spaces, too long, or with unknown fields', async () => {
    const { api } = setup();
    await api.put('acme', '1656000001', body);
    for (const channelSecret of ['        ', 'a b c d e f', 'x'.repeat(257)]) {
      expect(
        Object.keys(await fieldErrors(api.rotateSecret('acme', '1656000001', { channelSecret }))),
      ).toEqual(['channelSecret']);
    }
    expect(
      await fieldErrors(
        api.rotateSecret('acme', '1656000001', {
          channelSecret: 'feedface0000feedface0000feedface',
          grace: 1,
        }),
      ),
    ).toEqual({ grace: ['is not a known field'] });
  });
});
