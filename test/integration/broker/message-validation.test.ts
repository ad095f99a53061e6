/**
 * A message job LINE would refuse is refused before its first send (issue 35 #6): the broker asks
 * LINE's validation endpoint once per job (here the local LINE sandbox's), and a job whose message
 * LINE refuses has every task failed unsent with LINE's reason, then ends `failed` with it. A job
 * LINE takes is sent as before, and so is one whose validation LINE did not answer (a 500).
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { Job, Task } from '#shared/jobs/model.ts';
import { messageObjectProblems } from '#shared/line/message-objects.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { lineUserOf, seedMessageJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually } from '../../support/wait.ts';

const cloud = testCloud();
const stage = `mval${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
const TOKEN = 'mval-token';
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let line: LineSandbox;
const running: RunningBroker[] = [];

/**
 * A flex message whose contents are a box, not a container (bubble or carousel): Switchboard's
 * creation-time check (required properties) lets it through; LINE answers 400.
 */
const REFUSED: MessageTemplate = {
  messages: [
    { type: 'flex', altText: 'お知らせ', contents: { type: 'box', layout: 'vertical', contents: [] } },
  ],
};
const VALID: MessageTemplate = { messages: [{ type: 'text', text: 'お知らせ: 明日は休業です' }] };
const LINE_REASON =
  'LINE refused the message: messages[0].contents.type: Must be one of the following values: [bubble, carousel]';

beforeAll(async () => {
  [controlTable, tasksTable, channelsTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
    createTable(cloud.ddb, stage, tableSpec('channels')),
  ]);
  line = await startLineSandbox({ channels: [{ channelId: 'mval', accessToken: TOKEN }] });
});

afterEach(async () => {
  const left = running.splice(0);
  for (const b of left) b.stop('sigterm');
  await Promise.all(left.map((b) => b.done));
  line.faults.clear();
});

afterAll(async () => {
  await line?.stop();
});

/** A client on a channel of its own with a running message job of `n` recipients, and a broker serving it. */
async function served(prefix: string, n: number, message: MessageTemplate): Promise<Job> {
  const clientId = `${prefix}${Math.random().toString(36).slice(2, 6)}`;
  const channelId = `mval-${clientId}`;
  await cloud.doc.send(
    new PutCommand({
      TableName: channelsTable,
      Item: {
        channelId,
        clientId,
        accessToken: TOKEN,
        secrets: [{ secret: 's', addedAt: 0 }],
        autoAnswer: 'push',
        rules: [],
        updatedAt: 1,
      },
    }),
  );
  const job = await seedMessageJob(
    cloud.doc,
    { controlTable, tasksTable },
    { clientId, channelId, tasks: n, message, jobIdPrefix: '01JV' },
  );
  const config = testBrokerConfig(
    { controlTable, tasksTable },
    { broker: { callbackUrl: 'http://127.0.0.1:9/status' }, channelsTable, lineApiUrl: line.url },
  );
  running.push(await startBrokerProcess(config, { doc: cloud.doc, logger: silentLogger }));
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
    }),
  );
  return job;
}

/** Every task of the job once each has ended. */
function finalTasks(job: Job): Promise<Task[]> {
  return eventually(
    async () => {
      const tasks = await readTasks<Task>(cloud.doc, tasksTable, job.jobId);
      return tasks.length > 0 && tasks.every((t) => ['completed', 'failed', 'cancelled'].includes(t.state))
        ? tasks
        : undefined;
    },
    `every task of ${job.jobId} to end`,
    { timeoutMs: 60_000 },
  );
}

/** What the job manager does to a running job with no open task; the job as it then is. */
async function endJob(job: Job): Promise<Job | undefined> {
  const fleet = new DynamoFleetStore(cloud.doc, { controlTable, tasksTable });
  expect(await fleet.hasOpenTask(job.jobId)).toBe(false);
  expect(await fleet.completeJob(job, Date.now())).toBe(true);
  return new DynamoJobStore(cloud.doc, controlTable).get(job.clientId, job.jobId);
}

const deliveredTo = (job: Job, n: number) => {
  const recipients = new Set(Array.from({ length: n }, (_, i) => lineUserOf(job.clientId, i)));
  return line.deliveries().filter((d) => d.to.some((to) => recipients.has(to))).length;
};

const validations = (channelToken: string) =>
  line.log().filter((e) => e.path.startsWith('/v2/bot/message/validate/') && e.channelId === channelToken);

describe('LINE is asked before a message job is sent', () => {
  it("a job whose message passes Switchboard's check but LINE refuses: 0 deliveries, every task failed with LINE's reason, the job failed", async () => {
    // The creation-time check does not know this rule: the job could be created, LINE says no.
    expect(messageObjectProblems(REFUSED.messages)).toEqual([]);
    const n = 40;
    const before = validations('mval').length;
    const job = await served('refused', n, REFUSED);
    const tasks = await finalTasks(job);
    expect(tasks.map((t) => [t.state, t.lastResult, t.reason])).toEqual(
      tasks.map(() => ['failed', 'line-refused', LINE_REASON]),
    );
    expect(deliveredTo(job, n)).toBe(0);
    expect(validations('mval').length - before).toBe(1);
    expect(await endJob(job)).toMatchObject({ status: 'failed', failureReason: LINE_REASON });
  });

  it('a job LINE takes is sent and completes', async () => {
    const n = 40;
    const job = await served('valid', n, VALID);
    const tasks = await finalTasks(job);
    expect(tasks.every((t) => t.state === 'completed')).toBe(true);
    expect(deliveredTo(job, n)).toBeGreaterThan(0);
    expect(await endJob(job)).toMatchObject({ status: 'completed' });
  });

  it('a validation LINE does not answer (500) holds nothing back: the job is sent as before', async () => {
    line.faults.enqueue({ kind: 'status500', endpoint: 'validate' });
    const n = 40;
    const job = await served('unvalidated', n, VALID);
    const tasks = await finalTasks(job);
    expect(tasks.every((t) => t.state === 'completed')).toBe(true);
    expect(line.faults.pending()).toBe(0);
    expect(await endJob(job)).toMatchObject({ status: 'completed' });
  });
});
