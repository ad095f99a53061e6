/**
 * The job manager against DynamoDB Local, on tables of its own (so jobs other suites create in
 * the shared tables are never started or completed by these runs).
 */
import { readFileSync } from 'node:fs';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { ScheduledEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSkippedRun } from '#lambdas/job-manager/handler.ts';
import { createTable } from '#local/cloud.ts';
import { type EcsAgentEndpoint, startEcsAgent } from '#local/ecs-agent.ts';
import { type LocalFleet, startLocalFleet } from '#local/ecs-service.ts';
import { makeLocalJobManager } from '#local/job-manager.ts';
import { DynamoFleetStore, publishDesiredVersion } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoFleetWorkReader, DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import type { EcsServiceScaler, FleetStore } from '#shared/fleet/ports.ts';
import { JOB_MANAGER_RUN, runLeaseMs } from '#shared/fleet/run-lease.ts';
import { fleetWorkItem, parseFleetWork } from '#shared/fleet/work-list.ts';
import { functions } from '#shared/functions.ts';
import { type Job, keys, type Task } from '#shared/jobs/model.ts';
import { tableSpec } from '#shared/resources.ts';
import { type TestCloud, testCloud } from '../../support/cloud.ts';
import { client, job, MINUTE, task, weekdays } from '../../unit/fleet/fakes.ts';

const scheduledEvent = JSON.parse(
  readFileSync(new URL('../../fixtures/fleet/scheduled-event.json', import.meta.url), 'utf8'),
) as ScheduledEvent;

let cloud: TestCloud;
let controlTable: string;
let tasksTable: string;
let store: FleetStore;
/** A fixed instant inside Tokyo's Monday hours; jobs start relative to it. */
const NOW = Date.parse('2026-01-05T03:00:00Z');

beforeAll(async () => {
  cloud = testCloud();
  const stage = `fleet${process.pid % 100000}${Math.random().toString(36).slice(2, 6)}`;
  controlTable = await createTable(cloud.ddb, stage, tableSpec('control'));
  tasksTable = await createTable(cloud.ddb, stage, tableSpec('tasks'));
  store = new DynamoFleetStore(cloud.doc, { controlTable, tasksTable });
});

afterAll(() => cloud?.ddb.destroy());

async function putClient(id: string, hours = weekdays('Asia/Tokyo', '09:00', '18:00'), paused = false) {
  await cloud.doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.client(id), ...client(id, hours), paused } }),
  );
}
async function putJob(j: Job) {
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: { ...keys.job(j.clientId, j.jobId), ...j, ...keys.jobStatusIndex(j) },
    }),
  );
}
async function putTask(t: Task) {
  await cloud.doc.send(
    new PutCommand({
      TableName: tasksTable,
      Item: { ...keys.task(t.jobId, t.taskId), ...t, ...keys.outstandingIndex(t) },
    }),
  );
}
async function storedJob(j: Job) {
  const out = await cloud.doc.send(
    new GetCommand({ TableName: controlTable, Key: keys.job(j.clientId, j.jobId) }),
  );
  return out.Item as (Job & { statusKey?: string; dueKey?: string }) | undefined;
}
async function workList() {
  const out = await cloud.doc.send(
    new GetCommand({ TableName: controlTable, Key: { pk: 'FLEET', sk: 'WORK' } }),
  );
  return parseFleetWork(out.Item);
}
async function jobsIndexed(status: 'scheduled' | 'running') {
  const ids: string[] = [];
  for (const partition of keys.jobStatusPartitions(status)) {
    const out = await cloud.doc.send(
      new QueryCommand({
        TableName: controlTable,
        IndexName: 'byStatus',
        KeyConditionExpression: 'statusKey = :s',
        ExpressionAttributeValues: { ':s': partition },
      }),
    );
    ids.push(...(out.Items ?? []).map((i) => i.jobId as string));
  }
  return ids;
}

function manager(now: number, maxBrokers = 10) {
  const counts: number[] = [];
  const scaler: EcsServiceScaler = { setDesiredCount: async (n) => void counts.push(n) };
  const run = makeRunJobManager({
    store,
    scaler,
    // No job of this suite has an end: nothing is ever queued.
    sweeps: { send: async () => {} },
    clock: { now: () => now },
    maxBrokers,
    desiredVersion: () => 'v7',
  });
  return { run, counts };
}

describe('the job manager on DynamoDB', () => {
  it('starts a due job once under overlapping runs, moves it in the byStatus index, and lists its client', async () => {
    await putClient('jm-start');
    const due = job('jm-start', { status: 'scheduled', startAt: NOW - MINUTE });
    const later = job('jm-start', { status: 'scheduled', startAt: NOW + 60 * MINUTE });
    await putJob(due);
    await putJob(later);
    // 40 tasks spread over the shards, so the ready check looks beyond one partition.
    for (let i = 0; i < 40; i++) await putTask(task(due));
    await putTask(task(later));
    const { run, counts } = manager(NOW);

    const [a, b] = await Promise.all([run(), run()]);

    expect([...a.started, ...b.started]).toEqual([due.jobId]);
    expect((await storedJob(due))?.status).toBe('running');
    expect((await storedJob(due))?.statusKey).toMatch(/^JOBSTATUS#running#([0-9]|1[0-5])$/);
    expect((await storedJob(later))?.status).toBe('scheduled');
    expect(await jobsIndexed('running')).toContain(due.jobId);
    expect(await jobsIndexed('scheduled')).not.toContain(due.jobId);
    const work = await workList();
    expect(work?.clients).toContain('jm-start');
    expect(work?.desiredVersion).toBe('v7');
    expect(counts.every((n) => n >= 1)).toBe(true);
  });

  it('completes a job whose tasks are all final, across every shard, and takes it out of the index', async () => {
    await putClient('jm-done');
    // Its counts say every task has ended (a job whose counts say tasks are left is read only in its turn).
    const done = job('jm-done', {
      counts: { rows: 40, rejected: 0, skipped: 0, tasks: 40, completed: 26, failed: 14, cancelled: 0 },
    });
    await putJob(done);
    for (let i = 0; i < 40; i++) {
      await putTask(task(done, { state: i % 3 === 0 ? 'failed' : 'completed', attempts: 1 }));
    }

    const result = await manager(NOW + 1).run();

    expect(result.completed).toContain(done.jobId);
    const stored = await storedJob(done);
    expect(stored?.status).toBe('completed');
    expect(stored?.statusKey).toBeUndefined();
    expect(await jobsIndexed('running')).not.toContain(done.jobId);
  });

  it('finds jobs listed before the byStatus shards (one partition a status): starts and completes them, lists their clients', async () => {
    await putClient('jm-legacy');
    // Items as the version before the shards wrote them.
    const legacy = (j: Job) => ({
      statusKey: `JOBSTATUS#${j.status}`,
      dueKey: keys.jobStatusIndex(j)!.dueKey,
    });
    const due = job('jm-legacy', { status: 'scheduled', startAt: NOW - MINUTE });
    const done = job('jm-legacy', {
      counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 },
    });
    for (const j of [due, done])
      await cloud.doc.send(
        new PutCommand({
          TableName: controlTable,
          Item: { ...keys.job(j.clientId, j.jobId), ...j, ...legacy(j) },
        }),
      );
    await putTask(task(due));
    await putTask(task(done, { state: 'completed', attempts: 1 }));

    const result = await manager(NOW + 1).run();

    expect(result.started).toContain(due.jobId);
    expect(result.completed).toContain(done.jobId);
    expect(result.clients).toContain('jm-legacy');
    // Moved by its change of status into its shard.
    expect((await storedJob(due))?.statusKey).toBe(
      keys.jobStatusIndex({ ...due, status: 'running' })!.statusKey,
    );
    expect(await jobsIndexed('running')).toContain(due.jobId);
  });

  it('keeps a job running while one task in one shard is in flight, without giving it a new broker', async () => {
    await putClient('jm-busy');
    const busy = job('jm-busy');
    await putJob(busy);
    for (let i = 0; i < 30; i++) await putTask(task(busy, { state: 'completed', attempts: 1 }));
    await putTask(task(busy, { state: 'in-flight', attempts: 1 }));

    const result = await manager(NOW + 2).run();

    expect(result.completed).not.toContain(busy.jobId);
    expect((await storedJob(busy))?.status).toBe('running');
    expect(result.clients).not.toContain('jm-busy');
  });

  it('leaves out clients outside their calling hours and paused clients', async () => {
    await putClient('jm-night', weekdays('America/New_York', '09:00', '18:00'));
    await putClient('jm-paused', weekdays('Asia/Tokyo', '09:00', '18:00'), true);
    await putClient('jm-open');
    for (const id of ['jm-night', 'jm-paused', 'jm-open']) {
      const j = job(id);
      await putJob(j);
      await putTask(task(j));
    }

    const result = await manager(NOW + 3).run();

    expect(result.clients).toContain('jm-open');
    expect(result.clients).not.toContain('jm-night');
    expect(result.clients).not.toContain('jm-paused');
  });

  it('bounds the desired count by the maximum', async () => {
    const { run, counts } = manager(NOW + 4, 1);
    const result = await run();
    expect(result.clients.length).toBeGreaterThan(1);
    expect(counts).toEqual([1]);
  });

  it('reads a lease with calls in flight as orphaned only once it has expired, and a lease whose set was emptied as not', async () => {
    const putLease = (clientId: string, expiresAt: number, inFlight?: Set<string>) =>
      cloud.doc.send(
        new PutCommand({
          TableName: controlTable,
          Item: {
            ...keys.lease(clientId),
            clientId,
            owner: 'broker-x',
            token: 3,
            expiresAt,
            ...(inFlight ? { inFlight } : {}),
          },
        }),
      );
    await putLease('jm-live', NOW + 1, new Set(['J|t1']));
    await putLease('jm-dead', NOW, new Set(['J|t1', 'J|t2']));
    await putLease('jm-released', 0, new Set(['J|t1']));
    // The last call settled: DynamoDB drops the emptied set.
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.lease('jm-released'),
        UpdateExpression: 'DELETE inFlight :m',
        ExpressionAttributeValues: { ':m': new Set(['J|t1']) },
      }),
    );

    const states = await store.clientStates(['jm-live', 'jm-dead', 'jm-released', 'jm-never-leased']);
    const orphaned = (id: string) => {
      const lease = states.get(id)?.lease;
      return lease !== undefined && lease.inFlight > 0 && !(NOW < lease.expiresAt);
    };
    expect(states.get('jm-dead')?.lease).toEqual({ token: 3, expiresAt: NOW, inFlight: 2 });
    expect(orphaned('jm-live')).toBe(false);
    expect(orphaned('jm-dead')).toBe(true);
    expect(orphaned('jm-released')).toBe(false);
    expect(orphaned('jm-never-leased')).toBe(false);
  });

  it('gives a broker to a paused client whose dead broker left calls in flight, to settle them only', async () => {
    await putClient('jm-orphan', weekdays('Asia/Tokyo', '09:00', '18:00'), true);
    const j = job('jm-orphan');
    await putJob(j);
    const flying = task(j, { state: 'in-flight', attempts: 1 });
    await putTask(flying);
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: {
          ...keys.lease('jm-orphan'),
          clientId: 'jm-orphan',
          owner: 'broker-x',
          token: 1,
          expiresAt: NOW + 2 * MINUTE,
          inFlight: new Set([`${j.jobId}|${flying.taskId}`]),
        },
      }),
    );

    const whileHeld = await manager(NOW + 5).run();
    expect(whileHeld.orphaned).not.toContain('jm-orphan');
    const afterExpiry = await manager(NOW + 3 * MINUTE).run();
    expect(afterExpiry.orphaned).toContain('jm-orphan');
    expect(afterExpiry.clients).not.toContain('jm-orphan');
    expect((await workList())?.orphaned).toContain('jm-orphan');
  });

  it('never writes an older work list over a newer one', async () => {
    const newer = manager(NOW + 10 * MINUTE);
    await newer.run();
    const late = manager(NOW + 5 * MINUTE);

    const result = await late.run();

    expect(result.desiredCount).toBeUndefined();
    expect(late.counts).toEqual([]);
    expect((await workList())?.updatedAt).toBe(NOW + 10 * MINUTE);
  });
});

describe('the run lease: one job manager run at a time, without reserved concurrency (issue 35 #1)', () => {
  /** A scaler that holds each run in its last step until the test lets it go. */
  function heldScaler() {
    const counts: number[] = [];
    const waiting: Array<() => void> = [];
    let arrived: () => void = () => {};
    return {
      counts,
      arrivals: () => new Promise<void>((resolve) => (arrived = resolve)),
      letGo: () => {
        for (const go of waiting.splice(0)) go();
      },
      scaler: {
        version: 'v1',
        setDesiredCount: async (n: number) => {
          counts.push(n);
          const held = new Promise<void>((resolve) => waiting.push(resolve));
          arrived();
          await held;
        },
      },
    };
  }
  const quietLog = new PowertoolsLog('job-manager', { write: () => {} });
  // Tables of its own: these runs must not start or complete the other tests' jobs.
  let ownControl: string;
  let ownTasks: string;
  beforeAll(async () => {
    const stage = `runlease${process.pid % 100000}${Math.random().toString(36).slice(2, 6)}`;
    ownControl = await createTable(cloud.ddb, stage, tableSpec('control'));
    ownTasks = await createTable(cloud.ddb, stage, tableSpec('tasks'));
  });
  const handlerOf = (fleet: ReturnType<typeof heldScaler>['scaler'], now?: () => number) =>
    makeLocalJobManager({
      doc: cloud.doc,
      controlTable: ownControl,
      tasksTable: ownTasks,
      cloud: cloud.info,
      fleet,
      maxBrokers: 1,
      log: quietLog,
      ...(now ? { now } : {}),
    });

  it('a run that overlaps one in progress does nothing and says so; the next run after it works', async () => {
    const held = heldScaler();
    const handler = handlerOf(held.scaler);
    const arrived = held.arrivals();
    const first = handler(scheduledEvent, { awsRequestId: 'run-1' } as never);
    await arrived;

    // The first run holds the lease, in its last step: the overlapping one writes nothing.
    const second = await handler(scheduledEvent, { awsRequestId: 'run-2' } as never);
    expect(second).toEqual({ skipped: 'another run holds the run lease' });
    expect(held.counts).toEqual([expect.any(Number)]);
    const lease = await new DynamoLeaseStore(cloud.doc, ownControl, { key: keys.runLease }).get(
      JOB_MANAGER_RUN,
    );
    expect(lease).toMatchObject({ owner: 'run-1' });

    held.letGo();
    expect(isSkippedRun(await first)).toBe(false);
    // Released at its end: the next run takes the lease at once and works.
    const next = held.arrivals();
    const third = handler(scheduledEvent, { awsRequestId: 'run-3' } as never);
    await next;
    held.letGo();
    expect(isSkippedRun(await third)).toBe(false);
    expect(held.counts).toHaveLength(2);
  });

  it('a run Lambda stopped holding the lease (its timeout) holds up no run after the lease has passed', async () => {
    const held = heldScaler();
    let at = Date.now();
    const handler = handlerOf(held.scaler, () => at);
    const arrived = held.arrivals();
    const stuck = handler(scheduledEvent, { awsRequestId: 'stuck-run' } as never);
    await arrived;
    expect(await handler(scheduledEvent, { awsRequestId: 'too-soon' } as never)).toMatchObject({
      skipped: expect.any(String),
    });

    // Past the function's timeout and the margin, the stuck run's lease has expired.
    at += runLeaseMs(functions['job-manager'].timeoutSeconds) + 1;
    const next = held.arrivals();
    const later = handler(scheduledEvent, { awsRequestId: 'next-minute' } as never);
    await next;
    held.letGo();
    expect(isSkippedRun(await later)).toBe(false);
    expect(isSkippedRun(await stuck)).toBe(false);
    expect(held.counts).toHaveLength(2);
  });
});

describe('the local job manager driving the local fleet', () => {
  let agent: EcsAgentEndpoint;
  let fleet: LocalFleet;

  beforeAll(async () => {
    agent = await startEcsAgent();
  });
  afterAll(async () => {
    await fleet?.stop();
    await agent?.stop();
  });

  it('sizes the fleet from the work it finds, and a deploy publishes the new desired version', async () => {
    fleet = startLocalFleet({
      agent,
      env: {},
      version: 'v1',
      script: 'test/fixtures/fleet/fake-broker.ts',
      reconcileIntervalMs: 50,
      stopTimeoutMs: 5_000,
      onDeploy: publishDesiredVersion(cloud.doc, controlTable, () => Date.now() + 365 * 24 * 3600_000),
    });
    // Real time: a client whose hours are always open, with a job ready now.
    await putClient('jm-local', {
      timeZone: 'UTC',
      weekly: Object.fromEntries(
        ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
      ),
    });
    const j = job('jm-local', { startAt: Date.now() - MINUTE });
    await putJob(j);
    await putTask(task(j, { readyAt: j.startAt }));
    const handler = makeLocalJobManager({
      doc: cloud.doc,
      controlTable,
      tasksTable,
      cloud: cloud.info,
      fleet,
      maxBrokers: 1,
      log: new PowertoolsLog('job-manager', { write: () => {} }),
    });

    const result = await handler(scheduledEvent, {} as never);

    expect(result).toMatchObject({ clients: expect.arrayContaining(['jm-local']), desiredCount: 1 });
    await fleet.waitUntil((f) => f.running().filter((b) => b.state === 'ready').length === 1, 60_000);

    await fleet.deploy('v2');
    expect((await workList())?.desiredVersion).toBe('v2');
    await fleet.waitUntil((f) => f.running().length === 1 && f.running()[0]?.version === 'v2', 60_000);
  });

  it('writes a work list of 20,000 clients as shards no item of which nears 400 KB, and a broker reads it whole', async () => {
    const clients = Array.from({ length: 20_000 }, (_, i) => `cl${String(i).padStart(24, '0')}`);
    // A control table of its own: the other tests' lists are not in the way.
    const table = await createTable(cloud.ddb, `fleetwl${process.pid % 100000}`, tableSpec('control'));
    const own = new DynamoFleetStore(cloud.doc, { controlTable: table, tasksTable });
    const at = NOW;
    const written = await own.putFleetWork(
      fleetWorkItem({ clients, served: clients.slice(0, 10_000), desiredVersion: 'v9', updatedAt: at }),
    );
    expect(written).toBe(true);
    const reader = new DynamoFleetWorkReader(cloud.doc, table);
    const work = await reader.read();
    expect(work?.desiredVersion).toBe('v9');
    expect(work?.clients).toHaveLength(20_000);
    expect(new Set(work?.clients)).toEqual(new Set(clients));
    expect(work?.served).toHaveLength(10_000);
    // The drain check reads the head only.
    expect((await reader.read({ lists: false }))?.clients).toEqual([]);
    // An older run's list is refused, shards and head alike.
    expect(
      await own.putFleetWork(fleetWorkItem({ clients: ['late'], desiredVersion: 'v8', updatedAt: at - 1 })),
    ).toBe(false);
    expect((await reader.read())?.clients).toHaveLength(20_000);
    // A short list again: the head holds it, and the old shards are no longer read.
    await own.putFleetWork(fleetWorkItem({ clients: ['only'], desiredVersion: 'v9', updatedAt: at + 1 }));
    expect((await reader.read())?.clients).toEqual(['only']);
  });

  it('keeps ready hints between instances: a fresh job manager reads no task of a client whose hint holds', async () => {
    await putClient('jm-hint');
    const j = job('jm-hint', { startAt: NOW - MINUTE });
    await putJob(j);
    await putTask(task(j, { readyAt: NOW + 3 * 3600_000 }));
    await manager(NOW + 70 * MINUTE).run();
    await manager(NOW + 71 * MINUTE).run();
    const states = await store.clientStates(['jm-hint']);
    expect(states.get('jm-hint')?.hint?.quietUntil).toBeGreaterThan(NOW + 71 * MINUTE);
    const checkedAt = states.get('jm-hint')?.hint?.checkedAt;
    const result = await manager(NOW + 72 * MINUTE).run();
    expect(result.clients).not.toContain('jm-hint');
    expect((await store.clientStates(['jm-hint'])).get('jm-hint')?.hint?.checkedAt).toBe(checkedAt);
  });
});
