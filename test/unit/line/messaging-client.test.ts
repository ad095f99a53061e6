import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import {
  InvalidSendRequestError,
  MessagingApiClient,
  type MessagingClient,
  type PreparedSend,
  preparePush,
  type SendOutcome,
} from '#shared/line/messaging-client.ts';
import { retryKeyStillSafe, webhookRetryKey } from '#shared/retry-keys.ts';

const CHANNEL = { channelId: '1656000001', accessToken: 'access-token-1' };
const OTHER_CHANNEL = { channelId: '1656000002', accessToken: 'access-token-2' };
const USER = 'U4af4980629a1b2c3d4e5f60718293a4b';
const HELLO = [{ type: 'text', text: 'Hello, user' }] as const;
const KEY = '123e4567-e89b-12d3-a456-426614174000';
const HOUR = 60 * 60 * 1000;

let clock: { t: number; now(): number };
let sandbox: LineSandbox;
let client: MessagingClient;

beforeEach(async () => {
  clock = {
    t: Date.UTC(2025, 5, 1, 9),
    now() {
      return this.t;
    },
  };
  sandbox = await startLineSandbox({ channels: [CHANNEL, OTHER_CHANNEL], clock });
  client = new MessagingApiClient({
    channelAccessToken: CHANNEL.accessToken,
    baseUrl: sandbox.url,
    timeoutMs: 5000,
  });
});

afterEach(async () => {
  await sandbox.stop();
});

function expectKind<K extends SendOutcome['kind']>(
  outcome: SendOutcome,
  kind: K,
): Extract<SendOutcome, { kind: K }> {
  expect(outcome.kind, JSON.stringify(outcome)).toBe(kind);
  return outcome as Extract<SendOutcome, { kind: K }>;
}

describe('push', () => {
  it('is delivered once, with its retry key, and says so with LINE’s request ID', async () => {
    const outcome = expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    expect(outcome.status).toBe(200);
    expect(outcome.sentMessages).toHaveLength(1);
    const [delivery] = sandbox.deliveries();
    expect(delivery).toMatchObject({
      channelId: CHANNEL.channelId,
      endpoint: 'push',
      to: [USER],
      messages: HELLO,
      retryKey: KEY,
      requestId: outcome.requestId,
    });
  });

  it('answers a repeat of an accepted retry key with already-delivered, and delivers nothing more', async () => {
    const first = expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    const again = expectKind(await client.push(USER, HELLO, KEY), 'already-delivered');
    expect(again.acceptedRequestId).toBe(first.requestId);
    expect(again.requestId).not.toBe(first.requestId);
    expect(sandbox.deliveriesTo(USER)).toHaveLength(1);
  });

  it('keeps retry keys per channel', async () => {
    const other = new MessagingApiClient({
      channelAccessToken: OTHER_CHANNEL.accessToken,
      baseUrl: sandbox.url,
    });
    expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    expectKind(await other.push(USER, HELLO, KEY), 'delivered');
  });

  it('delivers again once LINE has forgotten the key (24 h), which is why a key is not retried after 23 h', async () => {
    const firstAttemptAt = clock.now();
    expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    clock.t += 23 * HOUR;
    expect(retryKeyStillSafe(firstAttemptAt, clock.now())).toBe(false);
    expectKind(await client.push(USER, HELLO, KEY), 'already-delivered');
    clock.t += HOUR;
    expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    expect(sandbox.duplicates()).toEqual([{ recipient: USER, messages: HELLO, count: 2 }]);
  });

  it('is retryable after a 500, which delivered nothing, and the retry delivers once', async () => {
    sandbox.faults.enqueue({ kind: 'status500' });
    const failed = expectKind(await client.push(USER, HELLO, KEY), 'retryable');
    expect(failed).toMatchObject({ reason: 'server-error', status: 500, maybeDelivered: true });
    expect(sandbox.deliveries()).toHaveLength(0);
    expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    expect(sandbox.deliveriesTo(USER)).toHaveLength(1);
  });

  it('is retryable after a timeout; the slow request was delivered, so the retry is already-delivered', async () => {
    sandbox.faults.enqueue({ kind: 'delay', ms: 400 });
    const timedOut = expectKind(await client.push(USER, HELLO, KEY, { timeoutMs: 50 }), 'retryable');
    expect(timedOut).toMatchObject({ reason: 'timeout', maybeDelivered: true });
    await vi.waitFor(() => expect(sandbox.deliveries()).toHaveLength(1), { timeout: 5000 });
    expectKind(await client.push(USER, HELLO, KEY), 'already-delivered');
    expect(sandbox.deliveriesTo(USER)).toHaveLength(1);
  });

  it('is retryable when the connection drops after LINE delivered; the retry does not deliver twice', async () => {
    sandbox.faults.enqueue({ kind: 'dropAfterDeliver' });
    const dropped = expectKind(await client.push(USER, HELLO, KEY), 'retryable');
    expect(dropped).toMatchObject({ reason: 'network', maybeDelivered: true });
    expect(sandbox.deliveriesTo(USER)).toHaveLength(1);
    expect(sandbox.log().at(-1)?.status).toBe('dropped');
    expectKind(await client.push(USER, HELLO, KEY), 'already-delivered');
    expect(sandbox.deliveriesTo(USER)).toHaveLength(1);
    expect(sandbox.duplicates()).toEqual([]);
  });

  it('resends the very same bytes and key on a retry', async () => {
    const sent: { body: string; key: string | null }[] = [];
    const recording = new MessagingApiClient({
      channelAccessToken: CHANNEL.accessToken,
      baseUrl: sandbox.url,
      fetch: (input, init) => {
        sent.push({ body: String(init?.body), key: new Headers(init?.headers).get('x-line-retry-key') });
        return fetch(input, init);
      },
    });
    const prepared: PreparedSend = preparePush(
      USER,
      [{ type: 'text', text: 'こんにちは 👋 "quoted"' }],
      KEY,
      {
        notificationDisabled: true,
      },
    );
    sandbox.faults.enqueue({ kind: 'status500' });
    expectKind(await recording.send(prepared), 'retryable');
    expectKind(await recording.send(prepared), 'delivered');
    expect(sent).toHaveLength(2);
    expect(sent[1]).toEqual(sent[0]);
    expect(JSON.parse(sent[0]!.body)).toEqual({
      to: USER,
      messages: [{ type: 'text', text: 'こんにちは 👋 "quoted"' }],
      notificationDisabled: true,
    });
  });

  it('is rate-limited per endpoint beyond LINE’s rate, and goes through once the bucket refills', async () => {
    sandbox.setRateLimits({ push: 2, multicast: 1 });
    expectKind(await client.push(USER, HELLO, webhookRetryKey('01FZ74A0TDDPYRVKNK77XKC3ZR')), 'delivered');
    expectKind(await client.push(USER, HELLO, crypto.randomUUID()), 'delivered');
    const limited = expectKind(await client.push(USER, HELLO, KEY), 'rate-limited');
    expect(limited.reason).toBe('rate');
    // Multicast has its own allowance: the pushes did not use it up.
    expectKind(
      await client.multicast([USER], HELLO, webhookRetryKey('01FZ74ASS536FW97EX38NKCZQK')),
      'delivered',
    );
    expectKind(await client.multicast([USER], HELLO, crypto.randomUUID()), 'rate-limited');
    expect(sandbox.deliveries()).toHaveLength(3);
    clock.t += 1000;
    expectKind(await client.push(USER, HELLO, KEY), 'delivered');
    sandbox.setRateLimit(Number.POSITIVE_INFINITY);
    for (let i = 0; i < 5; i++) expectKind(await client.push(USER, HELLO, crypto.randomUUID()), 'delivered');
  });

  it('keeps LINE’s table by default: multicast 200 requests a second, push 2,000', async () => {
    const fresh = await startLineSandbox({ channels: [CHANNEL], clock });
    try {
      const c = new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: fresh.url });
      const multicasts = await Promise.all(
        Array.from({ length: 201 }, () => c.multicast([USER], HELLO, crypto.randomUUID())),
      );
      expect(multicasts.filter((o) => o.kind === 'delivered')).toHaveLength(200);
      const limited = multicasts.find((o) => o.kind === 'rate-limited');
      expect(limited).toMatchObject({
        reason: 'rate',
        message: 'The API rate limit has been exceeded. Try again later.',
      });
      const pushes = await Promise.all(
        Array.from({ length: 250 }, () => c.push(USER, HELLO, crypto.randomUUID())),
      );
      expect(pushes.every((o) => o.kind === 'delivered')).toBe(true);
    } finally {
      await fresh.stop();
    }
  });

  it('tells a used-up monthly quota from a passing rate limit', async () => {
    sandbox.faults.enqueue({ kind: 'status429', monthly: true });
    sandbox.faults.burst429(1);
    expect(expectKind(await client.push(USER, HELLO, KEY), 'rate-limited').reason).toBe('monthly-quota');
    expect(expectKind(await client.push(USER, HELLO, KEY), 'rate-limited').reason).toBe('rate');
    expect(sandbox.deliveries()).toHaveLength(0);
  });

  it('is rejected, finally, with an unknown access token', async () => {
    const stranger = new MessagingApiClient({ channelAccessToken: 'revoked', baseUrl: sandbox.url });
    const outcome = expectKind(await stranger.push(USER, HELLO, KEY), 'rejected');
    expect(outcome.status).toBe(401);
    expect(outcome.message).toMatch(/^Authentication failed/);
  });

  it('is rejected with LINE’s details for too many messages or an empty text', async () => {
    const six = Array.from({ length: 6 }, (_, i) => ({ type: 'text', text: `m${i}` }));
    const tooMany = expectKind(await client.push(USER, six, KEY), 'rejected');
    expect(tooMany).toMatchObject({
      status: 400,
      message: 'The request body has 1 error(s)',
      details: [{ message: 'Size must be between 1 and 5', property: 'messages' }],
    });
    const empty = expectKind(await client.push(USER, [{ type: 'text', text: '' }], KEY), 'rejected');
    expect(empty.details).toEqual([{ message: 'May not be empty', property: 'messages[0].text' }]);
    expect(sandbox.deliveries()).toHaveLength(0);
  });

  it('refuses to send without a UUID retry key', async () => {
    await expect(client.push(USER, HELLO, 'not-a-uuid')).rejects.toThrow(InvalidSendRequestError);
    await expect(client.send({ endpoint: 'push', body: '{}' })).rejects.toThrow(/needs a UUID retry key/);
  });

  it('is retryable, and certainly not delivered, when nothing listens', async () => {
    const url = sandbox.url;
    await sandbox.stop();
    const outcome = expectKind(
      await new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: url }).push(
        USER,
        HELLO,
        KEY,
      ),
      'retryable',
    );
    expect(outcome).toMatchObject({ reason: 'network', maybeDelivered: false });
    sandbox = await startLineSandbox({ channels: [CHANNEL], clock });
  });
});

describe('multicast', () => {
  it('delivers to every recipient once per retry key', async () => {
    const users = Array.from({ length: 500 }, (_, i) => `U${String(i).padStart(32, '0')}`);
    const outcome = expectKind(await client.multicast(users, HELLO, KEY), 'delivered');
    expect(outcome.sentMessages).toEqual([]);
    expectKind(await client.multicast(users, HELLO, KEY), 'already-delivered');
    const counters = sandbox.counters();
    expect(counters.deliveries).toBe(1);
    expect(counters.perRecipient.size).toBe(500);
    expect([...counters.perRecipient.values()].every((n) => n === 1)).toBe(true);
    expect(counters.byStatus).toEqual({ '200': 1, '409': 1 });
  });

  it('is rejected beyond 500 recipients', async () => {
    const users = Array.from({ length: 501 }, (_, i) => `U${i}`);
    const outcome = expectKind(await client.multicast(users, HELLO, KEY), 'rejected');
    expect(outcome.details).toEqual([{ message: 'Size must be between 1 and 500', property: 'to' }]);
  });
});

describe('reply', () => {
  it('delivers once to the conversation of the event; the token cannot be used again', async () => {
    const event = sandbox.events.text({ channelId: CHANNEL.channelId, from: USER, text: 'hi' });
    const first = expectKind(await client.reply(event.replyToken!, HELLO), 'delivered');
    expect(sandbox.deliveries()).toEqual([
      expect.objectContaining({
        endpoint: 'reply',
        to: [USER],
        replyToken: event.replyToken,
        requestId: first.requestId,
      }),
    ]);
    const again = expectKind(await client.reply(event.replyToken!, HELLO), 'rejected');
    expect(again).toMatchObject({ status: 400, message: 'Invalid reply token' });
    expect(sandbox.deliveries()).toHaveLength(1);
  });

  it('is rejected once the token has expired, or with another channel’s token', async () => {
    const stale = sandbox.events.follow({ channelId: CHANNEL.channelId, from: USER });
    clock.t += 61_000;
    expect(expectKind(await client.reply(stale.replyToken!, HELLO), 'rejected').message).toBe(
      'Invalid reply token',
    );
    const foreign = sandbox.events.follow({ channelId: OTHER_CHANNEL.channelId, from: USER });
    expect(expectKind(await client.reply(foreign.replyToken!, HELLO), 'rejected').message).toBe(
      'Invalid reply token',
    );
  });

  it('answers a group message in the group', async () => {
    const event = sandbox.events.text({
      channelId: CHANNEL.channelId,
      from: { type: 'group', groupId: 'Ca56f94637c0123456789abcdef012345', userId: USER },
      text: '@bot hi',
    });
    expectKind(await client.reply(event.replyToken!, HELLO), 'delivered');
    expect(sandbox.deliveries()[0]?.to).toEqual(['Ca56f94637c0123456789abcdef012345']);
  });

  it('shares single use between an event and its redelivered copy', async () => {
    const event = sandbox.events.postback({ channelId: CHANNEL.channelId, from: USER, data: 'action=buy' });
    const redelivered = sandbox.events.redelivered(event);
    expect(redelivered.webhookEventId).toBe(event.webhookEventId);
    expect(redelivered.deliveryContext.isRedelivery).toBe(true);
    expect(redelivered.replyToken).not.toBe(event.replyToken);
    expectKind(await client.reply(redelivered.replyToken!, HELLO), 'delivered');
    expectKind(await client.reply(event.replyToken!, HELLO), 'rejected');
    expect(sandbox.deliveriesTo(USER)).toHaveLength(1);
  });

  it('refuses a redelivered token 20 minutes after the event', async () => {
    const event = sandbox.events.text({ channelId: CHANNEL.channelId, from: USER, text: 'hi' });
    clock.t += 20 * 60 * 1000;
    const late = sandbox.events.redelivered(event);
    expectKind(await client.reply(late.replyToken!, HELLO), 'rejected');
  });

  it('never carries a retry key: the client refuses, LINE would answer 400', async () => {
    const event = sandbox.events.follow({ channelId: CHANNEL.channelId, from: USER });
    const body = JSON.stringify({ replyToken: event.replyToken, messages: HELLO });
    await expect(client.send({ endpoint: 'reply', body, retryKey: KEY })).rejects.toThrow(
      InvalidSendRequestError,
    );
    const response = await fetch(`${sandbox.url}/v2/bot/message/reply`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CHANNEL.accessToken}`,
        'content-type': 'application/json',
        'x-line-retry-key': KEY,
      },
      body,
    });
    expect(response.status).toBe(400);
    expect(sandbox.deliveries()).toHaveLength(0);
  });
});
