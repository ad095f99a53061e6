import { describe, expect, it } from 'vitest';
import { cachedChannels } from '#shared/channels/cache.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { rotateSecret } from '#shared/channels/channel-input.ts';
import { signBody } from '#shared/line/signature.ts';
import { InvalidWebhookBodyError, type WebhookEvent } from '#shared/line/webhook.ts';
import type { QueuedWebhookEvent } from '#shared/webhooks/queue-message.ts';
import {
  MAX_WEBHOOK_BODY_BYTES,
  makeReceiveWebhook,
  PayloadTooLargeError,
  SignatureError,
  UnknownChannelError,
} from '#shared/webhooks/receive.ts';
import { fixtureBytes } from '../line/fixtures.ts';
import { channel, eventBuilders, ManualClock, MemoryQueue, SECRET, T0, USER } from './fakes.ts';

const CHANNEL_ID = '1656000001';
const NEW_SECRET = 'feedface0000feedface0000feedface';

function setup(known: Channel = channel()) {
  const clock = new ManualClock();
  const queue = new MemoryQueue();
  const reads: string[] = [];
  const receive = makeReceiveWebhook({
    channels: {
      async get(channelId) {
        reads.push(channelId);
        return channelId === known.channelId ? known : undefined;
      },
    },
    queue,
    clock,
  });
  return { clock, queue, receive, reads };
}

function signed(body: Uint8Array | string, secret = SECRET, header = 'x-line-signature') {
  const rawBody = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return { channelId: CHANNEL_ID, headers: { [header]: signBody(rawBody, secret) }, rawBody };
}

function bodyOf(events: readonly WebhookEvent[]): string {
  return JSON.stringify({ destination: 'U0000000000000000000000000000000b', events });
}

const queued = (body: string) => JSON.parse(body) as QueuedWebhookEvent;

describe('receiveWebhook', () => {
  it('stashes every event of a correctly signed body, each deduplicated by its webhookEventId', async () => {
    const { receive, queue } = setup();
    const raw = fixtureBytes('several-events');
    const result = await receive(signed(raw));
    expect(result).toMatchObject({ accepted: 3, setAside: [] });
    const sent = JSON.parse(raw.toString('utf8')) as { destination: string; events: WebhookEvent[] };
    expect(queue.entries.map((e) => e.dedupeId)).toEqual(sent.events.map((e) => e.webhookEventId));
    // The ids the receiver logs, so one event can be followed to the processor and the send.
    expect(result.eventIds).toEqual(sent.events.map((e) => e.webhookEventId));
    expect(queue.entries.map((e) => queued(e.body))).toEqual(
      sent.events.map((event) => ({
        v: 1,
        channelId: CHANNEL_ID,
        destination: sent.destination,
        receivedAt: T0,
        event,
      })),
    );
  });

  it('groups events by conversation of the channel, keeping their order', async () => {
    const { receive, queue } = setup();
    const events = eventBuilders();
    const group = { type: 'group' as const, groupId: 'Ca56f94637c0000', userId: USER };
    const room = { type: 'room' as const, roomId: 'Ra8dbf4673c0000', userId: USER };
    const batch = [
      events.text({ channelId: CHANNEL_ID, from: USER, text: 'one' }),
      events.text({ channelId: CHANNEL_ID, from: group, text: 'in the group' }),
      events.text({ channelId: CHANNEL_ID, from: USER, text: 'two' }),
      events.text({ channelId: CHANNEL_ID, from: room, text: 'in the room' }),
      events.unfollow({ channelId: CHANNEL_ID, from: 'Uother' }),
      events.text({ channelId: CHANNEL_ID, from: USER, text: 'three' }),
    ];
    expect(await receive(signed(bodyOf(batch)))).toMatchObject({ accepted: 6, setAside: [] });
    expect(queue.entries.map((e) => [e.groupId, e.dedupeId])).toEqual([
      [`${CHANNEL_ID}:${USER}`, batch[0]!.webhookEventId],
      [`${CHANNEL_ID}:Ca56f94637c0000`, batch[1]!.webhookEventId],
      [`${CHANNEL_ID}:${USER}`, batch[2]!.webhookEventId],
      [`${CHANNEL_ID}:Ra8dbf4673c0000`, batch[3]!.webhookEventId],
      [`${CHANNEL_ID}:Uother`, batch[4]!.webhookEventId],
      [`${CHANNEL_ID}:${USER}`, batch[5]!.webhookEventId],
    ]);
    // One enqueue call for the whole body: the receiver answers once all of it is stashed.
    expect(queue.calls).toHaveLength(1);
  });

  it('puts an event without a source in a group of its own', async () => {
    const { receive, queue } = setup();
    const { source: _none, ...event } = eventBuilders().postback({
      channelId: CHANNEL_ID,
      from: USER,
      data: 'x',
    });
    await receive(signed(bodyOf([event as WebhookEvent])));
    expect(queue.entries[0]!.groupId).toBe(`${CHANNEL_ID}:${event.webhookEventId}`);
  });

  it('verifies the raw bytes of emoji and non-ASCII bodies, and keeps their text intact', async () => {
    const { receive, queue } = setup();
    const raw = fixtureBytes('message-text-non-ascii');
    expect(await receive(signed(raw))).toMatchObject({ accepted: 1, setAside: [] });
    const event = queued(queue.entries[0]!.body).event as WebhookEvent & { message: { text: string } };
    expect(event.message.text).toBe('こんにちは 👋🏽 こんにちは "ok" é');
  });

  it('refuses a body signed after re-serialisation (the bytes LINE signed are what count)', async () => {
    const { receive, queue } = setup();
    const raw = fixtureBytes('message-text-non-ascii');
    const reserialised = Buffer.from(JSON.stringify(JSON.parse(raw.toString('utf8'))), 'utf8');
    const request = { ...signed(reserialised), rawBody: raw };
    await expect(receive(request)).rejects.toThrow(SignatureError);
    expect(queue.entries).toEqual([]);
  });

  it.each([
    ['signed with another secret', { 'x-line-signature': signBody('{}', 'another-secret') }],
    ['not base64', { 'x-line-signature': 'not a signature' }],
    ['empty', { 'x-line-signature': '' }],
    ['missing', {}],
  ])('refuses a signature that is %s, and stashes nothing', async (_what, headers) => {
    const { receive, queue } = setup();
    const rawBody = fixtureBytes('follow');
    const error = await receive({ channelId: CHANNEL_ID, headers, rawBody }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SignatureError);
    expect((error as Error).name).toBe('SignatureError');
    expect(queue.entries).toEqual([]);
  });

  it.each(['X-Line-Signature', 'X-LINE-SIGNATURE'])('accepts the header named %s', async (name) => {
    const { receive } = setup();
    expect(await receive(signed(fixtureBytes('follow'), SECRET, name))).toMatchObject({
      accepted: 1,
      setAside: [],
    });
  });

  it('accepts the retiring secret during a rotation, and only the new one after it', async () => {
    const rotated = rotateSecret(channel(), NEW_SECRET, T0, 3600_000);
    const { receive, clock } = setup(rotated);
    const raw = fixtureBytes('follow');
    expect(await receive(signed(raw, SECRET))).toMatchObject({ accepted: 1, setAside: [] });
    expect(await receive(signed(raw, NEW_SECRET))).toMatchObject({ accepted: 1, setAside: [] });
    clock.advance(3600_000);
    await expect(receive(signed(raw, SECRET))).rejects.toThrow(SignatureError);
    expect(await receive(signed(raw, NEW_SECRET))).toMatchObject({ accepted: 1, setAside: [] });
  });

  it('answers an unknown channel as such, whatever the signature', async () => {
    const { receive, queue } = setup();
    const error = await receive({ ...signed(fixtureBytes('follow')), channelId: '1999999999' }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UnknownChannelError);
    expect(queue.entries).toEqual([]);
  });

  it('refuses a body over the limit before looking anything up', async () => {
    const { receive, reads } = setup();
    const rawBody = Buffer.alloc(MAX_WEBHOOK_BODY_BYTES + 1, 0x20);
    await expect(receive(signed(rawBody))).rejects.toThrow(PayloadTooLargeError);
    expect(reads).toEqual([]);
  });

  it('accepts a body of exactly the limit', async () => {
    const { receive } = setup();
    const json = '{"destination":"U1","events":[]}';
    const rawBody = Buffer.from(json.padEnd(MAX_WEBHOOK_BODY_BYTES, ' '), 'utf8');
    expect(rawBody.length).toBe(MAX_WEBHOOK_BODY_BYTES);
    expect(await receive(signed(rawBody))).toMatchObject({ accepted: 0, setAside: [] });
  });

  const goodEvent = eventBuilders().follow({ channelId: CHANNEL_ID, from: USER });
  it.each([
    ['not JSON', '{"destination":"U1","events":['],
    ['not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
    ['without events', '{"destination":"U1"}'],
    [
      'with a good event and one whose id is not a ULID',
      bodyOf([
        goodEvent,
        { ...eventBuilders().follow({ channelId: CHANNEL_ID, from: USER }), webhookEventId: 'x' },
      ]),
    ],
  ])('refuses a correctly signed body %s, and stashes none of it', async (_what, body) => {
    const { receive, queue } = setup();
    await expect(receive(signed(body))).rejects.toThrow(InvalidWebhookBodyError);
    expect(queue.entries).toEqual([]);
  });

  it('checks the signature before the body: an unsigned malformed body is a signature error', async () => {
    const { receive } = setup();
    const rawBody = Buffer.from('not json');
    await expect(
      receive({ channelId: CHANNEL_ID, headers: { 'x-line-signature': signBody('x', SECRET) }, rawBody }),
    ).rejects.toThrow(SignatureError);
  });

  it('answers the console’s Verify request (no events) without touching the queue', async () => {
    const { receive, queue } = setup();
    expect(await receive(signed(fixtureBytes('verification')))).toMatchObject({ accepted: 0, setAside: [] });
    expect(queue.calls).toEqual([]);
  });

  it('fails when the queue does not take the events, so LINE can redeliver', async () => {
    const { receive, queue } = setup();
    queue.failWith = new Error('SQS unavailable');
    await expect(receive(signed(fixtureBytes('follow')))).rejects.toThrow('SQS unavailable');
  });

  it('reads the channel once for a burst of webhooks when cached', async () => {
    const clock = new ManualClock();
    let reads = 0;
    const receive = makeReceiveWebhook({
      channels: cachedChannels(
        {
          async get() {
            reads++;
            return channel();
          },
        },
        { clock },
      ),
      queue: new MemoryQueue(),
      clock,
    });
    const raw = fixtureBytes('follow');
    await Promise.all(Array.from({ length: 10 }, () => receive(signed(raw))));
    expect(reads).toBe(1);
  });
});

describe('an event nested 5,000 levels deep in a signed delivery (issue 13 #3)', () => {
  it('is set aside; the delivery’s other events are queued and LINE gets its 200', async () => {
    const { receive, queue } = setup();
    const events = eventBuilders();
    const follow = events.follow({ channelId: CHANNEL_ID, from: USER });
    const deep = {
      ...events.follow({ channelId: CHANNEL_ID, from: USER }),
      webhookEventId: '01JDEEP0000000000000000000',
    };
    const deepText = JSON.stringify(deep).replace(/\}$/, `,"extra":${'['.repeat(5000)}1${']'.repeat(5000)}}`);
    const raw = `{"destination":"U0000000000000000000000000000000b","events":[${JSON.stringify(follow)},${deepText}]}`;
    const result = await receive(signed(raw));
    expect(result.accepted).toBe(1);
    expect(result.setAside).toEqual([
      {
        index: 1,
        webhookEventId: '01JDEEP0000000000000000000',
        reason: expect.stringMatching(/nested deeper/),
      },
    ]);
    expect(queue.entries.map((e) => e.dedupeId)).toEqual([follow.webhookEventId]);
  });
});
