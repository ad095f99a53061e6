/**
 * A chunk's one outcome from its members' (`ClaimedChunks`): the multicast's, members whose outcome
 * differs written apart; members all skipped, each for its own reason, end the chunk too; a member
 * released makes a release, those that ended apart. A personalised chunk's members go a push each.
 */
import { describe, expect, it } from 'vitest';
import { ClaimedChunks, chunkMemberTasks } from '#shared/adapters/dynamo-message-chunks.ts';
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
const personal: Chunk = {
  ...chunk,
  ...packMembers(
    [
      { recipient: id(2), row: 2, name: 'Aoki', variables: { plan: 'gold' } },
      { recipient: id(3), row: 3, name: 'Baba' },
      { recipient: id(4), row: 4, variables: {} },
    ],
    true,
  ),
};
const personalMembers = chunkMembers(personal);
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
    chunks.claimed('J1', chunk, 1, members, { pushes: false });
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
    chunks.claimed('J1', chunk, 1, members, { pushes: false });
    const [done] = chunks.gather([
      outcome(0, 'skipped', { lastResult: 'opted-out' }),
      outcome(1, 'skipped', { lastResult: 'suppressed', reason: 'suppressed: complaint' }),
      outcome(2, 'skipped', { lastResult: 'suppressed', reason: 'suppressed: do not contact' }),
    ]).chunks;
    expect(done!.outcome).toMatchObject({ kind: 'skipped', lastResult: 'opted-out' });
    expect(Object.keys(done!.except).sort()).toEqual(['1', '2']);
    expect(done!.except['2']).toMatchObject({ state: 'cancelled', reason: 'suppressed: do not contact' });
  });

  it('makes a release of a chunk with a member released, the members that ended written apart', () => {
    const chunks = new ClaimedChunks();
    chunks.claimed('J1', personal, 1, personalMembers, { pushes: true });
    const [done] = chunks.gather([
      outcome(0, 'delivered', { requestId: 'r0', retryKey: 'k0' }),
      outcome(1, 'released', { lastResult: 'stopped' }),
      outcome(2, 'released', { lastResult: 'job-ended', maybeSent: true }),
    ]).chunks;
    expect(done!.outcome).toMatchObject({ taskId: chunkTaskId(2), kind: 'released', maybeSent: true });
    // Pushes of their own: no one request id or key speaks for the chunk.
    expect(done!.outcome.requestId).toBeUndefined();
    expect(done!.outcome.retryKey).toBeUndefined();
    expect(done!.except).toEqual({
      '0': { state: 'completed', lastResult: 'delivered', attempts: 1, updatedAt: 5 },
    });
  });

  it("ends a personalised chunk with its members' most common end, the others apart", () => {
    const chunks = new ClaimedChunks();
    chunks.claimed('J1', personal, 1, personalMembers, { pushes: true });
    const [done] = chunks.gather([
      outcome(0, 'failed', { lastResult: 'rejected', reason: 'HTTP 400' }),
      outcome(1, 'delivered'),
      outcome(2, 'delivered'),
    ]).chunks;
    expect(done!.outcome).toMatchObject({ kind: 'delivered' });
    expect(done!.except).toEqual({
      '0': { state: 'failed', lastResult: 'rejected', reason: 'HTTP 400', attempts: 1, updatedAt: 5 },
    });
  });

  it("sends a personalised chunk's members a push each, with their own variables and no shared key", () => {
    const template = { messages: [{ type: 'text' as const, text: 'Hello {{name}}' }] };
    const tasks = chunkMemberTasks(personal, personalMembers, {
      jobId: 'J1',
      attempt: 1,
      startedAt: 5,
      template,
      maybeSent: false,
      optedOut: new Set(),
      suppressed: new Map(),
    });
    expect(tasks.map((t) => [t.recipient, t.variables, t.batch])).toEqual([
      [id(2), { name: 'Aoki', plan: 'gold' }, undefined],
      [id(3), { name: 'Baba' }, undefined],
      [id(4), {}, undefined],
    ]);
    const shared = chunkMemberTasks(chunk, members, {
      jobId: 'J1',
      attempt: 1,
      startedAt: 5,
      template: { messages: [{ type: 'text' as const, text: 'Hello' }] },
      maybeSent: false,
      optedOut: new Set(),
      suppressed: new Map(),
    });
    expect(new Set(shared.map((t) => t.batch?.retryKey)).size).toBe(1);
    expect(shared[0]!.batch).toBeDefined();
  });
});
