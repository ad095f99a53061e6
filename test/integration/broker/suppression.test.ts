/**
 * The suppression list where a call starts, on the local cloud: DynamoDB Local (this suite's own
 * tables), the telephony sandbox as the far side, a real broker. Numbers suppressed while their job
 * runs are never rung afterwards (read from the sandbox's ring log); their tasks end `cancelled`
 * with `suppressed: <source>`, and the job counts them.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { startTelephonySandbox, type TelephonySandbox } from '#local/telephony-sandbox.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import type { BrokerConfig } from '#worker/config.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { ALWAYS_OPEN, jobIdFor, writeRunningJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually } from '../../support/wait.ts';

const SECRET = 'suppression-callback-secret';
const cloud = testCloud();
const stage = `sup${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let sandbox: TelephonySandbox;
const running: RunningBroker[] = [];

beforeAll(async () => {
  [controlTable, tasksTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
  ]);
  sandbox = await startTelephonySandbox({
    callbackSecret: SECRET,
    seed: 11,
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

const recipientOf = (i: number) => `+8190${String(30_000_000 + i)}`;

async function seed(clientId: string, tasks: number): Promise<Job> {
  const now = Date.now();
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 2,
    callsPerSecond: 2,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    updatedAt: now,
  };
  const job: Job = {
    clientId,
    jobId: jobIdFor('01JS', clientId),
    name: 'suppression',
    channel: 'call',
    scenarioId: 's1',
    startAt: now - 1000,
    maxAttempts: 1,
    retryDelaySeconds: 1,
    status: 'running',
    counts: { rows: tasks, rejected: 0, skipped: 0, tasks, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
  // Ready one after the other, so the broker starts them in order.
  const list = Array.from(
    { length: tasks },
    (_, i): Task => ({
      clientId,
      jobId: job.jobId,
      taskId: `t${String(i).padStart(4, '0')}`,
      row: i + 2,
      channel: 'call',
      recipient: recipientOf(i),
      variables: {},
      state: 'pending',
      attempts: 0,
      readyAt: now - 1000 + i,
      updatedAt: now,
    }),
  );
  await writeRunningJob(cloud.doc, { controlTable, tasksTable }, client, job, list);
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
    }),
  );
  return job;
}

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

const FINAL = new Set(['completed', 'failed', 'cancelled']);

describe('a number suppressed while its job runs', () => {
  it('is never rung afterwards: its task ends cancelled "suppressed: api", counted in the job', async () => {
    const clientId = 'dnc-live';
    const job = await seed(clientId, 12);
    const broker = await startBrokerProcess(brokerConfig(), { doc: cloud.doc, logger: silentLogger });
    running.push(broker);
    // Once the first calls have rung, the last eight numbers go on the list.
    await eventually(async () => (sandbox.stats(clientId).rings >= 2 ? true : undefined), 'two rings', {
      timeoutMs: 30_000,
    });
    const suppressed = Array.from({ length: 8 }, (_, i) => recipientOf(i + 4));
    const store = new DynamoSuppressionStore(cloud.doc, controlTable);
    const at = Date.now();
    await store.add(
      clientId,
      suppressed.map((recipient) => ({
        recipient,
        kind: 'phone',
        source: 'api',
        reason: 'asked',
        addedAt: at,
      })),
    );
    const listedAt = Date.now();
    const tasks = await eventually(
      async () => {
        const all = await readTasks<Task>(cloud.doc, tasksTable, job.jobId);
        return all.every((t) => FINAL.has(t.state)) ? all : undefined;
      },
      'every task to end',
      { timeoutMs: 60_000 },
    );

    // The far side: no ring to a suppressed number started after the list was written.
    const late = sandbox.rings().filter((r) => suppressed.includes(r.to) && r.startedAt >= listedAt);
    expect(late).toEqual([]);
    const rung = new Set(sandbox.rings().map((r) => r.to));
    const cancelled = tasks.filter((t) => t.state === 'cancelled');
    expect(cancelled.length).toBeGreaterThan(0);
    for (const t of cancelled) {
      expect(suppressed).toContain(t.recipient);
      expect(t.reason).toBe('suppressed: api');
      expect(rung.has(t.recipient)).toBe(false);
    }
    // Every task either rang or was suppressed; none was lost.
    expect(tasks.filter((t) => t.state === 'completed').length + cancelled.length).toBe(12);
    const stored = await new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable }).getJob(
      clientId,
      job.jobId,
    );
    expect(stored?.counts.cancelled).toBe(cancelled.length);
    expect(stored?.counts.suppressed).toBe(cancelled.length);
    broker.stop('sigterm');
    await broker.done;
  }, 90_000);
});
