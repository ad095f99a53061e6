/**
 * The fallback drill (issue 39 #4): a job over `line → email → sms` to 240 people, under a limit of
 * 1 contact a day over the three channels, sent by real broker processes (`node worker/main.ts`)
 * while the LINE sandbox answers 5 % with a 500 and loses 5 % of its answers after delivering, SES
 * loses 5 % of its answers after accepting and answers 5 % with a 5xx, End User Messaging throttles
 * in bursts — and while the broker holding the client is SIGKILLed mid-campaign, its standby taking
 * the client over once the lease runs out.
 *
 * A third of the people LINE reaches; the others are unfollowed or suppressed on LINE alone, some with
 * no address or a bounced one, some with an address that bounces once emailed: SES's events go to
 * the email-events use case (as deployed: the real stores), whose hard bounce moves the ended task
 * on to SMS. Counted from the far sides' own records (the sandbox's deliveries,
 * the stand-ins' accepted sends), never from Switchboard's state:
 * - nobody is contacted twice, nor on two channels;
 * - no task is lost: every task ends, and a completed task reached its person once, on the channel
 *   it says, as the identifier it holds;
 * - the moves took no second slot: a person LINE cannot reach is reached on the next channel (or
 *   their task ends in doubt, never two contacts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { LOCAL_SES, type SesEmulator, startSesEmulator } from '#local/ses-emulator.ts';
import { LOCAL_SMS, type SmsEmulator, startSmsEmulator } from '#local/sms-emulator.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys, type MessageChannel, type Task } from '#shared/jobs/model.ts';
import { FINAL_TASK_STATES } from '#shared/jobs/task-lifecycle.ts';
import { tableSpec } from '#shared/resources.ts';
import { SMS_CONTEXT } from '#shared/sms/settings.ts';
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

const PEOPLE = 240;
const CLIENT = 'fallback-drill';
const CHANNEL = { channelId: 'fallback-drill-channel', accessToken: 'fallback-drill-token' };
/** The holder is killed once this many people were reached. */
const KILL_AT = Math.floor(PEOPLE * 0.3);
/** Bounds against a hang on a loaded 2-core machine, not speed requirements. */
const WAIT = { timeoutMs: 240_000, everyMs: 200 };

const cloud = testCloud();
const stage = `fdr${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let line: LineSandbox;
let ses: SesEmulator;
let emailEvents: EmailEventsHandled;
let sms: SmsEmulator;
const children: { brokerId: string; child: ChildProcess }[] = [];

/** Person `i`'s address: the mailbox simulator's, bouncing for good for those whose email bounces once sent. */
const addressOf = (i: number) =>
  `${personOf(i).bouncesOnSend ? 'bounce' : 'success'}+fdr-${i}@simulator.amazonses.com`;
const phoneOf = (i: number) => `+8190${String(50_000_000 + i)}`;

/**
 * Who person `i` is: where LINE stands, whether they have an address, and whether it bounced before
 * (on the list) or bounces once emailed (SES's event moves the task on after it ended).
 */
function personOf(i: number) {
  const kind = i % 6;
  return {
    lineOptedOut: kind === 2 || kind === 4 || kind === 5,
    lineSuppressed: kind === 3,
    email: kind !== 4,
    emailBounced: kind === 5 && i % 12 === 5,
    bouncesOnSend: kind === 5 && i % 12 === 11,
    /** The channel that should reach them. */
    on: (kind <= 1 ? 'line' : kind <= 3 ? 'email' : 'sms') as MessageChannel,
  };
}

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
    account: { maxSendRate: 100, max24HourSend: 1_000_000 },
    deliver: emailEvents.deliver,
  });
  sms = await startSmsEmulator({
    identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 20 }],
  });
});

afterAll(async () => {
  for (const { child } of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await line?.stop();
  await ses?.close();
  await sms?.close();
});

/** A broker process as the fleet starts one, against the three far sides; resolves once it is ready. */
async function spawnBroker(brokerId: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['worker/main.ts'], {
    env: {
      ...process.env,
      ...cloud.env,
      CONTROL_TABLE: controlTable,
      TASKS_TABLE: tasksTable,
      CHANNELS_TABLE: channelsTable,
      BROKER_ID: brokerId,
      BROKER_VERSION: 'v1',
      CALL_STATUS_CALLBACK_URL: 'http://127.0.0.1:9/status',
      TELEPHONY_API_URL: 'http://127.0.0.1:9',
      TELEPHONY_API_TOKEN: 'unused',
      LINE_API_URL: line.url,
      AWS_ENDPOINT_URL_SESV2: ses.url,
      SES_CONFIGURATION_SET: LOCAL_SES.configurationSet,
      EMAIL_IN_DOUBT_WAIT_MS: '2000',
      AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2: sms.url,
      SMS_CONFIGURATION_SET: LOCAL_SMS.configurationSet,
      SMS_IN_DOUBT_WAIT_MS: '2000',
      // A dead holder's lease runs out after 6 s (heartbeats every 2 s, on a loaded DynamoDB Local).
      LEASE_MS: '6000',
      BROKER_IDLE_WAIT_MS: '300',
      LOG_LEVEL: 'error',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push({ brokerId, child });
  // Every line is read (the ready line first), so a chatty broker never blocks on a full pipe.
  const lines = createInterface({ input: child.stdout! });
  const [first] = (await once(lines, 'line')) as [string];
  expect(JSON.parse(first)).toMatchObject({ event: 'ready', brokerId });
  return child;
}

/** The client, its people, what stands in LINE's way, and the running job, as ingest writes them. */
async function seed(): Promise<Job> {
  const now = Date.now();
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
  const identifiers = (i: number) => [
    lineUserOf(CLIENT, i),
    ...(personOf(i).email ? [addressOf(i)] : []),
    phoneOf(i),
  ];
  const { persons } = await new DynamoPeopleStore(cloud.doc, controlTable).link(
    CLIENT,
    Array.from({ length: PEOPLE }, (_, i) => identifiers(i)),
  );
  const optOuts = new DynamoOptOutStore(cloud.doc, controlTable);
  const suppressions = new DynamoSuppressionStore(cloud.doc, controlTable);
  for (let i = 0; i < PEOPLE; i++) {
    const p = personOf(i);
    if (p.lineOptedOut) await optOuts.record(CLIENT, lineUserOf(CLIENT, i), true, now);
    const entry = (recipient: string, kind: 'line' | 'email', source: 'line-unfollow' | 'bounce') => ({
      recipient,
      kind,
      source,
      reason: source,
      addedAt: now,
    });
    if (p.lineSuppressed)
      await suppressions.add(CLIENT, [entry(lineUserOf(CLIENT, i), 'line', 'line-unfollow')]);
    if (p.emailBounced) await suppressions.add(CLIENT, [entry(addressOf(i), 'email', 'bounce')]);
  }
  const job: Job = {
    clientId: CLIENT,
    jobId: jobIdFor('R', CLIENT),
    name: 'drill over three channels',
    channel: 'line',
    fallback: ['email', 'sms'],
    scenarioId: 'default',
    // A placeholder: one push a person (a multicast's refusal would not be one user's).
    message: { messages: [{ type: 'text', text: '{{name}}様、お知らせです' }] },
    email: { subject: 'お知らせ', text: '{{name}}様' },
    sms: { body: '{{name}}様、お知らせです' },
    startAt: now - 1000,
    endAt: now + 30 * 60_000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: PEOPLE, rejected: 0, skipped: 0, tasks: PEOPLE, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
  const tasks = Array.from({ length: PEOPLE }, (_, i): Task => {
    const recipient = lineUserOf(CLIENT, i);
    return {
      clientId: CLIENT,
      jobId: job.jobId,
      taskId: `t${String(i).padStart(4, '0')}`,
      row: i + 2,
      channel: 'message',
      recipient,
      person: persons.get(recipient)!,
      reach: {
        line: recipient,
        ...(personOf(i).email ? { email: addressOf(i) } : {}),
        sms: phoneOf(i),
      },
      variables: { name: `顧客${i}` },
      state: 'pending',
      attempts: 0,
      readyAt: now - 1000,
      updatedAt: now,
    };
  });
  await writeRunningJob(cloud.doc, { controlTable, tasksTable }, client, job, tasks);
  return job;
}

/**
 * Contacts per person, as the far sides counted them: LINE's deliveries, SES's and SMS's acceptances;
 * an email to an address that bounces reached nobody, and is counted apart (`bounced`).
 */
function contacts(): { line: number; email: number; sms: number; bounced: number }[] {
  const index = new Map<string, { i: number; channel: MessageChannel }>();
  for (let i = 0; i < PEOPLE; i++) {
    index.set(lineUserOf(CLIENT, i), { i, channel: 'line' });
    index.set(addressOf(i), { i, channel: 'email' });
    index.set(phoneOf(i), { i, channel: 'sms' });
  }
  const out = Array.from({ length: PEOPLE }, () => ({ line: 0, email: 0, sms: 0, bounced: 0 }));
  const count = (to: string) => {
    const found = index.get(to);
    if (!found) return;
    if (to.startsWith('bounce+')) out[found.i]!.bounced += 1;
    else out[found.i]![found.channel] += 1;
  };
  for (const d of line.deliveries()) for (const to of d.to) count(to);
  for (const e of ses.sent()) for (const to of e.to) count(to);
  for (const t of sms.sent()) if (t.context[SMS_CONTEXT.client] === CLIENT) count(t.destination);
  return out;
}

const reached = () => contacts().filter((c) => c.line + c.email + c.sms > 0).length;

describe('the fallback drill: faults on every channel and a SIGKILLed broker', () => {
  it('contacts each person at most once, on one channel, and loses no task', {
    timeout: 300_000,
  }, async () => {
    const job = await seed();
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: fleetWorkItem({ clients: [CLIENT], desiredVersion: 'v1', updatedAt: Date.now() }),
      }),
    );
    line.faults.setProbabilities({ status500: 0.05, dropAfterDeliver: 0.05 });
    ses.faults.set({ answerLost: 0.05, internalFailure: 0.025, serviceUnavailable: 0.025 });
    ses.faults.force('answer-lost', 1);
    sms.faults.set({ throttled: 0.05, throttleBurst: 3 });
    await Promise.all([spawnBroker('fdr-a'), spawnBroker('fdr-b')]);

    const leases = new DynamoLeaseStore(cloud.doc, controlTable);
    const victim = await eventually(
      async () => {
        if (reached() < KILL_AT) return undefined;
        const lease = await leases.get(CLIENT);
        const holder = children.find((c) => c.brokerId === lease?.owner && c.child.exitCode === null);
        return lease && lease.expiresAt > Date.now() ? holder : undefined;
      },
      `${KILL_AT} people reached, on a live lease holder`,
      WAIT,
    );
    victim.child.kill('SIGKILL');
    const [, signal] = (await once(victim.child, 'exit')) as [number | null, NodeJS.Signals | null];
    expect(signal).toBe('SIGKILL');
    expect(reached()).toBeLessThan(PEOPLE);

    let last: Task[] = [];
    const tasks = await eventually(
      async () => {
        // Every SES event published so far handled first: a bounced task reads as ended until then.
        await emailEvents.settled(ses);
        last = await readTasks<Task>(cloud.doc, tasksTable, job.jobId);
        return last.length === PEOPLE && last.every((t) => FINAL_TASK_STATES.includes(t.state))
          ? last
          : undefined;
      },
      () =>
        `every task to end; open: ${JSON.stringify(last.filter((t) => !FINAL_TASK_STATES.includes(t.state)).map((t) => `${t.row} ${t.via ?? 'line'} ${t.state} ${t.lastResult ?? ''}`))}`,
      WAIT,
    );
    const successor = children.find((c) => c !== victim)!;
    successor.child.kill('SIGTERM');
    expect(((await once(successor.child, 'exit')) as [number | null])[0]).toBe(0);

    const counted = contacts();
    const wrong: string[] = [];
    for (const t of tasks) {
      const i = t.row - 2;
      const c = counted[i]!;
      const total = c.line + c.email + c.sms;
      const where = `${t.row}: ${t.via ?? 'line'} ${t.state}/${t.lastResult ?? ''} ${t.reason ?? ''}; line ${c.line}, email ${c.email}, sms ${c.sms}, bounced ${c.bounced}`;
      if (total > 1) wrong.push(`contacted ${total} times: ${where}`);
      if (c.bounced > 1) wrong.push(`emailed ${c.bounced} times: ${where}`);
      if (t.state === 'completed') {
        const via = t.via ?? 'line';
        if (c[via] !== 1) wrong.push(`completed without one contact on its channel: ${where}`);
        if (via !== personOf(i).on) wrong.push(`reached on ${via}, not ${personOf(i).on}: ${where}`);
      } else if (t.state !== 'failed' || t.lastResult !== 'in-doubt') {
        // A person reachable on some channel ends only reached, or in doubt (an answer lost, no event).
        wrong.push(`ended neither reached nor in doubt: ${where}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(emailEvents.neverHandled).toEqual([]);
    // Each channel reached someone, moves included (not every task ended in doubt).
    const completedOn = (channel: MessageChannel) =>
      tasks.filter((t) => t.state === 'completed' && (t.via ?? 'line') === channel).length;
    for (const channel of ['line', 'email', 'sms'] as const) expect(completedOn(channel)).toBeGreaterThan(0);
    // The job counts each task's end once, moves after a bounce included (pages closed by whoever
    // holds the client then: the successor, for the dead holder's).
    const want = { completed: 0, failed: 0, cancelled: 0 };
    for (const t of tasks) if (t.state in want) want[t.state as keyof typeof want] += 1;
    let jobCounts: Job['counts'] | undefined;
    await eventually(
      async () => {
        const stored = await cloud.doc.send(
          new GetCommand({ TableName: controlTable, Key: keys.job(CLIENT, job.jobId), ConsistentRead: true }),
        );
        jobCounts = (stored.Item as Job | undefined)?.counts;
        return jobCounts?.completed === want.completed &&
          jobCounts.failed === want.failed &&
          jobCounts.cancelled === want.cancelled
          ? jobCounts
          : undefined;
      },
      () => `the job to count ${JSON.stringify(want)}; it counts ${JSON.stringify(jobCounts)}`,
      WAIT,
    );
    // The addresses that bounce once emailed: each bounce moved its task on to SMS.
    const bouncedOn = tasks.filter((t) =>
      t.tried?.some((x) => x.channel === 'email' && x.reason.startsWith('bounced')),
    );
    expect(bouncedOn.length).toBeGreaterThan(0);
    console.log(
      `fallback drill: ${PEOPLE} people; reached on line ${completedOn('line')}, email ${completedOn('email')}, sms ${completedOn('sms')} (${bouncedOn.length} after their email bounced); in doubt ${tasks.filter((t) => t.lastResult === 'in-doubt').length}`,
    );
  });
});
