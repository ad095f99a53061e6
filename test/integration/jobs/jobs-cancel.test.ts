/**
 * Cancelling a job on the local cloud: the operator API behind the API Gateway stand-in, the
 * ingest Lambda polling its queue (which runs the cancel sweep), DynamoDB Local. Every task that
 * had not started ends `cancelled` and leaves the outstanding index; a call in flight is left
 * to end, and ends without a retry; a message a dead broker left in flight ends `cancelled` once
 * its claim's hold has passed, re-checked through a delayed message on the ingest queue.
 */

import { readFileSync } from 'node:fs';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { DeleteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoTaskCanceller } from '#shared/adapters/dynamo-cancel.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { settleFromSnapshot } from '#shared/broker/settle.ts';
import { CALL_NEVER_ENDED_REASON, cancelSweepStart, JobSweep } from '#shared/jobs/cancel.ts';
import { keys, type Task, taskShard } from '#shared/jobs/model.ts';
import type { CancelSweepMessage, QueueSendOptions } from '#shared/jobs/ports.ts';
import { archiveReportStart, reportArchiveKey } from '#shared/jobs/report-archive.ts';
import { JOB_CANCELLED_REASON } from '#shared/jobs/task-lifecycle.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, eventually, useJobsApi } from '../../support/jobs-api.ts';
import { readOutstanding, readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const mixedList = readFileSync(new URL('../../fixtures/jobs/mixed-list.csv', import.meta.url));
// Each message recipient a task of its own, as a list past the chunks' bound is held: these cases
// move single tasks (chunks' sweep is `chunk-readers.test.ts`'s).
const harness = useJobsApi(cloud, { env: { INGEST_MAX_CHUNKED_LIST_BYTES: '1' } });
const call = (method: string, path: string, body?: unknown, contentType = 'application/json') =>
  harness.call(method, path, body, { 'content-type': contentType });

const tasksOf = (jobId: string) => readTasks(cloud.doc, tasksTable, jobId);

const outstandingOf = (clientId: string, jobId: string) =>
  readOutstanding(cloud.doc, tasksTable, clientId, jobId);

/**
 * A client with a scheduled job made of `csv`, uploaded inline through the operator API; with
 * `message`, a message job sending that text.
 */
async function scheduledJob(
  csv: Uint8Array,
  message?: string,
): Promise<{ clientId: string; jobId: string; tasks: Task[] }> {
  const clientId = uniqueName('cancel');
  const client = message === undefined ? CLIENT : { ...CLIENT, messageChannelId: 'cancel-channel' };
  expect((await call('PUT', `/clients/${clientId}`, client)).status).toBe(200);
  const options = message === undefined ? '' : `&channel=message&message=${encodeURIComponent(message)}`;
  const created = await call('POST', `/clients/${clientId}/jobs?name=list${options}`, csv, 'text/csv');
  expect(created.status).toBe(201);
  const { jobId } = created.body;
  const job = await eventually(async () => {
    const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    return ['scheduled', 'failed'].includes(body.status) ? body : undefined;
  }, 'the ingest');
  expect(job.status).toBe('scheduled');
  return { clientId, jobId, tasks: await tasksOf(jobId) };
}

/** Puts a task where the broker would: in flight (out of the index) or waiting to retry (in it). */
async function moveTask(task: Task, state: 'in-flight' | 'retry-wait', readyAt = Date.now()) {
  const index = keys.outstandingIndex({ ...task, state: 'retry-wait', readyAt })!;
  await cloud.doc.send(
    new UpdateCommand({
      TableName: tasksTable,
      Key: keys.task(task.jobId, task.taskId),
      UpdateExpression:
        state === 'in-flight'
          ? 'SET #state = :state, attempts = :one, startedAt = :now REMOVE openPk, openSk'
          : 'SET #state = :state, attempts = :one, readyAt = :readyAt, openPk = :openPk, openSk = :openSk',
      ExpressionAttributeNames: { '#state': 'state' },
      ExpressionAttributeValues:
        state === 'in-flight'
          ? { ':state': state, ':one': 1, ':now': Date.now() }
          : {
              ':state': state,
              ':one': 1,
              ':readyAt': readyAt,
              ':openPk': index.openPk,
              ':openSk': index.openSk,
            },
    }),
  );
}

const MINUTE = 60_000;

/** A message with a name in it (held a task a recipient here: every list is past this suite's chunk bound). */
const PERSONAL = 'お知らせ {{name}} 様';

/** A list of `n` LINE recipients. */
function lineList(n: number): Buffer {
  const rows = Array.from(
    { length: n },
    (_, i) => `U${(0xc0ffee00 + i).toString(16).padStart(32, '0')},Name ${i}`,
  );
  return Buffer.from(`userId,name\n${rows.join('\n')}\n`, 'utf8');
}

/**
 * Puts a message task where a broker's claim does: in flight, still in the outstanding index,
 * re-sorted to the end of its hold (`readyAt`), with the claim's lease token.
 */
async function claimMessage(task: Task, holdUntil: number, token: number) {
  await cloud.doc.send(
    new UpdateCommand({
      TableName: tasksTable,
      Key: keys.task(task.jobId, task.taskId),
      UpdateExpression:
        'SET #state = :inFlight, attempts = :one, startedAt = :startedAt, claimToken = :token, ' +
        'readyAt = :holdUntil, openSk = :openSk, updatedAt = :startedAt',
      ExpressionAttributeNames: { '#state': 'state' },
      ExpressionAttributeValues: {
        ':inFlight': 'in-flight',
        ':one': 1,
        ':startedAt': holdUntil - 15 * MINUTE,
        ':token': token,
        ':holdUntil': holdUntil,
        ':openSk': `${new Date(holdUntil).toISOString()}#${task.jobId}#${task.taskId}`,
      },
    }),
  );
}

/** How many messages of the file's ingest queue wait out a delay. */
async function delayedOnIngestQueue(): Promise<number> {
  const out = await cloud.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: harness.ingestQueueUrl(),
      AttributeNames: ['ApproximateNumberOfMessagesDelayed'],
    }),
  );
  return Number(out.Attributes?.ApproximateNumberOfMessagesDelayed ?? 0);
}

describe('cancelling a job', () => {
  it('ends every task not started cancelled, through the ingest queue, and lets the call in flight end without a retry', async () => {
    const { clientId, jobId, tasks } = await scheduledJob(mixedList);
    expect(tasks.length).toBeGreaterThanOrEqual(4);
    const [inFlight, retrying] = tasks as [Task, Task, ...Task[]];
    await moveTask(inFlight, 'in-flight');
    await moveTask(retrying, 'retry-wait');
    expect((await outstandingOf(clientId, jobId)).length).toBe(tasks.length - 1);

    const cancelled = await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`);
    expect(cancelled).toMatchObject({ status: 200, body: { status: 'cancelled' } });

    // The ingest poller runs the sweep the cancel queued.
    const job = await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return body.counts.cancelled === tasks.length - 1 ? body : undefined;
    }, 'the sweep');
    expect(job.counts.outstanding).toBe(1);
    const after = await tasksOf(jobId);
    expect(after.map((t) => [t.taskId, t.state])).toEqual(
      tasks.map((t) => [t.taskId, t.taskId === inFlight.taskId ? 'in-flight' : 'cancelled']),
    );
    for (const t of after) if (t.state === 'cancelled') expect(t.reason).toBe(JOB_CANCELLED_REASON);
    expect(await outstandingOf(clientId, jobId)).toEqual([]);

    // The call in flight ends busy; the broker that started it still holds the job as running.
    const brokerTasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const settled = await settleFromSnapshot(brokerTasks, {
      task: { ...inFlight, state: 'in-flight', attempts: 1 },
      job: {
        ...(await new DynamoJobStore(cloud.doc, controlTable).get(clientId, jobId))!,
        status: 'running',
      },
      attempt: 1,
      snapshot: {
        callId: 'call-1',
        idempotencyKey: attemptKey(jobId, inFlight.taskId, 1),
        status: 'busy',
        at: new Date().toISOString(),
        sequence: 2,
      },
      now: Date.now(),
    });
    expect(settled).toBe(true);
    expect((await tasksOf(jobId)).every((t) => t.state === 'cancelled')).toBe(true);
    expect(await outstandingOf(clientId, jobId)).toEqual([]);
    const final = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    expect(final.body.counts).toMatchObject({ cancelled: tasks.length, outstanding: 0 });
  });

  it("writes no retry for a job cancelled between the settle's read and its write", async () => {
    const { clientId, jobId, tasks } = await scheduledJob(mixedList);
    const [inFlight] = tasks as [Task, ...Task[]];
    await moveTask(inFlight, 'in-flight');
    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`)).status).toBe(200);
    await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return body.counts.cancelled === tasks.length - 1 ? true : undefined;
    }, 'the sweep');
    // The settle decided on a retry while the job still looked running.
    const brokerTasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const settled = await brokerTasks.settle({
      task: { ...inFlight, state: 'in-flight', attempts: 1 },
      attempt: 1,
      settlement: { state: 'retry-wait', lastResult: 'no-answer', readyAt: Date.now() + 60_000 },
      now: Date.now(),
    });
    expect(settled).toBe(true);
    const [after] = (await tasksOf(jobId)).filter((t) => t.taskId === inFlight.taskId);
    expect(after).toMatchObject({
      state: 'cancelled',
      lastResult: 'no-answer',
      reason: JOB_CANCELLED_REASON,
    });
    expect(await outstandingOf(clientId, jobId)).toEqual([]);
    const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    expect(body.counts).toMatchObject({ cancelled: tasks.length, outstanding: 0 });
  });

  it('sweeps page by page over continuations, each page safe to run twice', async () => {
    const rows = Array.from({ length: 80 }, (_, i) => `090-3333-${String(1000 + i)},Name ${i}`);
    const csv = Buffer.from(`phone,name\n${rows.join('\n')}\n`, 'utf8');
    const { clientId, jobId, tasks } = await scheduledJob(csv);
    expect(tasks.length).toBe(80);
    const shardsUsed = new Set(tasks.map((t) => taskShard(t.taskId))).size;
    // Cancelled in the store, so no sweep is queued: this test runs the sweep itself, in small pages.
    const sent: CancelSweepMessage[] = [];
    const store = new DynamoJobStore(cloud.doc, controlTable);
    const job = (await store.get(clientId, jobId))!;
    expect((await store.transition(job, 'cancelled', Date.now())).ok).toBe(true);
    const sweep = new JobSweep({
      jobs: store,
      tasks: new DynamoTaskCanceller(cloud.doc, { controlTable, tasksTable, pageItems: 2 }),
      queue: {
        send: async (m) => {
          if (m.kind === 'cancel-sweep') sent.push(m);
        },
      },
      clock: { now: () => Date.now() },
      maxPagesPerRun: 3,
    });
    const ctx = { remainingMs: () => 600_000 };
    let message: CancelSweepMessage | undefined = { kind: 'cancel-sweep', clientId, jobId, shard: 0 };
    let runs = 0;
    while (message) {
      await sweep.handle(message, ctx);
      // Redelivered: the same page again ends and counts nothing twice.
      const next = sent.shift();
      await sweep.handle(message, ctx);
      sent.length = 0;
      message = next;
      runs++;
    }
    expect(runs).toBeGreaterThan(shardsUsed / 3);
    const after = await tasksOf(jobId);
    expect(after.every((t) => t.state === 'cancelled' && t.reason === JOB_CANCELLED_REASON)).toBe(true);
    expect((await store.get(clientId, jobId))!.counts.cancelled).toBe(80);
    expect(await outstandingOf(clientId, jobId)).toEqual([]);
  });
});

describe('a call its dead broker left in flight', () => {
  it('ends cancelled, saying so, once its longest duration and a grace have passed with no end', async () => {
    const rows = Array.from({ length: 3 }, (_, i) => `090-4444-${String(1000 + i)},Name ${i}`);
    const { clientId, jobId, tasks } = await scheduledJob(Buffer.from(`phone,name\n${rows.join('\n')}\n`));
    const [orphan] = tasks as [Task, ...Task[]];
    const startedAt = Date.now() - 20 * MINUTE;
    // Started 20 minutes ago by a broker that died; no status ever came (callbacks lost).
    await cloud.doc.send(
      new UpdateCommand({
        TableName: tasksTable,
        Key: keys.task(jobId, orphan.taskId),
        UpdateExpression:
          'SET #state = :inFlight, attempts = :one, startedAt = :startedAt REMOVE openPk, openSk',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':inFlight': 'in-flight', ':one': 1, ':startedAt': startedAt },
      }),
    );
    const store = new DynamoJobStore(cloud.doc, controlTable);
    expect((await store.transition((await store.get(clientId, jobId))!, 'cancelled', Date.now())).ok).toBe(
      true,
    );
    const sweep = new JobSweep({
      jobs: store,
      tasks: new DynamoTaskCanceller(cloud.doc, { controlTable, tasksTable }),
      queue: { send: async () => {} },
      clock: { now: () => Date.now() },
    });
    const outcome = await sweep.handle(cancelSweepStart(clientId, jobId), { remainingMs: () => 600_000 });
    expect(outcome).toEqual({ kind: 'swept', jobId, ended: 3 });
    const after = new Map((await tasksOf(jobId)).map((t) => [t.taskId, t]));
    expect(after.get(orphan.taskId)).toMatchObject({ state: 'cancelled', reason: CALL_NEVER_ENDED_REASON });
    expect([...after.values()].every((t) => t.state === 'cancelled')).toBe(true);
    expect((await store.get(clientId, jobId))!.counts.cancelled).toBe(3);
  });
});

describe('cancelling a message job while messages are in flight', () => {
  it("ends a dead broker's messages once their hold has passed, and re-checks the held ones after their hold", async () => {
    const { clientId, jobId, tasks } = await scheduledJob(lineList(8), PERSONAL);
    expect(tasks.map((t) => t.channel)).toEqual(Array(8).fill('message'));
    const [dead1, dead2, held1, held2] = tasks as [Task, Task, Task, Task, ...Task[]];
    const expiredHold = Date.now() - MINUTE;
    const heldUntil = Date.now() + 10 * MINUTE;
    // A broker that died (SIGKILL) a while ago, and one whose claim holds 10 more minutes.
    await claimMessage(dead1, expiredHold, 3);
    await claimMessage(dead2, expiredHold, 3);
    await claimMessage(held1, heldUntil, 4);
    await claimMessage(held2, heldUntil, 4);
    // Re-checks an earlier test of this file queued (a call in flight is looked at again later).
    const delayedBefore = await delayedOnIngestQueue();

    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`)).status).toBe(200);
    // The poller's sweep ends the waiting tasks and the dead broker's, and queues a delayed re-check.
    await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return body.counts.cancelled === 6 ? true : undefined;
    }, 'the sweep');
    await eventually(
      async () => ((await delayedOnIngestQueue()) === delayedBefore + 1 ? true : undefined),
      'the re-check',
    );
    const afterFirst = new Map((await tasksOf(jobId)).map((t) => [t.taskId, t]));
    for (const t of tasks) {
      const held = t.taskId === held1.taskId || t.taskId === held2.taskId;
      expect(afterFirst.get(t.taskId)).toMatchObject(
        held
          ? { state: 'in-flight', readyAt: heldUntil }
          : { state: 'cancelled', reason: JOB_CANCELLED_REASON },
      );
    }
    expect(await outstandingOf(clientId, jobId)).toHaveLength(2);

    // The sweep's write loses to a broker that wrote since the page was read (here: a new hold).
    const canceller = new DynamoTaskCanceller(cloud.doc, { controlTable, tasksTable });
    await claimMessage(held2, heldUntil + 1, 4);
    const late = Date.now() + 11 * MINUTE;
    const stale = {
      taskId: held2.taskId,
      state: 'in-flight' as const,
      channel: 'message' as const,
      readyAt: heldUntil,
    };
    expect(
      await canceller.endTasks(
        clientId,
        jobId,
        [stale],
        { state: 'cancelled', reason: JOB_CANCELLED_REASON },
        late,
      ),
    ).toBe(0);
    expect((await tasksOf(jobId)).find((t) => t.taskId === held2.taskId)?.state).toBe('in-flight');

    // The re-check, run when its delay is over: the live broker died too, nothing was written back.
    const queued: { message: unknown; options?: QueueSendOptions }[] = [];
    const store = new DynamoJobStore(cloud.doc, controlTable);
    const recheck = new JobSweep({
      jobs: store,
      tasks: canceller,
      queue: {
        send: async (message, options) => void queued.push({ message, ...(options ? { options } : {}) }),
      },
      clock: { now: () => late },
    });
    const outcome = await recheck.handle(cancelSweepStart(clientId, jobId), { remainingMs: () => 600_000 });
    expect(outcome).toEqual({ kind: 'swept', jobId, ended: 2 });
    expect(queued).toEqual([{ message: archiveReportStart(clientId, jobId) }]); // no re-check: its report next
    const after = await tasksOf(jobId);
    expect(after.every((t) => t.state === 'cancelled' && t.reason === JOB_CANCELLED_REASON)).toBe(true);
    expect(await outstandingOf(clientId, jobId)).toEqual([]);
    const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    expect(body.counts).toMatchObject({ tasks: 8, completed: 0, failed: 0, cancelled: 8, outstanding: 0 });
  });

  it('runs the delayed re-check from the ingest queue, so every message ends without anyone asking', async () => {
    const { clientId, jobId, tasks } = await scheduledJob(lineList(4), PERSONAL);
    const [dead, held] = tasks as [Task, Task, ...Task[]];
    await claimMessage(dead, Date.now() - MINUTE, 7);
    // A hold that ends soon: the poller receives the re-check once SQS's delay is over.
    await claimMessage(held, Date.now() + 3_000, 8);
    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`)).status).toBe(200);
    const job = await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return body.counts.cancelled === 4 ? body : undefined;
    }, 'the sweep and its re-check');
    expect(job.counts).toMatchObject({ tasks: 4, cancelled: 4, outstanding: 0 });
    expect((await tasksOf(jobId)).map((t) => t.state)).toEqual(Array(4).fill('cancelled'));
    expect(await outstandingOf(clientId, jobId)).toEqual([]);
  });

  it('archives the report once every task has ended, and serves it after the tasks expire', async () => {
    const { clientId, jobId, tasks } = await scheduledJob(mixedList);
    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`)).status).toBe(200);
    const store = new DynamoJobStore(cloud.doc, controlTable);
    const archive = await eventually(
      async () => (await store.get(clientId, jobId))?.reportArchive,
      'the cancel sweep, then the report archive',
    );
    expect(archive).toBe(reportArchiveKey(clientId, jobId));
    const reportOf = async () => {
      const answer = await call('GET', `/clients/${clientId}/jobs/${jobId}/report`);
      expect(answer.status).toBe(303);
      const object = await fetch(answer.location!);
      expect(object.status).toBe(200);
      return object.text();
    };
    const archived = await reportOf();
    const rows = archived.split('\r\n').filter((line) => line.includes('job cancelled'));
    expect(rows).toHaveLength(tasks.length);
    // Every task carries its TTL (checked by readTasks); DynamoDB's TTL deletes them in time.
    for (const task of await tasksOf(jobId))
      await cloud.doc.send(new DeleteCommand({ TableName: tasksTable, Key: keys.task(jobId, task.taskId) }));
    expect(await tasksOf(jobId)).toEqual([]);
    expect(await reportOf()).toBe(archived);
  });
});
