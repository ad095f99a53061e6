import { describe, expect, it } from 'vitest';
import { cachedChannels } from '#shared/channels/cache.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { channelFromInput, InvalidChannelError, rotateSecret } from '#shared/channels/channel-input.ts';
import { answerFor } from '#shared/channels/keyword-rules.ts';
import { signBody } from '#shared/line/signature.ts';
import { MONTHLY_QUOTA_RETRY_MS, makeProcessWebhookEvent } from '#shared/webhooks/process.ts';
import type { QueuedWebhookEvent } from '#shared/webhooks/queue-message.ts';
import { makeReceiveWebhook, SignatureError } from '#shared/webhooks/receive.ts';
import {
  channel,
  eventBuilders,
  FakeMessaging,
  ManualClock,
  MemoryEventStore,
  MemoryOptOuts,
  MemoryQueue,
  SECRET,
  USER,
} from './fakes.ts';

const NEW_SECRET = 'feedface0000feedface0000feedface';
const body = Buffer.from('{"destination":"U1","events":[]}');

describe('a secret rotated while the channel is cached', () => {
  it('is picked up by reading the channel again once, not after the cache expires', async () => {
    const clock = new ManualClock();
    let stored: Channel = channel();
    let reads = 0;
    const receive = makeReceiveWebhook({
      channels: cachedChannels(
        {
          async get() {
            reads++;
            return stored;
          },
        },
        { clock, ttlMs: 60_000 },
      ),
      queue: new MemoryQueue(),
      clock,
    });
    const request = (secret: string) => ({
      channelId: stored.channelId,
      headers: { 'x-line-signature': signBody(body, secret) },
      rawBody: body,
    });
    expect(await receive(request(SECRET))).toMatchObject({ accepted: 0, setAside: [] });
    // LINE issues a new secret; the operator stores it; the cached copy still has the old one.
    stored = { ...channel({ channelSecret: NEW_SECRET }), updatedAt: clock.now() + 1 };
    clock.advance(10_000);
    expect(await receive(request(NEW_SECRET))).toMatchObject({ accepted: 0, setAside: [] });
    expect(reads).toBe(2);
    // A forged signature still fails, and does not make every request read the table.
    await expect(receive(request('not-the-secret'))).rejects.toBeInstanceOf(SignatureError);
    await expect(receive(request('not-the-secret'))).rejects.toBeInstanceOf(SignatureError);
    expect(reads).toBe(2);
    expect(rotateSecret(stored, SECRET, clock.now()).secrets).toHaveLength(2);
  });
});

describe('keyword rules that could stall the processor (issue 13 #4)', () => {
  const input = (pattern: string) => ({
    channelId: 'c1',
    clientId: 'k1',
    channelSecret: SECRET,
    accessToken: 'token-123456',
    rules: [{ match: 'regex', pattern, answer: 'matched' }],
    fallback: 'fallback',
  });

  it('match the patterns that backtrack exponentially in linear time, with the right answers', () => {
    const cases: [string, string, string][] = [
      ['^(a|a)*$', `${'a'.repeat(29)}!`, 'fallback'],
      ['^(a|a)*$', 'a'.repeat(4_000), 'matched'],
      ['(.*a){20}', 'a'.repeat(19) + 'b'.repeat(3_000), 'fallback'],
      [`${'a*'.repeat(30)}b`, 'a'.repeat(2_000), 'fallback'],
      ['(a+)+$', `${'a'.repeat(40)}!`, 'fallback'],
      ['(\\w*)*x', `${'w'.repeat(40)}!`, 'fallback'],
      ['(予約|よやく)', '明日の予約をお願いします', 'matched'],
    ];
    for (const [pattern, text, expected] of cases) {
      expect(
        answerFor(channelFromInput(input(pattern), 0), text),
        `${pattern} on ${text.slice(0, 12)}…`,
      ).toBe(expected);
    }
  });

  it('refuses what RE2 cannot run (backreferences, lookaround) with a field error', () => {
    for (const bad of ['(a)\\1', '(?=a)b', '(?<!x)y']) {
      const error = (() => {
        try {
          channelFromInput(input(bad), 0);
        } catch (e) {
          return e;
        }
      })();
      expect(error, bad).toBeInstanceOf(InvalidChannelError);
      expect((error as InvalidChannelError).fieldErrors['rules.0.pattern']?.[0]).toMatch(/RE2 syntax/);
    }
  });
});

describe('a used-up monthly quota', () => {
  it('is retried an hour later, not in seconds', async () => {
    const clock = new ManualClock();
    const messaging = new FakeMessaging();
    messaging.outcomes.push({
      kind: 'rate-limited',
      reason: 'monthly-quota',
      retryAfterMs: undefined,
      message: 'You have reached your monthly limit.',
      requestId: undefined,
    });
    const ch = channel();
    const process = makeProcessWebhookEvent({
      channels: { get: async () => ch },
      events: new MemoryEventStore(),
      optOuts: new MemoryOptOuts(),
      messagingFor: () => messaging,
      clock,
    });
    const event = eventBuilders(clock).text({ channelId: ch.channelId, from: USER, text: 'hours' });
    const queued: QueuedWebhookEvent = {
      v: 1,
      channelId: ch.channelId,
      destination: 'U1',
      receivedAt: clock.now(),
      event,
    };
    const result = await process(queued, 1);
    expect(result).toMatchObject({ kind: 'retry', rateLimited: true });
    expect(result.kind === 'retry' && result.delayMs).toBeGreaterThanOrEqual(MONTHLY_QUOTA_RETRY_MS);
    expect(result.kind === 'retry' && result.reason).toContain('monthly-quota');
  });
});
