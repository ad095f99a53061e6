/**
 * A chunk's one outcome from its members' (`ClaimedChunks`): the multicast's, members whose outcome
 * differs written apart; members all skipped, each for its own reason, end the chunk too.
 */
import { describe, expect, it } from 'vitest';
import { ClaimedChunks } from '#shared/adapters/dynamo-message-chunks.ts';
import type { TaskOutcome } from '#shared/campaign/ports.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { type Chunk, chunkMembers, chunkTaskId, packMembers } from '#shared/jobs/chunks.ts';

const id = (n: number) => `U${n.toString(16).padStart(32, '0')}`;
const chunk: Chunk = {
  clientId: 'c1',
  jobId: 'J1',
  taskId: chunkTaskId(2),
  channel: 'message',
  state: 'pending',
  attempts: 0,
  readyAt: 0,
  updatedAt: 0,
  ...packMembers([2, 3, 4].map((row) => ({ recipient: id(row), row }))),
};
const members = chunkMembers(chunk);
const outcome = (i: number, kind: TaskOutcome['kind'], more: Partial<TaskOutcome> = {}): TaskOutcome => ({
  jobId: 'J1',
  taskId: recipientTaskId('J1', members[i]!.recipient),
  attempt: 1,
  kind,
  lastResult: kind,
  at: 5,
  ...more,
});

describe("a chunk's outcome from its members'", () => {
  it('waits for every member, over several writes', () => {
    const chunks = new ClaimedChunks();
    chunks.claimed('J1', chunk, 1, members);
    expect(chunks.gather([outcome(0, 'delivered')]).chunks).toEqual([]);
    const other = { ...outcome(0, 'delivered'), taskId: 'not-a-member' };
    const { tasks, chunks: done } = chunks.gather([outcome(1, 'delivered'), outcome(2, 'delivered'), other]);
    expect(tasks).toEqual([other]);
    expect(done).toHaveLength(1);
    expect(done[0]!.outcome).toMatchObject({ taskId: chunkTaskId(2), kind: 'delivered', attempt: 1 });
    expect(done[0]!.except).toEqual({});
  });

  it('ends a chunk whose members were all skipped, each for its own reason', () => {
    const chunks = new ClaimedChunks();
    chunks.claimed('J1', chunk, 1, members);
    const [done] = chunks.gather([
      outcome(0, 'skipped', { lastResult: 'opted-out' }),
      outcome(1, 'skipped', { lastResult: 'suppressed', reason: 'suppressed: complaint' }),
      outcome(2, 'skipped', { lastResult: 'suppressed', reason: 'suppressed: do not contact' }),
    ]).chunks;
    expect(done!.outcome).toMatchObject({ kind: 'skipped', lastResult: 'opted-out' });
    expect(Object.keys(done!.except).sort()).toEqual(['1', '2']);
    expect(done!.except['2']).toMatchObject({ state: 'cancelled', reason: 'suppressed: do not contact' });
  });

  it('refuses a member released beside one sent (one request cannot do both)', () => {
    const chunks = new ClaimedChunks();
    chunks.claimed('J1', chunk, 1, members);
    expect(() =>
      chunks.gather([outcome(0, 'delivered'), outcome(1, 'released'), outcome(2, 'delivered')]),
    ).toThrow(/disagree/);
  });
});
