/**
 * The job end (issue 14 #6): a job's `endAt` (or `expireAfter`), the rule that says a job has
 * ended, where each part of Switchboard applies it (validation, settle, messages, the expire
 * sweep, the job manager), on in-memory ports with an injected clock.
 */
import { describe, expect, it } from 'vitest';
import { settlementFor } from '#shared/broker/settle.ts';
import { runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { ClaimedTask } from '#shared/campaign/ports.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { JobsApi, jobView, ZERO_COUNTS } from '#shared/jobs/api.ts';
import { expireSweepStart, JobSweep, type JobSweepOutcome } from '#shared/jobs/cancel.ts';
import { type Job, jobHasEnded, type Task, type TaskState } from '#shared/jobs/model.ts';
import type { JobSweepMessage } from '#shared/jobs/ports.ts';
import { mayStartNow } from '#shared/jobs/restrictions.ts';
import {
  FINAL_TASK_STATES,
  JOB_CANCELLED_REASON,
  JOB_ENDED_IN_FLIGHT_REASON,
  JOB_ENDED_REASON,
  messageOutcomeMove,
  RETRY_AFTER_END_REASON,
  sweepMove,
  TASK_MOVES,
} from '#shared/jobs/task-lifecycle.ts';
import {
  isoDurationMs,
  jobOptionsFromQuery,
  parseClientSettings,
  parseJobOptions,
} from '#shared/jobs/validation.ts';
import { jobWaitingFor } from '#shared/jobs/waiting.ts';
import type { PreparedSend, SendOutcome } from '#shared/line/messaging-client.ts';
import { MemoryFleetStore } from '../../support/memory-fleet-store.ts';
import { makeTasks, memorySink, memorySource, PERSONAL } from '../campaign/support.ts';
import {
  client as fleetClient,
  job as fleetJob,
  task as fleetTask,
  MINUTE,
  weekdays,
} from '../fleet/fakes.ts';
import {
  fieldErrorsOf,
  memoryCanceller,
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

// Friday 2026-11-20 09:00 in Tokyo.
const NOW = Date.parse('2026-11-20T00:00:00Z');
const HOUR = 3_600_000;
const EVERY_DAY = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '09:00', end: '18:00' }]]),
);
const client = parseClientSettings('acme', { ...TOKYO_CLIENT, callingHours: EVERY_DAY }, NOW);

describe('the rule: has a job ended?', () => {
  it('from its endAt on, that instant included; a job without an end never has', () => {
    const job = { endAt: NOW };
    expect(jobHasEnded(job, NOW - 1)).toBe(false);
    expect(jobHasEnded(job, NOW)).toBe(true);
    expect(jobHasEnded(job, NOW + 1)).toBe(true);
    expect(jobHasEnded({}, Number.MAX_SAFE_INTEGER)).toBe(false);
  });

  it('nothing of an ended job may start, whatever its hours, and its view says why', () => {
    const job = {
      clientId: 'acme',
      jobId: 'J1',
      name: 'list',
      channel: 'call',
      scenarioId: 'default',
      startAt: NOW - HOUR,
      endAt: NOW + HOUR,
      maxAttempts: 3,
      retryDelaySeconds: 60,
      status: 'running',
      counts: { ...ZERO_COUNTS, rows: 4, tasks: 4, completed: 1, expired: 2 },
      createdAt: NOW - 2 * HOUR,
      updatedAt: NOW,
    } satisfies Job;
    // Inside the client's hours (09:00–18:00 in Tokyo): only the end holds it back.
    expect(mayStartNow(client, job, job.endAt - 1)).toBe(true);
    expect(mayStartNow(client, job, job.endAt)).toBe(false);
    expect(jobWaitingFor({ job, client, now: job.endAt })).toEqual({
      reason: 'job-ended',
      message:
        'the job ended at 2026-11-20 10:00 Asia/Tokyo: nothing more starts; tasks not done expire, and it completes once its calls in flight end',
    });
    const view = jobView(job);
    expect(view.endAt).toBe('2026-11-20T01:00:00.000Z');
    expect(view.counts).toMatchObject({ expired: 2, outstanding: 1 });
    // A job stored before the end existed has no expired count: it reads as 0.
    const { expired: _none, ...older } = job.counts;
    expect(jobView({ ...job, counts: older }).counts).toMatchObject({ expired: 0, outstanding: 3 });
  });
});

describe('the lifecycle: expired is an end', () => {
  it('is final, reached from a waiting task by the expire move, and by the sweep that ends as expired', () => {
    expect(FINAL_TASK_STATES).toContain('expired');
    expect(TASK_MOVES.expire).toEqual({ from: ['pending', 'retry-wait'], to: ['expired'] });
    expect(sweepMove('expired', 'pending')).toBe(TASK_MOVES.expire);
    expect(sweepMove('expired', 'in-flight')).toBe(TASK_MOVES.expireInFlight);
    expect(sweepMove('cancelled', 'retry-wait')).toBe(TASK_MOVES.cancelWaiting);
    // A call may end expired (its retry would come after the end); a message too.
    expect(TASK_MOVES.settleCall.to).toContain('expired');
    expect(TASK_MOVES.endMessage.to).toContain('expired');
  });

  it('a message given back when its job has ended (or will have by then) expires rather than wait for ever', () => {
    const released = { kind: 'released', lastResult: 'job-ended' } as const;
    expect(messageOutcomeMove(released, { cancelled: false, endedBeforeReady: true })).toMatchObject({
      state: 'expired',
      reason: JOB_ENDED_REASON,
    });
    expect(messageOutcomeMove(released, { cancelled: false, endedBeforeReady: false })).toMatchObject({
      state: 'retry-wait',
    });
    // Cancelled comes first: the cancel sweep's reason.
    expect(messageOutcomeMove(released, { cancelled: true, endedBeforeReady: true })).toMatchObject({
      state: 'cancelled',
      reason: JOB_CANCELLED_REASON,
    });
    // A delivery is a delivery, whatever the time.
    expect(
      messageOutcomeMove(
        { kind: 'delivered', lastResult: 'delivered' },
        { cancelled: false, endedBeforeReady: true },
      ),
    ).toMatchObject({ state: 'completed' });
  });
});

describe('the job options endAt and expireAfter', () => {
  const options = (extra: Record<string, unknown>) =>
    parseJobOptions({ name: 'list', ...extra }, client, NOW);

  it('takes an ISO 8601 instant or epoch ms as endAt, and an ISO 8601 duration after startAt as expireAfter', () => {
    expect(options({ endAt: '2026-11-20T18:00:00+09:00' }).endAt).toBe(Date.parse('2026-11-20T09:00:00Z'));
    expect(options({ endAt: NOW + HOUR }).endAt).toBe(NOW + HOUR);
    const startAt = '2026-11-21T09:00:00+09:00';
    expect(options({ startAt, expireAfter: 'PT4H' }).endAt).toBe(Date.parse(startAt) + 4 * HOUR);
    // Without startAt the job starts now, and so the duration counts from now.
    expect(options({ expireAfter: 'P1DT12H' }).endAt).toBe(NOW + 36 * HOUR);
    expect(options({}).endAt).toBeUndefined();
    expect(isoDurationMs('PT90M')).toBe(90 * MINUTE);
    expect(isoDurationMs('P2D')).toBe(48 * HOUR);
    expect(isoDurationMs('PT30S')).toBe(30_000);
  });

  it('reads them from a query string (an inline upload) as from a body', () => {
    const query = jobOptionsFromQuery({ name: 'list', endAt: String(NOW + HOUR) });
    expect(parseJobOptions(query, client, NOW).endAt).toBe(NOW + HOUR);
    const iso = jobOptionsFromQuery({ name: 'list', endAt: '2026-11-20T10:00:00Z', expireAfter: undefined });
    expect(parseJobOptions(iso, client, NOW).endAt).toBe(Date.parse('2026-11-20T10:00:00Z'));
    const duration = jobOptionsFromQuery({ name: 'list', expireAfter: 'PT2H' });
    expect(parseJobOptions(duration, client, NOW).endAt).toBe(NOW + 2 * HOUR);
  });

  it('refuses each mistake with a 400 naming its field', () => {
    expect(fieldErrorsOf(() => options({ endAt: NOW + HOUR, expireAfter: 'PT1H' }))).toEqual({
      endAt: ['give endAt or expireAfter, not both'],
      expireAfter: ['give endAt or expireAfter, not both'],
    });
    expect(
      fieldErrorsOf(() =>
        options({ startAt: '2026-11-21T09:00:00+09:00', endAt: '2026-11-21T08:00:00+09:00' }),
      ),
    ).toEqual({ endAt: ['must end after startAt (2026-11-21T00:00:00.000Z)'] });
    expect(fieldErrorsOf(() => options({ startAt: NOW + HOUR, endAt: NOW + HOUR }))).toHaveProperty('endAt');
    expect(fieldErrorsOf(() => options({ startAt: NOW - 2 * HOUR, endAt: NOW - HOUR }))).toEqual({
      endAt: ['is in the past'],
    });
    expect(fieldErrorsOf(() => options({ startAt: NOW - 5 * HOUR, expireAfter: 'PT4H' }))).toEqual({
      expireAfter: ['ends in the past: startAt + expireAfter is 2026-11-19T23:00:00.000Z'],
    });
    for (const endAt of ['tomorrow', '2026-11-20T18:00:00', -1, 1.5, true]) {
      expect(fieldErrorsOf(() => options({ endAt }))).toHaveProperty('endAt');
    }
    // Not a duration; calendar units (years, months, weeks); nothing in it; more than a year.
    for (const expireAfter of ['4h', 'PT', 'P', 'P1DT', 'P1M', 'P1Y', 'P1W', 'PT0S', 'P367D', 14400]) {
      const errors = fieldErrorsOf(() => options({ expireAfter }));
      expect(Object.keys(errors)).toEqual(['expireAfter']);
    }
  });

  it('is stored with the job and shown by GET', async () => {
    const clients = memoryClients();
    await clients.put(client);
    const api = new JobsApi({
      region: 'ap-northeast-1',
      clients,
      jobs: memoryJobs(),
      tasks: memoryTasks(),
      files: memoryFiles(),
      validationReports: memoryReports(),
      queue: memoryQueue(),
      bucket: 'uploads',
      clock: { now: () => NOW },
      newJobId: () => '01JEND0000000000000000000A',
    });
    const { jobId } = await api.createJob('acme', { name: 'list', expireAfter: 'PT4H' });
    const view = await api.getJob('acme', jobId);
    expect(view.endAt).toBe(new Date(NOW + 4 * HOUR).toISOString());
    expect(view.counts).toMatchObject({ expired: 0, outstanding: 0 });
  });
});

describe("a call's end near its job's end (settlementFor)", () => {
  const retries = { maxAttempts: 3, retryDelaySeconds: 600 };

  it('retries as usual while the retry is due before the end', () => {
    expect(settlementFor('busy', { attempts: 1, now: NOW }, { ...retries, endAt: NOW + 600_001 })).toEqual({
      state: 'retry-wait',
      lastResult: 'busy',
      readyAt: NOW + 600_000,
    });
  });

  it('expires the task instead of a retry due at or after the end, or once the end has passed', () => {
    for (const endAt of [NOW + 600_000, NOW + 1, NOW - 1]) {
      expect(settlementFor('no-answer', { attempts: 1, now: NOW }, { ...retries, endAt })).toEqual({
        state: 'expired',
        lastResult: 'no-answer',
        reason: RETRY_AFTER_END_REASON,
      });
    }
  });

  it('ends an answered, a failed or an exhausted call as it would without an end; a cancel comes first', () => {
    const endAt = NOW - 1;
    expect(settlementFor('completed', { attempts: 1, now: NOW }, { ...retries, endAt })).toMatchObject({
      state: 'completed',
    });
    expect(settlementFor('busy', { attempts: 3, now: NOW }, { ...retries, endAt })).toMatchObject({
      state: 'failed',
      reason: 'busy on all 3 attempts',
    });
    expect(
      settlementFor('busy', { attempts: 1, now: NOW }, { ...retries, endAt, status: 'cancelled' }),
    ).toMatchObject({ state: 'cancelled', reason: JOB_CANCELLED_REASON });
  });
});

/** An ended job's world: 40 call tasks (waiting, in flight, done) and 6 messages held by a broker. */
const JOB_ID = '01JEND0000000000000000000001';
const END = NOW;
const HOLD_UNTIL = END + 10 * MINUTE;
const STATE_OF = (i: number): TaskState =>
  i % 7 === 0 ? 'completed' : i % 5 === 0 ? 'in-flight' : i % 4 === 0 ? 'retry-wait' : 'pending';

function task(i: number, state: TaskState, channel: Task['channel'] = 'call'): Task {
  return {
    clientId: 'acme',
    jobId: JOB_ID,
    taskId: `task-${String(i).padStart(4, '0')}`,
    row: i + 2,
    channel,
    recipient: `+81901000${String(i).padStart(4, '0')}`,
    variables: {},
    state,
    attempts: state === 'pending' ? 0 : 1,
    readyAt: state === 'in-flight' && channel === 'message' ? HOLD_UNTIL : END - HOUR,
    ...(state === 'in-flight' ? { startedAt: END - MINUTE } : {}),
    updatedAt: END - HOUR,
  };
}

async function endedWorld(status: Job['status'] = 'running') {
  const jobs = memoryJobs();
  const tasks = memoryTasks();
  const queue = memoryQueue();
  let now = END + MINUTE;
  await jobs.create({
    clientId: 'acme',
    jobId: JOB_ID,
    name: 'list',
    channel: 'call',
    scenarioId: 'default',
    startAt: END - 2 * HOUR,
    endAt: END,
    maxAttempts: 3,
    retryDelaySeconds: 60,
    status,
    counts: { ...ZERO_COUNTS, rows: 46, tasks: 46 },
    createdAt: END - 3 * HOUR,
    updatedAt: END - 3 * HOUR,
  });
  await tasks.put([
    ...Array.from({ length: 40 }, (_, i) => task(i, STATE_OF(i))),
    ...Array.from({ length: 6 }, (_, i) => task(100 + i, 'in-flight', 'message')),
  ]);
  const sweep = new JobSweep({
    jobs,
    tasks: memoryCanceller(tasks, jobs),
    queue,
    clock: { now: () => now },
    maxPagesPerRun: 3,
  });
  /**
   * Runs the sweep from `first` through its continuations (not its delayed re-check): its last
   * outcome, and how many tasks the runs ended in all.
   */
  const drain = async (first: JobSweepMessage) => {
    let message: JobSweepMessage | undefined = first;
    let last: JobSweepOutcome | undefined;
    let ended = 0;
    while (message) {
      last = await sweep.handle(message, { remainingMs: () => 600_000 });
      if (last.kind !== 'ignored') ended += last.ended;
      message = last.kind === 'continued' ? (queue.sent.shift() as JobSweepMessage) : undefined;
    }
    return { ...last!, ended };
  };
  const states = () => {
    const by: Partial<Record<TaskState, number>> = {};
    for (const t of tasks.all.values()) by[t.state] = (by[t.state] ?? 0) + 1;
    return by;
  };
  return {
    jobs,
    tasks,
    queue,
    drain,
    states,
    at: (t: number) => {
      now = t;
    },
  };
}

const WAITING = Array.from({ length: 40 }, (_, i) => STATE_OF(i)).filter(
  (s) => s === 'pending' || s === 'retry-wait',
).length;
const CALLS_IN_FLIGHT = Array.from({ length: 40 }, (_, i) => STATE_OF(i)).filter(
  (s) => s === 'in-flight',
).length;

describe('the expire sweep', () => {
  it('ends every waiting task expired with the reason and counts it; calls in flight are left to finish', async () => {
    const w = await endedWorld();
    const last = await w.drain(expireSweepStart('acme', JOB_ID));
    // The messages its broker still holds are looked at again once their hold has passed.
    expect(last).toMatchObject({ kind: 'recheck', ended: WAITING, heldUntil: HOLD_UNTIL });
    expect(w.states()).toMatchObject({ expired: WAITING, 'in-flight': CALLS_IN_FLIGHT + 6 });
    for (const t of w.tasks.all.values()) {
      if (t.state === 'expired') expect(t.reason).toBe(JOB_ENDED_REASON);
    }
    expect((await w.jobs.get('acme', JOB_ID))!.counts).toMatchObject({ expired: WAITING, cancelled: 0 });

    // Run again (a redelivery, the job manager's next sweep): nothing ends or counts twice.
    w.queue.sent.length = 0;
    expect(await w.drain(expireSweepStart('acme', JOB_ID))).toMatchObject({ ended: 0 });

    // After the hold, the messages nobody wrote back (their broker is gone) expire too, saying
    // they may have been delivered; the calls in flight are still their broker's.
    w.at(HOLD_UNTIL + 1);
    expect(await w.drain(expireSweepStart('acme', JOB_ID))).toEqual({
      kind: 'swept',
      jobId: JOB_ID,
      ended: 6,
    });
    const messages = [...w.tasks.all.values()].filter((t) => t.channel === 'message');
    expect(messages.every((t) => t.state === 'expired' && t.reason === JOB_ENDED_IN_FLIGHT_REASON)).toBe(
      true,
    );
    expect(w.states()['in-flight']).toBe(CALLS_IN_FLIGHT);
    expect((await w.jobs.get('acme', JOB_ID))!.counts.expired).toBe(WAITING + 6);
  });

  it('never ends the tasks of a job that has not ended, or of a cancelled one (its own sweep does)', async () => {
    const early = await endedWorld();
    early.at(END - 1);
    expect(await early.drain(expireSweepStart('acme', JOB_ID))).toMatchObject({ kind: 'ignored' });
    const cancelled = await endedWorld('cancelled');
    expect(await cancelled.drain(expireSweepStart('acme', JOB_ID))).toMatchObject({ kind: 'ignored' });
    expect(early.states().expired).toBeUndefined();
    expect(cancelled.states().expired).toBeUndefined();
  });

  it('continues as an expire sweep over continuations', async () => {
    const w = await endedWorld();
    const sweep = await w.drain(expireSweepStart('acme', JOB_ID));
    expect(sweep.kind).toBe('recheck');
    // Its delayed re-check is an expire sweep too.
    expect(w.queue.sent).toEqual([expireSweepStart('acme', JOB_ID)]);
  });
});

describe('the job manager and a job past its end', () => {
  function setup() {
    const store = new MemoryFleetStore();
    const sweeps = memoryQueue();
    let now = END + MINUTE;
    const run = makeRunJobManager({
      store,
      scaler: { setDesiredCount: async () => {} },
      sweeps,
      clock: { now: () => now },
      maxBrokers: 10,
      desiredVersion: () => 'v1',
      fullCheckEveryMs: 10 * MINUTE,
    });
    store.clients.set('acme', {
      settings: fleetClient('acme', weekdays('UTC', '00:00', '24:00')),
      paused: false,
    });
    return {
      store,
      sweeps,
      run,
      at: (t: number) => {
        now = t;
      },
    };
  }

  it('queues its expire sweep, lists no work for it, and queues the sweep again only after fullCheckEveryMs', async () => {
    const { store, sweeps, run, at } = setup();
    const ended = fleetJob('acme', { startAt: END - HOUR, endAt: END });
    store.putJob(ended);
    store.putTask(fleetTask(ended, { readyAt: END - HOUR }));

    at(END - 1);
    const before = await run();
    expect(before.expiring).toEqual([]);
    expect(before.clients).toEqual(['acme']);

    at(END);
    const first = await run();
    expect(first.expiring).toEqual([ended.jobId]);
    expect(sweeps.sent).toEqual([expireSweepStart('acme', ended.jobId)]);
    // Its waiting task is not work: no broker is asked for it.
    expect(first.clients).toEqual([]);
    expect(first.completed).toEqual([]);

    at(END + 9 * MINUTE);
    expect((await run()).expiring).toEqual([]);
    at(END + 10 * MINUTE);
    expect((await run()).expiring).toEqual([ended.jobId]);
    expect(sweeps.sent).toHaveLength(2);
  });

  it('still gives a broker to calls a dead broker left in flight, then completes the job once every task has ended', async () => {
    const { store, sweeps, run, at } = setup();
    const ended = fleetJob('acme', {
      startAt: END - HOUR,
      endAt: END,
      counts: { ...ZERO_COUNTS, rows: 2, tasks: 2, completed: 1 },
    });
    store.putJob(ended);
    store.putTask(fleetTask(ended, { state: 'completed' }));
    const call = fleetTask(ended, { state: 'in-flight', attempts: 1, startedAt: END - MINUTE });
    store.putTask(call);
    store.leases.set('acme', { expiresAt: END - 1, inFlight: [`${ended.jobId}|${call.taskId}`] });

    at(END + MINUTE);
    const adopting = await run();
    expect(adopting.orphaned).toEqual(['acme']);
    expect(adopting.clients).toEqual([]);
    expect(adopting.completed).toEqual([]);
    expect(sweeps.sent).toHaveLength(1);

    // The adopting broker settles the call (no retry after the end): the job completes.
    store.putTask({ ...call, state: 'expired', reason: RETRY_AFTER_END_REASON });
    store.putJob({ ...ended, counts: { ...ended.counts, expired: 1 } });
    store.leases.delete('acme');
    at(END + 2 * MINUTE);
    expect((await run()).completed).toEqual([ended.jobId]);
    expect(store.jobs.get(ended.jobId)?.status).toBe('completed');
  });
});

describe('the message pipeline at the job end', () => {
  it('starts no request of a task at or after its sendBy; a request already made finishes', async () => {
    let now = END - 3;
    const requests: string[] = [];
    const send = async (prepared: PreparedSend): Promise<SendOutcome> => {
      requests.push(prepared.retryKey ?? '');
      now += 1;
      return { kind: 'delivered', status: 200, requestId: `req-${requests.length}`, sentMessages: [] };
    };
    const tasks: ClaimedTask[] = makeTasks(6, PERSONAL, { attemptStartedAt: END - HOUR }).map((t) => ({
      ...t,
      sendBy: END,
    }));
    const sink = memorySink();
    const totals = await runMessagePipeline({
      source: memorySource(tasks),
      send,
      report: sink,
      rate: { perSecond: Number.POSITIVE_INFINITY },
      concurrency: 1,
      clock: { now: () => now },
    });
    // END - 3, - 2, - 1 start; from END on, nothing does.
    expect(requests).toHaveLength(3);
    expect(totals).toMatchObject({ delivered: 3, released: 3, requests: 3 });
    const released = sink.outcomes.filter((o) => o.kind === 'released');
    expect(released.map((o) => o.lastResult)).toEqual(['job-ended', 'job-ended', 'job-ended']);
    expect(released.every((o) => o.maybeSent === false)).toBe(true);
  });
});
