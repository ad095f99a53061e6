import { describe, expect, it } from 'vitest';
import { MAX_MULTICAST_RECIPIENTS } from '#shared/campaign/pipeline.ts';
import { isSharedMessage } from '#shared/campaign/template.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import {
  CHUNK_MEMBERS,
  CHUNK_VARIABLE_BYTES,
  type Chunk,
  type ChunkMember,
  ChunkMemberError,
  chunkMembers,
  chunkTaskId,
  isChunk,
  isChunkTaskId,
  membersInChunkState,
  memberTasks,
  memberTemplateVariables,
  memberVariableBytes,
  packMembers,
  pageChunks,
} from '#shared/jobs/chunks.ts';
import { chunkRetryKey, isRetryKey } from '#shared/retry-keys.ts';

const id = (n: number) => `U${n.toString(16).padStart(32, '0')}`;

function chunkOf(count: number, extra: Partial<Chunk> = {}): Chunk {
  return {
    clientId: 'c1',
    jobId: 'j1',
    taskId: chunkTaskId(2),
    channel: 'message',
    state: 'pending',
    attempts: 0,
    readyAt: 1_000,
    updatedAt: 1_000,
    ...packMembers(Array.from({ length: count }, (_, i) => ({ recipient: id(i + 1), row: i + 2 }))),
    ...extra,
  };
}

describe('multicast chunks', () => {
  it('holds as many members as one multicast takes', () => {
    expect(CHUNK_MEMBERS).toBe(MAX_MULTICAST_RECIPIENTS);
  });

  it('packs LINE user ids and rows into 20 bytes a member and reads them back in order', () => {
    const members = [
      { recipient: 'U0123456789abcdef0123456789abcdef', row: 2 },
      { recipient: 'Uffffffffffffffffffffffffffffffff', row: 4_294_967_295 },
      { recipient: 'U00000000000000000000000000000000', row: 7 },
    ];
    const packed = packMembers(members);
    expect(packed.members.length + packed.rows.length).toBe(60);
    expect(chunkMembers(packed)).toEqual(members.map((m, index) => ({ ...m, index })));
    // As DynamoDB hands a binary attribute back: a view into a larger buffer.
    const backing = new Uint8Array(100);
    backing.set(packed.members, 20);
    const view = { members: backing.subarray(20, 68), rows: packed.rows };
    expect(chunkMembers(view).map((m) => m.recipient)).toEqual(members.map((m) => m.recipient));
  });

  it('refuses members that are not LINE user ids, bad rows, and too many or none', () => {
    for (const recipient of ['U0123456789ABCDEF0123456789ABCDEF', '+819011112222', 'U123', '']) {
      expect(() => packMembers([{ recipient, row: 2 }])).toThrow(ChunkMemberError);
    }
    for (const row of [0, -1, 1.5, 2 ** 32]) {
      expect(() => packMembers([{ recipient: id(1), row }])).toThrow(ChunkMemberError);
    }
    expect(() => packMembers([])).toThrow(ChunkMemberError);
    const many = Array.from({ length: CHUNK_MEMBERS + 1 }, (_, i) => ({ recipient: id(i), row: i + 1 }));
    expect(() => packMembers(many)).toThrow(/1 to 500/);
    expect(() => chunkMembers({ members: new Uint8Array(17), rows: new Uint8Array(4) })).toThrow(
      ChunkMemberError,
    );
  });

  it('names a chunk by the first row read, apart from every task of one recipient', () => {
    expect(chunkTaskId(2)).toBe('chunk-0000000002');
    expect(chunkTaskId(12) > chunkTaskId(9)).toBe(true);
    expect(isChunkTaskId(chunkTaskId(2))).toBe(true);
    expect(isChunkTaskId(recipientTaskId('j1', id(1)))).toBe(false);
    expect(isChunk({ taskId: chunkTaskId(3) })).toBe(true);
    expect(isChunk({})).toBe(false);
    expect(() => chunkTaskId(0)).toThrow(RangeError);
  });

  it("splits a page's recipients into chunks of 500, the first named by the page's first row read", () => {
    const members = Array.from({ length: 1_001 }, (_, i) => ({ recipient: id(i), row: 10 + i * 2 }));
    const chunks = pageChunks(9, members);
    expect(chunks.map((c) => [c.taskId, c.members.length])).toEqual([
      [chunkTaskId(9), 500],
      [chunkTaskId(1_010), 500],
      [chunkTaskId(2_010), 1],
    ]);
    expect(pageChunks(9, [])).toEqual([]);
  });

  it('reads each member as the task it stands for: its own id, row and recipient, its own end when apart', () => {
    const chunk = chunkOf(3, {
      state: 'completed',
      attempts: 1,
      lastResult: 'delivered',
      updatedAt: 5_000,
      except: { '1': { state: 'cancelled', reason: 'opted out', attempts: 0, updatedAt: 2_000 } },
    });
    const tasks = memberTasks(chunk);
    expect(
      tasks.map((t) => [t.taskId, t.row, t.recipient, t.state, t.attempts, t.lastResult, t.reason]),
    ).toEqual([
      [recipientTaskId('j1', id(1)), 2, id(1), 'completed', 1, 'delivered', undefined],
      [recipientTaskId('j1', id(2)), 3, id(2), 'cancelled', 0, undefined, 'opted out'],
      [recipientTaskId('j1', id(3)), 4, id(3), 'completed', 1, 'delivered', undefined],
    ]);
    expect(tasks[0]).toMatchObject({ clientId: 'c1', jobId: 'j1', channel: 'message', variables: {} });
    expect(tasks[0]).not.toHaveProperty('members');
    expect(tasks[0]).not.toHaveProperty('except');
    expect(membersInChunkState(chunk)).toBe(2);
  });

  it('gives a chunk one retry key per attempt', () => {
    const key = chunkRetryKey('j1', chunkTaskId(2), 1);
    expect(isRetryKey(key)).toBe(true);
    expect(chunkRetryKey('j1', chunkTaskId(2), 1)).toBe(key);
    expect(chunkRetryKey('j1', chunkTaskId(2), 2)).not.toBe(key);
    expect(chunkRetryKey('j2', chunkTaskId(2), 1)).not.toBe(key);
    expect(() => chunkRetryKey('j1', chunkTaskId(2), 0)).toThrow(RangeError);
  });

  it('sends a chunk as one multicast only when its message is the same for everyone', () => {
    expect(isSharedMessage({ messages: [{ type: 'text', text: 'Sale today' }] })).toBe(true);
    expect(isSharedMessage({ messages: [{ type: 'text', text: 'Hello {{name}}' }] })).toBe(false);
    expect(isSharedMessage({ messages: [] })).toBe(false);
    expect(isSharedMessage(undefined)).toBe(false);
  });
});

describe("a personalised message's chunks", () => {
  const members: Omit<ChunkMember, 'index'>[] = [
    { recipient: id(1), row: 2, name: '青木 花子', variables: { 配達日: '12/3', plan: 'gold' } },
    { recipient: id(2), row: 3, variables: { 配達日: '12/4' } },
    { recipient: id(3), row: 4 },
  ];

  it("carries each member's name and variables, read back in member order", () => {
    const packed = packMembers(members, true);
    expect(JSON.parse(packed.memberVariables!)).toHaveLength(3);
    expect(chunkMembers(packed)).toEqual(members.map((m, index) => ({ ...m, index })));
    expect(packMembers(members).memberVariables).toBeUndefined();
    expect(memberTemplateVariables(chunkMembers(packed)[0]!)).toEqual({
      name: '青木 花子',
      配達日: '12/3',
      plan: 'gold',
    });
    // A `name` column of its own wins over the list's name column, as for a task.
    expect(memberTemplateVariables({ name: 'A', variables: { name: 'B' } })).toEqual({ name: 'B' });
  });

  it('reads each member as its task with its own name and variables', () => {
    const tasks = memberTasks(chunkOf(1, packMembers(members, true)));
    expect(tasks.map((t) => [t.recipient, t.name, t.variables])).toEqual([
      [id(1), '青木 花子', { 配達日: '12/3', plan: 'gold' }],
      [id(2), undefined, { 配達日: '12/4' }],
      [id(3), undefined, {}],
    ]);
    expect(tasks[0]).not.toHaveProperty('memberVariables');
  });

  it('refuses a chunk whose variables do not match its members', () => {
    const packed = packMembers(members, true);
    const short = JSON.stringify(JSON.parse(packed.memberVariables!).slice(1));
    expect(() => chunkMembers({ ...packed, memberVariables: short })).toThrow(ChunkMemberError);
    expect(() => chunkMembers({ ...packed, memberVariables: '{}' })).toThrow(ChunkMemberError);
  });

  it("cuts a chunk at its variables' byte budget as well as at 500 members, named by each first row", () => {
    const big = 'x'.repeat(1_000);
    const many = Array.from({ length: 450 }, (_, i) => ({
      recipient: id(i),
      row: 10 + i,
      variables: { note: big },
    }));
    const chunks = pageChunks(9, many, true);
    const perChunk = Math.floor(CHUNK_VARIABLE_BYTES / memberVariableBytes(many[0]!));
    expect(chunks.map((c) => c.members.length)).toEqual([perChunk, perChunk, 450 - 2 * perChunk]);
    expect(chunks.map((c) => c.taskId)).toEqual([
      chunkTaskId(9),
      chunkTaskId(10 + perChunk),
      chunkTaskId(10 + 2 * perChunk),
    ]);
    for (const c of chunks)
      expect(c.members.reduce((n, m) => n + memberVariableBytes(m), 0)).toBeLessThanOrEqual(
        CHUNK_VARIABLE_BYTES,
      );
    // A shared message's chunk carries no variables: 500 a chunk whatever the columns.
    expect(pageChunks(9, many).map((c) => c.members.length)).toEqual([450]);
  });
});
