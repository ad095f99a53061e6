import { describe, expect, it } from 'vitest';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { turnComes } from '#shared/fleet/ready-hints.ts';
import { MemoryFleetStore } from '../../support/memory-fleet-store.ts';
import { memoryQueue } from '../jobs/fakes.ts';
import { client, job, MINUTE, NOW, task, weekdays } from './fakes.ts';

/** A job manager over a memory store whose clock the test moves; each `run` is a fresh instance when `cold`. */
function setup(options: { maxTaskReadsPerRun?: number; sweepEveryMs?: number } = {}) {
  const store = new MemoryFleetStore();
  let now = NOW;
  const make = () =>
    makeRunJobManager({
      store,
      scaler: { setDesiredCount: async () => {} },
      sweeps: memoryQueue(),
      clock: { now: () => now },
      maxBrokers: 100,
      desiredVersion: () => 'v1',
      ...options,
    });
  let warm = make();
  const run = (at: number, cold = false) => {
    now = at;
    if (cold) warm = make();
    return warm();
  };
  const addClient = (id: string) =>
    store.clients.set(id, { settings: client(id, weekdays('Asia/Tokyo', '09:00', '18:00')), paused: false });
  const reads = () => store.taskReads.length;
  /** A client with one running job of one task (ready a minute ago unless told). */
  const clientWithTask = (id: string, overrides: Parameters<typeof task>[1] = {}) => {
    addClient(id);
    const j = job(id);
    store.putJob(j);
    const t = task(j, overrides);
    store.putTask(t);
    return { j, t };
  };
  return { store, run, addClient, reads, clientWithTask };
}

describe("the job manager's ready hints", () => {
  it('reads a quiet client twice (the second confirms the first), then trusts its hint, cold or warm', async () => {
    const { run, reads, clientWithTask } = setup();
    clientWithTask('acme', { readyAt: NOW + 3 * 3600_000 });

    expect((await run(NOW)).clients).toEqual([]);
    expect((await run(NOW + MINUTE)).clients).toEqual([]);
    expect(reads()).toBe(2);
    for (let i = 2; i < 10; i++) expect((await run(NOW + i * MINUTE, i % 2 === 0)).clients).toEqual([]);
    expect(reads()).toBe(2);
  });

  it('reads hints from the table only on a cold instance, or for a client it has none of; a warm one uses what it wrote', async () => {
    const { store, run, addClient, reads } = setup();
    addClient('acme');
    addClient('bolt');
    const hintReads: string[][] = [];
    const clientStates = store.clientStates.bind(store);
    store.clientStates = (ids, options) => {
      hintReads.push([...(options?.hintsOf ?? ids)].sort());
      return clientStates(ids, options);
    };
    const a = job('acme');
    store.putJob(a);
    store.putTask(task(a, { readyAt: NOW + 3 * 3600_000 }));

    await run(NOW, true);
    await run(NOW + MINUTE);
    expect(hintReads).toEqual([['acme'], []]);
    // A client whose first job starts: its hint is read (it has none yet), then remembered.
    const b = job('bolt');
    store.putJob(b);
    store.putTask(task(b, { readyAt: NOW - MINUTE }));
    expect((await run(NOW + 2 * MINUTE)).clients).toEqual(['bolt']);
    expect((await run(NOW + 3 * MINUTE)).clients).toEqual(['bolt']);
    expect(hintReads.slice(2)).toEqual([['bolt'], []]);
    // A cold instance reads every hint, and trusts what the warm one wrote: no task read more.
    const before = reads();
    expect((await run(NOW + 4 * MINUTE, true)).clients).toEqual(['bolt']);
    expect(hintReads.at(-1)).toEqual(['acme', 'bolt']);
    expect(reads()).toBe(before);
  });

  it('keeps listing a client with ready work from its hint, without reading its tasks', async () => {
    const { run, reads, clientWithTask } = setup();
    clientWithTask('acme');

    await run(NOW);
    await run(NOW + MINUTE);
    const after = reads();
    const result = await run(NOW + 2 * MINUTE, true);
    expect(result.clients).toEqual(['acme']);
    expect(result.read).toBe(0);
    expect(reads()).toBe(after);
  });

  it('reads a client again when an ingest step changes its job, and lists it within the run', async () => {
    const { store, run, clientWithTask } = setup();
    const { j } = clientWithTask('acme', { readyAt: NOW + 3 * 3600_000 });
    await run(NOW);
    await run(NOW + MINUTE);

    // More rows ingested: new tasks ready now, the job's counts and updatedAt moved.
    store.putTask(task(j));
    store.putJob({ ...j, counts: { ...j.counts!, rows: 2, tasks: 2 }, updatedAt: NOW + 90_000 });
    const result = await run(NOW + 2 * MINUTE);
    expect(result.clients).toEqual(['acme']);
    expect(result.read).toBe(1);
  });

  it('reads a client again when its broker releases it, and stops listing it once its ready tasks are gone', async () => {
    const { store, run, clientWithTask } = setup();
    const { t: ready } = clientWithTask('acme');
    await run(NOW);
    expect((await run(NOW + MINUTE)).clients).toEqual(['acme']);

    // A broker takes the client: listed and served while it holds it.
    store.leases.set('acme', { token: 2, expiresAt: NOW + 10 * MINUTE, inFlight: [] });
    const held = await run(NOW + 2 * MINUTE);
    expect(held.served).toEqual(['acme']);
    // It starts the task (out of the index) and releases the client with nothing ready.
    store.putTask({ ...ready, state: 'in-flight' });
    store.leases.set('acme', { token: 2, expiresAt: 0, inFlight: [] });
    expect((await run(NOW + 3 * MINUTE)).clients).toEqual([]);
  });

  it('finds ready work a writer left no mark of within sweepEveryMs', async () => {
    const { store, run, clientWithTask } = setup({ sweepEveryMs: 20 * MINUTE });
    const { t: later } = clientWithTask('acme', { readyAt: NOW + 3 * 3600_000 });
    await run(NOW);
    await run(NOW + MINUTE);

    // A task moved to ready now behind the marks' back (no job change, no lease change).
    store.putTask({ ...later, readyAt: NOW });
    const listedAt: number[] = [];
    for (let i = 2; i <= 22; i++)
      if ((await run(NOW + i * MINUTE)).clients.includes('acme')) listedAt.push(i);
    expect(listedAt.length).toBeGreaterThan(0);
    expect(listedAt[0]).toBeGreaterThanOrEqual(11);
  });

  it('sweeps only hints that say nothing is ready: a ready one stands until a mark changes, and its lease changes are marks', async () => {
    const { store, run, reads, clientWithTask } = setup({ sweepEveryMs: 20 * MINUTE });
    const { t: ready } = clientWithTask('acme');
    await run(NOW);
    const after = reads();
    for (let i = 1; i <= 60; i++)
      expect((await run(NOW + i * MINUTE, i % 7 === 0)).clients).toEqual(['acme']);
    expect(reads()).toBe(after);
    // A broker takes the client, works its task off and releases it: each lease change is a read;
    // the last one finds nothing and the client is no longer listed.
    store.leases.set('acme', { expiresAt: NOW + 62 * MINUTE, inFlight: [], token: 2 });
    expect((await run(NOW + 61 * MINUTE)).clients).toEqual(['acme']);
    expect(reads()).toBe(after + 1);
    store.putTask({ ...ready, state: 'completed' });
    store.leases.set('acme', { expiresAt: NOW + 61 * MINUTE, inFlight: [], token: 2 });
    expect((await run(NOW + 62 * MINUTE)).clients).toEqual([]);
    expect(reads()).toBe(after + 2);
  });

  it('reads at most maxTaskReadsPerRun clients a run and lists the others unread, never dropping one', async () => {
    const { store, run, addClient } = setup({ maxTaskReadsPerRun: 2 });
    for (const id of ['a', 'b', 'c', 'd', 'e']) {
      addClient(id);
      const j = job(id);
      store.putJob(j);
      // Only a, c and e have work now.
      store.putTask(task(j, { readyAt: ['a', 'c', 'e'].includes(id) ? NOW : NOW + 3 * 3600_000 }));
    }
    const first = await run(NOW);
    expect(first.read).toBe(2);
    expect(first.unread).toBe(3);
    // The unread are listed: a broker too many at worst, never a client with work left out.
    expect(first.clients).toEqual(expect.arrayContaining(['a', 'c', 'e']));
    expect(first.clients.length).toBeGreaterThanOrEqual(first.unread);
    let last = first;
    for (let i = 1; i <= 6 && (last.unread > 0 || last.read > 0); i++) last = await run(NOW + i * MINUTE);
    expect(last.clients).toEqual(['a', 'c', 'e']);
  });

  it("gives each job one turn of the full check a period, spread over the period's runs", () => {
    const jobs = Array.from({ length: 1_000 }, (_, i) => `01JOB${String(i).padStart(21, '0')}`);
    const perRun = Array.from({ length: 10 }, (_, run) =>
      jobs.filter((j) => turnComes(j, NOW + run * MINUTE, 10 * MINUTE, MINUTE)),
    );
    expect(perRun.flat().sort()).toEqual([...jobs].sort());
    for (const turns of perRun) expect(turns.length).toBeGreaterThan(60);
  });
});
