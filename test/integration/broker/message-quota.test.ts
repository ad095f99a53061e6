import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { MONTHLY_LIMIT_FAILURE_REASON, MONTHLY_LIMIT_PAUSE_REASON } from '#shared/campaign/quota.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { type BrokerConfigOverrides, testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { seedMessageJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually, until } from '../../support/wait.ts';

const cloud = testCloud();
const stage = `quota${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let line: LineSandbox;
const running: RunningBroker[] = [];

const PERSONAL: MessageTemplate = {
  messages: [{ type: 'text', text: '{{name}} 様、ご利用ありがとうございます' }],
};
const SAME_FOR_ALL: MessageTemplate = { messages: [{ type: 'text', text: 'お知らせ: 明日は休業です' }] };

beforeAll(async () => {
  [controlTable, tasksTable, channelsTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
    createTable(cloud.ddb, stage, tableSpec('channels')),
  ]);
  line = await startLineSandbox({});
});

afterEach(async () => {
  const left = running.splice(0);
  for (const b of left) b.stop('sigterm');
  await Promise.all(left.map((b) => b.done));
});

afterAll(async () => {
  await line?.stop();
});

/** A channel of its own per test (the sandbox's quota consumption is per channel). */
async function channel(name: string) {
  const ch = {
    channelId: `${name}-${Math.random().toString(36).slice(2, 8)}`,
    accessToken: `${name}-token-${Math.random()}`,
  };
  line.addChannel(ch);
  await cloud.doc.send(
    new PutCommand({
      TableName: channelsTable,
      Item: {
        channelId: ch.channelId,
        clientId: 'any',
        accessToken: ch.accessToken,
        secrets: [{ secret: 's', addedAt: 0 }],
        autoAnswer: 'push',
        rules: [],
        updatedAt: 1,
      },
    }),
  );
  return ch;
}

async function startBroker(over: BrokerConfigOverrides['messages'] = {}): Promise<RunningBroker> {
  const config = testBrokerConfig(
    { controlTable, tasksTable },
    { channelsTable, lineApiUrl: line.url, messages: { messageConcurrency: 32, ...over } },
  );
  const b = await startBrokerProcess(config, { doc: cloud.doc, logger: silentLogger });
  running.push(b);
  return b;
}

async function putWork(clients: string[]) {
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients, desiredVersion: 'v1', updatedAt: Date.now() }),
    }),
  );
}

/**
 * A client on `channelId` (made the client's own: a broker sends only through the client's own
 * channel) with a running message job of `tasks` recipients, written as ingest would.
 */
async function seed(
  clientId: string,
  channelId: string,
  tasks: number,
  message: MessageTemplate,
  settings: Partial<ClientSettings> = {},
): Promise<Job> {
  await cloud.doc.send(
    new UpdateCommand({
      TableName: channelsTable,
      Key: { channelId },
      UpdateExpression: 'SET clientId = :client',
      ExpressionAttributeValues: { ':client': clientId },
    }),
  );
  return seedMessageJob(
    cloud.doc,
    { controlTable, tasksTable },
    { clientId, channelId, tasks, message, jobIdPrefix: '01JQ', settings },
  );
}

const tasksOf = (jobId: string) => readTasks<Task>(cloud.doc, tasksTable, jobId);

async function jobOf(job: Job): Promise<Job> {
  const out = await new DynamoMessageTaskStore(cloud.doc, {
    controlTable,
    tasksTable,
    clock: { now: () => Date.now() },
  }).getJob(job.clientId, job.jobId);
  return out!;
}

function deliveriesOn(channelId: string) {
  return line.deliveries().filter((d) => d.channelId === channelId);
}

// A loaded machine slows the brokers, not the rules: waits are long, and the tests never time a send.
describe("LINE's monthly quota (issue 14 #8)", { timeout: 300_000 }, () => {
  it('a campaign the quota left cannot cover is paused with the reason, and nothing of it is sent', async () => {
    const ch = await channel('short');
    line.setMonthlyQuota(1_000, { [ch.channelId]: 800 });
    const clientId = `qs${Math.random().toString(36).slice(2, 6)}`;
    const job = await seed(clientId, ch.channelId, 300, PERSONAL);
    await startBroker();
    await putWork([clientId]);

    const paused = await eventually(async () => {
      const j = await jobOf(job);
      return j.status === 'paused' ? j : undefined;
    }, 'the job to be paused for the quota');
    expect(paused.pausedReason).toBe(
      "line-quota: LINE's monthly message quota cannot cover this job: 300 messages left to send, 200 left in the quota for it (the channel's plan allows 1,000 a month, 800 used). Raise the plan's limit and resume, or set allowPartialDelivery on the client to send what the quota allows",
    );
    expect(deliveriesOn(ch.channelId)).toHaveLength(0);
    const tasks = await tasksOf(job.jobId);
    expect(tasks.filter((t) => t.state !== 'pending')).toEqual([]);
    // The quota was read through the Messaging API, before any send.
    const reads = line.log().filter((r) => r.channelId === ch.channelId);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((r) => r.method === 'GET')).toBe(true);

    // A resume clears the reason; the job is checked again before it sends, and paused again with
    // fresh figures while the plan has not changed.
    line.setMonthlyQuota(1_000, { [ch.channelId]: 850 });
    const resumed = await new DynamoJobStore(cloud.doc, controlTable).transition(
      paused,
      'running',
      Date.now(),
    );
    expect(resumed.ok && 'pausedReason' in resumed.job).toBe(false);
    expect(resumed.ok).toBe(true);
    expect((await jobOf(job)).pausedReason).toBeUndefined();
    const again = await eventually(async () => {
      const j = await jobOf(job);
      return j.status === 'paused' ? j : undefined;
    }, 'the resumed job to be paused again');
    expect(again.pausedReason).toContain('300 messages left to send, 150 left in the quota for it');
    expect(deliveriesOn(ch.channelId)).toHaveLength(0);
  });

  it('with partial delivery allowed it sends what the quota allows; the rest end failed with the reason, once', async () => {
    const ch = await channel('partial');
    line.setMonthlyQuota(1_000, { [ch.channelId]: 800 });
    const clientId = `qp${Math.random().toString(36).slice(2, 6)}`;
    const job = await seed(clientId, ch.channelId, 300, PERSONAL, { allowPartialDelivery: true });
    await startBroker();
    await putWork([clientId]);

    const tasks = await eventually(
      async () => {
        const all = await tasksOf(job.jobId);
        return all.every((t) => t.state === 'completed' || t.state === 'failed') ? all : undefined;
      },
      'every task to end',
      { timeoutMs: 240_000 },
    );
    const delivered = deliveriesOn(ch.channelId).flatMap((d) => d.to);
    expect(delivered).toHaveLength(200);
    expect(new Set(delivered).size).toBe(200);
    const failed = tasks.filter((t) => t.state === 'failed');
    expect(tasks.filter((t) => t.state === 'completed')).toHaveLength(200);
    expect(failed).toHaveLength(100);
    expect(
      failed.every((t) => t.lastResult === 'monthly-quota' && t.reason === MONTHLY_LIMIT_FAILURE_REASON),
    ).toBe(true);
    // Each refused task was asked once: not retried for ever.
    const refusals = line.log().filter((r) => r.channelId === ch.channelId && r.status === 429);
    expect(refusals).toHaveLength(100);
    const counts = (
      await eventually(async () => {
        const j = await jobOf(job);
        return j.counts.completed + j.counts.failed === 300 ? j : undefined;
      }, 'the job counts')
    ).counts;
    expect(counts).toMatchObject({ completed: 200, failed: 100 });
  });
});

// A loaded machine slows the brokers, not the rules: waits are long, and the tests never time a send.
describe("LINE's monthly limit answered by LINE itself", { timeout: 300_000 }, () => {
  it('a monthly-limit 429 mid-campaign (quota used elsewhere) pauses the job with the reason; nothing is lost', async () => {
    const ch = await channel('refused');
    line.setMonthlyQuota(undefined);
    const clientId = `qr${Math.random().toString(36).slice(2, 6)}`;
    const job = await seed(clientId, ch.channelId, 200, PERSONAL);
    line.faults.enqueue({ kind: 'status429', monthly: true });
    await startBroker();
    await putWork([clientId]);
    const paused = await eventually(async () => {
      const j = await jobOf(job);
      return j.status === 'paused' ? j : undefined;
    }, 'the job to be paused at the monthly limit');
    expect(paused.pausedReason).toBe(MONTHLY_LIMIT_PAUSE_REASON);
    // Every task is either delivered once or waiting for the resume (released: same attempt, same
    // retry key): none failed, none lost.
    const tasks = await eventually(async () => {
      const all = await tasksOf(job.jobId);
      return all.every((t) => ['completed', 'pending', 'retry-wait'].includes(t.state)) ? all : undefined;
    }, 'the round to settle');
    const delivered = deliveriesOn(ch.channelId).flatMap((d) => d.to);
    expect(new Set(delivered).size).toBe(delivered.length);
    expect(tasks.filter((t) => t.state === 'completed')).toHaveLength(delivered.length);
    expect(delivered.length).toBeLessThan(200);
  });
});

// A loaded machine slows the brokers, not the rules: waits are long, and the tests never time a send.
describe("LINE's per-endpoint rate limits", { timeout: 300_000 }, () => {
  it('multicasts keep their own endpoint rate at the sandbox: no 429, never more in a second than it allows', async () => {
    const ch = await channel('mcast');
    line.setMonthlyQuota(undefined);
    line.setRateLimits({ multicast: 2 });
    try {
      const clientId = `qm${Math.random().toString(36).slice(2, 6)}`;
      const job = await seed(clientId, ch.channelId, 1500, SAME_FOR_ALL);
      await startBroker({ multicastRatePerSecond: 2 });
      await putWork([clientId]);
      let seen: unknown;
      await until(
        async () => {
          seen = (await jobOf(job)).counts;
          return (seen as Job['counts']).completed === 1500;
        },
        () => `the job to be delivered (its counts: ${JSON.stringify(seen)})`,
        { timeoutMs: 240_000 },
      );
      const multicasts = line.log().filter((r) => r.channelId === ch.channelId && r.method === 'POST');
      expect(multicasts.length).toBeGreaterThanOrEqual(3);
      expect(multicasts.every((r) => r.status === 200)).toBe(true);
      // The sandbox's bucket refused none (no 429 above). The broker paced them: at 2/s, n
      // multicasts span at least (n - 2) × 500 ms from the first to the last even after a
      // burst of one, counted with a generous margin for a busy machine's late or early arrivals;
      // unpaced, they would all arrive within a few milliseconds.
      const at = multicasts.map((r) => r.at).sort((a, b) => a - b);
      expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(Math.max(1, at.length - 2) * 500 - 250);
      expect(new Set(deliveriesOn(ch.channelId).flatMap((d) => d.to)).size).toBe(1500);
    } finally {
      line.setRateLimits({ multicast: 200 });
    }
  });
});
