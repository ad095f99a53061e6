import { describe, expect, it } from 'vitest';
import {
  canTake,
  heartbeatInterval,
  type Lease,
  LeaseHeldError,
  LeaseKeeper,
  LeaseLostError,
  type LeaseLostReason,
  type LeaseStore,
  passesFence,
  release,
  renew,
  take,
} from '#shared/lease/lease.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { FakeTime } from '../pacing/fake-time.ts';

const LEASE_MS = 30_000;
const client = 'client-7';

describe('lease rules', () => {
  const held: Lease = { clientId: client, owner: 'A', expiresAt: 10_000, token: 4 };

  it('lets anyone take a free or expired lease, and only its holder a live one', () => {
    expect(canTake(undefined, 'A', 0)).toBe(true);
    expect(canTake(held, 'B', 9_999)).toBe(false);
    expect(canTake(held, 'A', 9_999)).toBe(true);
    expect(canTake(held, 'B', 10_000)).toBe(true);
  });

  it('grows the token on every takeover, and keeps it when the holder re-takes its live lease', () => {
    expect(take(undefined, { clientId: client, owner: 'A', now: 0, leaseMs: LEASE_MS })).toEqual({
      clientId: client,
      owner: 'A',
      expiresAt: LEASE_MS,
      token: 1,
    });
    expect(take(held, { clientId: client, owner: 'B', now: 10_000, leaseMs: LEASE_MS }).token).toBe(5);
    expect(take(held, { clientId: client, owner: 'A', now: 10_000, leaseMs: LEASE_MS }).token).toBe(5);
    expect(take(held, { clientId: client, owner: 'A', now: 5_000, leaseMs: LEASE_MS })).toEqual({
      ...held,
      expiresAt: 35_000,
    });
    expect(() => take(held, { clientId: client, owner: 'B', now: 5_000, leaseMs: LEASE_MS })).toThrow(
      LeaseHeldError,
    );
  });

  it('renews only for the holder with its token, before expiry', () => {
    const request = { clientId: client, owner: 'A', token: 4, now: 9_000, leaseMs: LEASE_MS };
    expect(renew(held, request).expiresAt).toBe(39_000);
    expect(() => renew(held, { ...request, now: 10_000 })).toThrow(LeaseLostError);
    expect(() => renew(held, { ...request, owner: 'B' })).toThrow(LeaseLostError);
    expect(() => renew(held, { ...request, token: 3 })).toThrow(LeaseLostError);
    expect(() => renew(undefined, request)).toThrow(LeaseLostError);
  });

  it('releases by expiring at once but keeps the token, so it keeps growing', () => {
    const released = release(held, 'A', 4);
    expect(released).toEqual({ ...held, expiresAt: 0 });
    expect(canTake(released, 'B', 1)).toBe(true);
    expect(take(released, { clientId: client, owner: 'A', now: 1, leaseMs: LEASE_MS }).token).toBe(5);
    expect(release(held, 'B', 4)).toBe(held);
    expect(release(held, 'A', 3)).toBe(held);
  });

  it('fences work to the live holder with the current token', () => {
    expect(passesFence(held, 'A', 4, 9_999)).toBe(true);
    expect(passesFence(held, 'A', 4, 10_000)).toBe(false);
    expect(passesFence(held, 'A', 3, 9_999)).toBe(false);
    expect(passesFence(held, 'B', 4, 9_999)).toBe(false);
  });

  it('heartbeats at most every third of the lease', () => {
    for (const ms of [3, 10, 30_000, 45_001]) expect(heartbeatInterval(ms) * 3).toBeLessThanOrEqual(ms);
    expect(() => heartbeatInterval(0)).toThrow(RangeError);
  });
});

/** A store whose network can fail or hang, in front of the shared memory store. */
class Network implements LeaseStore {
  mode: 'up' | 'down' | 'hang' = 'up';
  renewals = 0;
  readonly #store: MemoryLeaseStore;

  constructor(store: MemoryLeaseStore) {
    this.#store = store;
  }

  #send<T>(operation: () => Promise<T>): Promise<T> {
    if (this.mode === 'down') return Promise.reject(new Error('connection reset'));
    if (this.mode === 'hang') return new Promise<T>(() => {});
    return operation();
  }

  tryTake(request: Parameters<LeaseStore['tryTake']>[0]) {
    return this.#send(() => this.#store.tryTake(request));
  }

  tryRenew(request: Parameters<LeaseStore['tryRenew']>[0]) {
    this.renewals++;
    return this.#send(() => this.#store.tryRenew(request));
  }

  release(request: Parameters<LeaseStore['release']>[0]) {
    return this.#send(() => this.#store.release(request));
  }
}

function keeperFor(owner: string, store: LeaseStore, clock: Clock, timers: Timers): LeaseKeeper {
  return new LeaseKeeper({ clientId: client, owner, leaseMs: LEASE_MS, store, clock, timers });
}

function lossesOf(keeper: LeaseKeeper): LeaseLostReason[] {
  const losses: LeaseLostReason[] = [];
  keeper.onLost((reason) => losses.push(reason));
  return losses;
}

describe('lease keeper', () => {
  it('keeps the lease with heartbeats for as long as the store answers', async () => {
    const time = new FakeTime();
    const store = new MemoryLeaseStore();
    const network = new Network(store);
    const a = keeperFor('A', network, time, time);
    const losses = lossesOf(a);
    expect(await a.acquire()).toBe(true);
    await time.advance(10 * 60_000);
    expect(a.currentToken()).toBe(1);
    expect(losses).toEqual([]);
    expect(network.renewals).toBeGreaterThanOrEqual(60);
    expect(store.get(client)!.expiresAt).toBeGreaterThan(time.now() + LEASE_MS / 2);
    expect(await keeperFor('B', store, time, time).acquire()).toBe(false);
  });

  it('rides out a renewal that fails once', async () => {
    const time = new FakeTime();
    const network = new Network(new MemoryLeaseStore());
    const a = keeperFor('A', network, time, time);
    const losses = lossesOf(a);
    await a.acquire();
    network.mode = 'down';
    await time.advance(heartbeatInterval(LEASE_MS) + 1);
    network.mode = 'up';
    await time.advance(5 * 60_000);
    expect(losses).toEqual([]);
    expect(a.held).toBe(true);
  });

  it('calls itself lost before expiry when renewals go unanswered; B then takes over with a larger token', async () => {
    const time = new FakeTime();
    const store = new MemoryLeaseStore();
    const network = new Network(store);
    const a = keeperFor('A', network, time, time);
    const b = keeperFor('B', store, time, time);
    const losses = lossesOf(a);
    await a.acquire();
    const expiresAt = store.get(client)!.expiresAt;
    network.mode = 'hang';
    await time.advanceTo(expiresAt - LEASE_MS / 10 - 1);
    expect(a.currentToken()).toBe(1);
    expect(await b.acquire()).toBe(false);
    await time.advance(1);
    // Lost at the deadline, while the record still names A: no overlap with B.
    expect(losses).toEqual(['expired']);
    expect(a.currentToken()).toBeUndefined();
    expect(store.fence(client, 'A', 1, time.now())).toBe(true);
    await time.advanceTo(expiresAt);
    expect(await b.acquire()).toBe(true);
    expect(b.currentToken()).toBe(2);
    expect(store.fence(client, 'A', 1, time.now())).toBe(false);
    expect(store.fence(client, 'B', b.currentToken(), time.now())).toBe(true);
    expect(losses).toEqual(['expired']);
  });

  it('is lost at once when its renewal is refused after a takeover (B’s clock runs ahead)', async () => {
    const time = new FakeTime();
    const store = new MemoryLeaseStore();
    const network = new Network(store);
    const a = keeperFor('A', network, time, time);
    const aheadClock: Clock = { now: () => time.now() + 10_000 };
    const b = keeperFor('B', store, aheadClock, time);
    const losses = lossesOf(a);
    await a.acquire();
    await time.advance(heartbeatInterval(LEASE_MS)); // renewed once, till t + 40 s by A's clock
    network.mode = 'down';
    const expiresAt = store.get(client)!.expiresAt;
    await time.advanceTo(expiresAt - 10_000); // B's clock reads the expiry; A's margin has not run out
    expect(a.currentToken()).toBe(1);
    expect(await b.acquire()).toBe(true);
    expect(b.currentToken()).toBe(2);
    network.mode = 'up';
    await time.advance(heartbeatInterval(LEASE_MS) / 3 + 1); // A's next retry reaches the store
    expect(losses).toEqual(['refused']);
    expect(a.currentToken()).toBeUndefined();
    expect(time.now()).toBeLessThan(expiresAt - LEASE_MS / 10);
    expect(store.fence(client, 'A', 1, time.now())).toBe(false);
  });

  it('a paused broker finds its lease lost the moment it looks, even before its timers run', async () => {
    const time = new FakeTime();
    const store = new MemoryLeaseStore();
    let paused = false;
    const held: (() => void)[] = [];
    const pausable: Timers = {
      setTimeout: (callback, ms) => time.setTimeout(() => (paused ? held.push(callback) : callback()), ms),
      clearTimeout: (handle) => time.clearTimeout(handle),
    };
    const a = keeperFor('A', store, time, pausable);
    const losses = lossesOf(a);
    await a.acquire();
    paused = true;
    await time.advance(2 * LEASE_MS);
    expect(await keeperFor('B', store, time, time).acquire()).toBe(true);
    expect(losses).toEqual([]); // A has not run a line of code yet
    expect(a.currentToken()).toBeUndefined();
    expect(losses).toEqual(['expired']);
    paused = false;
    for (const callback of held) callback();
    await time.settle();
    expect(losses).toEqual(['expired']);
    expect(store.get(client)).toMatchObject({ owner: 'B', token: 2 });
  });

  it('releases on request so the next broker takes over at once', async () => {
    const time = new FakeTime();
    const store = new MemoryLeaseStore();
    const a = keeperFor('A', store, time, time);
    const losses = lossesOf(a);
    await a.acquire();
    await a.release();
    expect(losses).toEqual(['released']);
    expect(a.currentToken()).toBeUndefined();
    expect(store.get(client)).toMatchObject({ owner: 'A', token: 1, expiresAt: 0 });
    const b = keeperFor('B', store, time, time);
    expect(await b.acquire()).toBe(true);
    expect(b.currentToken()).toBe(2);
    expect(time.pendingTimers).toBe(2); // B's heartbeat and deadline; A's are gone
  });

  it('a release that cannot reach the store is logged, not thrown', async () => {
    const time = new FakeTime();
    const network = new Network(new MemoryLeaseStore());
    const warnings: string[] = [];
    const a = new LeaseKeeper({
      clientId: client,
      owner: 'A',
      leaseMs: LEASE_MS,
      store: network,
      clock: time,
      timers: time,
      logger: { warn: (message) => warnings.push(message) },
    });
    await a.acquire();
    network.mode = 'down';
    await expect(a.release()).resolves.toBeUndefined();
    expect(warnings).toEqual([expect.stringContaining('release failed')]);
  });

  it('waits at most releaseWaitMs for a release the store does not answer, then leaves the lease to expire', async () => {
    const time = new FakeTime();
    const network = new Network(new MemoryLeaseStore());
    const warnings: string[] = [];
    const a = new LeaseKeeper({
      clientId: client,
      owner: 'A',
      leaseMs: LEASE_MS,
      releaseWaitMs: 5_000,
      store: network,
      clock: time,
      timers: time,
      logger: { warn: (message) => warnings.push(message) },
    });
    await a.acquire();
    network.mode = 'hang';
    let released = false;
    void a.release().then(() => {
      released = true;
    });
    await time.advance(4_999);
    expect(released).toBe(false);
    expect(a.currentToken()).toBeUndefined();
    await time.advance(1);
    expect(released).toBe(true);
    expect(warnings).toEqual([expect.stringContaining('not answered in time')]);
    expect(time.pendingTimers).toBe(0);
  });

  it('reports a store that does not answer a take, and stays idle', async () => {
    const time = new FakeTime();
    const network = new Network(new MemoryLeaseStore());
    network.mode = 'down';
    const a = keeperFor('A', network, time, time);
    await expect(a.acquire()).rejects.toThrow('connection reset');
    expect(a.currentToken()).toBeUndefined();
    expect(time.pendingTimers).toBe(0);
  });

  it('refuses a safety margin that leaves no time to renew', () => {
    const time = new FakeTime();
    const store = new MemoryLeaseStore();
    expect(
      () =>
        new LeaseKeeper({
          clientId: client,
          owner: 'A',
          leaseMs: 30_000,
          marginMs: 20_000,
          store,
          clock: time,
          timers: time,
        }),
    ).toThrow(RangeError);
  });
});
