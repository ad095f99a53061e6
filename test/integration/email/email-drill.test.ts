/**
 * The email drill (issue 38, item 9): a campaign of 2,000 recipients sent by real broker processes
 * (`node worker/main.ts`) through the SES v2 stand-in while it loses the answer to 5 % of the sends
 * after accepting them, answers 5 % with a 5xx before sending, throttles in bursts of 429s, loses,
 * duplicates and reorders its events — and while the broker holding the client is SIGKILLed
 * mid-campaign, its standby taking the client over once the lease runs out. SES's events reach the
 * deployed email-events handler as the stack's rule sends them (`local/email-wiring.ts`'s path, with
 * the time each email's first event was recorded kept for the checks below).
 *
 * Counted from the stand-in's own record of accepted sends, never from Switchboard's state:
 * - no address is emailed twice;
 * - no task is lost: every task ends, completed (SES accepted it) or failed in doubt, and the job's
 *   counts add up to the list;
 * - a completed task's email was accepted, exactly once; a task never accepted (a 5xx, a send the
 *   killed broker never made) ends in doubt, never completed;
 * - every ambiguous send is resolved or reported in doubt: a task whose accepted send's answer was
 *   lost (seen on the wire by `SesWireTap`) is completed when an event of its email was recorded
 *   before the broker's in-doubt wait ran out, and in doubt when none ever was (every event lost).
 *   The same holds for any accepted email whose event came in time, the killed broker's included.
 *
 * Tasks a killed broker had claimed but never sent are sent by its successor: for email a request is
 * recorded just before it goes (the batch ledger), and only recorded tasks are taken as maybe sent.
 *
 * Waits are on the state they wait for, never sleeps; their bounds are against a hang only.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cloudEnv, createTable } from '#local/cloud.ts';
import { type Handler, invokeHandler } from '#local/lambda.ts';
import { LOCAL_SES, type SentEmail, type SesEmulator, startSesEmulator } from '#local/ses-emulator.ts';
import { toSqsRecord } from '#local/sqs-poller.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { SES_BULK_DESTINATIONS } from '#shared/adapters/ses-transport.ts';
import { IN_DOUBT_REASON } from '#shared/campaign/unit-sender.ts';
import {
  EMAIL_EVENT_TYPES,
  emailConfigurationSetName,
  matchesEmailEventRule,
} from '#shared/email/event-destination.ts';
import type { EmailTemplate } from '#shared/email/template.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { functions } from '#shared/functions.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { FINAL_TASK_STATES } from '#shared/jobs/task-lifecycle.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud } from '../../support/cloud.ts';
import { ALWAYS_OPEN, jobIdFor, writeRunningJob } from '../../support/seed-jobs.ts';
import { SesWireTap } from '../../support/ses-wire-tap.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually } from '../../support/wait.ts';

const RECIPIENTS = 2_000;
const CLIENT = 'email-drill';
/** The broker's wait for the SEND event of an unanswered send before the task ends in doubt. */
/** The brokers' email senders (requests at once): what a killed broker can have recorded and not yet sent. */
const SENDERS = 4;
const IN_DOUBT_WAIT_MS = 3_000;
/** The account's rate: the campaign takes seconds, long enough to kill its sender half-way. */
const MAX_SEND_RATE = 300;
/** The holder is killed once this many of the recipients were accepted. */
const KILL_AT = Math.floor(RECIPIENTS * 0.4);
/** Bounds against a hang on a loaded 2-core machine, not speed requirements. */
const WAIT = { timeoutMs: 240_000, everyMs: 200 };
/**
 * The event batches' window: shorter than the deployed mapping's (2 s), so that an event can settle
 * a send whose answer was lost within the brokers' {@link IN_DOUBT_WAIT_MS}.
 */
const BATCH_WINDOW_MS = 250;

const EMAIL: EmailTemplate = {
  subject: '{{name}}様へのご案内',
  text: 'こんにちは {{name}} さん。クーポン: {{coupon}}',
  html: '<p>こんにちは {{name}} さん</p><p>{{coupon}}</p>',
};

const cloud = testCloud();
const stage = `drl${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
const configurationSet = emailConfigurationSetName(stage);
let controlTable: string;
let tasksTable: string;
let ses: SesEmulator;
let tap: SesWireTap;
const children: { brokerId: string; child: ChildProcess }[] = [];
/** Wall ms each email's first event was recorded by email-events, by SES message id. */
const recordedAt = new Map<string, number>();

/** The deployed email-events handler, on this suite's tables (it reads them at import). */
async function emailEventsHandler(): Promise<Handler<SQSEvent, SQSBatchResponse>> {
  const env = cloudEnv({
    ...cloud.info,
    stage,
    tableNames: { ...cloud.info.tableNames, control: controlTable, tasks: tasksTable },
  });
  for (const [name, value] of Object.entries(env)) process.env[name] = value;
  process.env.LOG_LEVEL = 'error';
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const main = (await import('#lambdas/email-events/main.ts')) as unknown as {
    handler: Handler<SQSEvent, SQSBatchResponse>;
  };
  return main.handler;
}

beforeAll(async () => {
  [controlTable, tasksTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
  ]);
  const handler = await emailEventsHandler();
  const spec = functions['email-events'];
  const batches = new MappingBatches(async (records) => {
    const response = await invokeHandler(
      handler,
      { Records: records },
      { functionName: spec.id, timeoutMs: spec.timeoutSeconds * 1000 },
    );
    return new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  }, spec.queueSource!.batchSize);
  ses = await startSesEmulator({
    account: { maxSendRate: MAX_SEND_RATE, max24HourSend: 1_000_000 },
    configurationSets: { [configurationSet]: { eventTypes: EMAIL_EVENT_TYPES } },
    // The stack's rule, its queue and the function's event source mapping, as
    // `local/email-wiring.ts` wires them; a failure is retried by the stand-in.
    deliver: async (event) => {
      if (!matchesEmailEventRule(event, configurationSet)) return;
      const record = toSqsRecord(
        { MessageId: randomUUID(), ReceiptHandle: randomUUID(), Body: JSON.stringify(event) },
        'arn:aws:sqs:us-east-1:000000000000:ses-events',
        'us-east-1',
      );
      if (!(await batches.add(record))) throw new Error('email-events failed the event');
      const messageId = (event.detail as { mail?: { messageId?: string } }).mail?.messageId;
      if (messageId !== undefined && !recordedAt.has(messageId)) recordedAt.set(messageId, Date.now());
    },
  });
  tap = await SesWireTap.start(ses.url);
});

afterAll(async () => {
  for (const { child } of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await tap?.close();
  await ses?.close();
});

/**
 * Events gathered into batches as the event source mapping gathers them: up to its batch size, or
 * whatever came within {@link BATCH_WINDOW_MS}; one invocation a batch, each record told whether
 * the handler failed it. (Invoking the handler once an event, as many at once as the stand-in
 * publishes, loads DynamoDB Local far beyond what the deployed mapping would, and slows every suite
 * sharing it.)
 */
class MappingBatches {
  readonly #invoke: (records: SQSRecord[]) => Promise<ReadonlySet<string>>;
  readonly #size: number;
  #pending: { record: SQSRecord; settle: (ok: boolean) => void }[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(invoke: (records: SQSRecord[]) => Promise<ReadonlySet<string>>, size: number) {
    this.#invoke = invoke;
    this.#size = size;
  }

  /** Resolves true once the record's batch was handled and the record not failed. */
  add(record: SQSRecord): Promise<boolean> {
    return new Promise((settle) => {
      this.#pending.push({ record, settle });
      if (this.#pending.length >= this.#size) this.#flush();
      else this.#timer ??= setTimeout(() => this.#flush(), BATCH_WINDOW_MS);
    });
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#pending.splice(0);
    this.#invoke(batch.map((b) => b.record)).then(
      (failed) => {
        for (const { record, settle } of batch) settle(!failed.has(record.messageId));
      },
      () => {
        for (const { settle } of batch) settle(false);
      },
    );
  }
}

/** A broker process as the fleet starts one, its SES client pointed at the tap; resolves once it is ready. */
async function spawnBroker(brokerId: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['worker/main.ts'], {
    env: {
      ...process.env,
      ...cloud.env,
      CONTROL_TABLE: controlTable,
      TASKS_TABLE: tasksTable,
      BROKER_ID: brokerId,
      BROKER_VERSION: 'v1',
      CALL_STATUS_CALLBACK_URL: 'http://127.0.0.1:9/status',
      TELEPHONY_API_URL: 'http://127.0.0.1:9',
      TELEPHONY_API_TOKEN: 'unused',
      LINE_API_URL: 'http://127.0.0.1:9',
      AWS_ENDPOINT_URL_SESV2: tap.url,
      SES_CONFIGURATION_SET: configurationSet,
      EMAIL_IN_DOUBT_WAIT_MS: String(IN_DOUBT_WAIT_MS),
      EMAIL_CONCURRENCY: String(SENDERS),
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

/** The client's settings and a running email job of {@link RECIPIENTS} tasks, as ingest writes them. */
async function seed(): Promise<Job> {
  const now = Date.now();
  const client: ClientSettings = {
    clientId: CLIENT,
    maxConcurrentCalls: 1,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    email: { from: LOCAL_SES.from, fromName: 'ショップ', delivery: 'at-most-once' },
    updatedAt: now,
  };
  const job: Job = {
    clientId: CLIENT,
    jobId: jobIdFor('D', CLIENT),
    name: 'drill',
    channel: 'email',
    scenarioId: 'default',
    email: EMAIL,
    startAt: now - 1000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: {
      rows: RECIPIENTS,
      rejected: 0,
      skipped: 0,
      tasks: RECIPIENTS,
      completed: 0,
      failed: 0,
      cancelled: 0,
    },
    createdAt: now,
    updatedAt: now,
  };
  const tasks = Array.from(
    { length: RECIPIENTS },
    (_, i): Task => ({
      clientId: CLIENT,
      jobId: job.jobId,
      taskId: `t${String(i).padStart(5, '0')}`,
      row: i + 2,
      channel: 'message',
      recipient: `success+drill-${i}@simulator.amazonses.com`,
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

/** Recipients the stand-in accepted so far (one entry per acceptance). */
const accepted = () => ses.sent().flatMap((e) => e.to);

/** What the drill left: the tasks as stored, the job's counts, and what the stand-in and the wire saw. */
interface DrillResult {
  readonly tasks: readonly (Task & { startedAt?: number })[];
  readonly counts: Job['counts'] | undefined;
  readonly acceptedAtKill: number;
  /** Accepted emails by recipient (more than one: emailed twice). */
  readonly emailsTo: ReadonlyMap<string, readonly SentEmail[]>;
  readonly sends: ReturnType<SesWireTap['sends']>;
}

/** Runs the campaign under faults and kills its sender half-way; resolves once every task has ended. */
async function runDrill(): Promise<DrillResult> {
  const began = Date.now();
  const marks: string[] = [];
  const mark = (what: string) => marks.push(`${what} ${((Date.now() - began) / 1000).toFixed(1)} s`);
  const job = await seed();
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients: [CLIENT], desiredVersion: 'v1', updatedAt: Date.now() }),
    }),
  );
  // SES turns hostile from the first send: 5 % of the answers lost after accepting, 5 % 5xx before
  // sending, 429s in bursts of 5, a quarter of the events lost (both of an email's: 1 in 16), some
  // twice, some out of order.
  ses.faults.set({
    answerLost: 0.05,
    internalFailure: 0.025,
    serviceUnavailable: 0.025,
    throttled: 0.02,
    throttleBurst: 5,
    eventLost: 0.25,
    eventDuplicated: 0.05,
    eventReordered: 0.1,
  });
  // At least one of each, whatever the draws: the campaign has only a few dozen requests.
  ses.faults.force('answer-lost', 2);
  ses.faults.force('internal-failure', 1);
  ses.faults.force('service-unavailable', 1);
  // Two brokers, as the fleet runs them: one holds the client, the other stands by.
  await Promise.all([spawnBroker('drill-a'), spawnBroker('drill-b')]);
  mark('brokers ready');

  const leases = new DynamoLeaseStore(cloud.doc, controlTable);
  const victim = await eventually(
    async () => {
      if (accepted().length < KILL_AT) return undefined;
      const lease = await leases.get(CLIENT);
      const holder = children.find((c) => c.brokerId === lease?.owner && c.child.exitCode === null);
      return lease && lease.expiresAt > Date.now() ? holder : undefined;
    },
    `${KILL_AT} accepted, on a live lease holder`,
    WAIT,
  );
  ses.faults.force('throttled', 1); // a burst of 5 as the holder dies
  victim.child.kill('SIGKILL');
  const [, signal] = (await once(victim.child, 'exit')) as [number | null, NodeJS.Signals | null];
  expect(signal).toBe('SIGKILL');
  const acceptedAtKill = accepted().length;
  mark(`SIGKILL at ${acceptedAtKill} accepted`);
  expect(acceptedAtKill).toBeLessThan(RECIPIENTS);

  const tasks = await eventually(
    async () => {
      const read = await readTasks<Task & { startedAt?: number }>(cloud.doc, tasksTable, job.jobId);
      return read.every((t) => FINAL_TASK_STATES.includes(t.state)) ? read : undefined;
    },
    'every task to end',
    WAIT,
  );
  mark('every task ended');
  // Every event delivered, lost or given up: "no event ever came" is then a fact.
  await ses.idle();
  const successor = children.find((c) => c !== victim)!;
  successor.child.kill('SIGTERM');
  const [code] = (await once(successor.child, 'exit')) as [number | null];
  expect(code).toBe(0);
  mark('events settled, successor stopped');
  console.log(`email drill: ${marks.join(', ')}`);

  const emailsTo = new Map<string, SentEmail[]>();
  for (const e of ses.sent()) for (const to of e.to) emailsTo.set(to, [...(emailsTo.get(to) ?? []), e]);
  const counts = (await new DynamoJobStore(cloud.doc, controlTable).get(CLIENT, job.jobId))?.counts;
  return { tasks, counts, acceptedAtKill, emailsTo, sends: tap.sends() };
}

/** Each task against what the stand-in accepted, what the wire saw and when its email's events came. */
function judge(drill: DrillResult) {
  const lost = drill.sends.filter((s) => !s.outcome.answered);
  const answerLost = new Set(lost.flatMap((s) => s.recipients));
  const onTheWire = new Set(drill.sends.flatMap((s) => s.recipients));
  const verdict = {
    resolvedByEvent: [] as string[],
    inDoubtNeverAccepted: [] as string[],
    inDoubtNeverOnTheWire: [] as string[],
    inDoubtNoEvent: [] as string[],
    inDoubtLateEvent: [] as string[],
    wrong: [] as string[],
  };
  for (const t of drill.tasks) {
    const emails = drill.emailsTo.get(t.recipient) ?? [];
    const email = emails[0];
    const eventAt = email === undefined ? undefined : recordedAt.get(email.messageId);
    const say = (what: string) =>
      verdict.wrong.push(
        `${t.taskId} ${t.state}/${t.lastResult} (${what}; accepted ${emails.length}×, event ${eventAt ?? 'none'}, started ${t.startedAt})`,
      );
    if (t.state === 'completed') {
      if (t.lastResult !== 'accepted') say('completed as something else than accepted');
      if (emails.length !== 1) say('completed, yet not accepted exactly once');
      if (answerLost.has(t.recipient)) {
        // Nobody had SES's answer: only its event could tell, and it must have come.
        if (eventAt === undefined) say('answer lost and no event, yet completed');
        else verdict.resolvedByEvent.push(t.taskId);
      }
    } else if (t.state !== 'failed' || t.lastResult !== 'in-doubt' || t.reason !== IN_DOUBT_REASON) {
      say('ended neither accepted nor in doubt');
    } else if (email === undefined) {
      verdict.inDoubtNeverAccepted.push(t.taskId);
      if (!onTheWire.has(t.recipient)) verdict.inDoubtNeverOnTheWire.push(t.taskId);
    } else if (eventAt === undefined) {
      verdict.inDoubtNoEvent.push(t.taskId);
    } else if (t.startedAt === undefined) {
      say('in doubt with no attempt start recorded');
    } else if (eventAt < t.startedAt + IN_DOUBT_WAIT_MS) {
      // The broker decides "in doubt" only at a claim made once the wait from the attempt's start
      // had passed, so an event recorded before then must have settled the task accepted.
      say('in doubt though its event was recorded within the wait');
    } else verdict.inDoubtLateEvent.push(t.taskId);
  }
  return { ...verdict, lost, answerLost };
}

describe('the email drill: lost answers, 5xx, 429 bursts, lost events and a SIGKILLed broker', () => {
  let drill: DrillResult;
  let verdict: ReturnType<typeof judge>;

  beforeAll(async () => {
    drill = await runDrill();
    verdict = judge(drill);
    const statuses = drill.sends.flatMap((s) => (s.outcome.answered ? [s.outcome.status] : []));
    const inDoubt = drill.tasks.filter((t) => t.state === 'failed').length;
    console.log(
      `email drill: ${RECIPIENTS} recipients, ${drill.sends.length} sends (${verdict.lost.length} answers lost, ` +
        `${verdict.answerLost.size} recipients in them; ${statuses.filter((s) => s >= 500).length} 5xx; ` +
        `${statuses.filter((s) => s === 429).length} 429s), 1 SIGKILL at ${drill.acceptedAtKill} accepted; ` +
        `${drill.tasks.length - inDoubt} completed (${verdict.resolvedByEvent.length} resolved by their event ` +
        `after a lost answer), ${inDoubt} in doubt (${verdict.inDoubtNeverAccepted.length} never accepted, ` +
        `${verdict.inDoubtNeverOnTheWire.length} of them never in a request; ${verdict.inDoubtNoEvent.length} ` +
        `accepted with every event lost; ${verdict.inDoubtLateEvent.length} accepted, event after the wait); ` +
        `${[...drill.emailsTo.values()].filter((e) => e.length > 1).length} emailed twice; ` +
        `${ses.events().filter((e) => e.fate === 'lost').length} events lost`,
    );
  }, 600_000);

  it('emails nobody twice, by the stand-in’s own record of accepted sends', () => {
    expect([...drill.emailsTo].filter(([, emails]) => emails.length > 1).map(([to]) => to)).toEqual([]);
    const listed = new Set(drill.tasks.map((t) => t.recipient));
    expect([...drill.emailsTo.keys()].filter((to) => !listed.has(to))).toEqual([]);
  });

  it('loses no task: each ends accepted (sent once) or in doubt (never accepted, or no event in time), and the job’s counts add up', () => {
    expect(verdict.wrong).toEqual([]);
    const completed = drill.tasks.filter((t) => t.state === 'completed').length;
    const inDoubt = drill.tasks.filter((t) => t.state === 'failed').length;
    expect(drill.tasks).toHaveLength(RECIPIENTS);
    expect(completed + inDoubt).toBe(RECIPIENTS);
    expect(drill.counts).toMatchObject({ tasks: RECIPIENTS, completed, failed: inDoubt, cancelled: 0 });
  });

  it('resolves each send whose answer was lost by its event, or reports it in doubt when every event was lost', () => {
    // (Each task's case is checked in `judge`; here, that the drill exercised them.)
    const statuses = drill.sends.flatMap((s) => (s.outcome.answered ? [s.outcome.status] : []));
    expect(verdict.lost.length).toBeGreaterThanOrEqual(2);
    expect(statuses.filter((s) => s >= 500).length).toBeGreaterThanOrEqual(2);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(5);
    expect(verdict.resolvedByEvent.length).toBeGreaterThan(0);
    expect(verdict.inDoubtNoEvent.length + verdict.inDoubtNeverAccepted.length).toBeGreaterThan(0);
  });

  // Found by this drill, then fixed: the successor used to take every task on the dead holder's
  // claim pages as maybe sent, and for SES (no idempotency key) such a task is never sent again —
  // 239–564 of 2,000 that were in no request ended in doubt. Email now records each request just
  // before it goes, and only recorded tasks are taken as maybe sent (dynamo-message-claims.ts,
  // #settleLeftPages). What may still end in doubt without a request on the wire: the units the dead
  // broker had recorded but not yet sent when it died — a request or two.
  it('sends what a killed broker had claimed but never sent, instead of ending it in doubt', () => {
    // Recorded but not on the wire when it died: at most one unit a sender.
    expect(verdict.inDoubtNeverOnTheWire.length).toBeLessThanOrEqual(SENDERS * SES_BULK_DESTINATIONS);
  });
});
