/**
 * Ingest holding a personalised message's LINE recipients in chunks (`shared/jobs/chunks.ts`,
 * `ingest.ts` `#store`), on in-memory stores: a page whose variables pass a chunk's byte budget is
 * cut into several chunks, and a step repeated after a crash, with a recipient opted out meanwhile,
 * writes the same chunks again (same names, same cuts), so no recipient is ever held twice. A list
 * over the chunked limit is held a task a recipient.
 */
import { describe, expect, it } from 'vitest';
import { JobsApi } from '#shared/jobs/api.ts';
import {
  CHUNK_VARIABLE_BYTES,
  type Chunk,
  chunkMembers,
  chunkTaskId,
  memberVariableBytes,
} from '#shared/jobs/chunks.ts';
import { JobIngest } from '#shared/jobs/ingest.ts';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import { silentLogger } from '#shared/log.ts';
import {
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

const NOW = Date.parse('2026-11-26T00:00:00Z');
const ROWS = 60;
const recipient = (i: number) => `U${(0xbeef00 + i).toString(16).padStart(32, '0')}`;
/** A note of ~7 KB a row (a row may be 8 KB): about 28 members' variables fill a chunk. */
const note = (i: number) => `${i}:${'x'.repeat(7_000)}`;

interface WorldOptions {
  readonly maxChunkedListBytes?: number;
  readonly batchSize?: number;
  readonly maxRowsPerRun?: number;
  /** Steps that crash right after writing their first chunks (default 1). */
  readonly crashes?: number;
}

function world(options: WorldOptions = {}) {
  const clients = memoryClients();
  const jobs = memoryJobs();
  const chunks = new Map<string, Chunk>();
  const tasks = {
    ...memoryTasks(),
    async putChunks(written: readonly Chunk[]) {
      for (const chunk of written) chunks.set(chunk.taskId, chunk);
      await crashAfterChunks();
    },
    async chunkedRows(jobId: string) {
      const rows = new Map<string, number>();
      for (const chunk of chunks.values())
        if (chunk.jobId === jobId)
          for (const m of chunkMembers(chunk))
            rows.set(m.recipient, Math.min(rows.get(m.recipient) ?? m.row, m.row));
      return rows;
    },
    async deleteChunks(_jobId: string, taskIds: readonly string[]) {
      deleted.push(...taskIds);
      for (const taskId of taskIds) if (chunks.get(taskId)?.state === 'pending') chunks.delete(taskId);
    },
  };
  const deleted: string[] = [];
  let crashes = options.crashes ?? 1;
  const crashAfterChunks = async () => {
    if (crashes-- > 0) throw new Error('Lambda crashed after writing the page');
  };
  const files = memoryFiles();
  const queue = memoryQueue();
  const clock = { now: () => NOW };
  const optedOut = new Set<string>();
  void clients.put(parseClientSettings('acme', { ...TOKYO_CLIENT, messageChannelId: 'ch-1' }, NOW));
  const deps = { clients, jobs, tasks, files, validationReports: memoryReports(), queue, clock };
  const api = new JobsApi({ region: 'ap-northeast-1', ...deps, bucket: 'uploads' });
  const ingestWith = (more: Pick<WorldOptions, 'maxChunkedListBytes'>) => {
    const { crashes: _c, ...tuning } = { ...options, ...more };
    return new JobIngest({
      ...deps,
      ...tuning,
      log: silentLogger,
      optOuts: async (_client, recipients) => new Set(recipients.filter((r) => optedOut.has(r))),
    });
  };
  const ingest = ingestWith({});
  return { api, ingest, ingestWith, files, chunks, deleted, optedOut, queue, tasks, jobs };
}

/** A personalised message job of `ROWS` LINE recipients, uploaded; its S3 event and a step's context. */
async function uploaded(w: ReturnType<typeof world>, rows = Array.from({ length: ROWS }, (_, i) => i)) {
  const { jobId } = await w.api.createJob('acme', {
    name: 'notice',
    channel: 'message',
    message: { messages: [{ type: 'text', text: 'お知らせ {{note}}' }] },
  });
  const csv = `userId,note\n${rows.map((i) => `${recipient(i)},${note(i)}`).join('\n')}\n`;
  const key = `uploads/acme/${jobId}.csv`;
  await w.files.put(key, Buffer.from(csv), 'text/csv');
  const event = {
    kind: 'object' as const,
    object: { bucket: 'uploads', key, eTag: 'e1', size: Buffer.byteLength(csv), eventTime: NOW },
  };
  return {
    jobId,
    event,
    ctx: { remainingMs: () => 600_000, receiveCount: 1 },
    bytes: Buffer.byteLength(csv),
  };
}

describe("ingest of a personalised message's recipients in chunks", () => {
  it('cuts a page by its variables, and writes the same chunks again after a crash with a new opt-out', async () => {
    const w = world();
    const { event, ctx } = await uploaded(w);

    await expect(w.ingest.handle(event, ctx)).rejects.toThrow('Lambda crashed');
    const first = new Map([...w.chunks].map(([id, c]) => [id, chunkMembers(c).map((m) => m.row)]));
    const perChunk = Math.floor(
      CHUNK_VARIABLE_BYTES / memberVariableBytes({ variables: { note: note(10) } }),
    );
    expect(first.size).toBe(Math.ceil(ROWS / perChunk));
    expect([...first.keys()].sort()).toEqual(
      Array.from({ length: first.size }, (_, k) => chunkTaskId(2 + k * perChunk)).sort(),
    );

    // Row 2's recipient opts out before the step is repeated: the first chunk loses a member, the
    // cuts stay where they were (counted over the rows read, not those accepted).
    w.optedOut.add(recipient(0));
    await w.ingest.handle(event, ctx);
    const again = new Map([...w.chunks].map(([id, c]) => [id, chunkMembers(c).map((m) => m.row)]));
    expect([...again.keys()].sort()).toEqual([...first.keys()].sort());
    expect(again.get(chunkTaskId(2))).toEqual(first.get(chunkTaskId(2))!.slice(1));
    const held = [...again.values()].flat();
    expect(held).toHaveLength(ROWS - 1);
    expect(new Set(held).size).toBe(held.length);
    for (const chunk of w.chunks.values())
      expect(chunkMembers(chunk).every((m) => m.variables?.note === note(m.row - 2))).toBe(true);
  });

  it('holds a list larger than the chunked limit a task a recipient, on every step', async () => {
    const w = world({ maxChunkedListBytes: 100_000 });
    const { event, ctx, bytes } = await uploaded(w);
    expect(bytes).toBeGreaterThan(100_000);
    await w.ingest.handle(event, ctx);
    expect(w.chunks.size).toBe(0);
    expect(w.tasks.all.size).toBe(ROWS);
  });

  it.each([
    ['a page with other chunks', 500],
    ['a page left with no member at all', 10],
  ])(
    'deletes a chunk whose cut a repeated step leaves empty (every member opted out after the crash): %s',
    async (_, batchSize) => {
      const w = world({ batchSize });
      const { jobId, event, ctx } = await uploaded(w);
      await expect(w.ingest.handle(event, ctx)).rejects.toThrow('Lambda crashed');
      const firstCut = chunkMembers(w.chunks.get(chunkTaskId(2))!);
      for (const m of firstCut) w.optedOut.add(m.recipient);

      await w.ingest.handle(event, ctx);
      expect(w.deleted).toEqual([chunkTaskId(2)]);
      expect(w.chunks.has(chunkTaskId(2))).toBe(false);
      const held = [...w.chunks.values()].flatMap((c) => chunkMembers(c).map((m) => m.recipient));
      const { counts } = (await w.jobs.get('acme', jobId))!;
      expect(counts).toMatchObject({ rows: ROWS, tasks: ROWS - firstCut.length, skipped: firstCut.length });
      expect(held).toHaveLength(counts.tasks);
      expect(held.some((r) => w.optedOut.has(r))).toBe(false);
    },
  );

  it('holds a job the way decided when its validation began, whatever a later step has deployed', async () => {
    const w = world({ crashes: 0, batchSize: 10, maxRowsPerRun: 10 });
    const { jobId, event, ctx } = await uploaded(w);
    await w.ingest.handle(event, ctx);
    expect(w.chunks.size).toBe(1);
    // The next steps run where lists this size would be held as tasks: this job stays in chunks.
    await drain(w, w.ingestWith({ maxChunkedListBytes: 1 }), ctx);
    expect(w.tasks.all.size).toBe(0);
    const held = [...w.chunks.values()].flatMap((c) => chunkMembers(c).map((m) => m.recipient));
    expect(new Set(held).size).toBe(ROWS);
    expect((await w.jobs.get('acme', jobId))!.counts).toMatchObject({ rows: ROWS, tasks: ROWS });
  });

  it("confirms a duplicate against the job's chunks when a job begun before the record changes holding", async () => {
    const w = world({ crashes: 0, batchSize: 10, maxRowsPerRun: 10 });
    // 20 rows: row 17 (the 16th data row) repeats row 4's recipient, in the second step.
    const rows = Array.from({ length: 20 }, (_, i) => (i === 15 ? 2 : i));
    const { jobId, event, ctx } = await uploaded(w, rows);
    // Validation begun by code that recorded no decision: each step decides by what is deployed.
    await w.jobs.beginValidation('acme', jobId, { eTag: event.object.eTag, size: event.object.size }, NOW);
    await w.ingest.handle(event, ctx);
    expect(w.chunks.size).toBe(1);
    await drain(w, w.ingestWith({ maxChunkedListBytes: 1 }), ctx);
    expect(w.tasks.all.size).toBe(9);
    expect([...w.tasks.all.values()].map((t) => t.recipient)).not.toContain(recipient(2));
    expect((await w.jobs.get('acme', jobId))!.counts).toMatchObject({ rows: 20, tasks: 19, skipped: 1 });
  });
});

/** Runs the continuations `w`'s steps sent, and theirs, with `ingest`. */
async function drain(
  w: ReturnType<typeof world>,
  ingest: JobIngest,
  ctx: { remainingMs(): number; receiveCount: number },
) {
  while (w.queue.sent.length > 0) {
    const message = w.queue.sent.shift()!;
    if (message.kind === 'continue') await ingest.handle(message, ctx);
  }
}
