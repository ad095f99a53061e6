import { describe, expect, it } from 'vitest';
import { settleFromSnapshot, settlementFor } from '#shared/broker/settle.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { JobsApi, ZERO_COUNTS } from '#shared/jobs/api.ts';
import {
  CALL_END_GRACE_MS,
  CALL_NEVER_ENDED_REASON,
  cancelSweepStart,
  JobSweep,
  type JobSweepOutcome,
  MAX_RECHECK_DELAY_SECONDS,
  recheckDelaySeconds,
} from '#shared/jobs/cancel.ts';
import {
  DEFAULT_MAX_CALL_SECONDS,
  type Job,
  type Task,
  type TaskState,
  taskShard,
} from '#shared/jobs/model.ts';
import type {
  IngestQueue,
  IngestQueueMessage,
  JobSweepMessage,
  QueueSendOptions,
} from '#shared/jobs/ports.ts';
import { archiveReportStart } from '#shared/jobs/report-archive.ts';
import { JOB_CANCELLED_REASON } from '#shared/jobs/task-lifecycle.ts';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { MemoryFleetStore } from '../../support/memory-fleet-store.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { clientSettings, MemoryTaskStore } from '../broker/fakes.ts';
import {
  memoryCanceller,
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

const NOW = Date.parse('2026-11-23T01:00:00Z');
const JOB_ID = '01JD0000000000000000000001';

function task(i: number, state: TaskState): Task {
  return {
    clientId: 'acme',
    jobId: JOB_ID,
    taskId: `task-${String(i).padStart(4, '0')}`,
    row: i + 2,
    channel: 'call',
    recipient: `+81901000${String(i).padStart(4, '0')}`,
    variables: {},
    state,
    attempts: state === 'pending' ? 0 : 1,
    readyAt: NOW,
    updatedAt: NOW,
  };
}

/** When the world's calls in flight started; the sweep leaves them to their broker until this + 15 min. */
const CALLS_STARTED_AT = NOW - 60_000;
const CALLS_HELD_UNTIL = CALLS_STARTED_AT + DEFAULT_MAX_CALL_SECONDS * 1000 + CALL_END_GRACE_MS;

/** 60 tasks over the shards: every 4th waits to retry, every 5th is in flight, every 7th completed. */
const STATE_OF = (i: number): TaskState =>
  i % 7 === 0 ? 'completed' : i % 5 === 0 ? 'in-flight' : i % 4 === 0 ? 'retry-wait' : 'pending';

async function world(status: Job['status'] = 'running') {
  const clients = memoryClients();
  const jobs = memoryJobs();
  const tasks = memoryTasks();
  const queue = memoryQueue();
  const clock = { now: () => NOW };
  await clients.put(parseClientSettings('acme', TOKYO_CLIENT, NOW));
  await jobs.create({
    clientId: 'acme',
    jobId: JOB_ID,
    name: 'list',
    channel: 'call',
    scenarioId: 'default',
    startAt: NOW - 60_000,
    maxAttempts: 3,
    retryDelaySeconds: 60,
    status,
    counts: { ...ZERO_COUNTS, rows: 60, tasks: 60 },
    createdAt: NOW - 120_000,
    updatedAt: NOW - 120_000,
  });
  // The calls in flight started a minute ago: their broker may still be waiting for their end.
  await tasks.put(
    Array.from({ length: 60 }, (_, i) => {
      const t = task(i, STATE_OF(i));
      return t.state === 'in-flight' ? { ...t, startedAt: CALLS_STARTED_AT } : t;
    }),
  );
  const api = new JobsApi({
    region: 'ap-northeast-1',
    clients,
    jobs,
    tasks,
    files: memoryFiles(),
    validationReports: memoryReports(),
    queue,
    bucket: 'uploads',
    clock,
  });
  const canceller = memoryCanceller(tasks, jobs);
  const sweep = new JobSweep({ jobs, tasks: canceller, queue, clock, maxPagesPerRun: 2 });
  const ctx = { remainingMs: () => 600_000 };
  const states = () => {
    const by: Partial<Record<TaskState, number>> = {};
    for (const t of tasks.all.values()) by[t.state] = (by[t.state] ?? 0) + 1;
    return by;
  };
  const job = async () => (await jobs.get('acme', JOB_ID))!;
  return { api, jobs, tasks, queue, sweep, canceller, ctx, states, job };
}

const expected = (() => {
  let waiting = 0;
  let inFlight = 0;
  let completed = 0;
  for (let i = 0; i < 60; i++) {
    const s = STATE_OF(i);
    if (s === 'pending' || s === 'retry-wait') waiting++;
    else if (s === 'in-flight') inFlight++;
    else completed++;
  }
  return { waiting, inFlight, completed };
})();

describe('cancelling a job', () => {
  it('ends every pending and retry-waiting task cancelled, over continuations, and counts them', async () => {
    const w = await world();
    expect((await w.api.changeStatus('acme', JOB_ID, 'cancel')).status).toBe('cancelled');
    expect(w.queue.sent).toEqual([{ kind: 'cancel-sweep', clientId: 'acme', jobId: JOB_ID, shard: 0 }]);
    let runs = 0;
    let swept = 0;
    let last: JobSweepOutcome | undefined;
    while (w.queue.sent.length > 0 && last?.kind !== 'recheck') {
      const message = w.queue.sent.shift() as JobSweepMessage;
      last = await w.sweep.handle(message, w.ctx);
      runs++;
      if (last.kind !== 'ignored') swept += last.ended;
    }
    expect(runs).toBeGreaterThan(1);
    // Calls in flight are left to their broker (the call's end settles them), and looked at again
    // once their longest duration and a grace have passed, in case that broker is gone.
    expect(last).toMatchObject({ kind: 'recheck', heldUntil: CALLS_HELD_UNTIL });
    expect(swept).toBe(expected.waiting);
    expect(w.states()).toEqual({
      cancelled: expected.waiting,
      'in-flight': expected.inFlight,
      completed: expected.completed,
    });
    for (const t of w.tasks.all.values()) {
      if (t.state === 'cancelled') expect(t.reason).toBe(JOB_CANCELLED_REASON);
    }
    const job = await w.api.getJob('acme', JOB_ID);
    expect(job.counts.cancelled).toBe(expected.waiting);
    // Only the calls in flight are still to end.
    expect(job.counts.outstanding).toBe(expected.inFlight + expected.completed);
  });

  it('counts each task once when every message is delivered twice, or the sweep is started again', async () => {
    const w = await world();
    await w.api.changeStatus('acme', JOB_ID, 'cancel');
    const drain = async (redeliver: boolean) => {
      for (;;) {
        const message = w.queue.sent.shift() as JobSweepMessage | undefined;
        if (!message) return;
        const outcome = await w.sweep.handle(message, w.ctx);
        if (redeliver) {
          // The redelivered copy: its continuation is a duplicate too, so only the first is followed.
          const before = w.queue.sent.length;
          await w.sweep.handle(message, w.ctx);
          w.queue.sent.splice(before);
        }
        // The re-check of the calls in flight is due only later.
        if (outcome.kind === 'recheck') w.queue.sent.length = 0;
      }
    };
    await drain(true);
    // The operator cancels again (say, the first reply was lost): the sweep runs once more.
    expect((await w.api.changeStatus('acme', JOB_ID, 'cancel')).status).toBe('cancelled');
    await drain(false);
    expect((await w.job()).counts.cancelled).toBe(expected.waiting);
    expect(w.states().cancelled).toBe(expected.waiting);
  });

  it('stops in time and continues from the shard and page it reached', async () => {
    const w = await world('cancelled');
    let left = 3;
    const sweep = new JobSweep({
      jobs: w.jobs,
      tasks: w.canceller,
      queue: w.queue,
      clock: { now: () => NOW },
      marginMs: 1_000,
    });
    const outcome = await sweep.handle(
      { kind: 'cancel-sweep', clientId: 'acme', jobId: JOB_ID, shard: 0 },
      { remainingMs: () => (left-- > 0 ? 60_000 : 500) },
    );
    expect(outcome.kind).toBe('continued');
    expect(w.queue.sent).toHaveLength(1);
    const next = w.queue.sent[0] as JobSweepMessage;
    expect(next).toEqual(outcome.kind === 'continued' ? outcome.next : undefined);
    const ended = w.states().cancelled ?? 0;
    expect(ended).toBeGreaterThan(0);
    expect(ended).toBeLessThan(expected.waiting);
    const rest = await sweep.handle(next, { remainingMs: () => 60_000 });
    expect(rest).toMatchObject({ kind: 'recheck', ended: expected.waiting - ended });
    expect(w.states().cancelled).toBe(expected.waiting);
  });

  it('never ends the tasks of a job that is not cancelled', async () => {
    const w = await world('running');
    const outcome = await w.sweep.handle(
      { kind: 'cancel-sweep', clientId: 'acme', jobId: JOB_ID, shard: 0 },
      w.ctx,
    );
    expect(outcome).toMatchObject({ kind: 'ignored', reason: 'the job is running, not cancelled' });
    expect(w.states().cancelled).toBeUndefined();
    expect(w.queue.sent).toEqual([]);
  });

  it('ends a call its dead broker left in flight once its longest duration and a grace have passed', async () => {
    const w = await world('cancelled');
    const sweepAt = (now: number) =>
      new JobSweep({ jobs: w.jobs, tasks: w.canceller, queue: w.queue, clock: { now: () => now } });
    // Before: the calls are left to their broker, and a re-check is asked for after the grace.
    const early = await sweepAt(CALLS_HELD_UNTIL - 1).handle(cancelSweepStart('acme', JOB_ID), w.ctx);
    expect(early).toMatchObject({
      kind: 'recheck',
      ended: expected.waiting,
      heldUntil: CALLS_HELD_UNTIL,
    });
    expect(w.states()['in-flight']).toBe(expected.inFlight);
    // At the re-check no end came: the calls end cancelled, saying why, and are counted.
    w.queue.sent.length = 0;
    const late = await sweepAt(CALLS_HELD_UNTIL).handle(cancelSweepStart('acme', JOB_ID), w.ctx);
    expect(late).toEqual({ kind: 'swept', jobId: JOB_ID, ended: expected.inFlight });
    expect(w.states()).toEqual({
      cancelled: expected.waiting + expected.inFlight,
      completed: expected.completed,
    });
    const calls = [...w.tasks.all.values()].filter((t) => t.startedAt === CALLS_STARTED_AT);
    expect(calls.map((t) => t.reason)).toEqual(calls.map(() => CALL_NEVER_ENDED_REASON));
    expect((await w.job()).counts.cancelled).toBe(expected.waiting + expected.inFlight);
  });

  it('leaves a call alone that started again since the sweep read it', async () => {
    const w = await world('cancelled');
    const page = await w.canceller.sweepPage(JOB_ID, taskShard('task-0005'), undefined);
    const seen = page.tasks.find((t) => t.taskId === 'task-0005')!;
    expect(seen).toMatchObject({ state: 'in-flight', startedAt: CALLS_STARTED_AT });
    const key = `${JOB_ID}/task-0005`;
    w.tasks.all.set(key, { ...w.tasks.all.get(key)!, startedAt: NOW, attempts: 2 });
    expect(
      await w.canceller.endTasks(
        'acme',
        JOB_ID,
        [seen],
        { state: 'cancelled', reason: CALL_NEVER_ENDED_REASON },
        NOW,
      ),
    ).toBe(0);
    expect(w.tasks.all.get(key)!.state).toBe('in-flight');
  });

  it('lets a call in flight end, without a retry once its job is cancelled', async () => {
    const j = { maxAttempts: 3, retryDelaySeconds: 60 };
    expect(settlementFor('busy', { attempts: 1, now: NOW }, { ...j, status: 'cancelled' })).toEqual({
      state: 'cancelled',
      lastResult: 'busy',
      reason: JOB_CANCELLED_REASON,
    });
    expect(settlementFor('completed', { attempts: 1, now: NOW }, { ...j, status: 'cancelled' })).toEqual({
      state: 'completed',
      lastResult: 'completed',
    });

    // The broker holds the job as it was when the call started (running); the job is cancelled since.
    const store = new MemoryTaskStore(new MemoryLeaseStore(), { now: () => NOW });
    const running: Job = {
      clientId: 'c1',
      jobId: JOB_ID,
      name: 'list',
      channel: 'call',
      scenarioId: 's1',
      startAt: NOW,
      maxAttempts: 3,
      retryDelaySeconds: 60,
      status: 'running',
      counts: ZERO_COUNTS,
      createdAt: NOW,
      updatedAt: NOW,
    };
    const inFlight: Task = { ...task(1, 'in-flight'), clientId: 'c1' };
    store.add(clientSettings(), { ...running, status: 'cancelled' }, [inFlight]);
    const settled = await settleFromSnapshot(store, {
      task: inFlight,
      job: running,
      attempt: 1,
      snapshot: {
        callId: 'call-1',
        idempotencyKey: attemptKey(JOB_ID, inFlight.taskId, 1),
        status: 'no-answer',
        at: new Date(NOW).toISOString(),
        sequence: 3,
      },
      now: NOW,
    });
    expect(settled).toBe(true);
    expect(store.all()[0]).toMatchObject({
      state: 'cancelled',
      lastResult: 'no-answer',
      reason: JOB_CANCELLED_REASON,
    });
  });

  it('is never started again by the job manager', async () => {
    const store = new MemoryFleetStore();
    const w = await world('scheduled');
    await w.api.changeStatus('acme', JOB_ID, 'cancel');
    const cancelled = await w.job();
    store.putJob(cancelled);
    for (const t of w.tasks.all.values()) store.putTask(t);
    const run = makeRunJobManager({
      store,
      scaler: { setDesiredCount: async () => {} },
      sweeps: memoryQueue(),
      clock: { now: () => NOW },
      maxBrokers: 5,
      desiredVersion: () => 'v1',
    });
    const result = await run();
    expect(result.started).toEqual([]);
    expect(result.clients).toEqual([]);
    expect(store.jobs.get(JOB_ID)?.status).toBe('cancelled');
  });
});

const MINUTE = 60_000;

/**
 * A message job's 60 tasks: every 6th delivered; every 6th (+1) in flight under a dead broker's
 * claim, its hold over a minute ago; every 6th (+2) in flight under a live broker's claim, held
 * 4–5 minutes more; the rest waiting (some to retry).
 */
const MESSAGE_TASKS = Array.from({ length: 60 }, (_, i): Task => {
  const kind = i % 6;
  const state: TaskState =
    kind === 0 ? 'completed' : kind === 1 || kind === 2 ? 'in-flight' : kind === 3 ? 'retry-wait' : 'pending';
  const readyAt = kind === 1 ? NOW - MINUTE : kind === 2 ? NOW + 4 * MINUTE + i * 1_000 : NOW;
  return {
    ...task(i, state),
    channel: 'message',
    recipient: `U${String(i).padStart(32, '0')}`,
    readyAt,
    ...(state === 'in-flight' ? { startedAt: readyAt - 15 * MINUTE } : {}),
  };
});
const DEAD = MESSAGE_TASKS.filter((_, i) => i % 6 === 1).map((t) => t.taskId);
const HELD = MESSAGE_TASKS.filter((_, i) => i % 6 === 2);
const LATEST_HOLD = Math.max(...HELD.map((t) => t.readyAt));
const DELIVERED = MESSAGE_TASKS.filter((t) => t.state === 'completed').length;
const WAITING = MESSAGE_TASKS.filter((t) => t.state === 'pending' || t.state === 'retry-wait').length;

type Sent = {
  readonly message: IngestQueueMessage;
  readonly delaySeconds?: number;
};

/** The ingest queue, keeping each message's delay. */
function delayingQueue(): IngestQueue & { sent: Sent[] } {
  const sent: Sent[] = [];
  return {
    sent,
    async send(message, options: QueueSendOptions = {}) {
      sent.push({
        message,
        ...(options.delaySeconds === undefined ? {} : { delaySeconds: options.delaySeconds }),
      });
    },
  };
}

async function messageWorld(tasksOf: readonly Task[] = MESSAGE_TASKS) {
  const clients = memoryClients();
  const jobs = memoryJobs();
  const tasks = memoryTasks();
  const queue = delayingQueue();
  let now = NOW;
  const clock = { now: () => now };
  await clients.put(parseClientSettings('acme', { ...TOKYO_CLIENT, messageChannelId: 'ch-1' }, NOW));
  await jobs.create({
    clientId: 'acme',
    jobId: JOB_ID,
    name: 'campaign',
    channel: 'line',
    scenarioId: 'default',
    message: { messages: [{ type: 'text', text: 'hello' }] },
    startAt: NOW - 30 * MINUTE,
    maxAttempts: 3,
    retryDelaySeconds: 60,
    status: 'running',
    counts: {
      ...ZERO_COUNTS,
      rows: tasksOf.length,
      tasks: tasksOf.length,
      completed: tasksOf.filter((t) => t.state === 'completed').length,
    },
    createdAt: NOW - 40 * MINUTE,
    updatedAt: NOW - 40 * MINUTE,
  });
  await tasks.put(tasksOf);
  const api = new JobsApi({
    region: 'ap-northeast-1',
    clients,
    jobs,
    tasks,
    files: memoryFiles(),
    validationReports: memoryReports(),
    queue,
    bucket: 'uploads',
    clock,
  });
  const canceller = memoryCanceller(tasks, jobs);
  const sweep = new JobSweep({ jobs, tasks: canceller, queue, clock, maxPagesPerRun: 2 });
  const ctx = { remainingMs: () => 600_000 };
  const key = (taskId: string) => `${JOB_ID}/${taskId}`;
  const archives: IngestQueueMessage[] = [];
  const w = {
    api,
    jobs,
    tasks,
    queue,
    sweep,
    canceller,
    ctx,
    /** The report archives the sweep queued (once it finished: nothing held any more). */
    archives,
    at: (ms: number) => {
      now = ms;
    },
    stateOf: (taskId: string) => tasks.all.get(key(taskId))!.state,
    states() {
      const by: Partial<Record<TaskState, number>> = {};
      for (const t of tasks.all.values()) by[t.state] = (by[t.state] ?? 0) + 1;
      return by;
    },
    /** The live broker writes a claimed message back: delivered, or released into a cancelled job. */
    brokerWrites(taskId: string, outcome: 'delivered' | 'released') {
      const t = tasks.all.get(key(taskId))!;
      const row = jobs.rows.get(`acme/${JOB_ID}`)!;
      const end = outcome === 'delivered' ? 'completed' : 'cancelled';
      tasks.all.set(key(taskId), {
        ...t,
        state: end,
        ...(end === 'cancelled' ? { reason: JOB_CANCELLED_REASON } : {}),
      });
      row.job = { ...row.job, counts: { ...row.job.counts, [end]: row.job.counts[end] + 1 } };
    },
    /**
     * Runs the queued sweep messages sent without a delay (one pass over the shards, over its
     * continuations); returns the pass's last outcome, how many it ended, and what it queued with
     * a delay.
     */
    async pass(): Promise<{ last: JobSweepOutcome; cancelled: number; delayed: Sent[] }> {
      const delayed: Sent[] = [];
      let last: JobSweepOutcome | undefined;
      let cancelled = 0;
      while (queue.sent.length > 0) {
        const sent = queue.sent.shift()!;
        if (sent.message.kind === 'archive-report') {
          archives.push(sent.message);
          continue;
        }
        if (sent.delaySeconds !== undefined) {
          delayed.push(sent);
          continue;
        }
        last = await sweep.handle(sent.message as JobSweepMessage, ctx);
        if (last.kind !== 'ignored') cancelled += last.ended;
      }
      return { last: last!, cancelled, delayed };
    },
    /** Puts the delayed messages back on the queue, as SQS does once their delay is over. */
    deliver(delayed: readonly Sent[]) {
      for (const d of delayed) queue.sent.push({ message: d.message });
    },
  };
  return w;
}

describe('cancelling a message job whose messages are in flight', () => {
  it("ends a dead broker's messages at once, and the live broker's it has not written back once their hold has passed", async () => {
    const w = await messageWorld();
    expect((await w.api.changeStatus('acme', JOB_ID, 'cancel')).status).toBe('cancelled');

    const first = await w.pass();
    // The dead broker's messages (hold over) end with the waiting ones; the held ones wait.
    for (const taskId of DEAD) expect(w.stateOf(taskId)).toBe('cancelled');
    for (const t of HELD) expect(w.stateOf(t.taskId)).toBe('in-flight');
    expect(w.states()).toEqual({
      completed: DELIVERED,
      cancelled: WAITING + DEAD.length,
      'in-flight': HELD.length,
    });
    // A re-check from the first shard, delayed until the latest hold has passed (+1 s).
    const delaySeconds = Math.ceil((LATEST_HOLD - NOW) / 1_000) + 1;
    expect(first.last).toMatchObject({
      kind: 'recheck',
      jobId: JOB_ID,
      heldUntil: LATEST_HOLD,
      delaySeconds,
    });
    expect(first.cancelled).toBe(WAITING + DEAD.length);
    expect(first.delayed).toEqual([
      { message: { kind: 'cancel-sweep', clientId: 'acme', jobId: JOB_ID, shard: 0 }, delaySeconds },
    ]);
    expect(w.archives).toEqual([]); // not while a broker holds messages

    // Meanwhile the live broker writes two of its messages back; the rest it never will (it dies).
    const [delivered, released] = HELD as [Task, Task, ...Task[]];
    w.brokerWrites(delivered.taskId, 'delivered');
    w.brokerWrites(released.taskId, 'released');

    w.at(NOW + delaySeconds * 1_000);
    w.deliver(first.delayed);
    const recheck = await w.pass();
    expect(recheck.last.kind).toBe('swept');
    expect(w.archives).toEqual([archiveReportStart('acme', JOB_ID)]);
    expect(recheck.cancelled).toBe(HELD.length - 2);
    expect(recheck.delayed).toEqual([]);
    expect(w.stateOf(delivered.taskId)).toBe('completed');
    expect(w.states()).toEqual({ completed: DELIVERED + 1, cancelled: 60 - DELIVERED - 1 });
    for (const t of w.tasks.all.values()) {
      if (t.state === 'cancelled') expect(t.reason).toBe(JOB_CANCELLED_REASON);
    }
    const job = await w.api.getJob('acme', JOB_ID);
    expect(job.counts).toMatchObject({
      completed: DELIVERED + 1,
      cancelled: 60 - DELIVERED - 1,
      outstanding: 0,
    });
  });

  it('leaves a message its broker writes back after the sweep read it to that broker', async () => {
    const w = await messageWorld();
    await w.api.changeStatus('acme', JOB_ID, 'cancel');
    // The broker of the "dead" claims was only late: it writes each back just before the sweep's write.
    const racing = new Set(DEAD);
    const endTasks = w.canceller.endTasks.bind(w.canceller);
    w.canceller.endTasks = async (clientId, jobId, group, ending, now) => {
      for (const seen of group) {
        if (racing.delete(seen.taskId)) w.brokerWrites(seen.taskId, 'delivered');
      }
      return endTasks(clientId, jobId, group, ending, now);
    };
    const first = await w.pass();
    w.at(LATEST_HOLD + 1);
    w.deliver(first.delayed);
    await w.pass();
    for (const taskId of DEAD) expect(w.stateOf(taskId)).toBe('completed');
    const job = await w.api.getJob('acme', JOB_ID);
    expect(job.counts).toMatchObject({
      completed: DELIVERED + DEAD.length,
      cancelled: 60 - DELIVERED - DEAD.length,
      outstanding: 0,
    });
  });

  it('counts each message once when every sweep message is delivered twice', async () => {
    const w = await messageWorld();
    await w.api.changeStatus('acme', JOB_ID, 'cancel');
    const twice = async () => {
      const delayed: Sent[] = [];
      while (w.queue.sent.length > 0) {
        const sent = w.queue.sent.shift()!;
        if (sent.message.kind === 'archive-report') continue;
        if (sent.delaySeconds !== undefined) {
          delayed.push(sent);
          continue;
        }
        await w.sweep.handle(sent.message as JobSweepMessage, w.ctx);
        // The redelivered copy: its continuation duplicates one already queued, so it is dropped;
        // a re-check it queues is a second, real message (SQS would deliver it).
        const before = w.queue.sent.length;
        await w.sweep.handle(sent.message as JobSweepMessage, w.ctx);
        const extra = w.queue.sent.splice(before).filter((e) => e.message.kind !== 'archive-report');
        delayed.push(...extra.filter((e) => e.delaySeconds !== undefined));
      }
      return delayed;
    };
    const rechecks = await twice();
    expect(rechecks.length).toBeGreaterThan(0);
    w.at(LATEST_HOLD + 1_000);
    w.deliver(rechecks);
    expect(await twice()).toEqual([]);
    expect(w.states()).toEqual({ completed: DELIVERED, cancelled: 60 - DELIVERED });
    expect((await w.api.getJob('acme', JOB_ID)).counts).toMatchObject({
      cancelled: 60 - DELIVERED,
      outstanding: 0,
    });
  });

  it("waits at most SQS's 15 minutes, and re-checks again a hold that lasts longer", async () => {
    const longHold = NOW + 40 * MINUTE;
    const w = await messageWorld([
      { ...MESSAGE_TASKS[2]!, readyAt: longHold },
      { ...MESSAGE_TASKS[4]!, state: 'pending' },
    ]);
    await w.api.changeStatus('acme', JOB_ID, 'cancel');
    const delays: number[] = [];
    let outcome: JobSweepOutcome | undefined;
    for (let now = NOW; ; ) {
      const { last, delayed } = await w.pass();
      outcome = last;
      if (delayed.length === 0) break;
      delays.push(delayed[0]!.delaySeconds!);
      now += delayed[0]!.delaySeconds! * 1_000;
      w.at(now);
      w.deliver(delayed);
    }
    expect(delays).toEqual([MAX_RECHECK_DELAY_SECONDS, MAX_RECHECK_DELAY_SECONDS, 601]);
    expect(outcome?.kind).toBe('swept');
    expect(w.states()).toEqual({ cancelled: 2 });
    expect(recheckDelaySeconds(NOW - MINUTE, NOW)).toBe(1);
    expect(recheckDelaySeconds(NOW + 1, NOW)).toBe(2);
  });

  it('carries the holds it saw over continuations, so the last run of the pass re-checks them', async () => {
    const held = { ...HELD[0]!, readyAt: NOW + 5 * MINUTE };
    const w = await messageWorld([held]);
    await w.api.changeStatus('acme', JOB_ID, 'cancel');
    const sweep = new JobSweep({
      jobs: w.jobs,
      tasks: w.canceller,
      queue: w.queue,
      clock: { now: () => NOW },
      maxPagesPerRun: 1,
    });
    const continued: JobSweepMessage[] = [];
    let last: JobSweepOutcome | undefined;
    for (
      let sent = w.queue.sent.shift();
      sent?.delaySeconds === undefined && sent;
      sent = w.queue.sent.shift()
    ) {
      last = await sweep.handle(sent.message as JobSweepMessage, w.ctx);
      if (last.kind === 'continued') continued.push(last.next);
    }
    const heldShard = taskShard(held.taskId);
    // Runs after the held task's shard never read it: only the continuation tells them.
    expect(heldShard).toBeLessThan(TASK_SHARDS - 1);
    expect(continued.length).toBe(TASK_SHARDS - 1);
    for (const next of continued) {
      expect(next.heldUntil).toBe(next.shard > heldShard ? held.readyAt : undefined);
    }
    expect(last).toMatchObject({ kind: 'recheck', heldUntil: held.readyAt, delaySeconds: 301 });
    expect(w.stateOf(held.taskId)).toBe('in-flight');
  });
});
