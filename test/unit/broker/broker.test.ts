import { describe, expect, it } from 'vitest';
import { Broker, type BrokerSettings } from '#shared/broker/broker.ts';
import { DEFAULT_SERVE_SETTINGS } from '#shared/broker/serve-client.ts';
import { MemoryLeaseStore } from '#shared/lease/memory-lease-store.ts';
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
    provider,
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
});
