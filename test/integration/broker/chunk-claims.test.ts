/**
 * Multicast work held per chunk (docs/multicast-chunks.md, step 3), claimed and ended by a message
 * session on DynamoDB Local: a chunk goes to the pipeline as one task per member under the chunk's
 * retry key; its members' outcomes, arriving over several writes, end it once (members skipped
 * written apart), with the job's counts moved once per member at its page's close; a release keeps
 * the key; a broker taking the client over resends it under the same key; a client with contact
 * limits spills it into tasks of their own, counted and capped as tasks are. A personalised
 * message's chunk goes out as a push a member, each with its own variables and key; a session
 * stopped midway releases the chunk with the members that ended written apart.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { readOpenClaims } from '#shared/adapters/dynamo-claim-pages.ts';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import type { ClaimedTask, TaskOutcome } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { chunkTaskId } from '#shared/jobs/chunks.ts';
import { type Job, keys, type Task } from '#shared/jobs/model.ts';
import { OPTED_OUT_REASON } from '#shared/jobs/task-lifecycle.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { attemptKey, chunkRetryKey } from '#shared/retry-keys.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { claimAll, messageHolder } from '../../support/message-sessions.ts';
import { lineUserOf, seedMessageJob } from '../../support/seed-jobs.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const HOUR = 3_600_000;
const SHARED: MessageTemplate = { messages: [{ type: 'text', text: '本日限りのセール' }] };

const PERSONAL: MessageTemplate = { messages: [{ type: 'text', text: '{{name}}様、明日お届けします' }] };

const seed = (tasks: number, settings = {}, message = SHARED): Promise<Job> => {
  const clientId = uniqueName('ck').replace(/-/g, '');
  return seedMessageJob(
    cloud.doc,
    { controlTable, tasksTable },
    { clientId, channelId: 'channel-1', tasks, message, jobIdPrefix: 'CK', chunks: true, settings },
  );
};

const countsOf = async (job: Job) =>
  (await new DynamoJobStore(cloud.doc, controlTable).get(job.clientId, job.jobId))!.counts;

/** Every member of the job as its report reads it (a chunk's members one by one). */
async function memberTasks(job: Job): Promise<Task[]> {
  const store = new DynamoTaskStore(cloud.doc, tasksTable);
  const out: Task[] = [];
  for (let shard = 0; shard < TASK_SHARDS; shard++)
    for await (const t of store.shard(job.jobId, shard)) out.push(t);
  return out.sort((a, b) => a.row - b.row);
}

const chunkItem = async (job: Job, taskId = chunkTaskId(2)) =>
  (
    await cloud.doc.send(
      new GetCommand({ TableName: tasksTable, Key: keys.task(job.jobId, taskId), ConsistentRead: true }),
    )
  ).Item;

const outcome = (
  t: ClaimedTask,
  kind: TaskOutcome['kind'],
  at: number,
  more: Partial<TaskOutcome> = {},
): TaskOutcome => ({
  jobId: t.jobId,
  taskId: t.taskId,
  attempt: t.attempt,
  kind,
  lastResult: kind === 'skipped' ? 'opted-out' : kind,
  retryKey: t.batch?.retryKey,
  at,
  ...more,
});

/** A broker's lease and a message session under it; `optedOut` are the recipients who unfollowed. */
const holder = (job: Job, owner: string, now: () => number, optedOut: readonly string[] = []) =>
  messageHolder(job, owner, now, {
    tables: { controlTable, tasksTable },
    leaseDoc: cloud.doc,
    optedOut: async (_client, recipients) => new Set(recipients.filter((r) => optedOut.includes(r))),
  });

describe('a chunk claimed and ended by a message session', () => {
  it('goes out as its members under one key, and ends once when every member has an outcome', async () => {
    const job = await seed(3);
    const now = Date.now();
    const skipped = lineUserOf(job.clientId, 1);
    const a = await holder(job, 'a', () => now, [skipped]);
    const claimed = await claimAll(a, 3);
    const key = chunkRetryKey(job.jobId, chunkTaskId(2), 1);
    expect(claimed.map((t) => [t.taskId, t.batch?.retryKey, t.attempt])).toEqual(
      [0, 1, 2].map((i) => [recipientTaskId(job.jobId, lineUserOf(job.clientId, i)), key, 1]),
    );
    expect(claimed.filter((t) => t.optedOut).map((t) => t.recipient)).toEqual([skipped]);

    // The skipped member's outcome first (the pipeline settles it before sending): the chunk waits.
    await a.report.write([outcome(claimed[1]!, 'skipped', now)]);
    expect(await chunkItem(job)).toMatchObject({ state: 'pending' });
    await a.report.write([0, 2].map((i) => outcome(claimed[i]!, 'delivered', now, { requestId: 'r-1' })));

    expect(await chunkItem(job)).toMatchObject({ state: 'completed', attempts: 1, sentWith: key });
    expect((await memberTasks(job)).map((t) => [t.taskId, t.state, t.reason])).toEqual([
      [claimed[0]!.taskId, 'completed', undefined],
      [claimed[1]!.taskId, 'cancelled', OPTED_OUT_REASON],
      [claimed[2]!.taskId, 'completed', undefined],
    ]);
    expect(await countsOf(job)).toMatchObject({ completed: 2, cancelled: 1, failed: 0 });
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
    expect(a.written()).toMatchObject({ delivered: 2, skipped: 1, released: 0 });
  });

  it('is released whole, and claimed again under the same key', async () => {
    const job = await seed(2);
    let now = Date.now();
    const a = await holder(job, 'a', () => now);
    const first = await claimAll(a, 2);
    await a.report.write(
      first.map((t) => outcome(t, 'released', now, { lastResult: 'stopped', maybeSent: true })),
    );
    expect(await chunkItem(job)).toMatchObject({ state: 'retry-wait', attempts: 1, maybeSent: true });
    expect(await countsOf(job)).toMatchObject({ completed: 0 });

    now += 1_000;
    const again = await claimAll(a, 2);
    expect(again.map((t) => [t.taskId, t.batch?.retryKey, t.maybeSent])).toEqual(
      first.map((t) => [t.taskId, t.batch?.retryKey, true]),
    );
    await a.report.write(again.map((t) => outcome(t, 'delivered', now)));
    expect(await countsOf(job)).toMatchObject({ completed: 2 });
  });

  it('is resent under the same key by a broker taking the client over, and counted once', async () => {
    const job = await seed(600);
    let now = Date.now();
    const clock = () => now;
    const a = await holder(job, 'a', clock);
    const held = await claimAll(a, 500);
    expect(new Set(held.map((t) => t.batch?.retryKey)).size).toBe(1);

    now += HOUR + 1;
    const b = await holder(job, 'b', clock);
    const all = await claimAll(b, 600);
    const resent = all.filter((t) => t.batch?.retryKey === held[0]!.batch?.retryKey);
    expect(resent).toHaveLength(500);
    expect(resent.every((t) => t.maybeSent)).toBe(true);
    // a's late outcome for what b took over is refused.
    await a.report.write(held.map((t) => outcome(t, 'delivered', now)));
    expect(await chunkItem(job)).toMatchObject({ state: 'pending', maybeSent: true });

    await b.report.write(all.map((t) => outcome(t, 'delivered', now)));
    expect(await countsOf(job)).toMatchObject({ completed: 600, failed: 0, cancelled: 0 });
    expect((await memberTasks(job)).every((t) => t.state === 'completed')).toBe(true);
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
  });

  it('is spilled into tasks of its own when the client has a contact limit over LINE', async () => {
    const job = await seed(150, { contactLimits: [{ max: 1, per: 'day', channels: ['line'] }] });
    const now = Date.now();
    const a = await holder(job, 'a', () => now);
    const claimed = await claimAll(a, 150);
    expect(claimed).toHaveLength(150);
    expect(claimed.every((t) => t.batch === undefined)).toBe(true);
    expect(await chunkItem(job)).toBeUndefined();
    await a.report.write(claimed.map((t) => outcome(t, 'delivered', now)));
    expect(await countsOf(job)).toMatchObject({ completed: 150 });
    const tasks = await memberTasks(job);
    expect(tasks.map((t) => t.row)).toEqual(Array.from({ length: 150 }, (_, i) => i + 2));
    expect(new Set(tasks.map((t) => t.taskId)).size).toBe(150);
  });
});

describe("a personalised message's chunk claimed and ended by a message session", () => {
  it('goes out as a push a member, each with its variables and its own key; a stop midway keeps what was sent', async () => {
    const job = await seed(3, {}, PERSONAL);
    let now = Date.now();
    const a = await holder(job, 'a', () => now);
    const claimed = await claimAll(a, 3);
    expect(claimed.map((t) => [t.taskId, t.variables, t.batch, t.attempt])).toEqual(
      [0, 1, 2].map((i) => [
        recipientTaskId(job.jobId, lineUserOf(job.clientId, i)),
        { name: `顧客${i}` },
        undefined,
        1,
      ]),
    );
    expect(await chunkItem(job)).toMatchObject({ memberVariables: expect.any(String) });

    // Stopped after two pushes: the third released, the two sent kept apart in the chunk.
    await a.report.write([
      outcome(claimed[0]!, 'delivered', now, {
        requestId: 'r-0',
        retryKey: attemptKey(job.jobId, claimed[0]!.taskId, 1),
      }),
      outcome(claimed[2]!, 'failed', now, { lastResult: 'rejected', reason: 'HTTP 400: invalid user' }),
      outcome(claimed[1]!, 'released', now, { lastResult: 'stopped' }),
    ]);
    const released = await chunkItem(job);
    expect(released).toMatchObject({ state: 'retry-wait', attempts: 1 });
    expect(released).not.toHaveProperty('batchKey');
    expect(released).not.toHaveProperty('requestId');
    expect(Object.keys(released!.except as object).sort()).toEqual(['0', '2']);

    now += 1_000;
    const again = await claimAll(a, 3);
    expect(again.map((t) => [t.taskId, t.variables])).toEqual([[claimed[1]!.taskId, { name: '顧客1' }]]);
    await a.report.write([outcome(again[0]!, 'delivered', now)]);

    expect(await chunkItem(job)).toMatchObject({ state: 'completed' });
    expect((await memberTasks(job)).map((t) => [t.taskId, t.state, t.variables])).toEqual(
      [
        [claimed[0]!.taskId, 'completed', {}],
        [claimed[1]!.taskId, 'completed', {}],
        [claimed[2]!.taskId, 'failed', {}],
      ].map(([taskId, state], i) => [taskId, state, { name: `顧客${i}` }]),
    );
    expect(await countsOf(job)).toMatchObject({ completed: 2, failed: 1, cancelled: 0 });
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
  });

  /**
   * A personalised chunk of three claimed by a, then taken over by b once a's lease expired; b
   * delivers one member and releases the others. What a late write of a's must not undo.
   */
  async function takenOverHalfSent() {
    const job = await seed(3, {}, PERSONAL);
    const clock = { now: Date.now() };
    const a = await holder(job, 'a', () => clock.now);
    const held = await claimAll(a, 3);
    clock.now += HOUR + 1;
    const b = await holder(job, 'b', () => clock.now);
    const taken = await claimAll(b, 3);
    expect(taken.every((t) => t.maybeSent)).toBe(true);
    const [first, ...rest] = taken;
    await b.report.write([
      outcome(first!, 'delivered', clock.now),
      ...rest.map((t) => outcome(t, 'released', clock.now, { lastResult: 'stopped' })),
    ]);
    // a's late outcomes (it never knew it lost the client): a member other than b's delivered one
    // delivered, the rest released — its `except` would be written over b's.
    const other = held.find((t) => t.taskId !== first!.taskId)!;
    const lateWrite = () =>
      a.report.write(
        held.map((t) =>
          t === other
            ? outcome(t, 'delivered', clock.now)
            : outcome(t, 'released', clock.now, { lastResult: 'stopped' }),
        ),
      );
    return { job, clock, b, rest, before: (await chunkItem(job))!, lateWrite };
  }

  it("refuses the release of a holder whose page a newer holder settled: the newer one's ends stay", async () => {
    const { job, clock, b, rest, before, lateWrite } = await takenOverHalfSent();
    expect(Object.keys(before.except as object)).toHaveLength(1);
    await lateWrite();
    expect((await chunkItem(job))!.except).toEqual(before.except);

    clock.now += 1_000;
    const last = await claimAll(b, 3);
    expect(last.map((t) => t.taskId).sort()).toEqual(rest.map((t) => t.taskId).sort());
    await b.report.write(last.map((t) => outcome(t, 'delivered', clock.now)));
    expect(await countsOf(job)).toMatchObject({ completed: 3, failed: 0, cancelled: 0 });
  });

  it('refuses it also when the job was cancelled meanwhile (the release would become an end)', async () => {
    const { job, before, lateWrite } = await takenOverHalfSent();
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(job.clientId, job.jobId),
        UpdateExpression: 'SET #status = :cancelled',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':cancelled': 'cancelled' },
      }),
    );
    await lateWrite();
    // Neither ended cancelled by a nor its `except` over b's: the sweep ends it, counting b's end.
    expect(await chunkItem(job)).toMatchObject({ state: 'retry-wait', except: before.except });
    expect(await countsOf(job)).toMatchObject({ completed: 0, cancelled: 0 });
  });

  it("is spilled into tasks that keep each member's variables", async () => {
    const job = await seed(5, { contactLimits: [{ max: 1, per: 'day', channels: ['line'] }] }, PERSONAL);
    const now = Date.now();
    const a = await holder(job, 'a', () => now);
    const claimed = await claimAll(a, 5);
    const byRecipient = new Map(claimed.map((t) => [t.recipient, t.variables]));
    expect([0, 1, 2, 3, 4].map((i) => byRecipient.get(lineUserOf(job.clientId, i)))).toEqual(
      [0, 1, 2, 3, 4].map((i) => ({ name: `顧客${i}` })),
    );
    expect(await chunkItem(job)).toBeUndefined();
    await a.report.write(claimed.map((t) => outcome(t, 'delivered', now)));
    expect(await countsOf(job)).toMatchObject({ completed: 5 });
  });
});
