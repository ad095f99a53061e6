/**
 * LINE's monthly message quota as the sandbox keeps it and the Messaging API client reads it:
 * push and multicast count one per recipient (replies are free), a send over the quota is a 429
 * naming the monthly limit and records nothing (its retry key can be used again next month).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import {
  MessagingApiClient,
  type MessagingClient,
  parseMessageQuota,
  QuotaUnreadableError,
} from '#shared/line/messaging-client.ts';

const CHANNEL = { channelId: '1656000001', accessToken: 'access-token-1' };
const HELLO = [{ type: 'text', text: 'Hello' }];
const user = (n: number) => `U${String(n).padStart(32, '0')}`;
const key = (n: number) => `123e4567-e89b-42d3-a456-${String(n).padStart(12, '0')}`;

let sandbox: LineSandbox;
let client: MessagingClient;

beforeEach(async () => {
  sandbox = await startLineSandbox({ channels: [CHANNEL], monthlyQuota: 5 });
  client = new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: sandbox.url });
});

afterEach(async () => {
  await sandbox.stop();
});

describe('the monthly message quota', () => {
  it('counts a push as one and a multicast as its recipients', async () => {
    expect(await client.quota()).toEqual({ limit: 5, used: 0 });
    expect((await client.push(user(1), HELLO, key(1))).kind).toBe('delivered');
    expect((await client.multicast([user(2), user(3)], HELLO, key(2))).kind).toBe('delivered');
    expect(await client.quota()).toEqual({ limit: 5, used: 3 });
  });

  it('refuses a send over the quota with the monthly-limit 429, delivering nothing', async () => {
    sandbox.setMonthlyQuota(5, { [CHANNEL.channelId]: 4 });
    const over = await client.multicast([user(1), user(2)], HELLO, key(3));
    expect(over).toMatchObject({ kind: 'rate-limited', reason: 'monthly-quota' });
    expect(sandbox.deliveries()).toHaveLength(0);
    // Not accepted: the same retry key goes through once the quota allows it.
    sandbox.setMonthlyQuota(10);
    expect((await client.multicast([user(1), user(2)], HELLO, key(3))).kind).toBe('delivered');
  });

  it('says none when the plan sets no limit', async () => {
    sandbox.setMonthlyQuota(undefined);
    expect(await client.quota()).toEqual({ used: 0 });
  });

  it('refuses an unknown token and a wrong method like LINE', async () => {
    const stranger = new MessagingApiClient({ channelAccessToken: 'nobody', baseUrl: sandbox.url });
    await expect(stranger.quota()).rejects.toThrow(QuotaUnreadableError);
    const post = await fetch(`${sandbox.url}/v2/bot/message/quota`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CHANNEL.accessToken}` },
    });
    expect(post.status).toBe(405);
  });
});

describe('parseMessageQuota', () => {
  it.each([
    [{ type: 'limited', value: 1000 }, { totalUsage: 12 }, { limit: 1000, used: 12 }],
    [{ type: 'none' }, { totalUsage: 0 }, { used: 0 }],
  ])('reads %j and %j', (quota, consumption, expected) => {
    expect(parseMessageQuota(quota, consumption)).toEqual(expected);
  });

  it.each([
    [{ type: 'limited' }, { totalUsage: 1 }],
    [{ type: 'other', value: 3 }, { totalUsage: 1 }],
    [{ type: 'none' }, { totalUsage: '1' }],
    [null, null],
  ])('refuses %j with %j', (quota, consumption) => {
    expect(() => parseMessageQuota(quota, consumption)).toThrow(QuotaUnreadableError);
  });
});
