/**
 * Fallback in a broker (issue 39 #3): one job over `line → email → sms`, each task carrying its
 * person's identifiers, under a limit of 1 contact a day over the three channels. The LINE sandbox,
 * the SES v2 stand-in and the End User Messaging SMS stand-in count what reached each person: a
 * person LINE cannot reach (opted out, suppressed on LINE alone) is emailed instead, one with no
 * address (or whose address is suppressed on email alone) texted; a person suppressed person-wide is
 * reached on no channel; nobody twice, and the moves take no second slot of the limit.
 */
import { PinpointSMSVoiceV2Client } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { SESv2Client } from '@aws-sdk/client-sesv2';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { LOCAL_SES, type SesEmulator, startSesEmulator } from '#local/ses-emulator.ts';
import { LOCAL_SMS, type SmsEmulator, startSmsEmulator } from '#local/sms-emulator.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { DEFAULT_EMAIL_SETTINGS, DEFAULT_SMS_SETTINGS } from '#shared/broker/serve-unkeyed.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys, type MessageChannel, type Task } from '#shared/jobs/model.ts';
import { jobReportCsv } from '#shared/jobs/report.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { SMS_CONTEXT } from '#shared/sms/settings.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { EmailEventsHandled } from '../../support/email-events.ts';
import {
  ALWAYS_OPEN,
  jobIdFor,
  lineUserOf,
  putLineChannel,
  writeRunningJob,
} from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually } from '../../support/wait.ts';

const cloud = testCloud();
const stage = `fbk${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
const CHANNEL = { channelId: 'fallback-channel', accessToken: 'fallback-token' };
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let line: LineSandbox;
let ses: SesEmulator;
let emailEvents: EmailEventsHandled;
let sms: SmsEmulator;
const running: RunningBroker[] = [];

beforeAll(async () => {
  [controlTable, tasksTable, channelsTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
    createTable(cloud.ddb, stage, tableSpec('channels')),
  ]);
  line = await startLineSandbox({ channels: [CHANNEL] });
  // SES's events go to the email-events use case with the real stores, as the deployed function
  // records them (a hard bounce moves its task on).
  emailEvents = new EmailEventsHandled(cloud.doc, { controlTable, tasksTable });
  ses = await startSesEmulator({
    account: { maxSendRate: 400, max24HourSend: 1_000_000 },
    deliver: emailEvents.deliver,
  });
  sms = await startSmsEmulator({
    identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 20 }],
  });
});

afterAll(async () => {
  for (const b of running) b.stop('sigterm');
  await Promise.all(running.map((b) => b.done));
  await line?.stop();
  await ses?.close();
  await sms?.close();
});

const CLIENT = 'fallback-client';
/** The row's address: the mailbox simulator's, which bounces for good for a row whose email bounces. */
const addressOf = (i: number) =>
  `${ROWS[i]?.emailBounces ? 'bounce' : 'success'}+fb-${i}@simulator.amazonses.com`;
const phoneOf = (i: number) => `+8190${String(70_000_000 + i)}`;

/** Who each row is, and what stands in LINE's (or email's) way. */
const ROWS: readonly {
  readonly email: boolean;
  readonly phone: boolean;
  readonly lineOptedOut?: boolean;
  readonly lineSuppressed?: boolean;
  readonly emailBounced?: boolean;
  /** The address bounces for good once emailed (SES's event says so after the task completed). */
  readonly emailBounces?: boolean;
  readonly everywhere?: boolean;
  /** Where the person is reached, and what the task tried before (a pattern where SES's words are in it). */
  readonly expect: { readonly on: MessageChannel | 'none'; readonly tried?: string | RegExp };
}[] = [
  { email: true, phone: true, expect: { on: 'line' } },
  { email: true, phone: true, expect: { on: 'line' } },
  { email: true, phone: true, lineOptedOut: true, expect: { on: 'email', tried: 'line: opted-out' } },
  {
    email: true,
    phone: true,
    lineSuppressed: true,
    expect: { on: 'email', tried: 'line: suppressed: line-unfollow' },
  },
  {
    email: false,
    phone: true,
    lineOptedOut: true,
    expect: { on: 'sms', tried: 'line: opted-out; email: no-identifier' },
  },
  {
    email: true,
    phone: true,
    lineOptedOut: true,
    emailBounced: true,
    expect: { on: 'sms', tried: 'line: opted-out; email: suppressed: bounce' },
  },
  // Emailed, and the email bounced for good after the task completed: it opens again on SMS, in the
  // slot the email took.
  {
    email: true,
    phone: true,
    lineOptedOut: true,
    emailBounces: true,
    expect: {
      on: 'sms',
      tried: /^line: opted-out; email: bounced: Permanent\/General: smtp; 550 5\.1\.1 user unknown$/,
    },
  },
  // Suppressed person-wide (an operator's entry on the address): no channel may reach the person.
  { email: true, phone: true, everywhere: true, expect: { on: 'none' } },
  // LINE cannot, and the row has nothing else: the task ends on LINE as any would.
  { email: false, phone: false, lineOptedOut: true, expect: { on: 'none' } },
];

function fallbackJob(now: number): Job {
  return {
    clientId: CLIENT,
    jobId: jobIdFor('F', CLIENT),
    name: 'line, then email, then sms',
    channel: 'line',
    fallback: ['email', 'sms'],
    scenarioId: 'default',
    message: { messages: [{ type: 'text', text: 'お知らせです' }] },
    email: { subject: 'お知らせ', text: 'お知らせです' },
    sms: { body: 'お知らせです' },
    startAt: now - 1000,
    endAt: now + 10 * 60_000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: {
      rows: ROWS.length,
      rejected: 0,
      skipped: 0,
      tasks: ROWS.length,
      completed: 0,
      failed: 0,
      cancelled: 0,
    },
    createdAt: now,
    updatedAt: now,
  };
}

/** The task as ingest writes a row of a fallback job: its LINE id, and each identifier it has. */
function taskOf(job: Job, i: number, person: string | undefined): Task {
  const row = ROWS[i]!;
  const recipient = lineUserOf(CLIENT, i);
  return {
    clientId: CLIENT,
    jobId: job.jobId,
    taskId: `t${String(i).padStart(4, '0')}`,
    row: i + 2,
    channel: 'message',
    recipient,
    ...(person ? { person } : {}),
    reach: {
      line: recipient,
      ...(row.email ? { email: addressOf(i) } : {}),
      ...(row.phone ? { sms: phoneOf(i) } : {}),
    },
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: job.startAt,
    updatedAt: job.startAt,
  };
}

async function seed(now: number): Promise<Job> {
  const client: ClientSettings = {
    clientId: CLIENT,
    maxConcurrentCalls: 1,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    messageChannelId: CHANNEL.channelId,
    email: { from: LOCAL_SES.from },
    sms: { originationIdentity: LOCAL_SMS.originationNumber, partsPerSecond: 20 },
    contactLimits: [{ max: 1, per: 'day', channels: ['line', 'email', 'sms'] }],
    updatedAt: now,
  };
  await putLineChannel(cloud.doc, channelsTable, { ...CHANNEL, clientId: CLIENT });
  // Each row's identifiers are one person, as ingest links them.
  const { persons } = await new DynamoPeopleStore(cloud.doc, controlTable).link(
    CLIENT,
    ROWS.map((row, i) => [
      lineUserOf(CLIENT, i),
      ...(row.email ? [addressOf(i)] : []),
      ...(row.phone ? [phoneOf(i)] : []),
    ]),
  );
  const optOuts = new DynamoOptOutStore(cloud.doc, controlTable);
  const suppressions = new DynamoSuppressionStore(cloud.doc, controlTable);
  for (const [i, row] of ROWS.entries()) {
    if (row.lineOptedOut) await optOuts.record(CLIENT, lineUserOf(CLIENT, i), true, now);
    const entry = (
      recipient: string,
      kind: 'line' | 'email',
      source: 'line-unfollow' | 'bounce' | 'api',
    ) => ({
      recipient,
      kind,
      source,
      reason: source,
      addedAt: now,
    });
    if (row.lineSuppressed)
      await suppressions.add(CLIENT, [entry(lineUserOf(CLIENT, i), 'line', 'line-unfollow')]);
    if (row.emailBounced) await suppressions.add(CLIENT, [entry(addressOf(i), 'email', 'bounce')]);
    if (row.everywhere) await suppressions.add(CLIENT, [entry(addressOf(i), 'email', 'api')]);
  }
  const job = fallbackJob(now);
  await writeRunningJob(
    cloud.doc,
    { controlTable, tasksTable },
    client,
    job,
    ROWS.map((_, i) => taskOf(job, i, persons.get(lineUserOf(CLIENT, i)))),
  );
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients: [CLIENT], desiredVersion: 'v1', updatedAt: Date.now() }),
    }),
  );
  return job;
}

async function startBroker(): Promise<RunningBroker> {
  const config = testBrokerConfig(
    { controlTable, tasksTable },
    { broker: { callbackUrl: 'http://127.0.0.1:9/status' }, channelsTable, lineApiUrl: line.url },
  );
  const credentials = { accessKeyId: LOCAL_SES.accessKeyId, secretAccessKey: LOCAL_SES.secretAccessKey };
  return startBrokerProcess(
    {
      ...config,
      email: { configurationSet: LOCAL_SES.configurationSet, rateShare: 1, settings: DEFAULT_EMAIL_SETTINGS },
      sms: { configurationSet: LOCAL_SMS.configurationSet, settings: DEFAULT_SMS_SETTINGS },
    },
    {
      doc: cloud.doc,
      logger: silentLogger,
      ses: new SESv2Client({ region: LOCAL_SES.region, endpoint: ses.url, credentials, maxAttempts: 1 }),
      sms: new PinpointSMSVoiceV2Client({
        region: LOCAL_SMS.region,
        endpoint: sms.url,
        credentials: { accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: LOCAL_SMS.secretAccessKey },
        maxAttempts: 1,
      }),
    },
  );
}

const ended = (t: Task) => t.state === 'completed' || t.state === 'cancelled' || t.state === 'failed';

describe('a job over line → email → sms', { timeout: 180_000 }, () => {
  it('reaches each person once, on the first channel that can, and says what it tried', async () => {
    const job = await seed(Date.now());
    running.push(await startBroker());
    let last: Task[] = [];
    const tasks = await eventually(
      async () => {
        // Every SES event published so far recorded first: a bounced task reads as ended until then.
        await emailEvents.settled(ses);
        last = await readTasks<Task>(cloud.doc, tasksTable, job.jobId);
        return last.length === ROWS.length && last.every(ended) ? last : undefined;
      },
      () =>
        `every task to end; last seen: ${JSON.stringify(last.map((t) => `${t.row} ${t.via ?? 'line'} ${t.state} ${t.lastResult ?? ''} ${t.reason ?? ''}`))}`,
      { timeoutMs: 150_000 },
    );
    const byRow = new Map(tasks.map((t) => [t.row - 2, t]));
    const lineSent = line.deliveries().flatMap((d) => d.to);
    const emailed = ses.sent().flatMap((e) => e.to);
    const texted = sms
      .sent()
      .filter((t) => t.context[SMS_CONTEXT.client] === CLIENT)
      .map((t) => t.destination);
    for (const [i, row] of ROWS.entries()) {
      const reached = {
        line: lineSent.filter((to) => to === lineUserOf(CLIENT, i)).length,
        email: emailed.filter((to) => to === addressOf(i)).length,
        sms: texted.filter((to) => to === phoneOf(i)).length,
      };
      const task = byRow.get(i)!;
      const want = {
        line: 0,
        email: row.emailBounces ? 1 : 0,
        sms: 0,
        ...(row.expect.on === 'none' ? {} : { [row.expect.on]: 1 }),
      };
      expect({ row: i, ...reached }, JSON.stringify(task)).toEqual({ row: i, ...want });
      const { tried } = row.expect;
      expect({ row: i, tried: task.tried?.map((t) => `${t.channel}: ${t.reason}`).join('; ') }).toEqual({
        row: i,
        tried: tried instanceof RegExp ? expect.stringMatching(tried) : tried,
      });
      if (row.expect.on === 'none') expect(task.state).toBe('cancelled');
      else {
        // Completed where it reached the person, as its identifier there; the move took no second slot.
        expect({ row: i, state: task.state, via: task.via ?? 'line' }).toEqual({
          row: i,
          state: 'completed',
          via: row.expect.on,
        });
        expect(task.recipient).toBe(
          row.expect.on === 'line'
            ? lineUserOf(CLIENT, i)
            : row.expect.on === 'email'
              ? addressOf(i)
              : phoneOf(i),
        );
      }
    }
    // The job counts each end once: the bounced task's end on email was taken back when it moved on.
    const completed = tasks.filter((t) => t.state === 'completed').length;
    let counted: Record<string, unknown> | undefined;
    await eventually(
      async () => {
        counted = (
          await cloud.doc.send(
            new GetCommand({
              TableName: controlTable,
              Key: keys.job(CLIENT, job.jobId),
              ConsistentRead: true,
            }),
          )
        ).Item;
        return (counted?.counts as Job['counts'] | undefined)?.completed === completed ? counted : undefined;
      },
      () => `the job to count ${completed} completed; last seen: ${JSON.stringify(counted)}`,
    );
    expect(counted).toMatchObject({ reopened: 1 });
    // The report says which channel reached each person and what was tried before.
    const chunks: Uint8Array[] = [];
    const rows = (async function* () {
      yield* tasks;
    })();
    for await (const chunk of jobReportCsv((async function* () {})(), rows, job)) chunks.push(chunk);
    const report = Buffer.concat(chunks)
      .toString('utf8')
      .replace(/^\uFEFF/, '')
      .split('\r\n');
    expect(report[0]).toBe(
      'row,recipient,outcome,attempts,last_result,reason,column,value,channel,delivery,tried',
    );
    const sixth = report.find((l) => l.startsWith('7,'));
    expect(sixth).toMatch(
      new RegExp(
        `^7,'\\${phoneOf(5)},completed,1,[a-z-]+,,,,sms,,line: opted-out; email: suppressed: bounce$`,
      ),
    );
  });
});

describe('a job over sms → email', { timeout: 180_000 }, () => {
  it('emails a number the SMS service refuses as opted out (a STOP kept to SMS), in the slot the text took', async () => {
    const clientId = 'fallback-texts';
    const now = Date.now();
    const phone = (i: number) => `+8190${String(80_000_000 + i)}`;
    const address = (i: number) => `success+fbt-${i}@simulator.amazonses.com`;
    // The number's owner texted STOP to the origination identity: the service refuses the text.
    sms.optOut(phone(0));
    const { persons } = await new DynamoPeopleStore(cloud.doc, controlTable).link(clientId, [
      [phone(0), address(0)],
      [phone(1), address(1)],
    ]);
    const job: Job = {
      ...fallbackJob(now),
      clientId,
      jobId: jobIdFor('T', clientId),
      channel: 'sms',
      fallback: ['email'],
      counts: { rows: 2, rejected: 0, skipped: 0, tasks: 2, completed: 0, failed: 0, cancelled: 0 },
    };
    const { message: _line, ...content } = job;
    const tasks: Task[] = [0, 1].map((i) => ({
      clientId,
      jobId: job.jobId,
      taskId: `t${i}`,
      row: i + 2,
      channel: 'message',
      recipient: phone(i),
      person: persons.get(phone(i))!,
      reach: { sms: phone(i), email: address(i) },
      variables: {},
      state: 'pending',
      attempts: 0,
      readyAt: job.startAt,
      updatedAt: job.startAt,
    }));
    await writeRunningJob(
      cloud.doc,
      { controlTable, tasksTable },
      {
        clientId,
        maxConcurrentCalls: 1,
        callsPerSecond: 1,
        timeZone: 'Asia/Tokyo',
        callingHours: ALWAYS_OPEN,
        defaultRegion: 'JP',
        email: { from: LOCAL_SES.from },
        sms: { originationIdentity: LOCAL_SMS.originationNumber, partsPerSecond: 20 },
        contactLimits: [{ max: 1, per: 'day', channels: ['email', 'sms'] }],
        // A STOP keeps to SMS for this client: the person may still be emailed.
        suppressionScope: { 'sms-stop': 'channel' },
        updatedAt: now,
      },
      content,
      tasks,
    );
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: fleetWorkItem({ clients: [CLIENT, clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
      }),
    );
    if (running.length === 0) running.push(await startBroker());
    let last: Task[] = [];
    const done = await eventually(
      async () => {
        last = await readTasks<Task>(cloud.doc, tasksTable, job.jobId);
        return last.length === 2 && last.every(ended) ? last : undefined;
      },
      () => `both tasks to end; last seen: ${JSON.stringify(last)}`,
      { timeoutMs: 150_000 },
    );
    const [refused, texted] = [done.find((t) => t.row === 2)!, done.find((t) => t.row === 3)!];
    const emailed = ses.sent().flatMap((e) => e.to);
    const textedTo = sms
      .sent()
      .filter((t) => t.context[SMS_CONTEXT.client] === clientId)
      .map((t) => t.destination);
    expect({ emailed: emailed.filter((to) => to === address(0)).length, texted: textedTo }).toEqual({
      emailed: 1,
      texted: [phone(1)],
    });
    expect(emailed).not.toContain(address(1));
    expect(refused).toMatchObject({
      state: 'completed',
      via: 'email',
      recipient: address(0),
      attempts: 1,
      tried: [{ channel: 'sms', reason: 'sms-destination-phone-number-opted-out' }],
    });
    expect(texted).toMatchObject({ state: 'completed', recipient: phone(1) });
    expect(texted.tried).toBeUndefined();
  });
});
