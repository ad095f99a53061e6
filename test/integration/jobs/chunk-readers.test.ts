/**
 * A message job's recipients held in one chunk item (`shared/jobs/chunks.ts`), read by what reads
 * tasks one recipient at a time, on the local cloud: the cancel sweep ends the chunk and moves the
 * job's counts by every member (one that ended apart by its own end), and the report lists each
 * member on its own row with its own task id. Ingest writes the chunk (a message for all).
 */

import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { type Chunk, chunkTaskId } from '#shared/jobs/chunks.ts';
import { keys, type Task } from '#shared/jobs/model.ts';
import { tasksInShardOrder } from '#shared/jobs/report.ts';
import { JOB_CANCELLED_REASON } from '#shared/jobs/task-lifecycle.ts';
import { endedTaskExpiry } from '#shared/resources.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, eventually, scheduledInlineJob, useJobsApi } from '../../support/jobs-api.ts';
import { readOutstanding, readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const tasksTable = cloud.info.tableNames.tasks!;
const harness = useJobsApi(cloud);
const call = (method: string, path: string, body?: unknown, contentType = 'application/json') =>
  harness.call(method, path, body, { 'content-type': contentType });

const recipient = (i: number) => `U${(0xc4a0c000 + i).toString(16).padStart(32, '0')}`;

/** Every member of the job, as its report reads them (a chunk's one by one), in row order. */
async function membersOf(jobId: string): Promise<Task[]> {
  const store = new DynamoTaskStore(cloud.doc, tasksTable);
  const members: Task[] = [];
  for await (const task of tasksInShardOrder((shard) => store.shard(jobId, shard))) members.push(task);
  return members.sort((a, b) => a.row - b.row);
}

/** A scheduled message job of `n` LINE recipients with one message for all, as ingest leaves it. */
async function sharedMessageJob(n: number): Promise<{ clientId: string; jobId: string; tasks: Task[] }> {
  const clientId = uniqueName('chunk');
  expect(
    (await call('PUT', `/clients/${clientId}`, { ...CLIENT, messageChannelId: 'chunk-channel' })).status,
  ).toBe(200);
  const rows = Array.from({ length: n }, (_, i) => recipient(i));
  const csv = `userId\n${rows.join('\n')}\n`;
  const jobId = await scheduledInlineJob(harness, clientId, 'name=sale&channel=message&message=Sale', csv);
  return { clientId, jobId, tasks: await membersOf(jobId) };
}

/** The chunk's second member ended apart (as an opt-out at a claim leaves it). */
async function secondEndedApart(jobId: string): Promise<void> {
  await cloud.doc.send(
    new UpdateCommand({
      TableName: tasksTable,
      Key: keys.task(jobId, chunkTaskId(2)),
      UpdateExpression: 'SET #except = :except',
      ExpressionAttributeNames: { '#except': 'except' },
      ExpressionAttributeValues: {
        ':except': {
          '1': {
            state: 'failed',
            lastResult: 'invalid',
            reason: 'LINE refused the user',
            attempts: 1,
            updatedAt: 5,
          },
        },
      },
    }),
  );
}

describe('a chunk read as its members', () => {
  it('is cancelled whole, each member counted by its own end, and reported on its own row', async () => {
    const { clientId, jobId, tasks } = await sharedMessageJob(4);
    // Ingest held the four in one chunk, named by the first row read.
    const items = await readTasks<Task & Chunk>(cloud.doc, tasksTable, jobId);
    expect(items.map((item) => [item.taskId, (item as { memberCount?: number }).memberCount])).toEqual([
      [chunkTaskId(2), 4],
    ]);
    expect(tasks.map((t) => [t.taskId, t.row, t.state])).toEqual(
      [0, 1, 2, 3].map((i) => [recipientTaskId(jobId, recipient(i)), i + 2, 'pending']),
    );
    await secondEndedApart(jobId);
    const members = await membersOf(jobId);
    expect(members.map((t) => [t.taskId, t.row, t.recipient, t.state]).sort()).toEqual(
      tasks
        .map((t, i) => [
          recipientTaskId(jobId, t.recipient),
          t.row,
          t.recipient,
          i === 1 ? 'failed' : 'pending',
        ])
        .sort(),
    );

    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`)).status).toBe(200);
    const job = await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return body.counts.outstanding === 0 ? body : undefined;
    }, 'the cancel sweep');
    expect(job.counts).toMatchObject({ tasks: 4, completed: 0, failed: 1, cancelled: 3, outstanding: 0 });
    const [stored] = await readTasks<Task & Chunk>(cloud.doc, tasksTable, jobId);
    expect(stored).toMatchObject({ state: 'cancelled', reason: JOB_CANCELLED_REASON });
    expect(await readOutstanding(cloud.doc, tasksTable, clientId, jobId)).toEqual([]);

    const report = await eventually(async () => {
      const answer = await call('GET', `/clients/${clientId}/jobs/${jobId}/report`);
      if (answer.status === 200) return String(answer.body);
      if (answer.status !== 303) return undefined;
      return (await fetch(answer.location!)).text();
    }, 'the report');
    const lines = report
      .replace(/^\ufeff/, '')
      .trim()
      .split('\r\n')
      .slice(1)
      .sort();
    expect(lines).toEqual(
      tasks
        .map((t, i) =>
          i === 1
            ? `${t.row},${t.recipient},failed,1,invalid,LINE refused the user,,`
            : `${t.row},${t.recipient},cancelled,0,,${JOB_CANCELLED_REASON},,`,
        )
        .sort(),
    );
  });
});

describe('ingest of a message for all', () => {
  it('holds the recipients 500 a chunk, and finds a duplicate held in an earlier page', async () => {
    const clientId = uniqueName('chunkdup');
    expect(
      (await call('PUT', `/clients/${clientId}`, { ...CLIENT, messageChannelId: 'chunk-channel' })).status,
    ).toBe(200);
    // 1,200 rows (data rows 2 to 1,201): row 1,101 repeats row 4's recipient, three pages later.
    const rows = Array.from({ length: 1_200 }, (_, i) => (i === 1_099 ? recipient(102) : recipient(100 + i)));
    const csv = `userId\n${rows.join('\n')}\n`;
    const jobId = await scheduledInlineJob(harness, clientId, 'name=sale&channel=message&message=Sale', csv);
    const job = (await call('GET', `/clients/${clientId}/jobs/${jobId}`)).body;
    expect(job.counts).toMatchObject({ rows: 1_200, tasks: 1_199, skipped: 1, rejected: 0 });
    const items = await readTasks<Task & Chunk>(cloud.doc, tasksTable, jobId);
    expect(items.map((item) => item.taskId).sort()).toEqual([2, 502, 1_002].map((row) => chunkTaskId(row)));
    const members = await membersOf(jobId);
    expect(members).toHaveLength(1_199);
    expect(new Set(members.map((t) => t.recipient)).size).toBe(1_199);
    // Held in chunks as decided, and recorded, when its validation began.
    const { Item } = await cloud.doc.send(
      new GetCommand({ TableName: cloud.info.tableNames.control!, Key: keys.job(clientId, jobId) }),
    );
    expect(Item?.ingestChunked).toBe(true);
  });

  it('deletes the chunks a repeated page leaves empty where they exist and are pending', async () => {
    const store = new DynamoTaskStore(cloud.doc, tasksTable);
    const pending = await sharedMessageJob(3);
    await store.deleteChunks!(pending.jobId, [chunkTaskId(2), chunkTaskId(502)]);
    expect(await readTasks(cloud.doc, tasksTable, pending.jobId)).toEqual([]);
    // One a cancel sweep ended stays, as the job's counts have it.
    const ended = await sharedMessageJob(3);
    await cloud.doc.send(
      new UpdateCommand({
        TableName: tasksTable,
        Key: keys.task(ended.jobId, chunkTaskId(2)),
        UpdateExpression: 'SET #state = :cancelled, updatedAt = :at, expiresAt = :expires',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':cancelled': 'cancelled', ':at': 5, ':expires': endedTaskExpiry(5) },
      }),
    );
    await store.deleteChunks!(ended.jobId, [chunkTaskId(2)]);
    expect(await readTasks(cloud.doc, tasksTable, ended.jobId)).toHaveLength(1);
  });
});

describe('ingest of a personalised message', () => {
  it("holds the recipients in chunks with each one's name and columns, and reports them on their rows", async () => {
    const clientId = uniqueName('chunkvars');
    expect(
      (await call('PUT', `/clients/${clientId}`, { ...CLIENT, messageChannelId: 'chunk-channel' })).status,
    ).toBe(200);
    const csv = [
      'userId,お名前,配達日',
      `${recipient(300)},青木 花子,12月3日`,
      `${recipient(301)},"Baba, Ken",12月4日`,
      `${recipient(302)},,`,
      '',
    ].join('\n');
    const message = encodeURIComponent('お知らせ {{name}}様 お届けは{{配達日}}です');
    const jobId = await scheduledInlineJob(
      harness,
      clientId,
      `name=notice&channel=message&message=${message}`,
      csv,
    );
    const items = await readTasks<Task & Chunk>(cloud.doc, tasksTable, jobId);
    expect(items.map((item) => item.taskId)).toEqual([chunkTaskId(2)]);
    expect(items[0]!.memberVariables).toEqual(expect.any(String));
    const members = await membersOf(jobId);
    expect(members.map((t) => [t.taskId, t.row, t.name, t.variables])).toEqual([
      [recipientTaskId(jobId, recipient(300)), 2, '青木 花子', { 配達日: '12月3日' }],
      [recipientTaskId(jobId, recipient(301)), 3, 'Baba, Ken', { 配達日: '12月4日' }],
      [recipientTaskId(jobId, recipient(302)), 4, undefined, { 配達日: '' }],
    ]);
  });
});
