import { describe, expect, it } from 'vitest';
import { Broker, type BrokerSettings } from '#shared/broker/broker.ts';
import { DEFAULT_SERVE_SETTINGS } from '#shared/broker/serve-settings.ts';
import {
  fleetWorkItem,
  mergeFleetWork,
  parseFleetWork,
  parseFleetWorkShard,
  splitFleetWork,
} from '#shared/fleet/work-list.ts';
import type { Lease } from '#shared/lease/lease.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { oneProvider } from '#shared/telephony/port.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { FakeTime } from '../pacing/fake-time.ts';
import {
  clientSettings,
  FakeProvider,
  job,
  MemoryFleet,
  MemoryTaskStore,
  silentLog,
  statusRoute,
  T0,
  tasksFor,
} from './fakes.ts';

function setup(input: { callMs?: number; settings?: Partial<BrokerSettings> } = {}) {
  const time = new FakeTime(T0);
  const leases = new MemoryLeaseStore();
  const store = new MemoryTaskStore(leases, time);
  for (const clientId of ['c1', 'c2']) {
    const j = job({ clientId, jobId: `01JOB${clientId.toUpperCase()}00000000000000000000`.slice(0, 26) });
    store.add(clientSettings({ clientId, maxConcurrentCalls: 2, callsPerSecond: 1 }), j, tasksFor(j, 6));
  }
  const provider = new FakeProvider(time);
  const fleet = new MemoryFleet(['c1', 'c2']);
  const protection = { states: [] as number[], released: 0 };
  const broker = new Broker({
    leases,
    tasks: store,
    providers: oneProvider(provider),
    fleet,
    protection: {
      update: (n) => protection.states.push(n),
      release: async () => {
        protection.released += 1;
      },
    },
    clock: time,
    timers: time,
    logger: silentLog,
    order: (clients) => [...clients],
    settings: {
      ...DEFAULT_SERVE_SETTINGS,
      callbackUrl: 'https://api.example/providers/acme/calls/status',
      brokerId: 'broker-1',
      version: 'v1',
      leaseMs: 30_000,
      idleWaitMs: 2_000,
      stopGraceMs: 100_000,
      noWorkBackoffMs: 30_000,
      ...input.settings,
    },
  });
  const route = statusRoute({ store, clock: time, nudge: (ended) => broker.callEnded(ended) });
  if (input.callMs !== undefined) {
    const ms = input.callMs;
    provider.onPlaced = (call) =>
      time.setTimeout(() => void route(call, provider.end(call.callId, 'completed') as never), ms);
  }
  let done = false;
  const run = () => {
    void broker.run().then(() => {
      done = true;
    });
    return () => done;
  };
  return { time, leases, store, provider, fleet, protection, broker, run };
}

describe('the broker', () => {
  it('serves one client until it has no work, releases it, then claims the next', async () => {
    const s = setup({ callMs: 3_000 });
    s.run();
    await s.time.runUntil(() => s.store.all().every((t) => t.state === 'completed'));
    const byClient = (c: string) =>
      [...s.provider.calls.values()]
        .filter((call) => call.request.clientId === c)
        .map((call) => call.startedAt);
    // One client at a time: every c2 call starts after the last c1 call.
    expect(Math.min(...byClient('c2'))).toBeGreaterThan(Math.max(...byClient('c1')));
    await s.time.advance(1_000);
    expect(s.leases.get('c1')!.expiresAt).toBe(0);
    expect(s.leases.get('c2')!.expiresAt).toBe(0);
    // Protection followed the calls in flight and ended off.
    expect(Math.max(...s.protection.states)).toBe(2);
    expect(s.protection.states.at(-1)).toBe(0);
    s.broker.stop('sigterm');
    await s.time.advance(3_000);
  });

  it('waits idle and unprotected when there is nothing to claim', async () => {
    const s = setup();
    s.fleet.work = { ...s.fleet.work!, clients: [] };
    const done = s.run();
    await s.time.advance(60_000);
    expect(s.provider.calls.size).toBe(0);
    expect(s.protection.states).toEqual([]);
    s.broker.stop('sigterm');
    await s.time.runUntil(done);
    expect(s.protection.released).toBe(1);
  });

  it('does not claim a client another broker holds', async () => {
    const s = setup({ callMs: 1_000 });
    await s.leases.tryTake({ clientId: 'c1', owner: 'broker-2', now: T0, leaseMs: 600_000 });
    s.run();
    await s.time.advance(20_000);
    expect(new Set([...s.provider.calls.values()].map((c) => c.request.clientId))).toEqual(new Set(['c2']));
    s.broker.stop('sigterm');
    await s.time.advance(5_000);
  });

  it('drains when the work list names another version: no new call, in-flight calls end, lease released, run ends', async () => {
    const s = setup({ callMs: 20_000 });
    const done = s.run();
    await s.time.advance(1_500);
    expect(s.provider.calls.size).toBe(2);
    s.fleet.work = { ...s.fleet.work!, desiredVersion: 'v2' };
    await s.time.runUntil(done);
    expect(s.broker.stopReason).toBe('drain');
    expect(s.provider.calls.size).toBe(2);
    expect(s.provider.inFlight).toBe(0);
    expect(s.store.all().filter((t) => t.state === 'completed')).toHaveLength(2);
    expect(s.leases.get('c1')!.expiresAt).toBe(0);
    expect(s.protection.released).toBe(1);
  });

  it('on SIGTERM waits for calls in flight at most the grace period, then releases the lease and ends', async () => {
    const s = setup({ settings: { stopGraceMs: 100_000 } }); // calls never end by themselves
    const done = s.run();
    await s.time.advance(1_500);
    expect(s.provider.calls.size).toBe(2);
    const stoppedAt = s.time.now();
    s.broker.stop('sigterm');
    await s.time.runUntil(done);
    expect(s.time.now() - stoppedAt).toBeLessThanOrEqual(100_000);
    expect(s.provider.calls.size).toBe(2);
    expect(s.leases.get('c1')!.expiresAt).toBe(0);
    // The calls stay recorded in flight for the next holder to adopt.
    expect((await s.store.inFlight('c1')).length).toBe(2);
  });

  it('a SIGTERM that comes while the lease is being taken: no call starts, the lease is given back at once', async () => {
    const s = setup({ callMs: 1_000 });
    const tryTake = s.leases.tryTake.bind(s.leases);
    let answer: (() => void) | undefined;
    s.leases.tryTake = async (request) => {
      await new Promise<void>((resolve) => {
        answer = resolve;
      });
      return tryTake(request);
    };
    const done = s.run();
    await s.time.settle();
    expect(answer).toBeDefined(); // c1's lease is being taken
    const stoppedAt = s.time.now();
    s.broker.stop('sigterm');
    answer!();
    await s.time.runUntil(done);
    expect(s.provider.calls.size).toBe(0);
    expect(s.store.all().every((t) => t.state === 'pending')).toBe(true);
    expect(s.leases.get('c1')).toMatchObject({ owner: 'broker-1', expiresAt: 0 });
    expect(s.leases.get('c2')).toBeUndefined();
    expect(s.time.now()).toBe(stoppedAt);
    expect(s.protection.released).toBe(1);
  });
});

describe('a client listed for the calls a dead broker left in flight', () => {
  /**
   * c1 (paused by its operator) had two calls started under `dead`'s lease, which then ran out:
   * one call placed and ended at the provider with its callback lost, one never confirmed (its
   * broker died before the provider answered). Four tasks are still pending.
   */
  async function orphaned() {
    const s = setup();
    s.fleet.work = fleetWorkItem({ clients: [], orphaned: ['c1'], desiredVersion: 'v1', updatedAt: T0 });
    const dead = (await s.leases.tryTake({
      clientId: 'c1',
      owner: 'dead',
      now: T0,
      leaseMs: 30_000,
    })) as Lease;
    const [placed, unconfirmed] = s.store.all().filter((t) => t.clientId === 'c1');
    const fence = { clientId: 'c1', owner: 'dead', token: dead.token, now: T0 };
    for (const t of [placed!, unconfirmed!]) expect((await s.store.start(t, fence)).kind).toBe('started');
    const call = await s.provider.initiate(
      {
        to: placed!.recipient,
        clientId: 'c1',
        jobId: placed!.jobId,
        taskId: placed!.taskId,
        attempt: 1,
        callbackUrl: 'https://api.example/providers/acme/calls/status',
        maxDurationSeconds: 120,
        variables: {},
      },
      attemptKey(placed!.jobId, placed!.taskId, 1),
    );
    if (call.kind !== 'accepted') throw new Error('not placed');
    await s.store.recordCallId(placed!, 1, call.callId, T0);
    s.provider.end(call.callId, 'completed'); // its callback is lost
    await s.time.advance(31_000); // the dead broker's lease runs out
    return { ...s, placed: placed!, unconfirmed: unconfirmed!, token: dead.token };
  }

  it('is taken only to settle those calls: nothing new starts, the unconfirmed call is not placed, then released', async () => {
    const s = await orphaned();
    s.run();
    await s.time.runUntil(() =>
      [s.placed, s.unconfirmed].every(
        (t) => s.store.tasks.get(`${t.jobId}/${t.taskId}`)?.state !== 'in-flight',
      ),
    );
    expect(s.store.tasks.get(`${s.placed.jobId}/${s.placed.taskId}`)).toMatchObject({
      state: 'completed',
      lastResult: 'completed',
    });
    expect(s.store.tasks.get(`${s.unconfirmed.jobId}/${s.unconfirmed.taskId}`)).toMatchObject({
      state: 'failed',
      reason: expect.stringContaining('never confirmed'),
    });
    await s.time.advance(1_000);
    // Only the dead broker's one call ever reached the provider; the pending tasks stay pending.
    expect(s.provider.calls.size).toBe(1);
    expect(s.store.all().filter((t) => t.state === 'pending')).toHaveLength(10);
    expect(await s.store.inFlight('c1')).toEqual([]);
    const released = s.leases.get('c1')!;
    expect(released).toMatchObject({ owner: 'broker-1', token: s.token + 1, expiresAt: 0 });
    // Protection covered the adopted calls and is off again.
    expect(Math.max(...s.protection.states)).toBe(2);
    expect(s.protection.states.at(-1)).toBe(0);
    // The work list is a minute old: the client is not taken again at every idle turn.
    await s.time.advance(20_000);
    expect(s.leases.get('c1')!.token).toBe(released.token);
    s.broker.stop('sigterm');
  });

  it('a client listed with work now is served as usual, adopting the calls first', async () => {
    const s = await orphaned();
    s.fleet.work = fleetWorkItem({ clients: ['c1'], orphaned: ['c1'], desiredVersion: 'v1', updatedAt: T0 });
    s.provider.onPlaced = (call) =>
      s.time.setTimeout(() => void s.provider.end(call.callId, 'completed'), 1_000);
    s.run();
    await s.time.runUntil(() =>
      s.store
        .all()
        .filter((t) => t.clientId === 'c1')
        .every((t) => t.state === 'completed'),
    );
    // The unconfirmed call was placed with its own key (no second ring), and the four pending started.
    expect(s.provider.calls.size).toBe(6);
    expect(s.provider.repeatedRings()).toEqual([]);
    s.broker.stop('sigterm');
    await s.time.advance(200_000);
    expect(s.leases.get('c1')!.expiresAt).toBe(0);
  });
});

describe('the broker and a list of served clients', () => {
  it('tries the clients no live broker held first', async () => {
    const s = setup({ callMs: 3_000 });
    s.fleet.work = fleetWorkItem({
      clients: ['c1', 'c2'],
      served: ['c1'],
      desiredVersion: 'v1',
      updatedAt: T0,
    });
    s.run();
    await s.time.advance(1_000);
    expect(s.leases.get('c2')?.owner).toBe('broker-1');
    expect(s.leases.get('c1')).toBeUndefined();
  });
});

describe('the work list', () => {
  it('stays one item while short, and splits into shards of bounded size when long, losing no client', () => {
    const short = fleetWorkItem({ clients: ['a', 'b'], desiredVersion: 'v1', updatedAt: T0 });
    expect(splitFleetWork(short)).toEqual({ head: short, shards: [] });

    const clients = Array.from({ length: 10_001 }, (_, i) => `cl${String(i).padStart(24, '0')}`);
    const long = fleetWorkItem({
      clients,
      orphaned: ['zz-orphan'],
      served: clients.slice(0, 5_000),
      desiredVersion: 'v2',
      updatedAt: T0,
    });
    const { head, shards } = splitFleetWork(long, 3_000);
    expect(head.clients).toEqual([]);
    expect(head.shards).toBe(4);
    expect(shards.map((shard) => shard.sk)).toEqual(['WORK#0', 'WORK#1', 'WORK#2', 'WORK#3']);
    for (const shard of shards) {
      expect(shard.clients.length).toBeLessThan(3_300);
      expect(Buffer.byteLength(JSON.stringify(shard))).toBeLessThan(200 * 1024);
    }
    const stored = parseFleetWork({ ...head })!;
    const merged = mergeFleetWork(
      stored,
      shards.map((shard) => parseFleetWorkShard({ ...shard })),
    );
    expect([...merged.clients].sort()).toEqual(clients);
    expect(merged.orphaned).toEqual(['zz-orphan']);
    expect([...(merged.served ?? [])].sort()).toEqual(clients.slice(0, 5_000));
    expect(merged.desiredVersion).toBe('v2');
  });

  it('carries the orphaned clients when there are some, and reads a list written without them as none', () => {
    const item = fleetWorkItem({ clients: ['a'], orphaned: ['b'], desiredVersion: 'v1', updatedAt: T0 });
    expect(parseFleetWork({ ...item })).toEqual(item);
    const older = fleetWorkItem({ clients: ['a'], desiredVersion: 'v1', updatedAt: T0 });
    expect(older).not.toHaveProperty('orphaned');
    expect(parseFleetWork({ ...older })?.orphaned).toBeUndefined();
    expect(parseFleetWork({ ...older, orphaned: ['b', 7] })?.orphaned).toEqual(['b']);
  });
});
