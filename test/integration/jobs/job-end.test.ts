/**
 * A job's end (issue 14 #6) on the local cloud: the operator API and the ingest poller behind the
 * API Gateway stand-in, DynamoDB Local, the broker's start and settle transactions, the job
 * manager and the expire sweep. Time is injected where the rule is applied (the job manager, the
 * sweep, the broker's start and settle); the one test of the ingest queue's path moves the job's
 * end into the past instead of waiting for it.
 */
import { BatchWriteCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoTaskCanceller } from '#shared/adapters/dynamo-cancel.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { SqsIngestQueue } from '#shared/adapters/sqs-ingest-queue.ts';
import type { Fence } from '#shared/broker/ports.ts';
import { settleFromSnapshot } from '#shared/broker/settle.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import type { FleetStore } from '#shared/fleet/ports.ts';
import { expireSweepStart, JobSweep, type JobSweepOutcome } from '#shared/jobs/cancel.ts';
import { type Job, keys, type Task } from '#shared/jobs/model.ts';
import type { IngestQueue, JobSweepMessage } from '#shared/jobs/ports.ts';
import {
  JOB_ENDED_IN_FLIGHT_REASON,
  JOB_ENDED_REASON,
  RETRY_AFTER_END_REASON,
} from '#shared/jobs/task-lifecycle.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import type { FinalCallStatus } from '#shared/telephony/port.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, eventually, useJobsApi } from '../../support/jobs-api.ts';
import { readOutstanding, readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const harness = useJobsApi(cloud);
const call = (method: string, path: string, body?: unknown, contentType = 'application/json') =>
  harness.call(method, path, body, { 'content-type': contentType });

const SECOND = 1_000;
const HOUR = 3_600_000;
/** Calling hours open all week, so only the job's end holds its tasks back. */
const ALWAYS = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
);
const list = (n: number) =>
  Buffer.from(
    `phone,name\n${Array.from({ length: n }, (_, i) => `090-4444-${1000 + i},Name ${i}`).join('\n')}\n`,
    'utf8',
  );

const tasksOf = (jobId: string) => readTasks(cloud.doc, tasksTable, jobId);

const outstandingOf = (clientId: string, jobId: string) =>
  readOutstanding(cloud.doc, tasksTable, clientId, jobId);

/** A client whose hours are always open, with a scheduled job of `rows` calls and the given end. */
async function scheduledJob(rows: number, end: string) {
  const clientId = uniqueName('end');
  expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, callingHours: ALWAYS })).status).toBe(200);
  const created = await call(
    'POST',
    `/clients/${clientId}/jobs?name=list&retryDelaySeconds=60&${end}`,
    list(rows),
    'text/csv',
  );
  expect(created.status).toBe(201);
  const { jobId } = created.body;
  const job = await eventually(async () => {
    const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    return ['scheduled', 'failed'].includes(body.status) ? body : undefined;
  }, 'the ingest');
  expect(job.status).toBe('scheduled');
  return { clientId, jobId, view: job, tasks: await tasksOf(jobId) };
}

/**
 * The job manager at `now` on the shared tables, seeing only `clientId`'s jobs (the other suites'
 * jobs are theirs to start and complete) and writing no work list.
 */
function jobManager(clientId: string, now: () => number, sweeps: Pick<IngestQueue, 'send'>) {
  const real = new DynamoFleetStore(cloud.doc, { controlTable, tasksTable });
  const own = <T extends { clientId: string }>(items: T[]) => items.filter((i) => i.clientId === clientId);
  const store: FleetStore = {
    dueScheduledJobs: async (at) => own(await real.dueScheduledJobs(at)),
    runningJobs: async () => own(await real.runningJobs()),
    startJob: (job, at) => real.startJob(job, at),
    completeJob: (job, at) => real.completeJob(job, at),
    hasOpenTask: (jobId) => real.hasOpenTask(jobId),
    nextReadyAt: (c, jobIds, until) => real.nextReadyAt(c, jobIds, until),
    clientStates: (ids, options) => real.clientStates(ids, options),
    putReadyHints: (hints) => real.putReadyHints(hints),
    putFleetWork: async () => false,
  };
  return makeRunJobManager({
    store,
    scaler: { setDesiredCount: async () => {} },
    sweeps,
    clock: { now },
    maxBrokers: 10,
    desiredVersion: () => 'v1',
  });
}

/** The broker's side: its lease on the client, and its start and settle transactions at a given time. */
async function broker(clientId: string, at: number) {
  const tasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
  const lease = await new DynamoLeaseStore(cloud.doc, controlTable).tryTake({
    clientId,
    owner: 'broker-end',
    now: at,
    leaseMs: 4 * HOUR,
  });
  expect(lease).toBeDefined();
  const fence = (now: number): Fence => ({ clientId, owner: 'broker-end', token: lease!.token, now });
  const job = async (jobId: string) => (await tasks.getJob(clientId, jobId))!;
  return {
    tasks,
    start: (task: Task, now: number) => tasks.start(task, fence(now)),
    /** The call of `task`'s attempt ends `status` at `now`, as its status callback reports it. */
    end: async (task: Task, status: FinalCallStatus, now: number) =>
      settleFromSnapshot(tasks, {
        task,
        job: await job(task.jobId),
        attempt: task.attempts,
        snapshot: {
          callId: `call-${task.taskId}-${task.attempts}`,
          idempotencyKey: attemptKey(task.jobId, task.taskId, task.attempts),
          status,
          at: new Date(now).toISOString(),
          sequence: 9,
        },
        now,
      }),
  };
}

describe('a job that reaches its end', () => {
  it('expires its waiting tasks with the reason, lets its calls in flight finish, refuses a start after the end in the transaction, and completes', async () => {
    const endAt = new Date(Date.now() + HOUR);
    endAt.setMilliseconds(0);
    const END = endAt.getTime();
    const { clientId, jobId, view, tasks } = await scheduledJob(6, `endAt=${endAt.toISOString()}`);
    expect(view.endAt).toBe(endAt.toISOString());
    expect(tasks).toHaveLength(6);
    let now = END - HOUR / 2;
    const sent: JobSweepMessage[] = [];
    const run = jobManager(clientId, () => now, {
      send: async (m) => void (m.kind === 'expire-sweep' && sent.push(m)),
    });
    expect((await run()).started).toEqual([jobId]);

    // Before the end: three calls start in the start's transaction. One is answered, one is busy
    // (a retry, due a minute later, well before the end), one is still ringing.
    const b = await broker(clientId, now);
    const [answered, busy, ringing, waiting, late, last] = tasks as [Task, Task, Task, Task, Task, Task];
    const started: Task[] = [];
    for (const t of [answered, busy, ringing]) {
      const result = await b.start(t, now);
      expect(result.kind).toBe('started');
      if (result.kind === 'started') started.push(result.task);
    }
    const [answeredCall, busyCall, ringingCall] = started as [Task, Task, Task];
    expect(await b.end(answeredCall, 'completed', now + SECOND)).toBe(true);
    expect(await b.end(busyCall, 'busy', now + SECOND)).toBe(true);
    expect((await tasksOf(jobId)).find((t) => t.taskId === busy.taskId)).toMatchObject({
      state: 'retry-wait',
      readyAt: now + SECOND + 60_000,
    });

    // At and after the end, the start's transaction refuses: a broker's copy of the job, or its
    // list of outstanding tasks, may be stale; the transaction reads the job's end itself.
    now = END;
    expect(await b.start(waiting, END)).toEqual({ kind: 'gone' });
    expect(await b.start(late, END + SECOND)).toEqual({ kind: 'gone' });
    expect((await tasksOf(jobId)).find((t) => t.taskId === waiting.taskId)?.state).toBe('pending');

    // The job manager's run after the end queues the expire sweep and asks no broker for the job.
    now = END + SECOND;
    const ended = await run();
    expect(ended).toMatchObject({ expiring: [jobId], clients: [], completed: [] });
    expect(sent).toEqual([expireSweepStart(clientId, jobId)]);

    // The sweep (the ingest runs it) ends the waiting tasks, the retry among them, as expired.
    const sweep = new JobSweep({
      jobs: new DynamoJobStore(cloud.doc, controlTable),
      tasks: new DynamoTaskCanceller(cloud.doc, { controlTable, tasksTable, pageItems: 2 }),
      queue: { send: async (m) => void (m.kind === 'expire-sweep' && sent.push(m)) },
      clock: { now: () => now },
      maxPagesPerRun: 4,
    });
    let outcome: JobSweepOutcome | undefined;
    let expired = 0;
    for (let m = sent.shift(); m; m = sent.shift()) {
      outcome = await sweep.handle(m, { remainingMs: () => 600_000 });
      if (outcome.kind !== 'ignored') expired += outcome.ended;
    }
    expect(outcome).toMatchObject({ kind: 'swept' });
    expect(expired).toBe(4);
    const swept = await tasksOf(jobId);
    expect(swept.map((t) => [t.taskId, t.state])).toEqual([
      [answered.taskId, 'completed'],
      [busy.taskId, 'expired'],
      [ringing.taskId, 'in-flight'],
      [waiting.taskId, 'expired'],
      [late.taskId, 'expired'],
      [last.taskId, 'expired'],
    ]);
    for (const t of swept) if (t.state === 'expired') expect(t.reason).toBe(JOB_ENDED_REASON);
    expect(await outstandingOf(clientId, jobId)).toEqual([]);
    // Not complete while a call is in flight.
    expect((await run()).completed).toEqual([]);

    // The call in flight finishes after the end and settles normally: no answer, and since its
    // retry would come after the end, it expires saying so instead of waiting for ever.
    now = END + 2 * SECOND;
    expect(await b.end(ringingCall, 'no-answer', now)).toBe(true);
    expect((await tasksOf(jobId)).find((t) => t.taskId === ringing.taskId)).toMatchObject({
      state: 'expired',
      lastResult: 'no-answer',
      reason: RETRY_AFTER_END_REASON,
    });

    now = END + 3 * SECOND;
    expect((await run()).completed).toEqual([jobId]);
    const done = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    expect(done.body).toMatchObject({ status: 'completed', endAt: endAt.toISOString() });
    expect(done.body.counts).toMatchObject({ tasks: 6, completed: 1, expired: 5, outstanding: 0 });

    // The report says what became of each row, and why.
    const report = await call('GET', `/clients/${clientId}/jobs/${jobId}/report`);
    expect(report.status).toBe(200);
    const rows = (report.body as string)
      .replace(/^\ufeff/, '')
      .trim()
      .split('\r\n')
      .slice(1);
    expect(rows.filter((r) => r.includes(',expired,'))).toHaveLength(5);
    expect(rows.filter((r) => r.includes(JOB_ENDED_REASON))).toHaveLength(4);
    expect(rows.filter((r) => r.includes(RETRY_AFTER_END_REASON))).toHaveLength(1);
  });

  it('is refused with a 400 naming the field when its end is given twice, malformed or already past', async () => {
    const clientId = uniqueName('end400');
    expect((await call('PUT', `/clients/${clientId}`, CLIENT)).status).toBe(200);
    const future = new Date(Date.now() + HOUR).toISOString();
    const cases: [Record<string, unknown>, string[]][] = [
      [{ endAt: future, expireAfter: 'PT1H' }, ['endAt', 'expireAfter']],
      [{ endAt: 'tomorrow' }, ['endAt']],
      [{ expireAfter: '4 hours' }, ['expireAfter']],
      [{ endAt: new Date(Date.now() - HOUR).toISOString() }, ['endAt']],
      [{ startAt: new Date(Date.now() + 2 * HOUR).toISOString(), endAt: future }, ['endAt']],
    ];
    for (const [options, fields] of cases) {
      const answer = await call('POST', `/clients/${clientId}/jobs`, { name: 'list', ...options });
      expect(answer.status).toBe(400);
      expect(Object.keys(answer.body.fieldErrors).sort()).toEqual(fields);
    }
  });

  it('is swept through the ingest queue by the job manager, as deployed', async () => {
    const { clientId, jobId, tasks } = await scheduledJob(4, 'expireAfter=PT2H');
    const ingest = new SqsIngestQueue(cloud.sqs, harness.ingestQueueUrl());
    expect((await jobManager(clientId, Date.now, ingest)()).started).toEqual([jobId]);
    // The end, two hours away, has passed (as if they had gone by): the deployed parts act on it.
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(clientId, jobId),
        UpdateExpression: 'SET endAt = :past',
        ExpressionAttributeValues: { ':past': Date.now() - SECOND },
      }),
    );
    const run = jobManager(clientId, Date.now, ingest);
    expect((await run()).expiring).toEqual([jobId]);
    const swept = await eventually(async () => {
      const { body } = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return body.counts.expired === tasks.length ? body : undefined;
    }, 'the expire sweep');
    expect(swept.counts.outstanding).toBe(0);
    expect((await tasksOf(jobId)).every((t) => t.state === 'expired' && t.reason === JOB_ENDED_REASON)).toBe(
      true,
    );
    expect((await run()).completed).toEqual([jobId]);
  });
});

/** A client with a running message job of `n` recipients ending at `endAt`, written as ingest would. */
async function messageJob(n: number, endAt: number): Promise<Job> {
  const clientId = uniqueName('endmsg');
  const now = endAt - HOUR;
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: {
        ...keys.client(clientId),
        clientId,
        ...CLIENT,
        callingHours: { timeZone: 'Asia/Tokyo', weekly: ALWAYS },
        messageChannelId: 'end-channel',
        updatedAt: now,
      },
    }),
  );
  const job: Job = {
    clientId,
    jobId: `01JE${clientId.toUpperCase().replace(/[^0-9A-Z]/g, '')}${'0'.repeat(26)}`.slice(0, 26),
    name: 'campaign',
    channel: 'line',
    scenarioId: 'default',
    message: { messages: [{ type: 'text', text: 'Sale ends today' }] },
    startAt: now,
    endAt,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: n, rejected: 0, skipped: 0, tasks: n, completed: 0, failed: 0, cancelled: 0, expired: 0 },
    createdAt: now,
    updatedAt: now,
  };
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: { ...keys.job(clientId, job.jobId), ...job, ...keys.jobStatusIndex(job) },
    }),
  );
  const items = Array.from({ length: n }, (_, i) => {
    const task: Task = {
      clientId,
      jobId: job.jobId,
      taskId: `m${String(i).padStart(5, '0')}`,
      row: i + 2,
      channel: 'message',
      recipient: `U${clientId.length}${i.toString(16).padStart(31, '0')}`,
      variables: {},
      state: 'pending',
      attempts: 0,
      readyAt: now,
      updatedAt: now,
    };
    return { ...keys.task(task.jobId, task.taskId), ...task, ...keys.outstandingIndex(task) };
  });
  await cloud.doc.send(
    new BatchWriteCommand({
      RequestItems: { [tasksTable]: items.map((Item) => ({ PutRequest: { Item } })) },
    }),
  );
  return job;
}

describe('a message job that reaches its end', () => {
  it('claims nothing at or after the end, sends by its end only, and expires what its broker gives back or leaves', async () => {
    const END = Date.now() + HOUR;
    const job = await messageJob(8, END);
    let now = END - 2_000;
    const clock = { now: () => now };
    const store = new DynamoMessageTaskStore(cloud.doc, { controlTable, tasksTable, clock, holdMs: 60_000 });
    const lease = await new DynamoLeaseStore(cloud.doc, controlTable).tryTake({
      clientId: job.clientId,
      owner: 'sender',
      now,
      leaseMs: 4 * HOUR,
    });
    const session = () =>
      store.session({ clientId: job.clientId, owner: 'sender', token: () => lease!.token });

    // Before the end: a page is claimed, each task carrying the instant its sends must start by.
    const before = session();
    const page = await before.source.nextPage(3);
    expect(page.length).toBeGreaterThanOrEqual(2);
    expect(page.every((t) => t.sendBy === END)).toBe(true);
    const [sent, unsent, ...held] = page as [(typeof page)[0], (typeof page)[0], ...typeof page];

    // At the end: one was delivered just before it; the other is given back unsent (its sender
    // saw the end) and ends expired at once, rather than wait for a claim that never comes.
    now = END;
    await before.report.write([
      {
        jobId: job.jobId,
        taskId: sent.taskId,
        attempt: 1,
        kind: 'delivered',
        lastResult: 'delivered',
        at: END - 1,
      },
      {
        jobId: job.jobId,
        taskId: unsent.taskId,
        attempt: 1,
        kind: 'released',
        lastResult: 'job-ended',
        maybeSent: false,
        at: END,
      },
    ]);
    const afterRelease = await tasksOf(job.jobId);
    expect(afterRelease.find((t) => t.taskId === sent.taskId)?.state).toBe('completed');
    expect(afterRelease.find((t) => t.taskId === unsent.taskId)).toMatchObject({
      state: 'expired',
      reason: JOB_ENDED_REASON,
    });

    // At and after the end, nothing more is claimed: the rest stay pending for the sweep.
    expect(await session().source.nextPage(8)).toEqual([]);
    now = END + 1_000;
    expect(await session().source.nextPage(8)).toEqual([]);
    // (A message its broker claimed stays `pending` in its item: its claim page says it is held.)
    const pending = (await tasksOf(job.jobId)).filter(
      (t) => t.state === 'pending' && !held.some((h) => h.taskId === t.taskId),
    );
    expect(pending).toHaveLength(8 - page.length);

    // The expire sweep ends the waiting ones now, and those its (dead) broker still held once
    // their hold has passed, saying they may have been delivered.
    const sweep = (at: number) =>
      new JobSweep({
        jobs: new DynamoJobStore(cloud.doc, controlTable),
        tasks: new DynamoTaskCanceller(cloud.doc, { controlTable, tasksTable }),
        queue: { send: async () => {} },
        clock: { now: () => at },
      });
    const first = await sweep(now).handle(expireSweepStart(job.clientId, job.jobId), {
      remainingMs: () => 600_000,
    });
    expect(first).toMatchObject({ kind: held.length > 0 ? 'recheck' : 'swept', ended: pending.length });
    const recheck = await sweep(END + 60_000).handle(expireSweepStart(job.clientId, job.jobId), {
      remainingMs: () => 600_000,
    });
    expect(recheck).toEqual({ kind: 'swept', jobId: job.jobId, ended: held.length });
    const final = await tasksOf(job.jobId);
    expect(final.filter((t) => t.state === 'completed')).toHaveLength(1);
    expect(final.filter((t) => t.state === 'expired')).toHaveLength(7);
    for (const t of held) {
      expect(final.find((f) => f.taskId === t.taskId)?.reason).toBe(JOB_ENDED_IN_FLIGHT_REASON);
    }
    const counts = (await new DynamoJobStore(cloud.doc, controlTable).get(job.clientId, job.jobId))!.counts;
    expect(counts).toMatchObject({ completed: 1, expired: 7 });
  });
});
