/**
 * Recipient-local time (issue 14 #4) on the local cloud: a call list uploaded through the operator
 * API with `timeZoneBy=recipient` and a `タイムゾーン` column; the ingest writes each task's zone and
 * stamps its `readyAt` with that zone's first opening, so the broker's index read (`outstanding`)
 * finds only recipients inside their hours; a task found closed is deferred to its opening. When
 * the client's hours widen, the re-time sweep (queued by the settings update, run by the ingest)
 * moves the tasks waiting for an opening of the old hours to the new one, never before a retry's
 * delay end (`notBefore`).
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';
import { earliestStart } from '#shared/jobs/restrictions.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, eventually, scheduledInlineJob, useJobsApi } from '../../support/jobs-api.ts';
import { readOutstanding, readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const harness = useJobsApi(cloud);
const call = (method: string, path: string, body?: unknown, contentType = 'application/json') =>
  harness.call(method, path, body, { 'content-type': contentType });

/** 09:00–18:00 every day: at any instant some of Tokyo, New York and London are closed. */
const DAYTIME = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '09:00', end: '18:00' }]]),
);
const ZONES = ['Asia/Tokyo', 'America/New_York', 'Europe/London'];

describe('recipient-local time on the tasks table', () => {
  it('stamps zone and first opening per task, lists only open recipients, and defers a closed one', async () => {
    const clientId = uniqueName('tz');
    expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, callingHours: DAYTIME })).status).toBe(
      200,
    );
    // Rows 2-4: Japanese mobiles, the zone from the number (Tokyo) or the column; row 5: a bad zone.
    const csv = [
      '電話番号,氏名,タイムゾーン',
      '090-7777-1001,東京,',
      '090-7777-1002,NY,America/New_York',
      '090-7777-1003,LDN,europe/london',
      '090-7777-1004,bad,Tokyo Standard Time',
    ].join('\n');
    const created = await call(
      'POST',
      `/clients/${clientId}/jobs?name=tz&timeZoneBy=recipient`,
      csv,
      'text/csv',
    );
    expect(created.status).toBe(201);
    const { jobId } = created.body;
    const view = await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return ['scheduled', 'failed'].includes(body.status) ? body : undefined;
    }, 'the ingest');
    expect(view).toMatchObject({ status: 'scheduled', timeZoneBy: 'recipient' });
    expect(view.counts).toMatchObject({ rows: 4, tasks: 3, rejected: 1 });
    const problems = (await call('GET', `/clients/${clientId}/jobs/${jobId}/row-problems`)).body;
    expect(JSON.stringify(problems)).toContain('not an IANA time zone');

    const tasks = await readTasks(cloud.doc, tasksTable, jobId);
    expect(tasks.map((t) => t.timeZone)).toEqual(ZONES);
    const settings = (await call('GET', `/clients/${clientId}`)).body as ClientSettings;
    const job = { ...(view as Job), startAt: Date.parse(view.startAt ?? '') || (view as Job).startAt };
    for (const task of tasks) {
      expect(task.readyAt).toBe(earliestStart(settings, job, job.startAt, task.timeZone));
    }

    // The broker's index read at job start (a running job's tasks only): exactly the recipients
    // whose zone is open then.
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(clientId, jobId),
        UpdateExpression: 'SET #status = :running',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':running': 'running' },
      }),
    );
    const store = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const openNow = tasks.filter((t) => t.readyAt === job.startAt).map((t) => t.taskId);
    const listed = (await store.outstanding(clientId, job.startAt, 10)).filter((t) => t.jobId === jobId);
    expect(listed.map((t) => t.taskId).sort()).toEqual([...openNow].sort());

    // Deferring moves a waiting task's readyAt and its index entry; a stale copy is refused.
    const task = tasks[0] as Task;
    const later = task.readyAt + 3_600_000;
    expect(await store.defer!(task, later, Date.now())).toBe(true);
    expect(await store.defer!(task, later + 1, Date.now())).toBe(false);
    const [after] = (await readTasks(cloud.doc, tasksTable, jobId)).filter((t) => t.taskId === task.taskId);
    expect(after?.readyAt).toBe(later);
    const entry = (await readOutstanding(cloud.doc, tasksTable, clientId, jobId)).find(
      (e) => e.taskId === task.taskId,
    );
    expect(String(entry?.openSk)).toContain(new Date(later).toISOString());
  });

  it('a running job whose every recipient is outside their hours says so, and when the first opens (issue 35 #7)', async () => {
    const clientId = uniqueName('tzwait');
    // One minute a day, two hours from now in Tokyo: closed now for every recipient.
    const opens = new Date(Date.now() + 2 * 3_600_000 + 9 * 3_600_000);
    const hhmm = (d: Date) => d.toISOString().slice(11, 16);
    const minute = [{ start: hhmm(opens), end: hhmm(new Date(opens.getTime() + 60_000)) }];
    const hours = Object.fromEntries(
      ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, minute]),
    );
    expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, callingHours: hours })).status).toBe(200);
    const csv = ['電話番号,氏名', '090-7777-3001,東京', '090-7777-3002,京都'].join('\n');
    const jobId = await scheduledInlineJob(harness, clientId, 'name=tz&timeZoneBy=recipient', csv);
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(clientId, jobId),
        UpdateExpression: 'SET #status = :running',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':running': 'running' },
      }),
    );
    const [first] = (await readTasks(cloud.doc, tasksTable, jobId)).sort((a, b) => a.readyAt - b.readyAt);
    // Asked of a job that starts nothing: its first waiting task says why.
    expect((await call('GET', `/clients/${clientId}/jobs/${jobId}`)).body.waiting).toBeUndefined();
    const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}?why=next-task`);
    expect(body.waiting).toEqual({
      reason: 'recipient-hours',
      until: new Date(first!.readyAt).toISOString(),
      message: expect.stringMatching(
        /^every recipient left is outside their local calling hours .* Asia\/Tokyo$/,
      ),
    });
  });

  it("widened hours: the waiting tasks move to their recipients' new opening, never before a retry's delay", async () => {
    const clientId = uniqueName('tzwide');
    expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, callingHours: DAYTIME })).status).toBe(
      200,
    );
    const csv = [
      '電話番号,氏名,タイムゾーン',
      '090-7777-2001,東京,Asia/Tokyo',
      '090-7777-2002,NY,America/New_York',
      '090-7777-2003,LDN,Europe/London',
    ].join('\n');
    const jobId = await scheduledInlineJob(harness, clientId, 'name=tz&timeZoneBy=recipient', csv);
    const stamped = await readTasks(cloud.doc, tasksTable, jobId);
    // At any instant one of the three zones is outside 09:00-18:00: its task waits for its morning.
    const now = Date.now();
    expect(stamped.some((t) => t.readyAt > now)).toBe(true);
    // One task waits for a retry whose delay ends in an hour, stamped (under the old hours) 2 days on.
    const retry = stamped[0] as Task;
    const notBefore = now + 3_600_000;
    const deferred = now + 2 * 86_400_000;
    const index = keys.outstandingIndex({ ...retry, state: 'retry-wait', readyAt: deferred })!;
    await cloud.doc.send(
      new UpdateCommand({
        TableName: tasksTable,
        Key: keys.task(jobId, retry.taskId),
        UpdateExpression:
          'SET #state = :retry, readyAt = :readyAt, openSk = :openSk, notBefore = :notBefore, attempts = :one',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':retry': 'retry-wait',
          ':readyAt': deferred,
          ':openSk': index.openSk,
          ':notBefore': notBefore,
          ':one': 1,
        },
      }),
    );

    // Open all day, every day: every first attempt is ready now, the retry at its delay's end.
    const allDay = Object.fromEntries(
      ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
    );
    expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, callingHours: allDay })).status).toBe(200);
    const moved = await eventually(async () => {
      const tasks = await readTasks(cloud.doc, tasksTable, jobId);
      const done = tasks.every((t) =>
        t.taskId === retry.taskId ? t.readyAt === notBefore : t.readyAt <= Date.now(),
      );
      return done ? tasks : undefined;
    }, 'the re-time sweep');
    expect(moved.find((t) => t.taskId === retry.taskId)).toMatchObject({
      state: 'retry-wait',
      readyAt: notBefore,
    });
    const store = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(clientId, jobId),
        UpdateExpression: 'SET #status = :running',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':running': 'running' },
      }),
    );
    // The brokers' "ready by now" read finds the two first attempts, and the retry only at its time.
    const listed = (await store.outstanding(clientId, Date.now(), 10)).filter((t) => t.jobId === jobId);
    expect(listed.map((t) => t.taskId).sort()).toEqual(
      stamped
        .filter((t) => t.taskId !== retry.taskId)
        .map((t) => t.taskId)
        .sort(),
    );
    const atDelayEnd = (await store.outstanding(clientId, notBefore, 10)).filter((t) => t.jobId === jobId);
    expect(atDelayEnd).toHaveLength(3);
  });
});
