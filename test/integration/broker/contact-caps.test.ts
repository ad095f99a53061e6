/**
 * Contact limits where a call starts, on the local cloud: DynamoDB Local (this suite's own tables),
 * the telephony sandbox as the far side. Concurrent starts for one recipient never pass more than
 * the cap (the counter is taken in the start's transaction); two jobs listing the same people at
 * once contact nobody more than the cap, counted by the far side.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { startTelephonySandbox, type TelephonySandbox } from '#local/telephony-sandbox.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { type ContactLimit, capSlots } from '#shared/contact-limits/model.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';
import { jobReportCsv } from '#shared/jobs/report.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import type { BrokerConfig } from '#worker/config.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const stage = `cap${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let sandbox: TelephonySandbox;
const running: RunningBroker[] = [];

const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};
/** A window far longer than the test, so that its end is after every job's end. */
const LONG: ContactLimit['per'] = { days: 366 };

beforeAll(async () => {
  [controlTable, tasksTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
  ]);
  sandbox = await startTelephonySandbox({
    callbackSecret: 'caps-secret',
    seed: 5,
    timeScale: 60,
    durationSeconds: 30,
    ringSeconds: 6,
    outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
  });
});

afterAll(async () => {
  for (const b of running) b.stop('sigterm');
  await Promise.all(running.map((b) => b.done));
  await sandbox?.stop();
});

async function putClient(clientId: string, contactLimits: readonly ContactLimit[]): Promise<ClientSettings> {
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 4,
    callsPerSecond: 4,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS,
    defaultRegion: 'JP',
    contactLimits,
    updatedAt: Date.now(),
  };
  await cloud.doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.client(clientId), ...client } }),
  );
  return client;
}

/** A running call job of `clientId` with one task per recipient, ending in 10 minutes. */
async function putJob(clientId: string, n: number, recipients: readonly string[], over: Partial<Job> = {}) {
  const now = Date.now();
  const tasks = recipients.length;
  const job: Job = {
    clientId,
    jobId: `01JC${clientId.toUpperCase().replace(/[^0-9A-Z]/g, '')}${n}${'0'.repeat(26)}`.slice(0, 26),
    name: `caps ${n}`,
    channel: 'call',
    scenarioId: 's1',
    startAt: now - 1000,
    endAt: now + 10 * 60_000,
    maxAttempts: 1,
    retryDelaySeconds: 1,
    status: 'running',
    counts: { rows: tasks, rejected: 0, skipped: 0, tasks, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
    ...over,
  };
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: { ...keys.job(clientId, job.jobId), ...job, ...keys.jobStatusIndex(job) },
    }),
  );
  await Promise.all(
    recipients.map((recipient, i) => {
      const task: Task = {
        clientId,
        jobId: job.jobId,
        taskId: `t${n}-${String(i).padStart(4, '0')}`,
        row: i + 2,
        channel: 'call',
        recipient,
        variables: {},
        state: 'pending',
        attempts: 0,
        readyAt: now - 1000,
        updatedAt: now,
      };
      return cloud.doc.send(
        new PutCommand({
          TableName: tasksTable,
          Item: { ...keys.task(task.jobId, task.taskId), ...task, ...keys.outstandingIndex(task) },
        }),
      );
    }),
  );
  return job;
}

const jobOf = async (clientId: string, jobId: string) =>
  (await cloud.doc.send(new GetCommand({ TableName: controlTable, Key: keys.job(clientId, jobId) })))
    .Item as Job;

describe('a contact limit in the start transaction', () => {
  it('lets exactly max of many concurrent starts for one recipient through; the others end capped or wait', async () => {
    const clientId = 'cap-race';
    const limit: ContactLimit = { max: 3, per: LONG, channels: ['call', 'line'] };
    const client = await putClient(clientId, [limit]);
    const person = '+819044440000';
    const jobs = await Promise.all(Array.from({ length: 8 }, (_, n) => putJob(clientId, n, [person])));
    const store = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
    const lease = await leases.tryTake({ clientId, owner: 'racer', now: Date.now(), leaseMs: 60_000 });
    const now = Date.now();
    const slots = capSlots(client.contactLimits, 'call', now, client.timeZone);
    expect(slots).toHaveLength(1);
    const tasks = await Promise.all(
      jobs.map(async (j) => (await readTasks<Task>(cloud.doc, tasksTable, j.jobId))[0]!),
    );
    const results = await Promise.all(
      tasks.map((task, i) =>
        store.start(
          task,
          { clientId, owner: 'racer', token: lease!.token, now },
          // Half the jobs end before the window does (→ capped), half have no end (→ wait).
          { slots, ...(i % 2 === 0 ? { jobEndAt: jobs[i]!.endAt! } : {}) },
        ),
      ),
    );
    expect(results.filter((r) => r.kind === 'started')).toHaveLength(3);
    const capped = results.filter((r) => r.kind === 'capped');
    expect(capped).toHaveLength(5);
    const after = await Promise.all(
      jobs.map(async (j) => (await readTasks<Task>(cloud.doc, tasksTable, j.jobId))[0]!),
    );
    for (const [i, r] of results.entries()) {
      if (r.kind !== 'capped') continue;
      if (r.ended) {
        expect(after[i]).toMatchObject({ state: 'cancelled', lastResult: 'capped' });
        expect(after[i]!.reason).toMatch(
          /^capped: contact limit 3 per 366 days \(call, line\) reached until /,
        );
        expect((await jobOf(clientId, jobs[i]!.jobId)).counts).toMatchObject({ cancelled: 1, capped: 1 });
      } else {
        // Waiting, and saying so in the report until it starts.
        expect(after[i]).toMatchObject({
          state: 'pending',
          readyAt: slots[0]!.window.end,
          reason: `capped: waiting until ${new Date(slots[0]!.window.end).toISOString()} (contact limit 3 per 366 days (call, line))`,
        });
        expect((await jobOf(clientId, jobs[i]!.jobId)).counts).toMatchObject({ cancelled: 0 });
      }
    }
    expect(capped.some((r) => r.kind === 'capped' && r.ended)).toBe(true);
    const waitingIndex = results.findIndex((r) => r.kind === 'capped' && !r.ended);
    const waiting = after[waitingIndex]!;
    const report = await reportText(jobReportCsv(noEntries(), oneTask(waiting)));
    expect(report).toContain(`pending,0,,"capped: waiting until ${new Date(waiting.readyAt).toISOString()}`);
    // Started once its limits let it (here: a start with none), the waiting reason is gone.
    const started = await store.start(waiting, {
      clientId,
      owner: 'racer',
      token: lease!.token,
      now: Date.now(),
    });
    expect(started.kind).toBe('started');
    const [afterStart] = await readTasks<Task>(cloud.doc, tasksTable, jobs[waitingIndex]!.jobId);
    expect(afterStart).toMatchObject({ state: 'in-flight' });
    expect(afterStart!.reason).toBeUndefined();
  });
});

describe('two jobs listing the same people at once', () => {
  it('contact nobody more than the cap, counted by the far side; the tasks over it end capped', async () => {
    const clientId = 'cap-jobs';
    await putClient(clientId, [{ max: 1, per: LONG, channels: ['call'] }]);
    const people = Array.from({ length: 6 }, (_, i) => `+8190${String(50_000_000 + i)}`);
    const jobs = [await putJob(clientId, 1, people), await putJob(clientId, 2, people)];
    // A transactional job ignores the limits: its person is called even though already reached.
    const notice = await putJob(clientId, 3, [people[0]!], { ignoreContactLimits: true });
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
      }),
    );
    const broker = await startBrokerProcess(brokerConfig(), { doc: cloud.doc, logger: silentLogger });
    running.push(broker);
    const all = async () =>
      (
        await Promise.all([...jobs, notice].map((j) => readTasks<Task>(cloud.doc, tasksTable, j.jobId)))
      ).flat();
    const deadline = Date.now() + 60_000;
    while (!(await all()).every((t) => t.state === 'completed' || t.state === 'cancelled')) {
      if (Date.now() > deadline) throw new Error('the jobs did not end');
      await new Promise((r) => setTimeout(r, 100));
    }
    const rings = sandbox.stats(clientId).ringsPerRecipient;
    const perPerson = people.map((p) => Object.values(rings[p] ?? {}).reduce((a, b) => a + b, 0));
    // The notice's call to people[0] is the one contact above the cap, and it was asked for.
    expect(perPerson).toEqual([2, 1, 1, 1, 1, 1]);
    const tasks = await all();
    const capped = tasks.filter((t) => t.state === 'cancelled');
    expect(capped).toHaveLength(6);
    expect(capped.every((t) => t.reason?.startsWith('capped: contact limit 1 per 366 days (call)'))).toBe(
      true,
    );
    const counts = await Promise.all(
      jobs.map(async (j) => (await jobOf(clientId, j.jobId)).counts.capped ?? 0),
    );
    expect(counts[0]! + counts[1]!).toBe(6);
    broker.stop('sigterm');
    await broker.done;
  }, 90_000);
});

describe('message jobs listing the same LINE users at once', () => {
  it('claim each user no more than the cap; the tasks over it end capped with the limit named', async () => {
    const clientId = 'cap-line';
    await putClient(clientId, [{ max: 1, per: LONG, channels: ['line'] }]);
    const users = Array.from({ length: 5 }, (_, i) => `U${String(i).padStart(32, 'a')}`);
    const message = {
      message: { messages: [{ type: 'text' as const, text: 'hi' }] },
      channel: 'line' as const,
    };
    const jobs = [await putJob(clientId, 1, users, message), await putJob(clientId, 2, users, message)];
    for (const j of jobs)
      for (const t of await readTasks<Task>(cloud.doc, tasksTable, j.jobId))
        await cloud.doc.send(
          new PutCommand({
            TableName: tasksTable,
            Item: { ...keys.task(t.jobId, t.taskId), ...t, channel: 'message', ...keys.outstandingIndex(t) },
          }),
        );
    const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
    const lease = await leases.tryTake({ clientId, owner: 'claimer', now: Date.now(), leaseMs: 60_000 });
    const store = new DynamoMessageTaskStore(cloud.doc, {
      controlTable,
      tasksTable,
      clock: { now: () => Date.now() },
    });
    const session = store.session({ clientId, owner: 'claimer', token: () => lease!.token });
    const claimed = [...(await session.source.nextPage(500)), ...(await session.source.nextPage(500))];
    const perUser = users.map((u) => claimed.filter((c) => c.recipient === u).length);
    expect(perUser).toEqual([1, 1, 1, 1, 1]);
    const tasks = (
      await Promise.all(jobs.map((j) => readTasks<Task>(cloud.doc, tasksTable, j.jobId)))
    ).flat();
    const capped = tasks.filter((t) => t.state === 'cancelled');
    expect(capped).toHaveLength(5);
    expect(capped.every((t) => t.reason?.startsWith('capped: contact limit 1 per 366 days (line)'))).toBe(
      true,
    );
  });
});

function brokerConfig(): BrokerConfig {
  return testBrokerConfig(
    { controlTable, tasksTable },
    {
      telephony: { http: { baseUrl: sandbox.url, apiToken: sandbox.apiToken } },
      // Callbacks go nowhere: the broker reconciles each call with the sandbox once it should have ended.
      broker: { reconcileMarginMs: 500, defaultMaxCallSeconds: 1, recheckMs: 500 },
    },
  );
}

async function* noEntries(): AsyncGenerator<ReportEntry> {}
async function* oneTask(task: Task): AsyncGenerator<Task> {
  yield task;
}
async function reportText(chunks: AsyncIterable<Uint8Array>): Promise<string> {
  let text = '';
  for await (const chunk of chunks) text += Buffer.from(chunk).toString('utf8');
  return text;
}
