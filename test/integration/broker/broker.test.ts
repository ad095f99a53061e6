/**
 * The broker on the local cloud: DynamoDB Local (its own control and tasks tables, so the fleet's
 * work list is this suite's alone), the telephony sandbox as the far side, and the call-status
 * Lambda behind the API Gateway stand-in. Invariants are read from the sandbox's records.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { get as httpGet } from 'node:http';
import { createInterface } from 'node:readline';
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeCallStatusHandler } from '#lambdas/call-status/handler.ts';
import { type ApiGatewayServer, startApiGateway } from '#local/api-gateway.ts';
import { createTable } from '#local/cloud.ts';
import { startEcsAgent } from '#local/ecs-agent.ts';
import {
  startTelephonySandbox,
  type TelephonySandbox,
  type TelephonySandboxOptions,
} from '#local/telephony-sandbox.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoFleetWorkReader, DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { routes } from '#shared/routes.ts';
import { signCallback } from '#shared/telephony/callback-signature.ts';
import type { BrokerConfig } from '#worker/config.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { type BrokerConfigOverrides, testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { readTasks } from '../../support/task-table.ts';
import { until as untilHolds } from '../../support/wait.ts';

const SECRET = 'integration-callback-secret';
const PROVIDER = 'sandbox';
const cloud = testCloud();
const stage = `brk${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let api: ApiGatewayServer;
const running: RunningBroker[] = [];
const children: ChildProcess[] = [];
const sandboxes: TelephonySandbox[] = [];

const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};

beforeAll(async () => {
  [controlTable, tasksTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
  ]);
  const record = makeRecordCallStatus({
    tasks: new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable }),
    leases: new DynamoLeaseStore(cloud.doc, controlTable),
    notifier: makeHttpBrokerNotifier(),
    clock: { now: () => Date.now() },
    secrets: SECRET,
  });
  api = await startApiGateway({
    routes: routes.filter((r) => r.functionId === 'call-status'),
    functions: {
      'call-status': {
        timeoutMs: 10_000,
        handler: makeCallStatusHandler({ provider: PROVIDER, record, log: silentLogger }),
      },
    },
  });
});

// A test that failed half-way must not leave its broker claiming the next test's clients.
afterEach(async () => {
  const left = running.splice(0);
  for (const b of left) b.stop('sigterm');
  await Promise.all(left.map((b) => b.done));
});

afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const b of running) b.stop('sigterm');
  await Promise.all(running.map((b) => b.done));
  await Promise.all(sandboxes.map((s) => s.stop()));
  await api?.stop();
});

const callbackUrl = () => `${api.url}/providers/${PROVIDER}/calls/status`;

async function sandbox(options: Partial<TelephonySandboxOptions>): Promise<TelephonySandbox> {
  const s = await startTelephonySandbox({ callbackSecret: SECRET, seed: 7, ...options });
  sandboxes.push(s);
  return s;
}

async function seed(input: {
  clientId: string;
  limit: number;
  rate: number;
  tasks: number;
  job?: Partial<Job>;
}): Promise<Job> {
  const now = Date.now();
  const client: ClientSettings = {
    clientId: input.clientId,
    maxConcurrentCalls: input.limit,
    callsPerSecond: input.rate,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS,
    defaultRegion: 'JP',
    updatedAt: now,
  };
  const job: Job = {
    clientId: input.clientId,
    jobId: `01JB${input.clientId.toUpperCase().replace(/[^0-9A-Z]/g, '')}${'0'.repeat(26)}`.slice(0, 26),
    name: 'integration',
    channel: 'call',
    scenarioId: 's1',
    startAt: now - 1000,
    maxAttempts: 2,
    retryDelaySeconds: 1,
    status: 'running',
    counts: {
      rows: input.tasks,
      rejected: 0,
      skipped: 0,
      tasks: input.tasks,
      completed: 0,
      failed: 0,
      cancelled: 0,
    },
    createdAt: now,
    updatedAt: now,
    ...input.job,
  };
  await cloud.doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.client(client.clientId), ...client } }),
  );
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: { ...keys.job(job.clientId, job.jobId), ...job, ...keys.jobStatusIndex(job) },
    }),
  );
  await Promise.all(
    Array.from({ length: input.tasks }, (_, i) => {
      const task: Task = {
        clientId: input.clientId,
        jobId: job.jobId,
        taskId: `t${String(i).padStart(4, '0')}`,
        row: i + 2,
        channel: 'call',
        recipient: `+8190${String(20_000_000 + i)}`,
        variables: { name: `n${i}` },
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

const tasksOf = (jobId: string) => readTasks(cloud.doc, tasksTable, jobId);

async function putWork(clients: string[], desiredVersion = 'v1') {
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients, desiredVersion, updatedAt: Date.now() }),
    }),
  );
}

function brokerConfig(s: TelephonySandbox, over: BrokerConfigOverrides['broker'] = {}): BrokerConfig {
  return testBrokerConfig(
    { controlTable, tasksTable },
    {
      telephony: { http: { baseUrl: s.url, apiToken: s.apiToken } },
      broker: { callbackUrl: callbackUrl(), ...over },
    },
  );
}

async function startBroker(config: BrokerConfig): Promise<RunningBroker> {
  const b = await startBrokerProcess(config, { doc: cloud.doc, logger: silentLogger });
  running.push(b);
  return b;
}

const until = (done: () => Promise<boolean>, timeoutMs: number) =>
  untilHolds(done, `a condition within ${timeoutMs} ms`, { timeoutMs, everyMs: 200 });

const FINAL = new Set(['completed', 'failed', 'cancelled']);

describe('a broker on the local cloud', () => {
  it('runs 30 one-second calls at limit 3 and 2 calls/s: all completed, limits held on the far side, no ring repeated', async () => {
    const s = await sandbox({
      timeScale: 60,
      durationSeconds: 54,
      ringSeconds: 6,
      outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
    });
    const job = await seed({ clientId: 'pace', limit: 3, rate: 2, tasks: 30 });
    await putWork(['pace']);
    const broker = await startBroker(brokerConfig(s));
    await until(async () => (await tasksOf(job.jobId)).every((t) => FINAL.has(t.state)), 50_000);

    const tasks = await tasksOf(job.jobId);
    expect(tasks.map((t) => t.state)).toEqual(Array(30).fill('completed'));
    expect(tasks.every((t) => t.attempts === 1 && typeof t.callId === 'string')).toBe(true);
    const stats = s.stats('pace');
    expect(stats.rings).toBe(30);
    expect(stats.maxInFlight).toBeLessThanOrEqual(3);
    expect(stats.maxStartsPerSecond).toBeLessThanOrEqual(2);
    expect(stats.repeatedRings).toEqual([]);
    // The client was released once its work was done.
    await until(
      async () => (await new DynamoLeaseStore(cloud.doc, controlTable).get('pace'))?.expiresAt === 0,
      30_000,
    );
    broker.stop('sigterm');
    await broker.done;
  }, 120_000);

  it('settles lost and duplicated callbacks through reconciliation: every task ends, none rings twice', async () => {
    const s = await sandbox({
      timeScale: 1,
      durationSeconds: 1,
      ringSeconds: 0,
      outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
      faults: { callbackLossRate: 0.5, callbackDuplicateRate: 0.5 },
    });
    const job = await seed({
      clientId: 'lossy',
      limit: 3,
      rate: 5,
      tasks: 10,
      job: { maxCallDurationSeconds: 2 },
    });
    await putWork(['lossy']);
    const broker = await startBroker(brokerConfig(s, { reconcileMarginMs: 500 }));
    await until(async () => (await tasksOf(job.jobId)).every((t) => FINAL.has(t.state)), 40_000);

    const tasks = await tasksOf(job.jobId);
    expect(tasks.map((t) => t.state)).toEqual(Array(10).fill('completed'));
    const stats = s.stats('lossy');
    expect(stats.callbacks.lost).toBeGreaterThan(0);
    expect(stats.callbacks.duplicated).toBeGreaterThan(0);
    expect(stats.rings).toBe(10);
    expect(stats.repeatedRings).toEqual([]);
    expect(stats.maxInFlight).toBeLessThanOrEqual(3);
    broker.stop('sigterm');
    await broker.done;
  }, 120_000);

  it('drains when the work list names a newer version, and its successor finishes the client', async () => {
    const s = await sandbox({
      timeScale: 1,
      durationSeconds: 2,
      ringSeconds: 0,
      outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
    });
    const job = await seed({ clientId: 'roll', limit: 2, rate: 4, tasks: 12 });
    await putWork(['roll'], 'v1');
    const old = await startBroker(brokerConfig(s, { leaseMs: 3_000, version: 'v1' }));
    await until(async () => s.stats('roll').rings >= 2, 30_000);
    await putWork(['roll'], 'v2');
    const successor = await startBroker(brokerConfig(s, { leaseMs: 3_000, version: 'v2' }));
    await old.done;
    expect(old.broker.stopReason).toBe('drain');
    await until(async () => (await tasksOf(job.jobId)).every((t) => FINAL.has(t.state)), 40_000);
    expect((await tasksOf(job.jobId)).map((t) => t.state)).toEqual(Array(12).fill('completed'));
    const stats = s.stats('roll');
    expect(stats.rings).toBe(12);
    expect(stats.maxInFlight).toBeLessThanOrEqual(2);
    expect(stats.repeatedRings).toEqual([]);
    successor.stop('sigterm');
    await successor.done;
  }, 120_000);
});

describe('task protection', () => {
  it('is on while calls are in flight and off once the client is done, through agent failures', async () => {
    const agent = await startEcsAgent();
    try {
      const s = await sandbox({
        timeScale: 1,
        durationSeconds: 2,
        ringSeconds: 0,
        outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
      });
      // Ten 2 s calls two at a time: about 10 s of calls, so the moment both hold (a call in
      // flight, protection on after the agent's two 503s) is not a narrow window.
      const job = await seed({ clientId: 'protected', limit: 2, rate: 4, tasks: 10 });
      await putWork(['protected']);
      agent.failNext(2, 503);
      const config = brokerConfig(s);
      const broker = await startBroker({ ...config, ecsAgentUri: agent.register(config.broker.brokerId) });
      await until(
        async () => s.stats('protected').inFlight > 0 && agent.isProtected(config.broker.brokerId),
        30_000,
      );
      await until(async () => (await tasksOf(job.jobId)).every((t) => FINAL.has(t.state)), 90_000);
      expect((await tasksOf(job.jobId)).map((t) => t.state)).toEqual(Array(10).fill('completed'));
      await until(async () => !agent.isProtected(config.broker.brokerId), 30_000);
      const mine = agent.updates.filter((u) => u.brokerId === config.broker.brokerId);
      expect(mine[0]).toMatchObject({ enabled: true, expiresInMinutes: 10 });
      expect(mine.at(-1)).toMatchObject({ enabled: false });
      broker.stop('sigterm');
      await broker.done;
    } finally {
      await agent.stop();
    }
  }, 120_000);
});

describe('a broker killed mid-job', () => {
  it('leaves its client to another broker after the lease expires: calls adopted, none rung twice, none lost', async () => {
    const s = await sandbox({
      timeScale: 1,
      durationSeconds: 6,
      ringSeconds: 0,
      outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
    });
    const job = await seed({ clientId: 'killed', limit: 3, rate: 4, tasks: 15 });
    await putWork(['killed']);
    const child = spawnBroker(s, { LEASE_MS: '3000', BROKER_IDLE_WAIT_MS: '200' });
    await readyLine(child);
    // Calls outlive the lease: the successor must adopt the ones still ringing and count them.
    await until(async () => s.stats('killed').rings >= 4, 60_000);
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(s.stats('killed').rings).toBeLessThan(15);
    expect(s.stats('killed').inFlight).toBeGreaterThan(0);

    const successor = await startBroker(brokerConfig(s, { leaseMs: 3_000 }));
    await until(async () => (await tasksOf(job.jobId)).every((t) => FINAL.has(t.state)), 45_000);
    expect((await tasksOf(job.jobId)).map((t) => t.state)).toEqual(Array(15).fill('completed'));
    const stats = s.stats('killed');
    expect(stats.rings).toBe(15);
    expect(stats.repeatedRings).toEqual([]);
    expect(stats.maxInFlight).toBeLessThanOrEqual(3);
    expect(stats.maxStartsPerSecond).toBeLessThanOrEqual(4);
    successor.stop('sigterm');
    await successor.done;
  }, 120_000);
});

describe('a broker killed with only calls in flight, their callbacks lost', () => {
  /** The job manager on this suite's tables, on the wall clock (one instance: it keeps its state). */
  function jobManager() {
    return makeRunJobManager({
      store: new DynamoFleetStore(cloud.doc, { controlTable, tasksTable }),
      scaler: { setDesiredCount: async () => {} },
      // No job of this suite has an end: nothing is ever queued.
      sweeps: { send: async () => {} },
      clock: { now: () => Date.now() },
      maxBrokers: 10,
      desiredVersion: () => 'v1',
    });
  }

  /**
   * Gives `clientId` to a broker process, lets it start `started` calls (the provider ends them
   * at once, every callback lost), then SIGKILLs it: the calls stay in flight on the lease item.
   */
  async function killHolderMidCalls(s: TelephonySandbox, clientId: string, started: number, job: Job) {
    const child = spawnBroker(s, { LEASE_MS: '6000', BROKER_IDLE_WAIT_MS: '200' });
    await readyLine(child);
    await until(
      async () =>
        s.stats(clientId).rings >= started &&
        (await tasksOf(job.jobId)).filter((t) => t.state === 'in-flight').length === started,
      30_000,
    );
    child.kill('SIGKILL');
    await once(child, 'exit');
    const tasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    expect(await tasks.inFlight(clientId)).toHaveLength(started);
    return new DynamoLeaseStore(cloud.doc, controlTable);
  }

  it('once its lease has expired, the job manager gives the client a broker that settles the calls: every task ends, the job completes', async () => {
    const s = await sandbox({
      timeScale: 1,
      durationSeconds: 1,
      ringSeconds: 0,
      outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
      faults: { callbackLossRate: 1 },
    });
    const job = await seed({
      clientId: 'orphan',
      limit: 3,
      rate: 5,
      tasks: 3,
      job: { maxCallDurationSeconds: 2 },
    });
    const run = jobManager();
    expect((await run()).clients).toContain('orphan');
    const leases = await killHolderMidCalls(s, 'orphan', 3, job);

    // Its only open tasks are in flight: nothing ready, so only the dead lease can bring a broker.
    const lease = await leases.get('orphan');
    const whileLive = await run();
    if (Date.now() < lease!.expiresAt) {
      expect(whileLive.clients).not.toContain('orphan');
      expect(whileLive.orphaned).not.toContain('orphan');
    }
    await until(async () => Date.now() > lease!.expiresAt, 15_000);
    const afterExpiry = await run();
    expect(afterExpiry.clients).toContain('orphan');
    expect(afterExpiry.completed).not.toContain(job.jobId);

    const successor = await startBroker(brokerConfig(s, { leaseMs: 3_000, reconcileMarginMs: 500 }));
    await until(async () => (await tasksOf(job.jobId)).every((t) => FINAL.has(t.state)), 45_000);
    expect((await tasksOf(job.jobId)).map((t) => t.state)).toEqual(Array(3).fill('completed'));
    const stats = s.stats('orphan');
    expect(stats.callbacks.delivered).toBe(0);
    expect(stats.rings).toBe(3);
    expect(stats.repeatedRings).toEqual([]);
    // Nothing left: the successor released the client, with no call recorded in flight.
    await until(async () => (await leases.get('orphan'))?.expiresAt === 0, 10_000);
    const tasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    expect(await tasks.inFlight('orphan')).toEqual([]);
    const last = await run();
    expect(last.completed).toContain(job.jobId);
    expect(last.clients).not.toContain('orphan');
    expect(last.orphaned).not.toContain('orphan');
    successor.stop('sigterm');
    await successor.done;
  }, 120_000);

  it('a client paused meanwhile gets a broker only to settle them: no new call starts, then it is released', async () => {
    const s = await sandbox({
      timeScale: 1,
      durationSeconds: 1,
      ringSeconds: 0,
      outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
      faults: { callbackLossRate: 1 },
    });
    // Four tasks at a limit of three: the fourth waits for a slot the lost callbacks never free.
    const job = await seed({
      clientId: 'orphanp',
      limit: 3,
      rate: 5,
      tasks: 4,
      job: { maxCallDurationSeconds: 2 },
    });
    const run = jobManager();
    expect((await run()).clients).toContain('orphanp');
    const leases = await killHolderMidCalls(s, 'orphanp', 3, job);
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.client('orphanp'),
        UpdateExpression: 'SET paused = :yes',
        ExpressionAttributeValues: { ':yes': true },
      }),
    );
    const lease = await leases.get('orphanp');
    await until(async () => Date.now() > lease!.expiresAt, 15_000);
    const afterExpiry = await run();
    expect(afterExpiry.orphaned).toContain('orphanp');
    expect(afterExpiry.clients).not.toContain('orphanp');

    const successor = await startBroker(brokerConfig(s, { leaseMs: 3_000, reconcileMarginMs: 500 }));
    await until(
      async () => (await tasksOf(job.jobId)).filter((t) => FINAL.has(t.state)).length === 3,
      45_000,
    );
    await until(async () => (await leases.get('orphanp'))?.expiresAt === 0, 10_000);
    const tasks = await tasksOf(job.jobId);
    expect(tasks.filter((t) => t.state === 'pending')).toHaveLength(1);
    for (const t of tasks.filter((t) => t.state !== 'pending')) {
      // A call whose id the dead broker never recorded is failed, not placed again.
      if (t.state === 'failed') expect(t.reason).toContain('never confirmed');
      else expect(t.state).toBe('completed');
    }
    expect(s.stats('orphanp').rings).toBe(3);
    expect(s.stats('orphanp').repeatedRings).toEqual([]);
    expect(
      await new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable }).inFlight('orphanp'),
    ).toEqual([]);
    const last = await run();
    expect(last.orphaned).not.toContain('orphanp');
    expect(last.clients).not.toContain('orphanp');
    successor.stop('sigterm');
    await successor.done;
  }, 120_000);
});

describe('the DynamoDB fence', () => {
  it('refuses a start with a stale token after a takeover, and keeps the calls in flight on the lease item', async () => {
    const job = await seed({ clientId: 'fence', limit: 1, rate: 1, tasks: 1 });
    const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
    const tasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const now = Date.now();
    const first = await leases.tryTake({ clientId: 'fence', owner: 'old', now, leaseMs: 1_000 });
    expect(first).toBeDefined();
    expect(await leases.tryTake({ clientId: 'fence', owner: 'new', now, leaseMs: 1_000 })).toBeUndefined();
    const second = await leases.tryTake({
      clientId: 'fence',
      owner: 'new',
      now: now + 1_001,
      leaseMs: 30_000,
    });
    expect(second!.token).toBe(first!.token + 1);

    const [task] = await tasks.outstanding('fence', Date.now(), 10);
    expect(task?.jobId).toBe(job.jobId);
    const stale = await tasks.start(task!, {
      clientId: 'fence',
      owner: 'old',
      token: first!.token,
      now: now + 1_002,
    });
    expect(stale).toEqual({ kind: 'fenced' });
    expect((await tasks.getTask(task!))!.state).toBe('pending');

    const started = await tasks.start(task!, {
      clientId: 'fence',
      owner: 'new',
      token: second!.token,
      now: now + 1_003,
    });
    expect(started.kind).toBe('started');
    expect(
      await tasks.start(task!, { clientId: 'fence', owner: 'new', token: second!.token, now: now + 1_004 }),
    ).toEqual({
      kind: 'gone',
    });
    expect(await tasks.inFlight('fence')).toEqual([{ jobId: job.jobId, taskId: task!.taskId }]);
    expect(await tasks.outstanding('fence', Date.now(), 10)).toEqual([]);

    const settled = await tasks.settle({
      task: task!,
      attempt: 1,
      settlement: { state: 'retry-wait', lastResult: 'busy', readyAt: now - 1 },
      callId: 'c-1',
      now,
    });
    expect(settled).toBe(true);
    expect(await tasks.inFlight('fence')).toEqual([]);
    // Back in the outstanding index for its next attempt.
    expect((await tasks.outstanding('fence', Date.now(), 10)).map((t) => [t.taskId, t.attempts])).toEqual([
      [task!.taskId, 1],
    ]);

    // Each attempt's end counts its result on the job, the retried one too.
    const [again] = await tasks.outstanding('fence', Date.now(), 10);
    const lease = { clientId: 'fence', owner: 'new', token: second!.token, now: now + 2_000 };
    expect((await tasks.start(again!, lease)).kind).toBe('started');
    const ended = await tasks.settle({
      task: { ...again!, attempts: 2 },
      attempt: 2,
      settlement: { state: 'completed', lastResult: 'completed' },
      callId: 'c-2',
      now: now + 3_000,
    });
    expect(ended).toBe(true);
    const jobs = new DynamoJobStore(cloud.doc, controlTable);
    expect((await jobs.get('fence', job.jobId))?.results).toEqual({ busy: 1, completed: 1 });
  });

  it('a retry of a cancelled job ends cancelled, its attempt’s result counted once; of a job written without counts, it is kept', async () => {
    const tasks = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const jobs = new DynamoJobStore(cloud.doc, controlTable);
    const retry = async (clientId: string) => {
      const job = await seed({ clientId, limit: 1, rate: 1, tasks: 1 });
      const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
      const lease = await leases.tryTake({ clientId, owner: 'b', now: Date.now(), leaseMs: 30_000 });
      const [task] = await tasks.outstanding(clientId, Date.now(), 10);
      expect(
        (await tasks.start(task!, { clientId, owner: 'b', token: lease!.token, now: Date.now() })).kind,
      ).toBe('started');
      return { job, task: { ...task!, attempts: 1 } };
    };
    const changeJob = (
      job: Job,
      update: string,
      names: Record<string, string>,
      values?: Record<string, string>,
    ) =>
      cloud.doc.send(
        new UpdateCommand({
          TableName: controlTable,
          Key: keys.job(job.clientId, job.jobId),
          UpdateExpression: update,
          ExpressionAttributeNames: names,
          ...(values ? { ExpressionAttributeValues: values } : {}),
        }),
      );
    const cancelled = await retry('cancelled-retry');
    await changeJob(cancelled.job, 'SET #status = :c', { '#status': 'status' }, { ':c': 'cancelled' });
    const busy = { state: 'retry-wait', lastResult: 'busy', readyAt: Date.now() } as const;
    await tasks.settle({ task: cancelled.task, attempt: 1, settlement: busy, now: Date.now() });
    expect((await tasks.getTask(cancelled.task))?.state).toBe('cancelled');
    expect((await jobs.get('cancelled-retry', cancelled.job.jobId))?.results).toEqual({ busy: 1 });

    const bare = await retry('bare-retry');
    await changeJob(bare.job, 'REMOVE #counts', { '#counts': 'counts' });
    expect(await tasks.settle({ task: bare.task, attempt: 1, settlement: busy, now: Date.now() })).toBe(true);
    expect((await tasks.getTask(bare.task))?.state).toBe('retry-wait');
  });

  it('reads the fleet work list the job manager writes', async () => {
    await putWork(['a', 'b'], 'v7');
    const work = await new DynamoFleetWorkReader(cloud.doc, controlTable).read();
    expect(work).toMatchObject({ clients: ['a', 'b'], desiredVersion: 'v7' });
    await putWork([]);
  });
});

describe('the call-status route', () => {
  it('answers 401 to a bad signature, 400 to a callback for another attempt, 404 to an unknown provider', async () => {
    const body = JSON.stringify({
      callId: 'x',
      idempotencyKey: '00000000-0000-5000-8000-000000000000',
      status: 'completed',
      at: new Date().toISOString(),
      sequence: 1,
    });
    const url = `${callbackUrl()}?job=J&task=T&attempt=1`;
    const post = (u: string, signature: string) =>
      fetch(u, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature },
        body,
      });
    const good = signCallback(SECRET, body, Math.floor(Date.now() / 1000));
    expect((await post(url, signCallback('wrong', body, Math.floor(Date.now() / 1000)))).status).toBe(401);
    expect((await post(url, good)).status).toBe(400);
    expect((await post(`${api.url}/providers/other/calls/status?job=J&task=T&attempt=1`, good)).status).toBe(
      404,
    );
  });
});

function spawnBroker(s: TelephonySandbox, env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['worker/main.ts'], {
    env: {
      ...process.env,
      ...cloud.env,
      CONTROL_TABLE: controlTable,
      TASKS_TABLE: tasksTable,
      TELEPHONY_API_URL: s.url,
      TELEPHONY_API_TOKEN: s.apiToken,
      CALL_STATUS_CALLBACK_URL: callbackUrl(),
      BROKER_VERSION: 'v1',
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return child;
}

async function readyLine(child: ChildProcess): Promise<Record<string, unknown>> {
  const lines = createInterface({ input: child.stdout! });
  const [first] = (await once(lines, 'line')) as [string];
  return JSON.parse(first) as Record<string, unknown>;
}

describe('the broker process', () => {
  it('prints its ready line, and exits 0 on SIGTERM', async () => {
    // Its own work list: an earlier test may have left one naming another version, which a v1
    // broker would drain for at once, closing its server under the health request below.
    await putWork([], 'v1');
    const s = await sandbox({});
    const child = spawnBroker(s);
    const ready = await readyLine(child);
    expect(ready).toMatchObject({ event: 'ready', version: 'v1' });
    expect(String(ready.brokerId)).toMatch(/^broker-/);
    // A connection of its own: fetch's pool may hold a socket to an earlier broker that had the
    // same port (ports are reused), which the kernel resets on first use.
    const health = await new Promise<number | undefined>((resolve, reject) =>
      httpGet(`${String(ready.httpUrl)}/health`, { agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode);
      }).on('error', reject),
    );
    expect(health).toBe(200);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  }, 120_000);
});
