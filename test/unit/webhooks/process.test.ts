import { describe, expect, it } from 'vitest';
import type { Channel } from '#shared/channels/channel.ts';
import type { ChannelInput } from '#shared/channels/channel-input.ts';
import { ulidToUuid } from '#shared/ids.ts';
import type { SendOutcome } from '#shared/line/messaging-client.ts';
import type { WebhookEvent } from '#shared/line/webhook.ts';
import { makeProcessWebhookEvent, type ProcessResult } from '#shared/webhooks/process.ts';
import type { QueuedWebhookEvent } from '#shared/webhooks/queue-message.ts';
import {
  channel,
  eventBuilders,
  FakeMessaging,
  ManualClock,
  MemoryEventStore,
  MemoryOptOuts,
  T0,
  USER,
} from './fakes.ts';

const CHANNEL_ID = '1656000001';
const HOUR = 3600_000;

const serverError: SendOutcome = {
  kind: 'retryable',
  reason: 'server-error',
  maybeDelivered: true,
  status: 500,
  message: 'HTTP 500',
  requestId: undefined,
};
const timeout: SendOutcome = { ...serverError, reason: 'timeout', status: undefined };
const rateLimited = (retryAfterMs?: number): SendOutcome => ({
  kind: 'rate-limited',
  reason: 'rate',
  retryAfterMs,
  message: 'The API rate limit has been exceeded. Try again later.',
  requestId: undefined,
});
const alreadyDelivered: SendOutcome = { kind: 'already-delivered', acceptedRequestId: 'a1', requestId: 'r2' };
const badRequest: SendOutcome = {
  kind: 'rejected',
  status: 400,
  message: 'The request body has 1 error(s)',
  details: [{ message: 'May not be empty', property: 'messages[0].text' }],
  requestId: 'r3',
};

function setup(overrides: Partial<ChannelInput> = {}, options: { random?: () => number } = {}) {
  const clock = new ManualClock();
  const events = new MemoryEventStore();
  const optOuts = new MemoryOptOuts();
  const messaging = new FakeMessaging();
  const known: Channel = channel(overrides);
  const messagingFor: Channel[] = [];
  const process = makeProcessWebhookEvent({
    channels: { get: async (id) => (id === known.channelId ? known : undefined) },
    events,
    optOuts,
    messagingFor: (c) => {
      messagingFor.push(c);
      return messaging;
    },
    clock,
    backoff: { baseMs: 2_000, capMs: 15 * 60_000, random: options.random ?? (() => 0.5) },
  });
  const builders = eventBuilders(clock);
  return { clock, events, optOuts, messaging, process, builders, messagingFor };
}

function queued(event: WebhookEvent, channelId = CHANNEL_ID): QueuedWebhookEvent {
  return { v: 1, channelId, destination: 'U0000000000000000000000000000000b', receivedAt: T0, event };
}

const text = (messages: readonly { type: string; text?: unknown }[]) => messages.map((m) => m.text);

describe('processWebhookEvent: what each event calls for', () => {
  it('greets a new follower and opts them back in', async () => {
    const { process, builders, messaging, optOuts } = setup();
    await optOuts.record('client-a', USER, true, T0 - HOUR);
    const follow = builders.follow({ channelId: CHANNEL_ID, from: USER });
    expect(await process(queued(follow), 1)).toEqual({ kind: 'done', outcome: 'greeted' });
    expect(messaging.sent).toEqual([
      {
        endpoint: 'push',
        to: USER,
        messages: [{ type: 'text', text: 'Welcome!' }],
        retryKey: expect.any(String),
      },
    ]);
    expect(await optOuts.optedOut('client-a', [USER])).toEqual(new Set());
  });

  it('greets nobody for a follow older than the last one recorded (a late redelivery after an unfollow)', async () => {
    const { process, builders, messaging, optOuts } = setup();
    const follow = builders.follow({ channelId: CHANNEL_ID, from: USER });
    await optOuts.record('client-a', USER, true, follow.timestamp + HOUR);
    expect((await process(queued(follow), 1)).kind).toBe('done');
    expect(messaging.sent).toEqual([]);
    expect(await optOuts.optedOut('client-a', [USER])).toEqual(new Set([USER]));
  });

  it('still greets a follow older than a later follow (of another channel of the client, maybe)', async () => {
    const { process, builders, messaging, optOuts } = setup();
    const follow = builders.follow({ channelId: CHANNEL_ID, from: USER });
    await optOuts.record('client-a', USER, false, follow.timestamp + HOUR);
    expect(await process(queued(follow), 1)).toEqual({ kind: 'done', outcome: 'greeted' });
    expect(text(messaging.sent[0]!.messages)).toEqual(['Welcome!']);
  });

  it('opts a follower in without a message when the channel has no greeting', async () => {
    const { process, builders, messaging, optOuts } = setup({ greeting: undefined });
    await optOuts.record('client-a', USER, true, T0 - HOUR);
    expect((await process(queued(builders.follow({ channelId: CHANNEL_ID, from: USER })), 1)).kind).toBe(
      'done',
    );
    expect(messaging.sent).toEqual([]);
    expect(await optOuts.optedOut('client-a', [USER])).toEqual(new Set());
  });

  it('opts out a user who unfollows, and sends nothing', async () => {
    const { process, builders, messaging, optOuts } = setup();
    const result = await process(queued(builders.unfollow({ channelId: CHANNEL_ID, from: USER })), 1);
    expect(result.kind).toBe('done');
    expect(messaging.sent).toEqual([]);
    expect(await optOuts.optedOut('client-a', [USER, 'Usomeone-else'])).toEqual(new Set([USER]));
  });

  it('answers a text message with the matching rule, else the fallback', async () => {
    const { process, builders, messaging } = setup();
    await process(queued(builders.text({ channelId: CHANNEL_ID, from: USER, text: 'HOURS' })), 1);
    await process(queued(builders.text({ channelId: CHANNEL_ID, from: USER, text: 'what?' })), 1);
    expect(messaging.sent.map((s) => text(s.messages))).toEqual([['Open 9-18'], ['Sorry?']]);
  });

  it('sends nothing when no rule matches and there is no fallback', async () => {
    const { process, builders, messaging } = setup({ fallback: undefined });
    const result = await process(
      queued(builders.text({ channelId: CHANNEL_ID, from: USER, text: 'what?' })),
      1,
    );
    expect(result).toEqual({ kind: 'done', outcome: 'no answer' });
    expect(messaging.sent).toEqual([]);
  });

  it('answers in the group or room the message came from', async () => {
    const { process, builders, messaging } = setup();
    const from = { type: 'group' as const, groupId: 'Ca56f94637c0000', userId: USER };
    await process(queued(builders.text({ channelId: CHANNEL_ID, from, text: 'hours' })), 1);
    const room = { type: 'room' as const, roomId: 'Ra8dbf4673c0000' };
    await process(queued(builders.text({ channelId: CHANNEL_ID, from: room, text: 'hours' })), 1);
    expect(messaging.sent.map((s) => s.to)).toEqual(['Ca56f94637c0000', 'Ra8dbf4673c0000']);
  });

  it.each([
    [
      'a postback',
      (b: ReturnType<typeof eventBuilders>) => b.postback({ channelId: CHANNEL_ID, from: USER, data: 'a=1' }),
    ],
    [
      'an image message',
      (b: ReturnType<typeof eventBuilders>) => ({
        ...b.text({ channelId: CHANNEL_ID, from: USER, text: 'x' }),
        message: { id: '1', type: 'image', contentProvider: { type: 'line' } },
      }),
    ],
    [
      'an event type LINE added later',
      (b: ReturnType<typeof eventBuilders>) => ({
        ...b.follow({ channelId: CHANNEL_ID, from: USER }),
        type: 'membership',
        membership: { type: 'joined', membershipId: 3189 },
      }),
    ],
  ])('does nothing for %s, and remembers it was handled', async (_what, build) => {
    const { process, builders, messaging, events } = setup();
    const event = build(builders) as WebhookEvent;
    expect(await process(queued(event), 1)).toEqual({ kind: 'done', outcome: 'no answer' });
    expect(messaging.sent).toEqual([]);
    expect(events.records.get(event.webhookEventId)?.state).toBe('done');
  });

  it('sends nothing in standby mode', async () => {
    const { process, builders, messaging } = setup();
    const standby = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours', mode: 'standby' });
    expect(await process(queued(standby), 1)).toEqual({ kind: 'done', outcome: 'standby: nothing sent' });
    const follow = builders.follow({ channelId: CHANNEL_ID, from: USER, mode: 'standby' });
    expect((await process(queued(follow), 1)).kind).toBe('done');
    expect(messaging.sent).toEqual([]);
  });

  it('sends nothing in a mode it does not know, and still records an unfollow', async () => {
    const { process, builders, messaging, optOuts } = setup();
    const text = { ...builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' }), mode: 'paused' };
    expect(await process(queued(text), 1)).toEqual({ kind: 'done', outcome: 'paused: nothing sent' });
    const unfollow = { ...builders.unfollow({ channelId: CHANNEL_ID, from: USER }), mode: 'paused' };
    expect((await process(queued(unfollow), 1)).kind).toBe('done');
    expect(messaging.sent).toEqual([]);
    expect(await optOuts.optedOut('client-a', [USER])).toEqual(new Set([USER]));
  });

  it('still records an unfollow received in standby mode as an opt-out', async () => {
    const { process, builders, optOuts } = setup();
    await process(queued(builders.unfollow({ channelId: CHANNEL_ID, from: USER, mode: 'standby' })), 1);
    expect(await optOuts.optedOut('client-a', [USER])).toEqual(new Set([USER]));
  });

  it('records an event of a known type it cannot read as not understood, acting on nothing', async () => {
    const { process, builders, messaging, optOuts, events } = setup();
    // An unfollow whose source lost its user id: opting out a guess would be worse than nothing.
    const unfollow = {
      ...builders.unfollow({ channelId: CHANNEL_ID, from: USER }),
      source: { type: 'user' },
    };
    expect(await process(queued(unfollow), 1)).toEqual({
      kind: 'failed',
      reason: 'an unfollow event whose source.userId is missing',
    });
    const text = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    const drifted = { ...text, message: { type: 'text', text: 'hours' } } as unknown as WebhookEvent;
    expect(await process(queued(drifted), 1)).toEqual({
      kind: 'failed',
      reason: 'a message event whose message.id is missing',
    });
    expect(messaging.sent).toEqual([]);
    expect(await optOuts.optedOut('client-a', [USER])).toEqual(new Set());
    expect(events.records.get(drifted.webhookEventId)).toMatchObject({
      state: 'failed',
      outcome: 'event-not-understood',
    });
  });

  it('fails an event of a channel that no longer exists, sending nothing', async () => {
    const { process, builders, messaging, events } = setup();
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    const result = await process(queued(event, 'deleted-channel'), 1);
    expect(result).toEqual({ kind: 'failed', reason: 'channel deleted-channel no longer exists' });
    expect(messaging.sent).toEqual([]);
    expect(events.records.get(event.webhookEventId)).toMatchObject({
      state: 'failed',
      outcome: 'unknown-channel',
    });
  });
});

describe('processWebhookEvent in push mode: exactly once', () => {
  it('pushes with the event’s ULID as the retry key', async () => {
    const { process, builders, messaging } = setup();
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    await process(queued(event), 1);
    expect(messaging.sent[0]!.retryKey).toBe(ulidToUuid(event.webhookEventId));
    expect(messaging.sent[0]!.retryKey).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    );
  });

  it('skips a second delivery of a handled event (a LINE redelivery or a queue duplicate)', async () => {
    const { process, builders, messaging } = setup();
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    await process(queued(event), 1);
    const again = await process(queued(builders.redelivered(event)), 1);
    expect(again).toEqual({ kind: 'skipped', reason: 'already done (answered)' });
    expect(messaging.sent).toHaveLength(1);
  });

  it('counts a 409 (key already accepted) as delivered', async () => {
    const { process, builders, messaging, events } = setup();
    messaging.outcomes.push(alreadyDelivered);
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    expect(await process(queued(event), 2)).toEqual({
      kind: 'done',
      outcome: 'answered (already delivered)',
    });
    expect(events.records.get(event.webhookEventId)?.state).toBe('done');
  });

  it.each([
    ['a 5xx', serverError],
    ['a timeout', timeout],
    ['a 429', rateLimited()],
  ])('retries after %s with the same key and the same messages', async (_what, outcome) => {
    const { process, builders, messaging, events, clock } = setup();
    messaging.outcomes.push(outcome);
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    const first = await process(queued(event), 1);
    expect(first).toMatchObject({ kind: 'retry', rateLimited: outcome.kind === 'rate-limited' });
    expect(events.records.get(event.webhookEventId)?.state).toBe('processing');
    clock.advance(5_000);
    expect(await process(queued(event), 2)).toEqual({ kind: 'done', outcome: 'answered' });
    expect(messaging.sent).toHaveLength(2);
    expect(messaging.sent[1]).toEqual(messaging.sent[0]);
  });

  it('backs off longer with each receive, never under a second, never over the cap', async () => {
    const delays: number[] = [];
    for (let receiveCount = 1; receiveCount <= 12; receiveCount++) {
      const { process, builders, messaging } = setup({}, { random: () => 0.999 });
      messaging.outcomes.push(serverError);
      const result = await process(
        queued(builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' })),
        receiveCount,
      );
      delays.push((result as Extract<ProcessResult, { kind: 'retry' }>).delayMs);
    }
    for (let i = 1; i < delays.length; i++) expect(delays[i]).toBeGreaterThanOrEqual(delays[i - 1]!);
    expect(delays[3]).toBeGreaterThan(delays[0]!);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(1_000);
    expect(Math.max(...delays)).toBeLessThanOrEqual(15 * 60_000);
  });

  it('waits at least a second even when the jitter draws zero', async () => {
    const { process, builders, messaging } = setup({}, { random: () => 0 });
    messaging.outcomes.push(serverError);
    const result = await process(
      queued(builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' })),
      1,
    );
    expect(result).toMatchObject({ kind: 'retry', delayMs: 1_000 });
  });

  it('waits at least as long as a 429’s Retry-After', async () => {
    const { process, builders, messaging } = setup({}, { random: () => 0 });
    messaging.outcomes.push(rateLimited(30_000));
    const result = await process(
      queued(builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' })),
      1,
    );
    expect(result).toMatchObject({ kind: 'retry', delayMs: 30_000, rateLimited: true });
  });

  it('fails on any other 4xx, for good', async () => {
    const { process, builders, messaging, events } = setup();
    messaging.outcomes.push(badRequest);
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    const result = await process(queued(event), 1);
    expect(result.kind).toBe('failed');
    expect(events.records.get(event.webhookEventId)).toMatchObject({
      state: 'failed',
      outcome: 'push-rejected',
    });
    expect(await process(queued(event), 2)).toMatchObject({ kind: 'skipped' });
    expect(messaging.sent).toHaveLength(1);
  });

  it('stops retrying once the first attempt is 23 hours old: the key could deliver twice', async () => {
    const { process, builders, messaging, clock, events } = setup();
    messaging.outcomes.push(serverError, serverError);
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    expect((await process(queued(event), 1)).kind).toBe('retry');
    clock.advance(23 * HOUR - 1);
    expect((await process(queued(event), 2)).kind).toBe('retry');
    clock.advance(1);
    const late = await process(queued(event), 3);
    expect(late).toEqual({
      kind: 'failed',
      reason:
        'first attempt 23 h ago: LINE keeps a retry key 24 h from its first use, so a push now could deliver twice',
      expected: true,
    });
    expect(messaging.sent).toHaveLength(2);
    expect(events.records.get(event.webhookEventId)?.outcome).toBe('retry-window-expired');
  });

  it('never pushes an event older than the key window, even when its idempotency record expired (a late DLQ redrive)', async () => {
    const { process, builders, messaging, clock, events } = setup();
    messaging.outcomes.push(serverError);
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    expect((await process(queued({ ...event, timestamp: clock.now() }), 1)).kind).toBe('retry');
    // Eight days in the DLQ: the record's TTL (7 days) removed it, the redrive brings the event back.
    clock.advance(8 * 24 * HOUR);
    events.records.delete(event.webhookEventId);
    const redriven = await process(queued({ ...event, timestamp: clock.now() - 8 * 24 * HOUR }), 1);
    expect(redriven).toMatchObject({
      kind: 'failed',
      expected: true,
      reason: expect.stringMatching(/may have been answered already/),
    });
    expect(events.records.get(event.webhookEventId)?.outcome).toBe('too-old-to-know');
    expect(messaging.sent).toHaveLength(1);
  });

  it('answers an event first seen when it is already over 23 h old: its retry key has never been used (issue 13 #6)', async () => {
    const { process, builders, messaging, clock, events } = setup();
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    // Held back a day and a half (an outage of the processor), then seen for the first time.
    const result = await process(queued({ ...event, timestamp: clock.now() - 36 * HOUR }), 1);
    expect(result).toEqual({ kind: 'done', outcome: 'answered' });
    expect(messaging.sent).toHaveLength(1);
    expect(events.records.get(event.webhookEventId)?.state).toBe('done');
  });

  it('fails an answer that has nowhere to go (an event without a source)', async () => {
    const { process, builders, messaging } = setup();
    const { source: _none, ...event } = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    const result = await process(queued(event as WebhookEvent), 1);
    expect(result).toEqual({ kind: 'failed', reason: 'event has no source to push to' });
    expect(messaging.sent).toEqual([]);
  });
});

describe('processWebhookEvent in reply mode: at most once', () => {
  it('replies with the event’s reply token and no retry key', async () => {
    const { process, builders, messaging } = setup({ autoAnswer: 'reply' });
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    expect(await process(queued(event), 1)).toEqual({ kind: 'done', outcome: 'answered' });
    expect(messaging.sent).toEqual([
      { endpoint: 'reply', to: event.replyToken, messages: [{ type: 'text', text: 'Open 9-18' }] },
    ]);
  });

  it('uses a reply token once: a second delivery is skipped', async () => {
    const { process, builders, messaging } = setup({ autoAnswer: 'reply' });
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    await process(queued(event), 1);
    expect((await process(queued(builders.redelivered(event)), 1)).kind).toBe('skipped');
    expect(messaging.sent).toHaveLength(1);
  });

  it.each([
    ['a 5xx', serverError, 'reply-ambiguous'],
    ['a timeout', timeout, 'reply-ambiguous'],
    ['a 429', rateLimited(), 'reply-rate-limited'],
    ['a 400', badRequest, 'reply-rejected'],
  ])('never retries a reply after %s', async (_what, outcome, recorded) => {
    const { process, builders, messaging, events } = setup({ autoAnswer: 'reply' });
    messaging.outcomes.push(outcome);
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    expect((await process(queued(event), 1)).kind).toBe('failed');
    expect(events.records.get(event.webhookEventId)).toMatchObject({ state: 'failed', outcome: recorded });
    expect((await process(queued(event), 2)).kind).toBe('skipped');
    expect(messaging.sent).toHaveLength(1);
  });

  it('does not reply again after a crash between sending and recording', async () => {
    const { process, builders, messaging, events } = setup({ autoAnswer: 'reply' });
    const event = builders.text({ channelId: CHANNEL_ID, from: USER, text: 'hours' });
    // The previous attempt marked the reply and died before recording its outcome.
    await events.claim(event.webhookEventId, T0);
    await events.markReplyAttempted(event.webhookEventId);
    const result = await process(queued(event), 2);
    expect(result).toEqual({
      kind: 'failed',
      reason: 'a reply was already attempted for this event (at most once)',
    });
    expect(messaging.sent).toEqual([]);
  });

  it('fails an answer without a reply token instead of pushing it', async () => {
    const { process, builders, messaging } = setup({ autoAnswer: 'reply' });
    const { replyToken: _none, ...event } = builders.text({
      channelId: CHANNEL_ID,
      from: USER,
      text: 'hours',
    });
    expect(await process(queued(event as WebhookEvent), 1)).toEqual({
      kind: 'failed',
      reason: 'a message event carries no reply token',
    });
    expect(messaging.sent).toEqual([]);
  });
});
