/**
 * SMS jobs end to end in a broker: the SMS tasks a client's lease holder claims go out through the
 * End User Messaging SMS stand-in (the real `PinpointSMSVoiceV2Client`), one `SendTextMessage` a
 * recipient with their own text and the `Context` keys naming the task, paced in message parts per
 * second of the origination identity; the service's answers decide each task, and an unanswered
 * text is never sent again blindly (the task waits for its event, then ends in doubt).
 */
import { PinpointSMSVoiceV2Client } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { LOCAL_SMS, type SmsEmulator, startSmsEmulator } from '#local/sms-emulator.ts';
import { DynamoDeliveryOutcomeStore } from '#shared/adapters/dynamo-delivery-outcomes.ts';
import { DEFAULT_SMS_SETTINGS } from '#shared/broker/serve-unkeyed.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { SMS_CONTEXT, type SmsSettings } from '#shared/sms/settings.ts';
import { readSmsEvent, SMS_DELIVERY_RANK } from '#shared/sms/sms-events.ts';
import type { SmsTemplate } from '#shared/sms/template.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { ALWAYS_OPEN, jobIdFor, writeRunningJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually } from '../../support/wait.ts';

const cloud = testCloud();
const stage = `sms${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let sms: SmsEmulator;
const running: RunningBroker[] = [];

/** 74 characters of Japanese once filled: UCS-2, two parts (70 fit one, 67 a part once split). */
const JAPANESE: SmsTemplate = {
  body: '{{name}}様、ご予約の確認です。明日の午前十時にお待ちしております。変更は店舗までお電話ください。クーポン{{coupon}}。またのご来店を心よりお待ちしております。',
};

beforeAll(async () => {
  [controlTable, tasksTable, channelsTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
    createTable(cloud.ddb, stage, tableSpec('channels')),
  ]);
  // The events go where the SMS events function records them: each task's delivery state.
  const outcomes = new DynamoDeliveryOutcomeStore(cloud.doc, tasksTable, SMS_DELIVERY_RANK, 'sms');
  sms = await startSmsEmulator({
    identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 20 }],
    deliver: async (event) => {
      const change = readSmsEvent(event);
      if (!('ignored' in change)) await outcomes.record({ ...change, sent: true });
    },
  });
});

afterEach(async () => {
  const left = running.splice(0);
  for (const b of left) b.stop('sigterm');
  await Promise.all(left.map((b) => b.done));
  sms.faults.reset();
});

afterAll(async () => {
  await sms?.close();
});

async function startBroker(inDoubtWaitMs = 60_000): Promise<RunningBroker> {
  const config = testBrokerConfig(
    { controlTable, tasksTable },
    { broker: { callbackUrl: 'http://127.0.0.1:9/status' }, channelsTable, lineApiUrl: 'http://127.0.0.1:9' },
  );
  const client = new PinpointSMSVoiceV2Client({
    region: LOCAL_SMS.region,
    endpoint: sms.url,
    credentials: { accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: LOCAL_SMS.secretAccessKey },
    maxAttempts: 1,
  });
  const b = await startBrokerProcess(
    {
      ...config,
      sms: {
        configurationSet: LOCAL_SMS.configurationSet,
        settings: { ...DEFAULT_SMS_SETTINGS, inDoubtWaitMs },
      },
    },
    { doc: cloud.doc, logger: silentLogger, sms: client },
  );
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

/** A Japanese mobile number of a client's list (each client its own block), E.164 as ingest writes it. */
const numberOf = (i: number, block = 0) => `+8190${String(10_000_000 + block * 100_000 + i).slice(-8)}`;

/** A client with SMS settings and a running SMS job of `n` recipients, as ingest writes them. */
async function seed(
  clientId: string,
  n: number,
  block: number,
  settings: Partial<SmsSettings> = {},
): Promise<Job> {
  const now = Date.now();
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 1,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    sms: { originationIdentity: LOCAL_SMS.originationNumber, partsPerSecond: 20, ...settings },
    updatedAt: now,
  };
  const job: Job = {
    clientId,
    jobId: jobIdFor('S', clientId),
    name: 'reminder',
    channel: 'sms',
    scenarioId: 'default',
    sms: JAPANESE,
    startAt: now - 1000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: n, rejected: 0, skipped: 0, tasks: n, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
  const tasks = Array.from(
    { length: n },
    (_, i): Task => ({
      clientId,
      jobId: job.jobId,
      taskId: `t${String(i).padStart(5, '0')}`,
      row: i + 2,
      channel: 'message',
      recipient: numberOf(i, block),
      variables: { name: `顧客${i}`, coupon: `C${i}` },
      state: 'pending',
      attempts: 0,
      readyAt: now - 1000,
      updatedAt: now,
    }),
  );
  await writeRunningJob(cloud.doc, { controlTable, tasksTable }, client, job, tasks);
  return job;
}

const tasksOf = (job: Job) => readTasks(cloud.doc, tasksTable, job.jobId);
const textsOf = (clientId: string) => sms.sent().filter((t) => t.context[SMS_CONTEXT.client] === clientId);

function timesTexted(clientId: string): Map<string, number> {
  const times = new Map<string, number>();
  for (const t of textsOf(clientId)) times.set(t.destination, (times.get(t.destination) ?? 0) + 1);
  return times;
}

async function allFinal(job: Job): Promise<Task[]> {
  return eventually(
    async () => {
      const tasks = await tasksOf(job);
      return tasks.every((t) => ['completed', 'failed', 'cancelled'].includes(t.state)) ? tasks : undefined;
    },
    'every task to end',
    { timeoutMs: 240_000 },
  );
}

describe('SMS jobs in a broker', { timeout: 300_000 }, () => {
  it('texts each recipient once, their own text with the Context keys, from the identity, counted in parts', async () => {
    const job = await seed('sms-a', 30, 1);
    await startBroker();
    await putWork(['sms-a']);
    const tasks = await allFinal(job);
    expect(tasks.map((t) => t.state)).toEqual(Array(30).fill('completed'));
    const texts = textsOf('sms-a');
    expect(texts).toHaveLength(30);
    expect(new Set(texts.map((t) => t.destination)).size).toBe(30);
    const first = texts.find((t) => t.destination === numberOf(0, 1))!;
    expect(first.body).toBe(JAPANESE.body.replace('{{name}}', '顧客0').replace('{{coupon}}', 'C0'));
    expect(first).toMatchObject({
      origin: LOCAL_SMS.originationNumber,
      configurationSet: LOCAL_SMS.configurationSet,
      messageType: 'TRANSACTIONAL',
      encoding: 'UCS2',
      parts: 2,
    });
    expect(first.context).toEqual({
      [SMS_CONTEXT.client]: 'sms-a',
      [SMS_CONTEXT.job]: job.jobId,
      [SMS_CONTEXT.task]: 't00000',
      [SMS_CONTEXT.attempt]: '1',
    });
    // Every text's events came back: each task records its delivery.
    const delivered = await eventually(
      async () => {
        const now = await tasksOf(job);
        return now.every((t) => t.deliveryState === 'delivered') ? now : undefined;
      },
      'every delivery recorded',
      { timeoutMs: 240_000 },
    );
    expect(delivered).toHaveLength(30);
  });

  it('a number on the identity’s opt-out list fails with that reason; the others are texted', async () => {
    const job = await seed('sms-b', 5, 2);
    sms.optOut(numberOf(2, 2));
    await startBroker();
    await putWork(['sms-b']);
    const tasks = await allFinal(job);
    const optedOut = tasks.find((t) => t.recipient === numberOf(2, 2))!;
    expect(optedOut).toMatchObject({ state: 'failed', lastResult: 'sms-destination-phone-number-opted-out' });
    expect(optedOut.reason).toMatch(/opted out/);
    expect(tasks.filter((t) => t.state === 'completed')).toHaveLength(4);
    expect(timesTexted('sms-b').get(numberOf(2, 2))).toBeUndefined();
  });

  it('an answer lost after the text went out: never texted again, and its event proves it sent', async () => {
    const job = await seed('sms-c', 40, 3);
    sms.faults.set({ answerLost: 0.15 });
    await startBroker(3_000);
    await putWork(['sms-c']);
    const tasks = await allFinal(job);
    expect([...timesTexted('sms-c').values()].every((n) => n === 1)).toBe(true);
    expect(timesTexted('sms-c').size).toBe(40);
    // The text whose answer was lost waited for its event, which said it went out.
    expect(tasks.filter((t) => t.state !== 'completed').map((t) => [t.recipient, t.reason])).toEqual([]);
  });

  it('throttled texts wait and go again: every number texted once, every task completed', async () => {
    const job = await seed('sms-e', 30, 5);
    sms.faults.force('throttled', 6);
    await startBroker();
    await putWork(['sms-e']);
    const tasks = await allFinal(job);
    expect(tasks.map((t) => t.state)).toEqual(Array(30).fill('completed'));
    expect([...timesTexted('sms-e').values()].every((n) => n === 1)).toBe(true);
    expect(timesTexted('sms-e').size).toBe(30);
  });

  it('a 5xx may have sent the text: at most once, it ends in doubt unless an event says it went', async () => {
    const job = await seed('sms-d', 40, 4);
    sms.faults.force('internal-failure', 3);
    await startBroker(1_000);
    await putWork(['sms-d']);
    const tasks = await allFinal(job);
    expect([...timesTexted('sms-d').values()].every((n) => n === 1)).toBe(true);
    const inDoubt = tasks.filter((t) => t.lastResult === 'in-doubt');
    expect(inDoubt).toHaveLength(3);
    expect(
      inDoubt.every((t) => t.state === 'failed' && /may or may not have been sent/.test(t.reason ?? '')),
    ).toBe(true);
    expect(tasks.filter((t) => t.state === 'completed')).toHaveLength(37);
  });
});
