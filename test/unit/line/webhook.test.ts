import { describe, expect, it } from 'vitest';
import {
  InvalidWebhookBodyError,
  type KnownWebhookEvent,
  parseWebhookBody,
  parseWebhookEvent,
  readKnownEvent,
  sourceKey,
  type WebhookEvent,
} from '#shared/line/webhook.ts';
import { fixtureBytes, webhookFixtureNames } from './fixtures.ts';

/** The event typed by its `type` when Switchboard reads it, otherwise undefined. */
function knownEvent(event: WebhookEvent): KnownWebhookEvent | undefined {
  const reading = readKnownEvent(event);
  return reading.kind === 'known' ? reading.event : undefined;
}

function parseFixture(name: string) {
  return parseWebhookBody(fixtureBytes(name));
}

function onlyEvent(name: string): WebhookEvent {
  const { events } = parseFixture(name);
  expect(events).toHaveLength(1);
  return events[0]!;
}

/** A body with one follow event, with `overrides` applied (undefined removes a field). */
function bodyWith(overrides: Record<string, unknown>, extraEvents: unknown[] = []): string {
  const event = {
    type: 'follow',
    mode: 'active',
    timestamp: 1705891467176,
    source: { type: 'user', userId: 'U3d3edab4f36c6292e6d8a8131f141b8b' },
    webhookEventId: '01HMQGW40RZJPJM3RAJP7BHC2Q',
    deliveryContext: { isRedelivery: false },
    replyToken: '85cbe770fa8b4f45bbe077b1d4be4a36',
    ...overrides,
  };
  return JSON.stringify({
    destination: 'U0000000000000000000000000000000b',
    events: [...extraEvents, event],
  });
}

function errorOf(body: string | Uint8Array): InvalidWebhookBodyError {
  try {
    parseWebhookBody(body);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidWebhookBodyError);
    return error as InvalidWebhookBodyError;
  }
  throw new Error('the body was accepted');
}

describe('parseWebhookBody on LINE’s examples', () => {
  it.each(webhookFixtureNames)('parses %s and keeps every field LINE sent', (name) => {
    const raw = JSON.parse(fixtureBytes(name).toString('utf8'));
    const body = parseFixture(name);
    // Nothing dropped, nothing added: the parsed body equals the JSON as sent.
    expect(body).toEqual(raw);
  });

  it('answers the console’s Verify request, which has no events', () => {
    expect(parseFixture('verification')).toEqual({ destination: 'xxxxxxxxxx', events: [] });
  });

  it('reads a follow event: reply token, source, first delivery', () => {
    const event = knownEvent(onlyEvent('follow'));
    expect(event?.type).toBe('follow');
    if (event?.type !== 'follow') return;
    expect(event.replyToken).toBe('85cbe770fa8b4f45bbe077b1d4be4a36');
    expect(event.follow?.isUnblocked).toBe(false);
    expect(event.deliveryContext.isRedelivery).toBe(false);
    expect(event.mode).toBe('active');
    expect(sourceKey(event)).toBe('U3d3edab4f36c6292e6d8a8131f141b8b');
  });

  it('reads an unblock as a follow event', () => {
    const event = knownEvent(onlyEvent('follow-unblocked'));
    expect(event?.type === 'follow' && event.follow?.isUnblocked).toBe(true);
  });

  it('reads an unfollow, which has no reply token', () => {
    const event = knownEvent(onlyEvent('unfollow'));
    expect(event?.type).toBe('unfollow');
    expect(event?.replyToken).toBeUndefined();
    expect(sourceKey(onlyEvent('unfollow'))).toBe('U4af4980629...');
  });

  it('reads a text message with a mention and a LINE emoji in a group, keeping both', () => {
    const event = knownEvent(onlyEvent('message-text-mention-emoji'));
    expect(event?.type).toBe('message');
    if (event?.type !== 'message') return;
    expect(event.message.type).toBe('text');
    expect(event.message.text).toBe('@All @example Good Morning!! (love)');
    expect(event.message['emojis']).toEqual([
      { index: 29, length: 6, productId: '5ac1bfd5040ab15980c9b435', emojiId: '001' },
    ]);
    expect(event.message['mention']).toMatchObject({
      mentionees: [{ type: 'all' }, { type: 'user', isSelf: false }],
    });
    // The conversation is the group, not the member who wrote.
    expect(sourceKey(event)).toBe('Ca56f94637c...');
  });

  it('reads image and sticker messages, which carry no text', () => {
    const image = knownEvent(onlyEvent('message-image'));
    expect(image?.type === 'message' && image.message.type).toBe('image');
    expect(image?.type === 'message' && image.message['imageSet']).toMatchObject({ index: 1, total: 2 });
    const sticker = knownEvent(onlyEvent('message-sticker'));
    expect(sticker?.type === 'message' && sticker.message).toMatchObject({
      type: 'sticker',
      packageId: '11537',
      stickerId: '52002738',
    });
  });

  it('reads postbacks from a date-time picker and a rich-menu switch', () => {
    const datetime = knownEvent(onlyEvent('postback-datetime'));
    expect(datetime?.type === 'postback' && datetime.postback).toEqual({
      data: 'storeId=12345',
      params: { datetime: '2017-12-25T01:00' },
    });
    const richMenu = knownEvent(onlyEvent('postback-richmenu'));
    expect(richMenu?.type === 'postback' && richMenu.postback.params).toEqual({
      newRichMenuAliasId: 'richmenu-alias-b',
      status: 'SUCCESS',
    });
  });

  it('reads join, leave, member-joined and unsend events of a group', () => {
    expect(knownEvent(onlyEvent('join'))?.type).toBe('join');
    expect(knownEvent(onlyEvent('leave'))?.type).toBe('leave');
    const joined = knownEvent(onlyEvent('member-joined'));
    expect(joined?.type === 'memberJoined' && joined.joined.members.map((m) => m.userId)).toEqual([
      'U4af4980629...',
      'U91eeaf62d9...',
    ]);
    const unsend = knownEvent(onlyEvent('unsend'));
    expect(unsend?.type === 'unsend' && unsend.unsend.messageId).toBe('325708');
    for (const name of ['join', 'leave', 'member-joined'])
      expect(sourceKey(onlyEvent(name))).toBe('C4af4980629...');
  });

  it('reads a standby event: no reply token, so nothing may be sent', () => {
    const event = onlyEvent('standby-text');
    expect(event.mode).toBe('standby');
    expect(event.replyToken).toBeUndefined();
    expect(knownEvent(event)?.type).toBe('message');
  });

  it('reads a redelivered event, with the ID of the original delivery', () => {
    const event = onlyEvent('redelivered-text');
    expect(event.deliveryContext.isRedelivery).toBe(true);
    expect(event.webhookEventId).toBe('01G2KZKG2DS765NMRH3GZFD8AP');
  });

  it('keeps several events of several users in order, each with its own conversation', () => {
    const { events } = parseFixture('several-events');
    expect(events.map((e) => e.type)).toEqual(['message', 'follow', 'unfollow']);
    expect(events.map(sourceKey)).toEqual([
      'U80696558e1aa831...',
      'Ufc729a925b3abef...',
      'Ubbd4f124aee5113...',
    ]);
  });

  it('passes event types Switchboard does not know through, whole', () => {
    for (const name of ['message-edited', 'membership']) {
      const event = onlyEvent(name);
      expect(knownEvent(event)).toBeUndefined();
      expect(event).toEqual(JSON.parse(fixtureBytes(name).toString('utf8')).events[0]);
    }
    expect(onlyEvent('membership')['membership']).toEqual({ type: 'joined', membershipId: 3189 });
  });

  it('keys an event of a multi-person chat by its room', () => {
    expect(sourceKey(onlyEvent('message-text-non-ascii'))).toBe('Ra8dbf4673c...');
  });
});

describe('sourceKey', () => {
  it('gives an event without a source (a failed account link) a key of its own', () => {
    const { events } = parseWebhookBody(
      bodyWith({ type: 'accountLink', source: undefined, replyToken: undefined, link: { result: 'failed' } }),
    );
    expect(sourceKey(events[0]!)).toBe('01HMQGW40RZJPJM3RAJP7BHC2Q');
  });
});

describe('parseWebhookBody on malformed bodies', () => {
  it.each([
    ['not JSON', 'hello', '', /^invalid webhook body: is not JSON \(/],
    ['JSON that is not an object', '[]', '', 'invalid webhook body: must be an object, got an array'],
    ['no destination', '{"events":[]}', 'destination', 'invalid webhook body: destination is missing'],
    ['no events', '{"destination":"U1"}', 'events', 'invalid webhook body: events is missing'],
    [
      'events not an array',
      '{"destination":"U1","events":{}}',
      'events',
      'invalid webhook body: events must be an array, got an object',
    ],
    [
      'an event that is not an object',
      '{"destination":"U1","events":[null]}',
      'events[0]',
      'invalid webhook body: events[0] must be an object, got null',
    ],
    [
      'an event without webhookEventId',
      bodyWith({ webhookEventId: undefined }),
      'events[0].webhookEventId',
      'invalid webhook body: events[0].webhookEventId is missing',
    ],
    [
      'a webhookEventId that is not a ULID',
      bodyWith({ webhookEventId: 'testwebhookeventid' }),
      'events[0].webhookEventId',
      'invalid webhook body: events[0].webhookEventId must be a ULID, got "testwebhookeventid"',
    ],
    [
      'an event without a type',
      bodyWith({ type: undefined }),
      'events[0].type',
      'invalid webhook body: events[0].type is missing',
    ],
    [
      'a mode that is not a string',
      bodyWith({ mode: 1 }),
      'events[0].mode',
      'invalid webhook body: events[0].mode must be a string, got a number',
    ],
    [
      'a timestamp as a string',
      bodyWith({ timestamp: '1705891467176' }),
      'events[0].timestamp',
      'invalid webhook body: events[0].timestamp must be a number, got a string',
    ],
    [
      'no deliveryContext',
      bodyWith({ deliveryContext: undefined }),
      'events[0].deliveryContext',
      'invalid webhook body: events[0].deliveryContext is missing',
    ],
    [
      'isRedelivery not a boolean',
      bodyWith({ deliveryContext: { isRedelivery: 'false' } }),
      'events[0].deliveryContext.isRedelivery',
      'invalid webhook body: events[0].deliveryContext.isRedelivery must be a boolean, got a string',
    ],
    [
      'a problem in the second event',
      bodyWith({ timestamp: 'soon' }, [JSON.parse(fixtureBytes('unfollow').toString('utf8')).events[0]]),
      'events[1].timestamp',
      /^invalid webhook body: events\[1\]\.timestamp must be a number/,
    ],
  ])('rejects %s, naming where', (_, body, path, message) => {
    const error = errorOf(body);
    expect(error.name).toBe('InvalidWebhookBodyError');
    expect(error.path).toBe(path);
    if (typeof message === 'string') expect(error.message).toBe(message);
    else expect(error.message).toMatch(message);
  });

  it('rejects bytes that are not UTF-8', () => {
    expect(errorOf(new Uint8Array([0x7b, 0xff, 0x7d])).message).toBe('invalid webhook body: is not UTF-8');
  });
});

describe('parseWebhookBody on events that drifted from what Switchboard knows', () => {
  // LINE signed these: a 400 would fail the whole delivery, the good events with it. The receiver
  // queues them; the processor records what it could not read instead of acting on a guess.
  it.each([
    [
      'an unknown source type',
      bodyWith({ source: { type: 'channel', channelId: '1' } }),
      'a follow event whose source.type must be "user", "group" or "room"',
    ],
    [
      'a user source without userId',
      bodyWith({ source: { type: 'user' } }),
      'a follow event whose source.userId is missing',
    ],
    [
      'a message event without its message',
      bodyWith({ type: 'message' }),
      'a message event whose message is missing',
    ],
    [
      'a text message without text',
      bodyWith({ type: 'message', message: { id: '1', type: 'text' } }),
      'a message event whose message is a text message without text',
    ],
  ])('accepts %s, kept as sent, and reads it as not understood', (_, text, problem) => {
    const body = parseWebhookBody(text);
    expect(body).toEqual(JSON.parse(text));
    const event = body.events[0]!;
    expect(readKnownEvent(event)).toEqual({ kind: 'unreadable', problem });
    expect(knownEvent(event)).toBeUndefined();
  });

  it('accepts a mode LINE may add later, kept as sent', () => {
    const [event] = parseWebhookBody(bodyWith({ mode: 'paused' })).events;
    expect(event!.mode).toBe('paused');
    expect(readKnownEvent(event!).kind).toBe('known');
  });

  it('keys an event whose source it does not know by its own id', () => {
    const [event] = parseWebhookBody(
      bodyWith({ type: 'squareChat', source: { type: 'square', squareChatId: 'S1' } }),
    ).events;
    expect(readKnownEvent(event!)).toEqual({ kind: 'other' });
    expect(sourceKey(event!)).toBe('01HMQGW40RZJPJM3RAJP7BHC2Q');
  });
});

describe('parseWebhookEvent', () => {
  it('checks one event on its own, e.g. read back from a queue', () => {
    const event = JSON.parse(fixtureBytes('postback-datetime').toString('utf8')).events[0];
    expect(parseWebhookEvent(JSON.parse(JSON.stringify(event)))).toEqual(event);
    expect(() => parseWebhookEvent({ ...event, deliveryContext: undefined })).toThrow(
      'invalid webhook event: deliveryContext is missing',
    );
  });
});
