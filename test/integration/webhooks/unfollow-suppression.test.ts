/**
 * LINE unfollows and follows on the suppression list, against DynamoDB Local: the webhook processor
 * (with the real opt-out and suppression stores) puts an unfollowing user on the client's list with
 * source `line-unfollow`, and a later follow takes that entry back; an operator's entry is neither
 * replaced by an unfollow nor taken back by a follow.
 */
import { describe, expect, it } from 'vitest';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { makeProcessWebhookEvent } from '#shared/webhooks/process.ts';
import type { QueuedWebhookEvent } from '#shared/webhooks/queue-message.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import {
  channel,
  eventBuilders,
  FakeMessaging,
  ManualClock,
  MemoryEventStore,
  T0,
} from '../../unit/webhooks/fakes.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const HOUR = 3_600_000;

function setup() {
  const clientId = uniqueName('line');
  const known = { ...channel({ greeting: undefined }), clientId };
  const clock = new ManualClock();
  const suppressions = new DynamoSuppressionStore(cloud.doc, controlTable);
  const process = makeProcessWebhookEvent({
    channels: { get: async (id) => (id === known.channelId ? known : undefined) },
    events: new MemoryEventStore(),
    optOuts: new DynamoOptOutStore(cloud.doc, controlTable),
    suppressions,
    messagingFor: () => new FakeMessaging(),
    clock,
  });
  const builders = eventBuilders(clock);
  const queued = (event: QueuedWebhookEvent['event']): QueuedWebhookEvent => ({
    v: 1,
    channelId: known.channelId,
    destination: 'U0000000000000000000000000000000b',
    receivedAt: T0,
    event,
  });
  return { clientId, known, clock, suppressions, process, builders, queued };
}

describe('an unfollow on the suppression list', () => {
  it('adds the user (source line-unfollow); a later follow takes the entry back', async () => {
    const { clientId, known, clock, suppressions, process, builders, queued } = setup();
    const user = `U${'1'.repeat(32)}`;
    await process(queued(builders.unfollow({ channelId: known.channelId, from: user })), 1);
    const entry = (await suppressions.suppressed(clientId, [user])).get(user);
    expect(entry).toMatchObject({ source: 'line-unfollow', kind: 'line' });
    clock.advance(HOUR);
    await process(queued(builders.follow({ channelId: known.channelId, from: user })), 1);
    expect((await suppressions.suppressed(clientId, [user])).size).toBe(0);
  });

  it("never replaces nor takes back an operator's entry", async () => {
    const { clientId, known, clock, suppressions, process, builders, queued } = setup();
    const user = `U${'2'.repeat(32)}`;
    await suppressions.add(clientId, [
      { recipient: user, kind: 'line', source: 'api', reason: 'complaint', addedAt: T0 - HOUR },
    ]);
    await process(queued(builders.unfollow({ channelId: known.channelId, from: user })), 1);
    clock.advance(HOUR);
    await process(queued(builders.follow({ channelId: known.channelId, from: user })), 1);
    expect((await suppressions.suppressed(clientId, [user])).get(user)).toMatchObject({
      source: 'api',
      reason: 'complaint',
    });
  });
});
