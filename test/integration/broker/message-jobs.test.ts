import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { type LineSandbox, startLineSandbox } from '#local/line-sandbox.ts';
import { DynamoTaskCanceller } from '#shared/adapters/dynamo-cancel.ts';
import { readOpenClaims } from '#shared/adapters/dynamo-claim-pages.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { ClaimedTask } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { cancelSweepStart, JobSweep } from '#shared/jobs/cancel.ts';
import { type Job, keys, type Task } from '#shared/jobs/model.ts';
import type { CancelSweepMessage } from '#shared/jobs/ports.ts';
import {
  JOB_CANCELLED_REASON,
  OPTED_OUT_MAYBE_SENT_REASON,
  OPTED_OUT_REASON,
} from '#shared/jobs/task-lifecycle.ts';
import { MessagingApiClient, prepareMulticast, preparePush } from '#shared/line/messaging-client.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { attemptKey, multicastRetryKey } from '#shared/retry-keys.ts';
import type { BrokerConfig } from '#worker/config.ts';
import { type RunningBroker, startBrokerProcess } from '#worker/process.ts';
import { type BrokerConfigOverrides, testBrokerConfig } from '../../support/broker-config.ts';
import { testCloud } from '../../support/cloud.ts';
import { lineUserOf, seedMessageJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';
import { eventually, until } from '../../support/wait.ts';

const cloud = testCloud();
const stage = `msg${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
const CHANNEL = { channelId: 'msg-channel', accessToken: 'msg-token' };
let controlTable: string;
let tasksTable: string;
let channelsTable: string;
let line: LineSandbox;
const running: RunningBroker[] = [];

const PERSONAL: MessageTemplate = { messages: [{ type: 'text', text: 'こんにちは {{name}} さん 🎉' }] };
const SAME_FOR_ALL: MessageTemplate = { messages: [{ type: 'text', text: 'お知らせ: 明日は休業です' }] };

beforeAll(async () => {
  [controlTable, tasksTable, channelsTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
    createTable(cloud.ddb, stage, tableSpec('channels')),
  ]);
  line = await startLineSandbox({ channels: [CHANNEL] });
  await cloud.doc.send(
    new PutCommand({
      TableName: channelsTable,
      Item: {
        channelId: CHANNEL.channelId,
        clientId: 'any',
        accessToken: CHANNEL.accessToken,
        secrets: [{ secret: 's', addedAt: 0 }],
        autoAnswer: 'push',
        rules: [],
        updatedAt: 1,
      },
    }),
  );
});

afterEach(async () => {
  const left = running.splice(0);
  for (const b of left) b.stop('sigterm');
  await Promise.all(left.map((b) => b.done));
  line.faults.clear();
  line.setRateLimit(2_000);
});

afterAll(async () => {
  await line?.stop();
});

function brokerConfig(over: BrokerConfigOverrides['messages'] = {}): BrokerConfig {
  return testBrokerConfig(
    { controlTable, tasksTable },
    {
      broker: { callbackUrl: 'http://127.0.0.1:9/status' },
      channelsTable,
      lineApiUrl: line.url,
      messages: { messageConcurrency: 64, ...over },
    },
  );
}

async function startBroker(over: BrokerConfigOverrides['messages'] = {}): Promise<RunningBroker> {
  const b = await startBrokerProcess(brokerConfig(over), { doc: cloud.doc, logger: silentLogger });
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

const recipientOf = lineUserOf;

/**
 * A client with a running message job of `tasks` recipients, written as ingest would, on a channel
 * of its own (a broker sends only through the client's own channel) with the sandbox's one token.
 */
async function seed(clientId: string, tasks: number, message: MessageTemplate): Promise<Job> {
  const channelId = `${CHANNEL.channelId}-${clientId}`;
  await cloud.doc.send(
    new PutCommand({
      TableName: channelsTable,
      Item: {
        channelId,
        clientId,
        accessToken: CHANNEL.accessToken,
        secrets: [{ secret: 's', addedAt: 0 }],
        autoAnswer: 'push',
        rules: [],
        updatedAt: 1,
      },
    }),
  );
  return seedMessageJob(
    cloud.doc,
    { controlTable, tasksTable },
    { clientId, channelId, tasks, message, jobIdPrefix: '01JM' },
  );
}

const tasksOf = (jobId: string) => readTasks<Task & { claimToken?: number }>(cloud.doc, tasksTable, jobId);
const claimPagesOf = (clientId: string) => readOpenClaims(cloud.doc, tasksTable, clientId);

async function jobOf(job: Job): Promise<Job> {
  const out = await new DynamoMessageTaskStore(cloud.doc, {
    controlTable,
    tasksTable,
    clock: { now: () => Date.now() },
  }).getJob(job.clientId, job.jobId);
  return out!;
}

async function allFinal(job: Job): Promise<Task[]> {
  return eventually(
    async () => {
      const tasks = await tasksOf(job.jobId);
      return tasks.every((t) => ['completed', 'failed', 'cancelled'].includes(t.state)) ? tasks : undefined;
    },
    `every task of ${job.jobId} to end`,
    { timeoutMs: 90_000 },
  );
}

/** Deliveries per recipient of this job's recipients, from the sandbox's log. */
function deliveredCounts(clientId: string, n: number): number[] {
  // One pass over the log: this runs every 100 ms on the event loop the broker and sandbox share.
  const index = new Map(Array.from({ length: n }, (_, i) => [recipientOf(clientId, i), i]));
  const counts = new Array<number>(n).fill(0);
  for (const d of line.deliveries())
    for (const to of d.to) {
      const i = index.get(to);
      if (i !== undefined) counts[i]! += 1;
    }
  return counts;
}

/**
 * Resolves once the broker has let the client go: the round the nudge stopped has ended, so every
 * request it had on the wire has been answered (and logged by the sandbox) and recorded.
 */
function letGo(broker: RunningBroker, clientId: string): Promise<true> {
  return eventually(
    async () => (broker.broker.clientId === clientId ? undefined : true),
    `the broker to let ${clientId} go`,
  );
}

/** Runs the cancel sweep the jobs API queues for a cancelled job, continuations included. */
async function sweepCancelled(job: Job): Promise<void> {
  const continuations: CancelSweepMessage[] = [];
  const sweep = new JobSweep({
    jobs: new DynamoJobStore(cloud.doc, controlTable),
    tasks: new DynamoTaskCanceller(cloud.doc, { controlTable, tasksTable }),
    queue: { send: async (m) => void (m.kind === 'cancel-sweep' && continuations.push(m)) },
    clock: { now: () => Date.now() },
  });
  let message: CancelSweepMessage | undefined = cancelSweepStart(job.clientId, job.jobId);
  while (message) {
    await sweep.handle(message, { remainingMs: () => 600_000 });
    message = continuations.shift();
  }
}

/** What the jobs API does on cancel: the status, then the nudge to the lease holder. */
async function cancelJob(job: Job, broker: RunningBroker): Promise<void> {
  const jobs = new DynamoJobStore(cloud.doc, controlTable);
  const stored = await jobs.get(job.clientId, job.jobId);
  expect((await jobs.transition(stored!, 'cancelled', Date.now())).ok).toBe(true);
  await broker.broker.jobChanged(job.clientId, job.jobId);
}

/** A job of `n` personal messages and a broker sending them at 400/s; resolves once 300 went out. */
async function sendingJob(prefix: string, n: number) {
  const clientId = `${prefix}${Math.random().toString(36).slice(2, 6)}`;
  const job = await seed(clientId, n, PERSONAL);
  line.setRateLimit(400);
  // Claims run at most 200 tasks ahead of the senders, so the list's end is claimed seconds later.
  const broker = await startBroker({ messageRatePerSecond: 400, messageQueueCapacity: 200 });
  await putWork([clientId]);
  await eventually(
    async () => (deliveredCounts(clientId, n).reduce((a, b) => a + b, 0) > 300 ? true : undefined),
    'the first sends',
  );
  return { clientId, job, broker };
}

/**
 * The dead holder's lease: long enough that its claims (and their fence) run inside it on a loaded
 * machine (1 s was not: its first claim found the lease gone and claimed nothing); the heir takes
 * over at a time past it.
 */
const DEAD_LEASE_MS = 60_000;

describe('a message job served by the broker', () => {
  it('pushes each recipient its own message once, through 500s, dropped responses and 429s, and skips who opted out', async () => {
    const clientId = `push${Math.random().toString(36).slice(2, 6)}`;
    const n = 1_200;
    const job = await seed(clientId, n, PERSONAL);
    const optOuts = new DynamoOptOutStore(cloud.doc, controlTable);
    const optedOut = [5, 600, 1_111];
    for (const i of optedOut) await optOuts.record(clientId, recipientOf(clientId, i), true, Date.now());
    line.faults.setProbabilities({ status500: 0.05, dropAfterDeliver: 0.05 });
    line.faults.burst429(20);

    await startBroker();
    await putWork([clientId]);
    // The job's counts move while it runs (the reporter's writes), not only at its end.
    const seen: number[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        seen.push((await jobOf(job)).counts.completed);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const tasks = await allFinal(job);
    watching = false;
    await watch;
    expect(seen.some((c) => c > 0 && c < n - optedOut.length)).toBe(true);

    const counts = deliveredCounts(clientId, n);
    for (let i = 0; i < n; i++) expect(counts[i], `recipient ${i}`).toBe(optedOut.includes(i) ? 0 : 1);
    const byState = Object.groupBy(tasks, (t) => t.state);
    expect(byState.completed?.length).toBe(n - optedOut.length);
    expect(byState.cancelled?.map((t) => t.reason)).toEqual(optedOut.map(() => OPTED_OUT_REASON));
    const sample = line.deliveriesTo(recipientOf(clientId, 7))[0]!;
    expect(sample.endpoint).toBe('push');
    expect(sample.messages).toEqual([{ type: 'text', text: 'こんにちは 顧客7 さん 🎉' }]);
    const stored = await jobOf(job);
    expect(stored.counts).toMatchObject({
      completed: n - optedOut.length,
      failed: 0,
      cancelled: optedOut.length,
    });
  });

  it('a recipient put on the suppression list while the campaign runs gets nothing from the next claim on', async () => {
    const n = 2_000;
    const { clientId, job } = await sendingJob('dnc', n);
    const late = Array.from({ length: 200 }, (_, k) => n - 200 + k);
    const at = Date.now();
    await new DynamoSuppressionStore(cloud.doc, controlTable).add(
      clientId,
      late.map((i) => ({
        recipient: recipientOf(clientId, i),
        kind: 'line',
        source: 'api',
        reason: 'asked',
        addedAt: at,
      })),
    );
    const tasks = await allFinal(job);
    const counts = deliveredCounts(clientId, n);
    const byRecipient = new Map(tasks.map((t) => [t.recipient, t]));
    let suppressed = 0;
    for (const i of late) {
      const task = byRecipient.get(recipientOf(clientId, i))!;
      // Claimed before the entry: sent once; claimed after: never sent, cancelled saying why.
      if (task.state === 'cancelled') {
        suppressed++;
        expect(task.reason).toBe('suppressed: api');
        expect(counts[i], `recipient ${i}`).toBe(0);
      } else expect(counts[i], `recipient ${i}`).toBe(1);
    }
    expect(suppressed).toBeGreaterThan(0);
    // The job's counts move when a claim page closes, a moment after its tasks ended.
    await until(async () => {
      const { cancelled, suppressed: counted } = (await jobOf(job)).counts;
      return cancelled === suppressed && counted === suppressed;
    }, "the job's counts to reach every suppressed task");
  });

  it('multicasts a message without placeholders in batches of up to 500, each recipient once', async () => {
    const clientId = `mc${Math.random().toString(36).slice(2, 6)}`;
    const n = 1_300;
    const job = await seed(clientId, n, SAME_FOR_ALL);
    line.faults.enqueue(
      { kind: 'status500', endpoint: 'multicast' },
      { kind: 'dropAfterDeliver', endpoint: 'multicast' },
    );
    const before = line.counters().requests;

    await startBroker();
    await putWork([clientId]);
    await allFinal(job);

    expect(deliveredCounts(clientId, n).every((c) => c === 1)).toBe(true);
    const multicasts = line.log().filter((e) => e.path.endsWith('/multicast') && e.status === 200);
    expect(multicasts.length).toBeGreaterThanOrEqual(Math.ceil(n / 500));
    expect(line.counters().requests - before).toBeLessThan(20);
    // The job's counts move when a claim page closes, a moment after its tasks ended.
    await until(
      async () => (await jobOf(job)).counts.completed === n,
      "the job's counts to reach every task",
    );
  });

  it('a task that appears below the cursors (earlier readyAt) is claimed before the session says it has nothing left', async () => {
    const clientId = `below${Math.random().toString(36).slice(2, 6)}`;
    const job = await seed(clientId, 300, PERSONAL);
    const leases = new DynamoLeaseStore(cloud.doc, controlTable);
    const lease = await leases.tryTake({ clientId, owner: 'b1', now: Date.now(), leaseMs: 60_000 });
    const store = new DynamoMessageTaskStore(cloud.doc, {
      controlTable,
      tasksTable,
      clock: { now: () => Date.now() },
    });
    const session = store.session({ clientId, owner: 'b1', token: () => lease!.token });
    // A first page sets the shards' cursors; its tasks stay held (no outcome written).
    const claimed = new Set((await session.source.nextPage(100)).map((t) => t.taskId));
    expect(claimed.size).toBeGreaterThan(0);
    // A task ready a minute before all the others (a later ingest step's, a retry re-timed): in
    // its shard's index it sorts before that shard's cursor.
    const late: Task = {
      clientId,
      jobId: job.jobId,
      taskId: 'zlate',
      row: 999,
      channel: 'message',
      recipient: recipientOf(clientId, 999),
      variables: { name: '遅延' },
      state: 'pending',
      attempts: 0,
      readyAt: Date.now() - 60_000,
      updatedAt: Date.now(),
    };
    await cloud.doc.send(
      new PutCommand({
        TableName: tasksTable,
        Item: { ...keys.task(late.jobId, late.taskId), ...late, ...keys.outstandingIndex(late) },
      }),
    );
    for (;;) {
      const page = await session.source.nextPage(100);
      if (page.length === 0) break;
      for (const t of page) claimed.add(t.taskId);
    }
    expect(claimed.has('zlate')).toBe(true);
    expect(claimed.size).toBe(301);
  });

  it('a broker taking over resends what a dead holder left in flight with the same keys: nobody gets it twice', async () => {
    const clientId = `takepage${Math.random().toString(36).slice(2, 6)}`;
    const n = 700;
    const job = await seed(clientId, n, SAME_FOR_ALL);
    const clock = { now: () => Date.now() };
    const leases = new DynamoLeaseStore(cloud.doc, controlTable);
    const store = new DynamoMessageTaskStore(cloud.doc, { controlTable, tasksTable, clock });

    // The first holder claims a page, records its multicast, sends it — and dies before writing outcomes.
    const first = await leases.tryTake({
      clientId,
      owner: 'dead',
      now: Date.now(),
      leaseMs: DEAD_LEASE_MS,
    });
    const dead = store.session({ clientId, owner: 'dead', token: () => first!.token });
    // A page takes up to ~1/16 of the limit from each shard: it may come back a little short.
    const page = await dead.source.nextPage(500);
    expect(page.length).toBeGreaterThan(0);
    expect(page.length).toBeLessThanOrEqual(500);
    const ids = page.map((t) => t.taskId).sort();
    const claimedItems = (await tasksOf(job.jobId)).filter((t) => ids.includes(t.taskId));
    // The claim wrote its pages, not the tasks: they still wait in the index, attempt 0.
    expect(claimedItems.every((t) => t.state === 'pending' && t.attempts === 0)).toBe(true);
    const listed = (await claimPagesOf(clientId)).flatMap((p) => Object.values(p.tasks).flat());
    expect(listed.sort()).toEqual(ids);
    const retryKey = multicastRetryKey(job.jobId, 1, ids);
    await dead.batches.record({ jobId: job.jobId, attempt: 1, retryKey, taskIds: ids });
    const sorted = [...page].sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
    const client = new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: line.url });
    const sent = await client.send(
      prepareMulticast(
        sorted.map((t) => t.recipient),
        SAME_FOR_ALL.messages,
        retryKey,
      ),
    );
    expect(sent.kind).toBe('delivered');

    // The lease expires (the heir's clock is past it); another broker takes the client over and runs the job to its end.
    const second = await leases.tryTake({
      clientId,
      owner: 'heir',
      now: Date.now() + DEAD_LEASE_MS + 100,
      leaseMs: 30_000,
    });
    expect(second!.token).toBeGreaterThan(first!.token);
    const heir = store.session({ clientId, owner: 'heir', token: () => second!.token });
    const totals = await runMessagePipeline({
      source: heir.source,
      report: heir.report,
      batches: heir.batches,
      send: (prepared) => client.send(prepared),
      rate: { perSecond: 2_000 },
      clock,
      // Pages smaller than the recorded multicast: its first page claims the whole batch, the rest
      // of what the dead holder left is then held already, and the session goes on to the ready tasks.
      pageSize: 100,
    });
    expect(totals.delivered).toBe(n);
    const tasks = await tasksOf(job.jobId);
    expect(tasks.every((t) => t.state === 'completed')).toBe(true);
    expect(deliveredCounts(clientId, n).every((c) => c === 1)).toBe(true);
    // The batch went out once: the heir's resend of the recorded batch was answered 409.
    expect(line.log().some((e) => e.retryKey === retryKey && e.status === 409)).toBe(true);
    // The job's counts move when a claim page closes, a moment after its tasks ended.
    await until(
      async () => (await jobOf(job)).counts.completed === n,
      "the job's counts to reach every task",
    );
    // Every page is gone once its tasks are written: the dead holder's (settled by the heir) and the heir's.
    expect(await claimPagesOf(clientId)).toEqual([]);
    // What the dead holder had claimed was resent knowing it may have gone out, from its first claim's time.
    const left = (await tasksOf(job.jobId)).filter((t) => ids.includes(t.taskId));
    expect(left.every((t) => t.attempts === 1 && typeof t.startedAt === 'number')).toBe(true);
  });

  it('a recipient who opts out while a dead holder had their message in flight is not resent to, and the report says it may have been delivered', async () => {
    const clientId = `doubt${Math.random().toString(36).slice(2, 6)}`;
    const n = 300;
    const job = await seed(clientId, n, PERSONAL);
    const clock = { now: () => Date.now() };
    const leases = new DynamoLeaseStore(cloud.doc, controlTable);
    const optOuts = new DynamoOptOutStore(cloud.doc, controlTable);
    const store = new DynamoMessageTaskStore(cloud.doc, {
      controlTable,
      tasksTable,
      clock,
      optedOut: (c, recipients) => optOuts.optedOut(c, recipients),
    });

    // The first holder claims a page, sends one of them — and dies before writing any outcome.
    const first = await leases.tryTake({ clientId, owner: 'dead', now: Date.now(), leaseMs: DEAD_LEASE_MS });
    const dead = store.session({ clientId, owner: 'dead', token: () => first!.token });
    const page = await dead.source.nextPage(100);
    expect(page.length).toBeGreaterThanOrEqual(2);
    const [sentOne, heldOne] = page as [ClaimedTask, ClaimedTask];
    const client = new MessagingApiClient({ channelAccessToken: CHANNEL.accessToken, baseUrl: line.url });
    const key = attemptKey(job.jobId, sentOne.taskId, sentOne.attempt);
    expect((await client.send(preparePush(sentOne.recipient, [{ type: 'text', text: 'x' }], key))).kind).toBe(
      'delivered',
    );
    // Both unfollow, as does a recipient nobody had claimed yet.
    const claimedIds = new Set(page.map((t) => t.recipient));
    const untouched = Array.from({ length: n }, (_, i) => recipientOf(clientId, i)).find(
      (r) => !claimedIds.has(r),
    )!;
    for (const r of [sentOne.recipient, heldOne.recipient, untouched])
      await optOuts.record(clientId, r, true, Date.now());

    // The dead holder's lease has expired by the heir's clock.
    const second = await leases.tryTake({
      clientId,
      owner: 'heir',
      now: Date.now() + DEAD_LEASE_MS + 100,
      leaseMs: 30_000,
    });
    const heir = store.session({ clientId, owner: 'heir', token: () => second!.token });
    const totals = await runMessagePipeline({
      source: heir.source,
      report: heir.report,
      batches: heir.batches,
      send: (prepared) => client.send(prepared),
      rate: { perSecond: 2_000 },
      clock,
    });
    expect(totals).toMatchObject({ delivered: n - 3, skipped: 3 });
    const byRecipient = new Map((await tasksOf(job.jobId)).map((t) => [t.recipient, t]));
    expect(byRecipient.get(sentOne.recipient)).toMatchObject({
      state: 'cancelled',
      reason: OPTED_OUT_MAYBE_SENT_REASON,
    });
    expect(byRecipient.get(heldOne.recipient)).toMatchObject({
      state: 'cancelled',
      reason: OPTED_OUT_MAYBE_SENT_REASON,
    });
    expect(byRecipient.get(untouched)).toMatchObject({ state: 'cancelled', reason: OPTED_OUT_REASON });
    // Nothing more reached any of them: the one delivery is the dead holder's.
    expect(line.deliveriesTo(sentOne.recipient)).toHaveLength(1);
    expect(line.deliveriesTo(heldOne.recipient)).toHaveLength(0);
    expect(line.deliveriesTo(untouched)).toHaveLength(0);
    expect((await jobOf(job)).counts).toMatchObject({ completed: n - 3, cancelled: 3, failed: 0 });
  });

  it('cancel while the broker sends: no send after the nudge, sends in flight recorded, every other task cancelled', async () => {
    const n = 2_000;
    const { clientId, job, broker } = await sendingJob('cancel', n);

    await cancelJob(job, broker);
    const atNudge = line.log().length;
    // Requests on the wire at the nudge land; then nothing more.
    await letGo(broker, clientId);
    expect(line.log().length - atNudge).toBeLessThanOrEqual(64);
    const stoppedAt = line.log().length;
    // The broker gives back what it claimed and did not send: cancelled, as the job is.
    await eventually(async () => {
      const tasks = await tasksOf(job.jobId);
      return tasks.some((t) => t.state === 'in-flight') ? undefined : true;
    }, 'the claimed tasks to be given back');

    // The sweep the cancel queued ends every task still waiting.
    await sweepCancelled(job);

    const tasks = await tasksOf(job.jobId);
    const byState = Object.groupBy(tasks, (t) => t.state);
    expect(Object.keys(byState).sort()).toEqual(['cancelled', 'completed']);
    const delivered = deliveredCounts(clientId, n);
    expect(delivered.every((c) => c <= 1)).toBe(true);
    // Completed exactly for those LINE delivered to; nobody else got anything.
    const completed = new Set(byState.completed!.map((t) => t.recipient));
    for (let i = 0; i < n; i++)
      expect(delivered[i]! === 1, `recipient ${i}`).toBe(completed.has(recipientOf(clientId, i)));
    expect(completed.size).toBeGreaterThan(300);
    expect(completed.size).toBeLessThan(n);
    expect((await jobOf(job)).counts).toMatchObject({
      completed: completed.size,
      cancelled: n - completed.size,
      failed: 0,
    });
    // Stopped, the broker has sent all it ever will: nothing since the sends stopped.
    broker.stop('sigterm');
    await broker.done;
    expect(line.log().length).toBe(stoppedAt);
  });

  it.each([
    ['push', PERSONAL],
    ['multicast', SAME_FOR_ALL],
  ] as const)(
    "cancel while LINE's answers are lost (%s): what LINE accepted is finished under its key and reported completed, nobody twice (issue 35 #10)",
    async (endpoint, message) => {
      const clientId = `lost${endpoint[0]}${Math.random().toString(36).slice(2, 6)}`;
      const n = 400;
      const job = await seed(clientId, n, message);
      // Every answer lost: LINE delivers each request, and each sender waits to resend under its key.
      line.faults.setProbabilities({ dropAfterDeliver: 1 });
      const broker = await startBroker({ messageRatePerSecond: 400, messageQueueCapacity: 200 });
      await putWork([clientId]);
      await eventually(
        async () => (deliveredCounts(clientId, n).filter((c) => c > 0).length >= 20 ? true : undefined),
        'LINE to accept the first sends',
      );

      await cancelJob(job, broker);
      // LINE answers again: a resend under a key it holds is a 409, already delivered.
      line.faults.clear();
      await letGo(broker, clientId);
      await eventually(async () => {
        const tasks = await tasksOf(job.jobId);
        return tasks.some((t) => t.state === 'in-flight') ? undefined : true;
      }, 'the claimed tasks to be given back');
      await sweepCancelled(job);

      const delivered = deliveredCounts(clientId, n);
      expect(delivered.every((c) => c <= 1)).toBe(true);
      const tasks = await tasksOf(job.jobId);
      const byRecipient = new Map(tasks.map((t) => [t.recipient, t]));
      for (let i = 0; i < n; i++) {
        const task = byRecipient.get(recipientOf(clientId, i))!;
        if (delivered[i] === 1) expect(task, `recipient ${i}`).toMatchObject({ state: 'completed' });
        else
          expect(task, `recipient ${i}`).toMatchObject({ state: 'cancelled', reason: JOB_CANCELLED_REASON });
      }
      const completed = delivered.filter((c) => c === 1).length;
      expect(completed).toBeGreaterThanOrEqual(20);
      expect((await jobOf(job)).counts).toMatchObject({ completed, cancelled: n - completed, failed: 0 });
      // The resends that finished them were answered 409 (delivered before), never a second 200.
      const answered = line.log().filter((e) => e.path.endsWith(`/${endpoint}`) && e.status === 409);
      expect(answered.length).toBeGreaterThan(0);
    },
  );

  it('pause stops new sends before it returns; resume finishes the job without a gap or a repeat', async () => {
    const n = 3_000;
    const { clientId, job, broker } = await sendingJob('pause', n);

    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(clientId, job.jobId),
        UpdateExpression: 'SET #status = :paused',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':paused': 'paused' },
      }),
    );
    await broker.broker.jobChanged(clientId, job.jobId);
    const started = line.log().length;
    // Requests already on the wire may still land; nothing new is started.
    await letGo(broker, clientId);
    expect(line.log().length - started).toBeLessThanOrEqual(64);
    const atPause = line.log().length;
    // The broker stops; the one that serves the resumed job is another. Stopped, it has sent all
    // it ever will: nothing since the pause took hold.
    broker.stop('sigterm');
    await broker.done;
    expect(line.log().length).toBe(atPause);
    const paused = await tasksOf(job.jobId);
    expect(paused.filter((t) => t.state === 'in-flight')).toEqual([]);
    const sentBefore = paused.filter((t) => t.state === 'completed').length;
    expect(sentBefore).toBeGreaterThan(0);
    expect(sentBefore).toBeLessThan(n);

    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.job(clientId, job.jobId),
        UpdateExpression: 'SET #status = :running',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':running': 'running' },
      }),
    );
    await startBroker({ messageRatePerSecond: 400 });
    await putWork([clientId]);
    await allFinal(job);
    expect(deliveredCounts(clientId, n).every((c) => c === 1)).toBe(true);
    // The job's counts move when a claim page closes, a moment after its tasks ended.
    await until(
      async () => (await jobOf(job)).counts.completed === n,
      "the job's counts to reach every task",
    );
  });
});

describe("a client whose settings name another client's channel", () => {
  it("sends nothing through it, and says why; the channel's own client is served", async () => {
    const intruder = `intr${Math.random().toString(36).slice(2, 6)}`;
    const owner = `ownr${Math.random().toString(36).slice(2, 6)}`;
    const job = await seed(intruder, 20, PERSONAL);
    const own = await seed(owner, 20, PERSONAL);
    // The intruder's settings name the owner's channel (the token the owner's messages go out with).
    await cloud.doc.send(
      new UpdateCommand({
        TableName: controlTable,
        Key: keys.client(intruder),
        UpdateExpression: 'SET messageChannelId = :channel',
        ExpressionAttributeValues: { ':channel': `${CHANNEL.channelId}-${owner}` },
      }),
    );
    const errors: Record<string, unknown>[] = [];
    const b = await startBrokerProcess(brokerConfig(), {
      doc: cloud.doc,
      logger: { ...silentLogger, error: (message, fields) => errors.push({ message, ...fields }) },
    });
    running.push(b);
    await putWork([intruder, owner]);
    await allFinal(own);
    await eventually(
      async () => (errors.some((e) => e.clientId === intruder) ? true : undefined),
      "the broker to refuse the intruder's channel",
    );
    expect(errors.find((e) => e.clientId === intruder)).toMatchObject({
      message: "the client's message jobs are not served: its channel cannot be used",
      channelId: `${CHANNEL.channelId}-${owner}`,
    });
    expect(deliveredCounts(intruder, 20).every((n) => n === 0)).toBe(true);
    expect(deliveredCounts(owner, 20).every((n) => n === 1)).toBe(true);
    expect((await tasksOf(job.jobId)).every((t) => t.state === 'pending')).toBe(true);
  });
});

describe('a message job and restricted periods (issue 14 #3)', () => {
  it('a restricted period set mid-campaign stops new sends; once it is gone the job finishes, nobody twice', async () => {
    const n = 3_000;
    const { clientId, job, broker } = await sendingJob('period', n);
    // Today in Tokyo (the client's zone), as a restricted date of the job.
    const today = new Date(Date.now() + 9 * 3_600_000).toISOString().slice(0, 10);
    const setPeriods = (periods: readonly { start: string }[]) =>
      cloud.doc.send(
        new UpdateCommand({
          TableName: controlTable,
          Key: keys.job(clientId, job.jobId),
          UpdateExpression: 'SET restrictedPeriods = :periods',
          ExpressionAttributeValues: { ':periods': periods },
        }),
      );
    // No nudge: a period is reached by the clock, and the broker's job watch (every quarter second)
    // sees it: at 400/s, about 100 more sends may start, besides the 128 already on the wire.
    const started = line.log().length;
    await setPeriods([{ start: today }]);
    await letGo(broker, clientId);
    expect(line.log().length - started).toBeLessThanOrEqual(100 + 128);
    const atPeriod = line.log().length;
    broker.stop('sigterm');
    await broker.done;
    expect(line.log().length).toBe(atPeriod);
    const held = await tasksOf(job.jobId);
    expect(held.filter((t) => t.state === 'in-flight')).toEqual([]);
    expect(held.filter((t) => t.state === 'completed').length).toBeLessThan(n);

    await setPeriods([]);
    await startBroker({ messageRatePerSecond: 400 });
    await putWork([clientId]);
    await allFinal(job);
    expect(deliveredCounts(clientId, n).every((c) => c === 1)).toBe(true);
    // The job's counts move when a claim page closes, a moment after its tasks ended.
    await until(
      async () => (await jobOf(job)).counts.completed === n,
      "the job's counts to reach every task",
    );
  });
});
