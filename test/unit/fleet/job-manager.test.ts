import { readFileSync } from 'node:fs';
import type { ScheduledEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { isSkippedRun, JobManagerRunError, makeJobManagerHandler } from '#lambdas/job-manager/handler.ts';
import { EcsBrokerService } from '#shared/adapters/ecs-service.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { fullCheckPeriod } from '#shared/fleet/job-completion.ts';
import {
  InvalidJobManagerOptionsError,
  type JobManagerOptions,
  makeRunJobManager,
} from '#shared/fleet/job-manager.ts';
import type { EcsServiceScaler } from '#shared/fleet/ports.ts';
import { RunLease, runLeaseMs } from '#shared/fleet/run-lease.ts';
import { BOUNCE_GRACE_MS } from '#shared/jobs/reopen.ts';
import { archiveReportStart } from '#shared/jobs/report-archive.ts';
import { MemoryFleetStore } from '../../support/memory-fleet-store.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { memoryQueue } from '../jobs/fakes.ts';
import { client, job, MINUTE, NOW, task, weekdays } from './fakes.ts';

const scheduledEvent = JSON.parse(
  readFileSync(new URL('../../fixtures/fleet/scheduled-event.json', import.meta.url), 'utf8'),
) as ScheduledEvent;

/** The run lease over an in-memory store, on the wall clock. */
function memoryRunLease(store = new MemoryLeaseStore()): RunLease {
  return new RunLease({ store, clock: { now: () => Date.now() }, leaseMs: 55_000 });
}

function recordingScaler(): EcsServiceScaler & { counts: number[] } {
  const counts: number[] = [];
  return { counts, setDesiredCount: async (n) => void counts.push(n) };
}

function setup(options: { maxBrokers?: number; now?: number; version?: string } = {}) {
  const store = new MemoryFleetStore();
  const scaler = recordingScaler();
  const clock = { now: () => options.now ?? NOW };
  const sweeps = memoryQueue();
  const run = makeRunJobManager({
    store,
    scaler,
    sweeps,
    clock,
    maxBrokers: options.maxBrokers ?? 10,
    desiredVersion: () => options.version ?? 'v1',
  });
  const addClient = (id: string, hours = weekdays('Asia/Tokyo', '09:00', '18:00'), paused = false) =>
    store.clients.set(id, { settings: client(id, hours), paused });
  return { store, scaler, sweeps, run, addClient };
}

/** A job manager instance of its own (a cold Lambda) over `store` at `now`, full checks every 10 minutes. */
function freshManager(
  store: MemoryFleetStore,
  now: number | (() => number),
  options: Partial<JobManagerOptions> = {},
) {
  return makeRunJobManager({
    store,
    scaler: recordingScaler(),
    sweeps: memoryQueue(),
    clock: { now: typeof now === 'number' ? () => now : now },
    maxBrokers: 10,
    desiredVersion: () => 'v1',
    fullCheckEveryMs: 10 * MINUTE,
    ...options,
  });
}

/** A fleet store with client acme (weekdays 09:00–18:00 in Tokyo, not paused). */
function acmeStore(): MemoryFleetStore {
  const store = new MemoryFleetStore();
  store.clients.set('acme', {
    settings: client('acme', weekdays('Asia/Tokyo', '09:00', '18:00')),
    paused: false,
  });
  return store;
}

describe('the job manager', () => {
  it('starts a due scheduled job exactly once, even when two runs overlap', async () => {
    const { store, run, addClient } = setup();
    addClient('acme');
    const due = job('acme', { status: 'scheduled', startAt: NOW - MINUTE });
    store.putJob(due);
    store.putTask(task(due));

    const [a, b] = await Promise.all([run(), run()]);

    expect([...a.started, ...b.started]).toEqual([due.jobId]);
    expect(store.transitions.filter((t) => t.to === 'running')).toHaveLength(1);
    expect(store.jobs.get(due.jobId)?.status).toBe('running');
  });

  it('leaves a job whose start time has not come yet scheduled', async () => {
    const { store, run, addClient } = setup();
    addClient('acme');
    const later = job('acme', { status: 'scheduled', startAt: NOW + MINUTE });
    store.putJob(later);
    store.putTask(task(later, { readyAt: later.startAt }));

    const result = await run();

    expect(result.started).toEqual([]);
    expect(store.jobs.get(later.jobId)?.status).toBe('scheduled');
  });

  it('a job started in this run already counts: its client gets a broker in the same run', async () => {
    const { store, run, addClient } = setup();
    addClient('acme');
    const due = job('acme', { status: 'scheduled', startAt: NOW });
    store.putJob(due);
    store.putTask(task(due));

    const result = await run();

    expect(result.clients).toEqual(['acme']);
    expect(result.desiredCount).toBe(1);
  });

  it('completes a running job once every task is final, and only once across overlapping runs', async () => {
    const { store, run, addClient, sweeps } = setup();
    addClient('acme');
    const done = job('acme', {
      counts: { rows: 3, rejected: 0, skipped: 0, tasks: 3, completed: 1, failed: 1, cancelled: 1 },
    });
    store.putJob(done);
    store.putTask(task(done, { state: 'completed' }));
    store.putTask(task(done, { state: 'failed', reason: 'invalid number' }));
    store.putTask(task(done, { state: 'cancelled' }));

    const [a, b] = await Promise.all([run(), run()]);

    expect([...a.completed, ...b.completed]).toEqual([done.jobId]);
    expect(store.jobs.get(done.jobId)?.status).toBe('completed');
    expect(a.clients).toEqual([]);
    // Its report is archived (queued before the completion, delayed past it; twice is harmless).
    expect(sweeps.sent.length).toBeGreaterThan(0);
    expect(new Set(sweeps.sent.map((m) => JSON.stringify(m)))).toEqual(
      new Set([JSON.stringify(archiveReportStart('acme', done.jobId))]),
    );
  });

  it('keeps a job whose tasks an email bounce may open again running for the bounce grace, unread, then completes it', async () => {
    const store = acmeStore();
    const counts = { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 };
    const fallback = job('acme', { channel: 'line', fallback: ['email', 'sms'], counts });
    const emailLast = job('acme', { channel: 'line', fallback: ['sms', 'email'], counts });
    for (const j of [fallback, emailLast]) {
      store.putJob(j);
      store.putTask(task(j, { state: 'completed' }));
    }
    let now = NOW;
    const run = freshManager(store, () => now);
    // Email is its last channel: nothing would move on after a bounce, so it completes at once.
    expect((await run()).completed).toEqual([emailLast.jobId]);
    const reads = store.openTaskReads;
    now += BOUNCE_GRACE_MS - 1;
    expect((await run()).completed).toEqual([]);
    expect(store.openTaskReads).toBe(reads);
    expect(store.jobs.get(fallback.jobId)?.status).toBe('running');
    now += 1;
    expect((await run()).completed).toEqual([fallback.jobId]);
  });

  it('settles the job’s claim pages as the grace starts (a bounce waits for its page), and gives a job past its end no grace', async () => {
    const store = acmeStore();
    const counts = { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 };
    const waiting = job('acme', { channel: 'email', fallback: ['sms'], counts });
    const ended = job('acme', { channel: 'email', fallback: ['sms'], counts, endAt: NOW - MINUTE });
    for (const j of [waiting, ended]) {
      store.putJob(j);
      store.putTask(task(j, { state: 'completed' }));
    }
    const run = freshManager(store, NOW);
    expect((await run()).completed).toEqual([ended.jobId]);
    expect(store.settledPages).toContain(waiting.jobId);
  });

  it('counts that say a task is left while none is open do not hold the job for ever', async () => {
    const store = acmeStore();
    // A count lost (or a page a dead broker never closed): 1 of 2 ended, nothing open.
    const counts = { rows: 2, rejected: 0, skipped: 0, tasks: 2, completed: 1, failed: 0, cancelled: 0 };
    const j = job('acme', { channel: 'email', fallback: ['sms'], counts });
    store.putJob(j);
    store.putTask(task(j, { state: 'completed' }));
    let now = NOW;
    const run = freshManager(store, () => now);
    let completedAt: number | undefined;
    for (let minute = 0; minute < 120 && completedAt === undefined; minute++) {
      if ((await run()).completed.includes(j.jobId)) completedAt = now;
      now += MINUTE;
    }
    expect(completedAt).toBeDefined();
  });

  it('a task opened again during the grace starts it over once it ends', async () => {
    const store = acmeStore();
    const counts = { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 };
    const j = job('acme', { channel: 'email', fallback: ['sms'], counts });
    store.putJob(j);
    const ended = task(j, { state: 'completed' });
    store.putTask(ended);
    let now = NOW;
    const run = freshManager(store, () => now);
    await run();
    // A bounce moves the task on: open again, its end's count taken back.
    now += MINUTE;
    store.putTask({ ...ended, state: 'pending' });
    store.putJob({ ...j, reopened: 1, counts: { ...counts, completed: 0 } });
    expect((await run()).completed).toEqual([]);
    // It ends on SMS: a new grace from then.
    now += MINUTE;
    store.putTask({ ...ended, state: 'completed' });
    store.putJob({ ...j, reopened: 1, counts });
    expect((await run()).completed).toEqual([]);
    now += BOUNCE_GRACE_MS;
    expect((await run()).completed).toEqual([j.jobId]);
  });

  it("trusts a job's counts while they say tasks are left, and reads its tasks once every fullCheckEveryMs, cold or warm", async () => {
    const store = acmeStore();
    let now = NOW;
    const make = () => freshManager(store, now);
    let reads = 0;
    const hasOpenTask = store.hasOpenTask.bind(store);
    store.hasOpenTask = (jobId) => {
      reads++;
      return hasOpenTask(jobId);
    };
    // Counts that say nothing is left: the tasks are read at once, and decide.
    const ended = job('acme', {
      counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 },
    });
    store.putJob(ended);
    store.putTask(task(ended, { state: 'completed' }));
    expect((await make()()).completed).toEqual([ended.jobId]);
    expect(reads).toBe(1);

    // Counts one short of the truth (say, a count lost with a crash): two tasks, both ended.
    const short = job('acme', {
      counts: { rows: 2, rejected: 0, skipped: 0, tasks: 2, completed: 1, failed: 0, cancelled: 0 },
    });
    store.putJob(short);
    store.putTask(task(short, { state: 'completed' }));
    store.putTask(task(short, { state: 'completed' }));
    // Runs a minute apart, every other one on a fresh instance: the job's tasks are read in one
    // run of the period (its turn), which completes it.
    const completedAt: number[] = [];
    for (let i = 1; i <= 10; i++) {
      now = NOW + i * MINUTE;
      const run = make();
      if ((await run()).completed.includes(short.jobId)) completedAt.push(i);
    }
    expect(completedAt).toHaveLength(1);
    expect(reads).toBe(2);
  });

  it("lengthens the full check when its turns would pass a run's budget: every job still gets one, none is skipped", async () => {
    const store = new MemoryFleetStore();
    store.clients.set('acme', {
      settings: client('acme', weekdays('Asia/Tokyo', '00:00', '24:00')),
      paused: false,
    });
    // 60 running jobs, each with an open task its counts know of, and 10 full checks a run: at a
    // 10-minute period 6 would come due a run (up to 16 with the hash's spread); at 20 minutes, 3.
    const jobs = Array.from({ length: 60 }, () => job('acme'));
    for (const j of jobs) {
      store.putJob(j);
      store.putTask(task(j));
    }
    expect(fullCheckPeriod(60, 10, 10 * MINUTE, MINUTE)).toBe(20 * MINUTE);
    let now = NOW;
    const checked = new Map<string, number[]>();
    const hasOpenTask = store.hasOpenTask.bind(store);
    let run = 0;
    store.hasOpenTask = (jobId) => {
      checked.set(jobId, [...(checked.get(jobId) ?? []), run]);
      return hasOpenTask(jobId);
    };
    const perRun: number[] = [];
    for (run = 1; run <= 40; run++) {
      now = NOW + run * MINUTE;
      const before = [...checked.values()].flat().length;
      // A fresh instance every run: the turns are derived, not remembered.
      await freshManager(store, now, { maxFullChecksPerRun: 10 })();
      perRun.push([...checked.values()].flat().length - before);
    }
    // Two periods of 20 runs: each job read once in each, never more than the budget in a run.
    for (const j of jobs) {
      const runs = checked.get(j.jobId) ?? [];
      expect(runs.filter((r) => r <= 20)).toHaveLength(1);
      expect(runs.filter((r) => r > 20)).toHaveLength(1);
    }
    expect(Math.max(...perRun)).toBeLessThanOrEqual(10);
  });

  it('owes a full check its run had no time for to the next run, longest owed first, so none is skipped turn after turn', async () => {
    const store = new MemoryFleetStore();
    store.clients.set('acme', {
      settings: client('acme', weekdays('Asia/Tokyo', '00:00', '24:00')),
      paused: false,
    });
    const jobs = Array.from({ length: 3 }, () => job('acme'));
    for (const j of jobs) {
      store.putJob(j);
      store.putTask(task(j));
    }
    // Every job's turn comes every run, and a full check takes 6 s: a run (5 s of reads at least)
    // has time for one. Without the debt, the first job listed would be the one checked every run.
    let now = NOW;
    const checked: string[] = [];
    const hasOpenTask = store.hasOpenTask.bind(store);
    store.hasOpenTask = (jobId) => {
      checked.push(jobId);
      now += 6_000;
      return hasOpenTask(jobId);
    };
    const warm = freshManager(store, () => now, {
      fullCheckEveryMs: MINUTE,
      runEveryMs: MINUTE,
      readForMs: 0,
      concurrency: 1,
    });
    for (let run = 1; run <= 6; run++) {
      now = NOW + run * 10 * MINUTE;
      await warm();
    }
    expect(checked).toHaveLength(6);
    for (const j of jobs) expect(checked.filter((id) => id === j.jobId)).toHaveLength(2);
  });

  it('refuses a full-check budget of none', () => {
    for (const maxFullChecksPerRun of [0, -1, 1.5]) {
      expect(() => freshManager(new MemoryFleetStore(), NOW, { maxFullChecksPerRun })).toThrow(
        InvalidJobManagerOptionsError,
      );
    }
  });

  it('keeps the full check at its period while the turns fit, and doubles it by the number of running jobs', () => {
    expect(fullCheckPeriod(0, 500, 10 * MINUTE, MINUTE)).toBe(10 * MINUTE);
    expect(fullCheckPeriod(4_000, 500, 10 * MINUTE, MINUTE)).toBe(10 * MINUTE);
    expect(fullCheckPeriod(4_200, 500, 10 * MINUTE, MINUTE)).toBe(20 * MINUTE);
    expect(fullCheckPeriod(25_000, 500, 10 * MINUTE, MINUTE)).toBe(80 * MINUTE);
    expect(fullCheckPeriod(25_000, 1_000, 10 * MINUTE, MINUTE)).toBe(40 * MINUTE);
  });

  it.each(['pending', 'in-flight', 'retry-wait'] as const)(
    'keeps a job running while a task is %s',
    async (state) => {
      const { store, run, addClient } = setup();
      addClient('acme');
      const busy = job('acme');
      store.putJob(busy);
      store.putTask(task(busy, { state: 'completed' }));
      store.putTask(task(busy, { state, readyAt: NOW + 3 * 3600_000 }));

      const result = await run();

      expect(result.completed).toEqual([]);
      expect(store.jobs.get(busy.jobId)?.status).toBe('running');
    },
  );

  it('gives no broker to a client outside its calling hours, nor to a paused client', async () => {
    const { store, run, addClient } = setup();
    addClient('tokyo'); // 12:00 on Monday in Tokyo: open
    addClient('new-york', weekdays('America/New_York', '09:00', '18:00')); // 22:00 on Sunday: closed
    addClient('paused', weekdays('Asia/Tokyo', '09:00', '18:00'), true);
    for (const id of ['tokyo', 'new-york', 'paused']) {
      const j = job(id);
      store.putJob(j);
      store.putTask(task(j));
    }

    const result = await run();

    expect(result.clients).toEqual(['tokyo']);
    expect(result.desiredCount).toBe(1);
    // The closed client's job is not completed: its work is only waiting for the morning.
    expect(result.completed).toEqual([]);
  });

  it("uses a job's own calling hours over its client's", async () => {
    const { store, run, addClient } = setup();
    addClient('night-owl', weekdays('America/New_York', '09:00', '18:00'));
    const evening = job('night-owl', {
      callingHours: { timeZone: 'America/New_York', weekly: { sun: [{ start: '20:00', end: '23:00' }] } },
    });
    store.putJob(evening);
    store.putTask(task(evening));

    expect((await run()).clients).toEqual(['night-owl']);
  });

  it('counts a task ready within the next minute as work now, and one ready later as none', async () => {
    const { store, run, addClient } = setup();
    addClient('soon');
    addClient('later');
    const soon = job('soon');
    store.putJob(soon);
    store.putTask(task(soon, { state: 'retry-wait', readyAt: NOW + 30_000 }));
    const later = job('later');
    store.putJob(later);
    store.putTask(task(later, { state: 'retry-wait', readyAt: NOW + 10 * MINUTE }));

    const result = await run();

    expect(result.clients).toEqual(['soon']);
  });

  it('gives no broker to a client whose only open tasks are in flight (its broker is protected)', async () => {
    const { store, run, addClient } = setup();
    addClient('acme');
    const j = job('acme');
    store.putJob(j);
    const flying = task(j, { state: 'in-flight' });
    store.putTask(flying);
    // Its holder is alive: the lease records the call and has not expired.
    store.leases.set('acme', { expiresAt: NOW + 1, inFlight: [`${j.jobId}|${flying.taskId}`] });

    const result = await run();

    expect(result.clients).toEqual([]);
    expect(result.orphaned).toEqual([]);
    expect(result.desiredCount).toBe(0);
  });

  it('gives a broker to a client whose holder died with only calls in flight, so they get settled', async () => {
    const { store, run, addClient, scaler } = setup();
    addClient('acme');
    const j = job('acme');
    store.putJob(j);
    const flying = task(j, { state: 'in-flight', attempts: 1 });
    store.putTask(flying);
    // SIGKILLed mid-call: the lease ran out with the call still recorded, its callback lost.
    store.leases.set('acme', { expiresAt: NOW, inFlight: [`${j.jobId}|${flying.taskId}`] });

    const result = await run();

    // It may call now: served as usual, the broker adopting the call first.
    expect(result.clients).toEqual(['acme']);
    expect(result.orphaned).toEqual([]);
    expect(result.completed).toEqual([]);
    expect(scaler.counts).toEqual([1]);
    expect(store.work?.clients).toEqual(['acme']);
  });

  it('gives a broker only to adopt the calls a dead holder left, whatever the hours or a pause', async () => {
    const { store, run, addClient, scaler } = setup();
    addClient('paused', weekdays('Asia/Tokyo', '09:00', '18:00'), true);
    addClient('night', weekdays('America/New_York', '09:00', '18:00')); // 22:00 on Sunday: closed
    for (const id of ['paused', 'night']) {
      const j = job(id);
      store.putJob(j);
      const flying = task(j, { state: 'in-flight', attempts: 1 });
      store.putTask(flying);
      // A pending task too: there is work, but not work the client may do now.
      store.putTask(task(j));
      store.leases.set(id, { expiresAt: 0, inFlight: [`${j.jobId}|${flying.taskId}`] });
    }
    // Released by its last broker with nothing in flight, its next attempt due in two hours.
    addClient('released');
    const later = job('released');
    store.putJob(later);
    store.putTask(task(later, { state: 'retry-wait', attempts: 1, readyAt: NOW + 120 * MINUTE }));
    store.leases.set('released', { expiresAt: 0, inFlight: [] });

    const result = await run();

    expect(result.clients).toEqual([]);
    expect(result.orphaned).toEqual(['night', 'paused']);
    expect(result.desiredCount).toBe(2);
    expect(scaler.counts).toEqual([2]);
    expect(store.work).toMatchObject({ clients: [], orphaned: ['night', 'paused'] });
  });

  it('lists a client with work now once, in the work list, even when a dead holder left calls too', async () => {
    const { store, run, addClient } = setup();
    addClient('acme');
    const j = job('acme');
    store.putJob(j);
    const flying = task(j, { state: 'in-flight', attempts: 1 });
    store.putTask(flying);
    store.putTask(task(j));
    store.leases.set('acme', { expiresAt: NOW - MINUTE, inFlight: [`${j.jobId}|${flying.taskId}`] });

    const result = await run();

    expect(result.clients).toEqual(['acme']);
    expect(result.orphaned).toEqual([]);
    expect(result.desiredCount).toBe(1);
  });

  it('bounds the desired count by the maximum, but lists every client with work', async () => {
    const { store, run, addClient, scaler } = setup({ maxBrokers: 3, version: 'build-42' });
    for (const id of ['a', 'b', 'c', 'd', 'e']) {
      addClient(id);
      const j = job(id);
      store.putJob(j);
      store.putTask(task(j));
    }

    const result = await run();

    expect(result.desiredCount).toBe(3);
    expect(scaler.counts).toEqual([3]);
    expect(store.work).toEqual({
      pk: 'FLEET',
      sk: 'WORK',
      clients: ['a', 'b', 'c', 'd', 'e'],
      desiredVersion: 'build-42',
      updatedAt: NOW,
    });
  });

  it('scales to zero when nothing is left to do', async () => {
    const { run, scaler } = setup();
    await run();
    expect(scaler.counts).toEqual([0]);
  });

  it('a late run leaves a newer work list and the fleet size to the run that wrote it', async () => {
    const { store, run, scaler } = setup();
    store.work = {
      pk: 'FLEET',
      sk: 'WORK',
      clients: ['acme'],
      desiredVersion: 'v2',
      updatedAt: NOW + MINUTE,
    };

    const result = await run();

    expect(result.desiredCount).toBeUndefined();
    expect(scaler.counts).toEqual([]);
    expect(store.work.desiredVersion).toBe('v2');
  });

  it('one broken client does not keep the others from their brokers', async () => {
    const { store, run, addClient } = setup();
    addClient('ok');
    store.clients.set('broken', {
      settings: client('broken', {
        timeZone: 'Not/AZone',
        weekly: { mon: [{ start: '09:00', end: '18:00' }] },
      }),
      paused: false,
    });
    for (const id of ['ok', 'broken']) {
      const j = job(id);
      store.putJob(j);
      store.putTask(task(j));
    }

    const result = await run();

    expect(result.clients).toEqual(['ok']);
    expect(result.problems).toEqual([expect.objectContaining({ step: 'client', id: 'broken' })]);
  });

  it('refuses a maximum that is not a whole number', () => {
    expect(() => setup({ maxBrokers: 2.5 })).toThrow(InvalidJobManagerOptionsError);
  });
});

describe('the job manager handler', () => {
  const quiet = new PowertoolsLog('job-manager', { write: () => {} });

  it('runs once per scheduled event and returns what it did', async () => {
    const { store, run, addClient } = setup();
    addClient('acme');
    const j = job('acme');
    store.putJob(j);
    store.putTask(task(j));
    const handler = makeJobManagerHandler({ run, runLease: memoryRunLease(), log: quiet });

    const result = await handler(scheduledEvent, {} as never);

    expect(result).toMatchObject({ clients: ['acme'] });
  });

  it('fails the invocation after sizing the fleet when a step failed, so the error alarm fires', async () => {
    const { store, run, scaler } = setup();
    store.clients.set('broken', {
      settings: client('broken', { timeZone: 'Not/AZone', weekly: {} }),
      paused: false,
    });
    const j = job('broken');
    store.putJob(j);
    store.putTask(task(j));
    const lines: string[] = [];
    const handler = makeJobManagerHandler({
      run,
      runLease: memoryRunLease(),
      log: new PowertoolsLog('job-manager', { write: (l) => lines.push(l) }),
    });

    await expect(handler(scheduledEvent, {} as never)).rejects.toThrow(JobManagerRunError);
    expect(scaler.counts).toEqual([0]);
    expect(lines.some((l) => l.includes('"job manager step failed"') && l.includes('broken'))).toBe(true);
  });
});

describe('the run lease (issue 35 #1)', () => {
  it('a run that overlaps another does nothing, logs it and counts it; the lease is free again after the first', async () => {
    const store = new MemoryLeaseStore();
    let letFirstEnd: () => void = () => {};
    let firstRunning: () => void = () => {};
    const running = new Promise<void>((resolve) => (firstRunning = resolve));
    const { run } = setup();
    const runs: string[] = [];
    const lines: string[] = [];
    const handler = makeJobManagerHandler({
      run: async () => {
        runs.push('ran');
        if (runs.length === 1) {
          firstRunning();
          await new Promise<void>((resolve) => (letFirstEnd = resolve));
        }
        return run();
      },
      runLease: memoryRunLease(store),
      log: new PowertoolsLog('job-manager', { write: (l) => lines.push(l) }),
    });
    const first = handler(scheduledEvent, { awsRequestId: 'a' } as never);
    await running;

    expect(await handler(scheduledEvent, { awsRequestId: 'b' } as never)).toEqual({
      skipped: 'another run holds the run lease',
    });
    expect(runs).toEqual(['ran']);
    expect(lines.some((l) => l.includes('job manager run skipped'))).toBe(true);
    expect(lines.some((l) => l.includes('"JobManagerRunsSkipped":1'))).toBe(true);

    letFirstEnd();
    expect(isSkippedRun(await first)).toBe(false);
    expect(store.get('job-manager')).toMatchObject({ owner: 'a', expiresAt: 0 });
    expect(isSkippedRun(await handler(scheduledEvent, { awsRequestId: 'c' } as never))).toBe(false);
    expect(runs).toHaveLength(2);
  });

  it('is released when the run fails, and a store that does not answer the take fails the run unrun', async () => {
    const store = new MemoryLeaseStore();
    const lease = memoryRunLease(store);
    await expect(
      lease.runAlone('failing', async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(store.get('job-manager')).toMatchObject({ owner: 'failing', expiresAt: 0 });

    const down = new RunLease({
      store: {
        tryTake: () => Promise.reject(new Error('unreachable')),
        tryRenew: async () => undefined,
        release: async () => false,
      },
      clock: { now: () => Date.now() },
      leaseMs: 55_000,
    });
    const ran: string[] = [];
    await expect(down.runAlone('x', async () => void ran.push('x'))).rejects.toThrow('unreachable');
    expect(ran).toEqual([]);
  });

  it('is as long as the function may run and a margin, so a run stopped at its timeout blocks none after', () => {
    expect(runLeaseMs(50)).toBe(55_000);
    expect(runLeaseMs(50)).toBeLessThan(60_000);
  });
});

describe('the ECS service scaler', () => {
  it('sets the desired count of its one service', async () => {
    const sent: unknown[] = [];
    const scaler = new EcsBrokerService({ cluster: 'switchboard-prod', service: 'brokers' }, {
      send: async (command: { input: unknown }) => void sent.push(command.input),
    } as never);

    await scaler.setDesiredCount(4);

    expect(sent).toEqual([{ cluster: 'switchboard-prod', service: 'brokers', desiredCount: 4 }]);
  });

  it("reads the version to serve from the primary deployment's task definition, once per revision", async () => {
    const sent: string[] = [];
    const primary = { value: 'arn:aws:ecs:ap-northeast-1:1:task-definition/brokers:8' };
    const client = {
      send: async (command: { constructor: { name: string }; input: { taskDefinition?: string } }) => {
        sent.push(command.constructor.name);
        if (command.constructor.name === 'DescribeServicesCommand') {
          return {
            services: [
              {
                deployments: [
                  {
                    status: 'ACTIVE',
                    taskDefinition: 'arn:aws:ecs:ap-northeast-1:1:task-definition/brokers:7',
                  },
                  { status: 'PRIMARY', taskDefinition: primary.value },
                ],
              },
            ],
          };
        }
        const revision = command.input.taskDefinition!.split(':').pop();
        return {
          taskDefinition: {
            containerDefinitions: [
              { name: 'broker', environment: [{ name: 'BROKER_VERSION', value: `image-${revision}` }] },
            ],
          },
        };
      },
    };
    const service = new EcsBrokerService({ cluster: 'c', service: 's' }, client as never);

    expect(await service.primaryVersion()).toBe('image-8');
    expect(await service.primaryVersion()).toBe('image-8');
    primary.value = 'arn:aws:ecs:ap-northeast-1:1:task-definition/brokers:9';
    expect(await service.primaryVersion()).toBe('image-9');
    expect(sent.filter((n) => n === 'DescribeTaskDefinitionCommand')).toHaveLength(2);
  });
});
