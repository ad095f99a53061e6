import { describe, expect, it } from 'vitest';
import { settleFromSnapshot, settlementFor } from '#shared/broker/settle.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { MemoryFleetStore } from '#shared/fleet/memory-fleet-store.ts';
import { attemptKey } from '#shared/ids.ts';
import { makeJobsApi, ZERO_COUNTS } from '#shared/jobs/api.ts';
import { JOB_CANCELLED_REASON, makeCancelSweep } from '#shared/jobs/cancel.ts';
import { type Job, type Task, type TaskState, taskShard } from '#shared/jobs/model.ts';
import type { CancelSweepMessage, TaskCanceller } from '#shared/jobs/ports.ts';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import { MemoryLeaseStore } from '#shared/lease/memory-lease-store.ts';
import { clientSettings, MemoryTaskStore } from '../broker/fakes.ts';
import {
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

/**
 * The tasks table as the sweep sees it, over the in-memory tasks: pages of `pageItems` items
 * read in key order before the state filter (as a DynamoDB Query with a FilterExpression), and
 * the job's count moved with each ended group.
 */
function memoryCanceller(
  tasks: ReturnType<typeof memoryTasks>,
  jobs: ReturnType<typeof memoryJobs>,
  pageItems = 3,
): TaskCanceller & { writes: number } {
  const waiting = (t: Task) => t.state === 'pending' || t.state === 'retry-wait';
  const canceller = {
    writes: 0,
    async waitingPage(jobId: string, shard: number, cursor: string | undefined) {
      const inShard = [...tasks.all.values()]
        .filter((t) => t.jobId === jobId && taskShard(t.taskId) === shard)
        .sort((a, b) => (a.taskId < b.taskId ? -1 : 1))
        .filter((t) => cursor === undefined || t.taskId > cursor);
      const read = inShard.slice(0, pageItems);
      const more = inShard.length > pageItems;
      return {
        tasks: read.filter(waiting).map((t) => ({ taskId: t.taskId, state: t.state })),
        ...(more ? { next: read.at(-1)!.taskId } : {}),
      };
    },
    async cancelWaiting(
      clientId: string,
      jobId: string,
      group: readonly Pick<Task, 'taskId'>[],
      reason: string,
      now: number,
    ) {
      canceller.writes++;
      let ended = 0;
      for (const { taskId } of group) {
        const t = tasks.all.get(`${jobId}/${taskId}`);
        if (!t || !waiting(t)) continue;
        tasks.all.set(`${jobId}/${taskId}`, { ...t, state: 'cancelled', reason, updatedAt: now });
        ended++;
      }
      const row = jobs.rows.get(`${clientId}/${jobId}`)!;
      row.job = { ...row.job, counts: { ...row.job.counts, cancelled: row.job.counts.cancelled + ended } };
      return ended;
    },
  };
  return canceller;
}

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
  await tasks.put(Array.from({ length: 60 }, (_, i) => task(i, STATE_OF(i))));
  const api = makeJobsApi({
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
  const sweep = makeCancelSweep({ jobs, tasks: canceller, queue, clock, maxPagesPerRun: 2 });
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
    while (w.queue.sent.length > 0) {
      const message = w.queue.sent.shift() as CancelSweepMessage;
      const outcome = await w.sweep.handle(message, w.ctx);
      runs++;
      if (outcome.kind !== 'ignored') swept += outcome.cancelled;
    }
    expect(runs).toBeGreaterThan(1);
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
    while (w.queue.sent.length > 0) {
      const message = w.queue.sent.shift() as CancelSweepMessage;
      await w.sweep.handle(message, w.ctx);
      // The redelivered copy: its continuation is a duplicate too, so only the first is followed.
      const before = w.queue.sent.length;
      await w.sweep.handle(message, w.ctx);
      w.queue.sent.splice(before);
    }
    // The operator cancels again (say, the first reply was lost): the sweep runs once more.
    expect((await w.api.changeStatus('acme', JOB_ID, 'cancel')).status).toBe('cancelled');
    while (w.queue.sent.length > 0) await w.sweep.handle(w.queue.sent.shift() as CancelSweepMessage, w.ctx);
    expect((await w.job()).counts.cancelled).toBe(expected.waiting);
    expect(w.states().cancelled).toBe(expected.waiting);
  });

  it('stops in time and continues from the shard and page it reached', async () => {
    const w = await world('cancelled');
    let left = 3;
    const sweep = makeCancelSweep({
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
    const next = w.queue.sent[0] as CancelSweepMessage;
    expect(next).toEqual(outcome.kind === 'continued' ? outcome.next : undefined);
    const ended = w.states().cancelled ?? 0;
    expect(ended).toBeGreaterThan(0);
    expect(ended).toBeLessThan(expected.waiting);
    const rest = await sweep.handle(next, { remainingMs: () => 60_000 });
    expect(rest).toMatchObject({ kind: 'swept', cancelled: expected.waiting - ended });
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
