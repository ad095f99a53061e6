/**
 * A person's history on DynamoDB Local (`DynamoPersonHistory`): the tasks table's keys-only
 * byRecipient index, read under each of the person's identifiers, newest job first, the tasks and
 * their jobs read in batches.
 */
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoPersonHistory } from '#shared/adapters/dynamo-person-history.ts';
import { newUlid } from '#shared/ids.ts';
import { type Job, type JobChannel, keys, type Task } from '#shared/jobs/model.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud } from '../../support/cloud.ts';

const cloud = testCloud();
const stage = `hist${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let history: DynamoPersonHistory;
let tasks: DynamoTaskStore;

beforeAll(async () => {
  [controlTable, tasksTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
  ]);
  history = new DynamoPersonHistory(cloud.doc, tasksTable, controlTable);
  tasks = new DynamoTaskStore(cloud.doc, tasksTable);
});

const PHONE = '+819055550001';
const MAIL = 'hanako@example.jp';
let clock = Date.parse('2026-11-01T00:00:00Z');

/** A job of `channel` written to the control table, its id a ULID a minute after the last. */
async function job(clientId: string, name: string, channel: JobChannel): Promise<string> {
  clock += 60_000;
  const jobId = newUlid(clock);
  const item: Pick<Job, 'clientId' | 'jobId' | 'name' | 'channel'> = { clientId, jobId, name, channel };
  await cloud.doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.job(clientId, jobId), ...item } }),
  );
  return jobId;
}

function task(clientId: string, jobId: string, recipient: string, person?: string): Task {
  return {
    clientId,
    jobId,
    taskId: `t-${recipient}`,
    row: 2,
    channel: recipient.startsWith('+') ? 'call' : 'message',
    recipient,
    ...(person ? { person } : {}),
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: clock,
    updatedAt: clock,
  };
}

describe("a person's history", () => {
  it('reads the tasks filed under each identifier, linked or not when written, newest job first', async () => {
    const clientId = `c${newUlid(Date.now()).slice(-8)}`;
    const before = await job(clientId, 'before the link', 'call');
    await tasks.put([task(clientId, before, PHONE)]);
    const calls = await job(clientId, 'calls', 'call');
    const mails = await job(clientId, 'mails', 'email');
    await tasks.put([task(clientId, calls, PHONE, 'P1'), task(clientId, calls, '+819055550002')]);
    await tasks.put([task(clientId, mails, MAIL, 'P1')]);
    const found = await history.latest(clientId, [PHONE, MAIL], 10);
    expect(found.more).toBe(false);
    expect(found.tasks.map(({ task, job }) => [job?.name, job?.channel, task.recipient])).toEqual([
      ['mails', 'email', MAIL],
      ['calls', 'call', PHONE],
      ['before the link', 'call', PHONE],
    ]);
    // The records as the job reads them: no index keys.
    expect(Object.keys(found.tasks[0]!.task)).not.toContain('recipientPk');
    // Another person's task is not theirs; an identifier never seen has none.
    expect((await history.latest(clientId, ['+819055550002'], 10)).tasks).toHaveLength(1);
    expect(await history.latest(clientId, ['+819099990000'], 10)).toEqual({ tasks: [], more: false });
  });

  it('keeps a task under its person when the task changes, and shows it as it is now', async () => {
    const clientId = `c${newUlid(Date.now()).slice(-8)}`;
    const jobId = await job(clientId, 'calls', 'call');
    const t = task(clientId, jobId, PHONE, 'P2');
    await tasks.put([t]);
    await cloud.doc.send(
      new UpdateCommand({
        TableName: tasksTable,
        Key: keys.task(jobId, t.taskId),
        UpdateExpression: 'SET #state = :s, lastResult = :r, attempts = :a REMOVE openPk, openSk',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':s': 'completed', ':r': 'answered', ':a': 1 },
      }),
    );
    const [entry] = (await history.latest(clientId, [PHONE], 10)).tasks;
    expect(entry!.task).toMatchObject({ state: 'completed', lastResult: 'answered', attempts: 1 });
  });

  it('answers the newest `limit` and says there are more', async () => {
    const clientId = `c${newUlid(Date.now()).slice(-8)}`;
    const names: string[] = [];
    for (let i = 0; i < 5; i++) {
      const jobId = await job(clientId, `job ${i}`, i % 2 === 0 ? 'call' : 'email');
      names.push(`job ${i}`);
      await tasks.put([task(clientId, jobId, i % 2 === 0 ? PHONE : MAIL, 'P3')]);
    }
    const found = await history.latest(clientId, [PHONE, MAIL], 3);
    expect(found.more).toBe(true);
    expect(found.tasks.map(({ job }) => job?.name)).toEqual(['job 4', 'job 3', 'job 2']);
    const all = await history.latest(clientId, [PHONE, MAIL], 5);
    expect(all.more).toBe(false);
    expect(all.tasks.map(({ job }) => job?.name)).toEqual([...names].reverse());
  });
});
