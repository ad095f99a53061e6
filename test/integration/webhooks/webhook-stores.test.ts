import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import {
  DynamoProcessedEventStore,
  PROCESSED_EVENT_TTL_SECONDS,
} from '#shared/adapters/dynamo-webhook-events.ts';
import { cachedChannels } from '#shared/channels/cache.ts';
import { channelFromInput, rotateSecret } from '#shared/channels/channel-input.ts';
import { newUlid } from '#shared/ids.ts';
import { signBody } from '#shared/line/signature.ts';
import { makeReceiveWebhook, UnknownChannelError } from '#shared/webhooks/receive.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const eventsTable = cloud.info.tableNames.events!;
const controlTable = cloud.info.tableNames.control!;
const channelsTable = cloud.info.tableNames.channels!;
// Records carry a TTL that DynamoDB Local enforces: a fixed past time would see them swept mid-test.
const T0 = Date.now();

describe('the processed-event store (idempotency records)', () => {
  const store = new DynamoProcessedEventStore(cloud.doc, eventsTable);

  it('creates a record on the first claim and hands back that same record after', async () => {
    const eventId = newUlid(T0);
    expect(await store.claim(eventId, T0)).toEqual({
      eventId,
      state: 'processing',
      firstAttemptAt: T0,
      replyAttempted: false,
    });
    // A redelivery an hour later: still the first attempt's time, so the retry window holds.
    expect(await store.claim(eventId, T0 + 3600_000)).toEqual({
      eventId,
      state: 'processing',
      firstAttemptAt: T0,
      replyAttempted: false,
    });
    const item = await cloud.doc.send(
      new GetCommand({ TableName: eventsTable, Key: { pk: `EVENT#${eventId}` } }),
    );
    expect(item.Item?.expiresAt).toBe(Math.floor(T0 / 1000) + PROCESSED_EVENT_TTL_SECONDS);
  });

  it('lets concurrent claims of one event all see the one record', async () => {
    const eventId = newUlid(T0);
    const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => store.claim(eventId, T0 + i)));
    expect(new Set(claims.map((c) => c.firstAttemptAt)).size).toBe(1);
  });

  it('marks a reply attempted once: true the first time, false ever after', async () => {
    const eventId = newUlid(T0);
    await store.claim(eventId, T0);
    const marks = await Promise.all([store.markReplyAttempted(eventId), store.markReplyAttempted(eventId)]);
    expect(marks.sort()).toEqual([false, true]);
    expect(await store.markReplyAttempted(eventId)).toBe(false);
    expect((await store.claim(eventId, T0)).replyAttempted).toBe(true);
  });

  it('does not mark a reply for an event it never claimed', async () => {
    expect(await store.markReplyAttempted(newUlid(T0))).toBe(false);
  });

  it('records how an event finished, which a later claim reports', async () => {
    const done = newUlid(T0);
    await store.claim(done, T0);
    await store.finish(done, 'done', 'greeted');
    expect(await store.claim(done, T0 + 1)).toEqual({
      eventId: done,
      state: 'done',
      firstAttemptAt: T0,
      replyAttempted: false,
      outcome: 'greeted',
    });

    const failed = newUlid(T0);
    await store.claim(failed, T0);
    await store.finish(failed, 'failed', 'push-rejected', 'push rejected 400: bad request');
    expect(await store.claim(failed, T0 + 1)).toMatchObject({
      state: 'failed',
      outcome: 'push-rejected',
      reason: 'push rejected 400: bad request',
    });
  });
});

describe('the opt-out store', () => {
  const store = new DynamoOptOutStore(cloud.doc, controlTable);

  it('keeps the latest follow or unfollow of a recipient, whatever order they arrive in', async () => {
    const client = uniqueName('client');
    // A newer follow is recorded, then an older unfollow arrives late (a redelivery): still opted in.
    await store.record(client, 'U1', false, T0 + 2_000);
    await store.record(client, 'U1', true, T0 + 1_000);
    expect(await store.optedOut(client, ['U1'])).toEqual(new Set());
    // A newer unfollow, then an older follow: opted out.
    await store.record(client, 'U2', true, T0 + 2_000);
    await store.record(client, 'U2', false, T0 + 1_000);
    expect(await store.optedOut(client, ['U2'])).toEqual(new Set(['U2']));
    // And a still newer follow opts U2 back in.
    await store.record(client, 'U2', false, T0 + 3_000);
    expect(await store.optedOut(client, ['U1', 'U2'])).toEqual(new Set());
  });

  it('lets the later of two events with the same timestamp win, and says when one is dropped as stale (issue 13 #5)', async () => {
    const client = uniqueName('client');
    // follow, unfollow, follow of one user in the same millisecond, processed in FIFO order.
    expect(await store.record(client, 'U1', false, T0)).toBe(true);
    expect(await store.record(client, 'U1', true, T0)).toBe(true);
    expect(await store.optedOut(client, ['U1'])).toEqual(new Set(['U1']));
    expect(await store.record(client, 'U1', false, T0)).toBe(true);
    expect(await store.optedOut(client, ['U1'])).toEqual(new Set());
    // An older one arriving late is dropped, and the caller learns it.
    expect(await store.record(client, 'U1', true, T0 - 1)).toBe(false);
    expect(await store.optedOut(client, ['U1'])).toEqual(new Set());
  });

  it('keeps the first record when the same event is recorded twice', async () => {
    const client = uniqueName('client');
    await store.record(client, 'U1', true, T0);
    await store.record(client, 'U1', true, T0);
    expect(await store.optedOut(client, ['U1'])).toEqual(new Set(['U1']));
  });

  it.each([
    ['read whole (a small partition)', {}],
    ['key by key (a partition too big to read whole)', { maxItems: 100 }],
  ])('looks up 250 recipients at once, duplicates and unknowns included: %s', async (_, options) => {
    const store = new DynamoOptOutStore(cloud.doc, controlTable, options);
    const client = uniqueName('client');
    const recipients = Array.from({ length: 250 }, (_, i) => `U${String(i).padStart(32, '0')}`);
    const expected = new Set<string>();
    await Promise.all(
      recipients.map((r, i) => {
        if (i % 3 === 0) expected.add(r);
        return i % 5 === 4 ? undefined : store.record(client, r, i % 3 === 0, T0);
      }),
    );
    for (const [i, r] of recipients.entries()) if (i % 5 === 4) expected.delete(r);
    const asked = [...recipients, ...recipients.slice(0, 20), 'Unever-seen'];
    expect(await store.optedOut(client, asked)).toEqual(expected);
  });

  it('keeps each client’s opt-outs apart', async () => {
    const a = uniqueName('client');
    const b = uniqueName('client');
    await store.record(a, 'U1', true, T0);
    expect(await store.optedOut(b, ['U1'])).toEqual(new Set());
    expect(await store.optedOut(a, [])).toEqual(new Set());
  });
});

describe("the suppression list's lookup", () => {
  it.each([
    ['read whole (a small list)', {}],
    ['key by key (a list too big to read whole)', { maxItems: 100 }],
  ])(
    'finds the entries of 250 recipients at once, duplicates and unknowns included: %s',
    async (_, options) => {
      const store = new DynamoSuppressionStore(cloud.doc, controlTable, options);
      const client = uniqueName('client');
      const recipients = Array.from({ length: 250 }, (_, i) => `U${String(i).padStart(32, '0')}`);
      const listed = recipients.filter((_, i) => i % 3 === 0);
      // More on the list than asked for: a list of 180, of which 84 are asked.
      const others = Array.from({ length: 96 }, (_, i) => `U${String(1_000 + i).padStart(32, '0')}`);
      await store.add(
        client,
        [...listed, ...others].map((recipient) => ({
          recipient,
          kind: 'line' as const,
          source: 'api' as const,
          reason: 'asked not to be contacted',
          addedAt: T0,
        })),
      );
      const found = await store.suppressed(client, [
        ...recipients,
        ...recipients.slice(0, 20),
        'Unever-seen',
      ]);
      expect([...found.keys()].sort()).toEqual([...listed].sort());
      expect(found.get(listed[0]!)).toMatchObject({ source: 'api', reason: 'asked not to be contacted' });
      // Another client's list is its own.
      expect((await store.suppressed(uniqueName('client'), recipients)).size).toBe(0);
    },
  );
});

describe('the channel store', () => {
  const store = new DynamoChannelStore(cloud.doc, channelsTable);

  it('stores a channel and reads it back as it was, retiring secret included', async () => {
    const channelId = uniqueName('ch');
    const channel = rotateSecret(
      channelFromInput(
        {
          channelId,
          clientId: 'client-a',
          channelSecret: 'c0ffee00c0ffee00c0ffee00c0ffee00',
          accessToken: 'channel-access-token-1',
          greeting: 'ようこそ 👋',
          rules: [{ match: 'regex', pattern: '^order #\\d+$', answer: 'On it', ignoreCase: true }],
        },
        T0,
      ),
      'feedface0000feedface0000feedface',
      T0 + 1,
    );
    await store.put(channel);
    expect(await store.get(channelId)).toEqual(channel);
    expect(await store.get(uniqueName('missing'))).toBeUndefined();
  });
});

describe('receiving a webhook for a channel id that cannot exist', () => {
  it('answers it as an unknown channel, not as an internal error', async () => {
    const receive = makeReceiveWebhook({
      channels: cachedChannels(new DynamoChannelStore(cloud.doc, channelsTable)),
      queue: { enqueue: async () => {} },
      clock: { now: () => T0 },
    });
    const rawBody = Buffer.from('{"destination":"U1","events":[]}');
    const request = {
      channelId: 'x'.repeat(2049),
      headers: { 'x-line-signature': signBody(rawBody, 'any-secret') },
      rawBody,
    };
    await expect(receive(request)).rejects.toBeInstanceOf(UnknownChannelError);
  });
});
