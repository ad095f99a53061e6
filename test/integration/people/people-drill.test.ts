/**
 * The people drill (issue 39 #4) in a broker: one client, a limit of 1 contact a day over
 * `[call, email]`, and two jobs — a call job to each person's phone and an email job to the same
 * person's address — run at once by the client's lease holder against the telephony sandbox and the
 * SES v2 stand-in. Each person is contacted exactly once, on one channel, counted by the far sides;
 * the other task is capped (ended, or waiting for the next day's window). Half of the tasks were written before their person was linked (no
 * `person` on the task): the start finds the link all the same.
 */
import { SESv2Client } from '@aws-sdk/client-sesv2';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { LOCAL_SES, type SesEmulator, startSesEmulator } from '#local/ses-emulator.ts';
import { startTelephonySandbox, type TelephonySandbox } from '#local/telephony-sandbox.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { DEFAULT_EMAIL_SETTINGS } from '#shared/broker/serve-unkeyed.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { ALWAYS_OPEN, jobIdFor, writeRunningJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually } from '../../support/wait.ts';

const cloud = testCloud();
const stage = `pdr${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let sandbox: TelephonySandbox;
let ses: SesEmulator;
const running: RunningBroker[] = [];

beforeAll(async () => {
  [controlTable, tasksTable, channelsTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
    // The message side (email jobs' claims among them) runs where the broker has its channels table.
    createTable(cloud.ddb, stage, tableSpec('channels')),
  ]);
  sandbox = await startTelephonySandbox({
    callbackSecret: 'people-secret',
    seed: 9,
    timeScale: 60,
    durationSeconds: 30,
    ringSeconds: 6,
    outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
  });
  ses = await startSesEmulator({ account: { maxSendRate: 400, max24HourSend: 1_000_000 } });
});

afterAll(async () => {
  for (const b of running) b.stop('sigterm');
  await Promise.all(running.map((b) => b.done));
  await sandbox?.stop();
  await ses?.close();
});

const PEOPLE = 16;

/**
 * Refused by the limit: ended capped, or waiting for the next day's window when this one ends
 * before the job does (a run near midnight in Tokyo).
 */
const isCapped = (task: Task) =>
  (task.state === 'cancelled' && task.lastResult === 'capped') ||
  (task.state === 'pending' && task.reason?.startsWith('capped: waiting until ') === true);
const phoneOf = (i: number) => `+8190${String(60_000_000 + i)}`;
const addressOf = (clientId: string, i: number) => `success+${clientId}-${i}@simulator.amazonses.com`;

function job(clientId: string, channel: 'call' | 'email', now: number): Job {
  return {
    clientId,
    jobId: jobIdFor(channel === 'call' ? 'C' : 'E', clientId),
    name: `${channel} to everyone`,
    channel,
    scenarioId: 'default',
    ...(channel === 'email' ? { email: { subject: 'お知らせ', text: 'こんにちは' } } : {}),
    startAt: now - 1000,
    endAt: now + 10 * 60_000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: PEOPLE, rejected: 0, skipped: 0, tasks: PEOPLE, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
}

function task(j: Job, i: number, recipient: string, person: string | undefined): Task {
  return {
    clientId: j.clientId,
    jobId: j.jobId,
    taskId: `t${String(i).padStart(4, '0')}`,
    row: i + 2,
    channel: j.channel === 'call' ? 'call' : 'message',
    recipient,
    // Even rows were ingested after their person was linked; odd rows before.
    ...(person && i % 2 === 0 ? { person } : {}),
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: j.startAt,
    updatedAt: j.startAt,
  };
}

describe('a call job and an email job to the same people under 1 contact a day', { timeout: 180_000 }, () => {
  it('contact each person once, on one channel; the other task ends capped', async () => {
    const clientId = 'people-drill';
    const now = Date.now();
    const client: ClientSettings = {
      clientId,
      maxConcurrentCalls: 4,
      callsPerSecond: 4,
      timeZone: 'Asia/Tokyo',
      callingHours: ALWAYS_OPEN,
      defaultRegion: 'JP',
      email: { from: LOCAL_SES.from },
      contactLimits: [{ max: 1, per: 'day', channels: ['call', 'email'] }],
      updatedAt: now,
    };
    const { persons } = await new DynamoPeopleStore(cloud.doc, controlTable).link(
      clientId,
      Array.from({ length: PEOPLE }, (_, i) => [phoneOf(i), addressOf(clientId, i)]),
    );
    const calls = job(clientId, 'call', now);
    const emails = job(clientId, 'email', now);
    const tasksOf = (j: Job, recipient: (i: number) => string) =>
      Array.from({ length: PEOPLE }, (_, i) => task(j, i, recipient(i), persons.get(recipient(i))));
    await writeRunningJob(cloud.doc, { controlTable, tasksTable }, client, calls, tasksOf(calls, phoneOf));
    await writeRunningJob(
      cloud.doc,
      { controlTable, tasksTable },
      client,
      emails,
      tasksOf(emails, (i) => addressOf(clientId, i)),
    );
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
      }),
    );
    running.push(await startBroker());

    let last: Task[] = [];
    const all = await eventually(
      async () => {
        last = [
          ...(await readTasks<Task>(cloud.doc, tasksTable, calls.jobId)),
          ...(await readTasks<Task>(cloud.doc, tasksTable, emails.jobId)),
        ];
        return last.every((t) => t.state === 'completed' || isCapped(t)) ? last : undefined;
      },
      () =>
        `every task of both jobs to end; last seen: ${JSON.stringify(last.map((t) => `${t.channel} ${t.state} ${t.lastResult ?? ''} ${t.reason ?? ''}`))}`,
      { timeoutMs: 150_000 },
    );
    const rings = sandbox.stats(clientId).ringsPerRecipient;
    const sent = ses.sent().flatMap((e) => e.to);
    const contacts = Array.from({ length: PEOPLE }, (_, i) => ({
      calls: Object.values(rings[phoneOf(i)] ?? {}).reduce((a, b) => a + b, 0),
      emails: sent.filter((to) => to === addressOf(clientId, i)).length,
    }));
    expect(contacts.map((c) => c.calls + c.emails)).toEqual(Array(PEOPLE).fill(1));
    const capped = all.filter(isCapped);
    expect(capped).toHaveLength(PEOPLE);
    expect(capped.every((t) => t.reason?.includes('contact limit 1 per day (call, email)'))).toBe(true);
  });
});

async function startBroker(): Promise<RunningBroker> {
  const config = testBrokerConfig(
    { controlTable, tasksTable },
    {
      telephony: { http: { baseUrl: sandbox.url, apiToken: sandbox.apiToken } },
      // Callbacks go nowhere: the broker reconciles each call with the sandbox once it should have ended.
      broker: { reconcileMarginMs: 500, defaultMaxCallSeconds: 1, recheckMs: 500 },
      channelsTable,
    },
  );
  const client = new SESv2Client({
    region: LOCAL_SES.region,
    endpoint: ses.url,
    credentials: { accessKeyId: LOCAL_SES.accessKeyId, secretAccessKey: LOCAL_SES.secretAccessKey },
    maxAttempts: 1,
  });
  return startBrokerProcess(
    {
      ...config,
      email: { configurationSet: LOCAL_SES.configurationSet, rateShare: 1, settings: DEFAULT_EMAIL_SETTINGS },
    },
    { doc: cloud.doc, logger: silentLogger, ses: client },
  );
}
