import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { getHeader } from '#shared/http/api-gateway.ts';
import { isUlid } from '#shared/ids.ts';
import { MessagingApiClient } from '#shared/line/messaging-client.ts';
import { verifySignature } from '#shared/line/signature.ts';
import { parseWebhookBody, readKnownEvent, sourceKey } from '#shared/line/webhook.ts';
import { fixtureBytes } from './fixtures.ts';

const CHANNEL = { channelId: '1656000001', accessToken: 'access-token-1' };
const SECRET = 'c0ffee00c0ffee00c0ffee00c0ffee00';
const USER = 'U3d3edab4f36c6292e6d8a8131f141b8b';
const HELLO = [{ type: 'text', text: 'Hello' }];

let clock: { t: number; now(): number };
let sandbox: LineSandbox;

beforeEach(async () => {
  clock = {
    t: Date.UTC(2025, 5, 1, 9),
    now() {
      return this.t;
    },
  };
  sandbox = await startLineSandbox({ channels: [CHANNEL], clock });
});

afterEach(async () => {
  await sandbox.stop();
});

/** A webhook receiver that checks what it gets the way the real receiver does. */
const received: { body: Buffer; headers: http.IncomingHttpHeaders }[] = [];
let receiver: http.Server;
let receiverUrl: string;

beforeAll(async () => {
  receiver = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    received.push({ body, headers: req.headers });
    const headers = req.headers as Record<string, string | undefined>;
    const ok = verifySignature(body, getHeader(headers, 'x-line-signature'), [SECRET]);
    res.writeHead(ok ? 200 : 401).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/line/${CHANNEL.channelId}`;
});

afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});

beforeEach(() => {
  received.length = 0;
});

describe('sending webhooks as LINE does', () => {
  it('signs the exact bytes it posts, and the receiver can parse them', async () => {
    const events = [
      sandbox.events.follow({ channelId: CHANNEL.channelId, from: USER }),
      sandbox.events.text({ channelId: CHANNEL.channelId, from: USER, text: 'こんにちは 👋🏽 (love)' }),
      sandbox.events.postback({ channelId: CHANNEL.channelId, from: USER, data: 'action=optout' }),
      sandbox.events.unfollow({ channelId: CHANNEL.channelId, from: USER }),
    ];
    const response = await sandbox.sendWebhook({ url: receiverUrl, channelSecret: SECRET, events });
    expect(response.status).toBe(200);
    const [request] = received;
    expect(request?.body.equals(Buffer.from(response.sentBody))).toBe(true);
    expect(request?.headers['x-line-signature']).toBeDefined();
    const body = parseWebhookBody(request!.body);
    expect(body.events.map((e) => e.type)).toEqual(['follow', 'message', 'postback', 'unfollow']);
    expect(body.events.map((e) => readKnownEvent(e).kind)).toEqual(['known', 'known', 'known', 'known']);
    for (const event of body.events) {
      expect(isUlid(event.webhookEventId)).toBe(true);
      expect(event.timestamp).toBe(clock.now());
      expect(event.deliveryContext.isRedelivery).toBe(false);
      expect(sourceKey(event)).toBe(USER);
    }
    expect(body.events.map((e) => e.replyToken === undefined)).toEqual([false, false, false, true]);
    const text = readKnownEvent(body.events[1]!);
    expect(text.kind === 'known' && text.event.type === 'message' && text.event.message.text).toBe(
      'こんにちは 👋🏽 (love)',
    );
  });

  it('sends standby events without a reply token', async () => {
    const event = sandbox.events.text({
      channelId: CHANNEL.channelId,
      from: USER,
      text: 'hi',
      mode: 'standby',
    });
    expect(event.mode).toBe('standby');
    expect(event.replyToken).toBeUndefined();
  });

  it('redelivers events with the same webhook event IDs, marked as redeliveries', async () => {
    const events = [
      sandbox.events.follow({ channelId: CHANNEL.channelId, from: USER }),
      sandbox.events.unfollow({ channelId: CHANNEL.channelId, from: USER }),
    ];
    await sandbox.sendWebhook({ url: receiverUrl, channelSecret: SECRET, events });
    await sandbox.sendWebhook({ url: receiverUrl, channelSecret: SECRET, events, redeliver: true });
    const [first, second] = received.map((r) => parseWebhookBody(r.body).events);
    expect(second?.map((e) => e.webhookEventId)).toEqual(first?.map((e) => e.webhookEventId));
    expect(second?.every((e) => e.deliveryContext.isRedelivery)).toBe(true);
    expect(second?.[0]?.replyToken).toBeDefined();
    expect(second?.[0]?.replyToken).not.toBe(first?.[0]?.replyToken);
  });

  it('posts a fixture byte for byte', async () => {
    const raw = fixtureBytes('message-text-non-ascii');
    const response = await sandbox.sendWebhook({ url: receiverUrl, channelSecret: SECRET, rawBody: raw });
    expect(response.status).toBe(200);
    expect(received[0]?.body.equals(raw)).toBe(true);
  });

  it('can send a bad signature, which the receiver refuses', async () => {
    const response = await sandbox.sendWebhook({
      url: receiverUrl,
      channelSecret: SECRET,
      events: [],
      signature: 'bm90IGEgc2lnbmF0dXJl',
    });
    expect(response.status).toBe(401);
  });
});

describe('the Messaging API stand-in', () => {
  const client = () =>
    new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: sandbox.url });

  async function rawPost(path: string, body: string, headers: Record<string, string> = {}) {
    const response = await fetch(`${sandbox.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CHANNEL.accessToken}`,
        'content-type': 'application/json',
        ...headers,
      },
      body,
    });
    return {
      status: response.status,
      body: await response.json(),
      requestId: response.headers.get('x-line-request-id'),
    };
  }

  it('answers 400 to a retry key that is not a UUID, and to a body that is not JSON', async () => {
    const badKey = await rawPost('/v2/bot/message/push', JSON.stringify({ to: USER, messages: HELLO }), {
      'x-line-retry-key': 'retry-1',
    });
    expect(badKey.status).toBe(400);
    const notJson = await rawPost('/v2/bot/message/push', '{"to":', {
      'x-line-retry-key': crypto.randomUUID(),
    });
    expect(notJson).toMatchObject({
      status: 400,
      body: { message: expect.stringMatching(/could not be parsed as JSON/) },
    });
    expect(sandbox.deliveries()).toHaveLength(0);
  });

  it('answers 404 to an unknown endpoint and 405 to a GET', async () => {
    expect((await rawPost('/v2/bot/message/broadcast-all', '{}')).status).toBe(404);
    const get = await fetch(`${sandbox.url}/v2/bot/message/push`);
    expect(get.status).toBe(405);
  });

  it('accepts a push without a retry key, as LINE does (Switchboard always sends one)', async () => {
    const response = await rawPost('/v2/bot/message/push', JSON.stringify({ to: USER, messages: HELLO }));
    expect(response.status).toBe(200);
    expect(sandbox.deliveries()[0]?.retryKey).toBeUndefined();
  });

  it('logs every request and counts answers by status', async () => {
    const key = crypto.randomUUID();
    await client().push(USER, HELLO, key);
    await client().push(USER, HELLO, key);
    sandbox.faults.enqueue({ kind: 'status500' });
    await client().push(USER, HELLO, crypto.randomUUID());
    expect(sandbox.log().map((e) => [e.status, e.fault])).toEqual([
      [200, undefined],
      [409, undefined],
      [500, 'status500'],
    ]);
    expect(sandbox.counters()).toMatchObject({
      requests: 3,
      deliveries: 1,
      byStatus: { '200': 1, '409': 1, '500': 1 },
    });
    sandbox.resetRecords();
    expect(sandbox.counters().requests).toBe(0);
  });

  it('applies queued faults to their endpoint only, in order', async () => {
    sandbox.faults.enqueue({ kind: 'status500', endpoint: 'multicast' }, { kind: 'status429' });
    expect(sandbox.faults.pending()).toBe(2);
    expect((await client().push(USER, HELLO, crypto.randomUUID())).kind).toBe('rate-limited');
    expect((await client().push(USER, HELLO, crypto.randomUUID())).kind).toBe('delivered');
    expect((await client().multicast([USER], HELLO, crypto.randomUUID())).kind).toBe('retryable');
    expect(sandbox.faults.pending()).toBe(0);
  });

  it('injects random faults with the given probabilities until cleared', async () => {
    sandbox.faults.setProbabilities({ status500: 1 });
    for (let i = 0; i < 3; i++)
      expect((await client().push(USER, HELLO, crypto.randomUUID())).kind).toBe('retryable');
    sandbox.faults.clear();
    expect((await client().push(USER, HELLO, crypto.randomUUID())).kind).toBe('delivered');
  });

  it('registers reply tokens issued by hand, for one conversation', async () => {
    const token = sandbox.issueReplyToken(CHANNEL.channelId, 'Ca56f94637c0123456789abcdef012345');
    expect((await client().reply(token, HELLO)).kind).toBe('delivered');
    expect(sandbox.deliveriesTo('Ca56f94637c0123456789abcdef012345')).toHaveLength(1);
  });

  it('accepts channels added while running', async () => {
    sandbox.addChannel({ channelId: '1656000009', accessToken: 'late-token' });
    const late = new MessagingApiClient({ channelAccessToken: 'late-token', baseUrl: sandbox.url });
    expect((await late.push(USER, HELLO, crypto.randomUUID())).kind).toBe('delivered');
    expect(sandbox.deliveries()[0]?.channelId).toBe('1656000009');
  });
});
