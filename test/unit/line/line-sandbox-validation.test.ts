/**
 * The LINE sandbox refuses what LINE refuses, checked with LINE's official client (`@line/bot-sdk`)
 * and raw requests: message objects by type, `to` as LINE ids, the validation endpoints, and
 * the `sentMessages` of a 200.
 */
import { HTTPFetchError, messagingApi } from '@line/bot-sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';

const CHANNEL = { channelId: '1656000001', accessToken: 'access-token-1' };
const USER = 'U3d3edab4f36c6292e6d8a8131f141b8b';
const GROUP = 'Ca56f94637cc4347f90a25382909b24b9';
const ROOM = 'Ra8dbf4673c4c812cd491258042226c99';

let sandbox: LineSandbox;
let client: messagingApi.MessagingApiClient;

beforeEach(async () => {
  sandbox = await startLineSandbox({ channels: [CHANNEL] });
  client = new messagingApi.MessagingApiClient({
    channelAccessToken: CHANNEL.accessToken,
    baseURL: sandbox.url,
  });
});

afterEach(async () => {
  await sandbox.stop();
});

/** What the official client's 4xx carried: the status and LINE's error body. */
async function refusal(call: Promise<unknown>): Promise<{ status: number; body: unknown }> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof HTTPFetchError)) throw new Error(`expected an HTTPFetchError, got ${String(error)}`);
  return { status: error.status, body: JSON.parse(error.body) };
}

async function rawPost(path: string, body: unknown, token = CHANNEL.accessToken) {
  const response = await fetch(`${sandbox.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

describe('message objects are checked by type, as LINE does', () => {
  const refused: [string, unknown, string, string][] = [
    [
      'an unknown type',
      { type: 'poll', text: 'x' },
      'messages[0].type',
      'Must be one of the following values',
    ],
    [
      'a sticker without stickerId',
      { type: 'sticker', packageId: '446' },
      'messages[0].stickerId',
      'must be specified',
    ],
    ['an empty text', { type: 'text', text: '' }, 'messages[0].text', 'May not be empty'],
    ['a text of 5,001 characters', { type: 'text', text: 'あ'.repeat(5001) }, 'messages[0].text', 'Length'],
    [
      'an http image',
      {
        type: 'image',
        originalContentUrl: 'http://example.com/a.jpg',
        previewImageUrl: 'https://example.com/p.jpg',
      },
      'messages[0].originalContentUrl',
      'HTTPS',
    ],
    [
      'a flex without altText',
      { type: 'flex', contents: { type: 'bubble' } },
      'messages[0].altText',
      'must be specified',
    ],
    ['a flex without contents', { type: 'flex', altText: 'hi' }, 'messages[0].contents', 'must be specified'],
    [
      'an audio without duration',
      { type: 'audio', originalContentUrl: 'https://e.com/a.m4a' },
      'messages[0].duration',
      'must be specified',
    ],
    [
      'a template of an unknown kind',
      { type: 'template', altText: 'a', template: { type: 'list' } },
      'messages[0].template.type',
      'Must be one of',
    ],
  ];

  it.each(refused)(
    'push of %s: 400 with the property, nothing delivered',
    async (_name, message, property, text) => {
      const { status, body } = await refusal(client.pushMessage({ to: USER, messages: [message as never] }));
      expect(status).toBe(400);
      expect(body).toEqual({
        message: 'The request body has 1 error(s)',
        details: [{ property, message: expect.stringContaining(text) }],
      });
      expect(sandbox.deliveries()).toHaveLength(0);
    },
  );

  it('names each problem of each message, at its index', async () => {
    const { body } = await refusal(
      client.pushMessage({
        to: USER,
        messages: [{ type: 'text', text: 'ok' }, { type: 'sticker' } as never],
      }),
    );
    expect(body).toMatchObject({
      message: 'The request body has 2 error(s)',
      details: [
        { property: 'messages[1].packageId', message: 'must be specified' },
        { property: 'messages[1].stickerId', message: 'must be specified' },
      ],
    });
  });

  it('accepts the reference examples of each type', async () => {
    const messages = [
      { type: 'text', text: 'Hello, world' },
      { type: 'sticker', packageId: '446', stickerId: '1988' },
      {
        type: 'image',
        originalContentUrl: 'https://example.com/o.jpg',
        previewImageUrl: 'https://example.com/p.jpg',
      },
      { type: 'location', title: 'my location', address: '1-3 Kioicho', latitude: 35.67, longitude: 139.73 },
      {
        type: 'flex',
        altText: 'This is a Flex Message',
        contents: { type: 'bubble', body: { type: 'box' } },
      },
    ] as messagingApi.Message[];
    const answer = await client.pushMessage({ to: USER, messages });
    expect(answer.sentMessages).toHaveLength(5);
    expect(sandbox.deliveries()).toHaveLength(1);
  });
});

describe('recipients are LINE ids', () => {
  it('pushes to a user, a group or a room id', async () => {
    for (const to of [USER, GROUP, ROOM])
      await client.pushMessage({ to, messages: [{ type: 'text', text: 'hi' }] });
    expect(sandbox.deliveries().map((d) => d.to)).toEqual([[USER], [GROUP], [ROOM]]);
  });

  it.each([
    ['a phone number', '+819012345678'],
    ['an uppercase id', USER.toUpperCase()],
    ['a short id', 'U123'],
  ])('refuses a push to %s as LINE does', async (_name, to) => {
    const { status, body } = await refusal(
      client.pushMessage({ to, messages: [{ type: 'text', text: 'hi' }] }),
    );
    expect(status).toBe(400);
    expect(body).toEqual({
      message: "The property, 'to', in the request body is invalid (line: -, column: -)",
    });
    expect(sandbox.deliveries()).toHaveLength(0);
  });

  it('refuses a multicast to a group (users only)', async () => {
    const { status } = await refusal(
      client.multicast({ to: [USER, GROUP], messages: [{ type: 'text', text: 'hi' }] }),
    );
    expect(status).toBe(400);
    expect(sandbox.deliveries()).toHaveLength(0);
  });
});

describe('the 200 of a send', () => {
  it('push: sentMessages with an id each, and a quote token for a quotable message', async () => {
    const answer = await client.pushMessage({
      to: USER,
      messages: [
        { type: 'text', text: 'hi' },
        { type: 'location', title: 't', address: 'a', latitude: 1, longitude: 2 },
      ],
    });
    expect(answer.sentMessages).toEqual([
      { id: expect.stringMatching(/^\d{18}$/), quoteToken: expect.stringMatching(/^[\w-]{20,}$/) },
      { id: expect.stringMatching(/^\d{18}$/) },
    ]);
  });

  it('multicast: {} as LINE documents it', async () => {
    expect(await client.multicast({ to: [USER], messages: [{ type: 'text', text: 'hi' }] })).toEqual({});
  });
});

describe("LINE's validation endpoints", () => {
  const good = [{ type: 'text', text: 'hi' }] as messagingApi.Message[];
  const bad = [{ type: 'sticker', packageId: '446' }] as messagingApi.Message[];

  it('answers 200 {} to valid messages, through the official client', async () => {
    expect(await client.validatePush({ messages: good })).toEqual({});
    expect(await client.validateMulticast({ messages: good })).toEqual({});
    expect(await client.validateReply({ messages: good })).toEqual({});
    expect(await client.validateNarrowcast({ messages: good })).toEqual({});
    expect(await client.validateBroadcast({ messages: good })).toEqual({});
  });

  it("answers 400 in LINE's shape, delivers nothing and takes no quota", async () => {
    sandbox.setMonthlyQuota(1);
    for (const call of [
      client.validatePush({ messages: bad }),
      client.validateMulticast({ messages: bad }),
    ]) {
      expect(await refusal(call)).toEqual({
        status: 400,
        body: {
          message: 'The request body has 1 error(s)',
          details: [{ message: 'must be specified', property: 'messages[0].stickerId' }],
        },
      });
    }
    await client.validatePush({ messages: good });
    expect(sandbox.deliveries()).toHaveLength(0);
    await client.pushMessage({ to: USER, messages: good });
    expect(sandbox.deliveries()).toHaveLength(1);
  });

  it('needs the channel token, and refuses more than 5 messages', async () => {
    expect((await rawPost('/v2/bot/message/validate/push', { messages: good }, 'nope')).status).toBe(401);
    const six = await rawPost('/v2/bot/message/validate/push', { messages: Array(6).fill(good[0]) });
    expect(six).toMatchObject({ status: 400, body: { details: [{ property: 'messages' }] } });
  });

  it('is struck only by a fault queued for it', async () => {
    sandbox.faults.enqueue({ kind: 'status500', endpoint: 'validate' });
    expect((await rawPost('/v2/bot/message/validate/push', { messages: good })).status).toBe(500);
    sandbox.faults.enqueue({ kind: 'status500' });
    expect((await rawPost('/v2/bot/message/validate/push', { messages: good })).status).toBe(200);
    expect(sandbox.faults.pending()).toBe(1);
  });
});
