import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PROTECTION_POLICY,
  nextProtectionAction,
  type ProtectionState,
  TaskProtectionKeeper,
  type TaskProtectionPort,
} from '#shared/broker/task-protection.ts';
import { FakeTime } from '../pacing/fake-time.ts';

const MINUTE = 60_000;

/** The ECS agent's protection endpoint as the keeper sees it: records requests, can fail or lag. */
class Agent implements TaskProtectionPort {
  readonly requests: { at: number; enabled: boolean; expiresInMinutes?: number }[] = [];
  failures = 0;
  lagMs = 0;
  throwSync = false;
  readonly #time: FakeTime;

  constructor(time: FakeTime) {
    this.#time = time;
  }

  set(enabled: boolean, expiresInMinutes?: number): Promise<void> {
    if (this.throwSync) {
      this.throwSync = false;
      throw new Error('agent URI not set');
    }
    this.requests.push({ at: this.#time.now(), enabled, ...(expiresInMinutes ? { expiresInMinutes } : {}) });
    if (this.failures > 0) {
      this.failures--;
      return Promise.reject(new Error('503 from agent'));
    }
    if (this.lagMs === 0) return Promise.resolve();
    return new Promise((resolve) => this.#time.setTimeout(resolve, this.lagMs));
  }
}

function setup(policy: Partial<typeof DEFAULT_PROTECTION_POLICY> = {}) {
  const time = new FakeTime();
  const agent = new Agent(time);
  const warnings: string[] = [];
  const keeper = new TaskProtectionKeeper({
    port: agent,
    clock: time,
    timers: time,
    logger: { warn: (message) => warnings.push(message) },
    policy,
  });
  return { time, agent, warnings, keeper, t0: time.now() };
}

describe('task protection policy', () => {
  const policy = DEFAULT_PROTECTION_POLICY;
  const off: ProtectionState = { inFlight: 0, idleSince: undefined, applied: { enabled: false } };

  it('asks for protection when a call is in flight and renews it on schedule', () => {
    expect(nextProtectionAction({ ...off, inFlight: 1 }, 0, policy)).toEqual({
      kind: 'enable',
      expiresInMinutes: 10,
    });
    const on: ProtectionState = {
      inFlight: 3,
      idleSince: undefined,
      applied: { enabled: true, requestedAt: 0 },
    };
    expect(nextProtectionAction(on, 2 * MINUTE, policy)).toEqual({ kind: 'none', recheckAt: 3 * MINUTE });
    expect(nextProtectionAction(on, 3 * MINUTE, policy).kind).toBe('enable');
  });

  it('drops protection when nothing is in flight, unless it has lapsed already', () => {
    const idle: ProtectionState = {
      inFlight: 0,
      idleSince: MINUTE,
      applied: { enabled: true, requestedAt: 0 },
    };
    expect(nextProtectionAction(idle, MINUTE, policy)).toEqual({ kind: 'disable' });
    expect(nextProtectionAction(idle, 10 * MINUTE, policy)).toEqual({ kind: 'none', recheckAt: undefined });
    expect(nextProtectionAction(off, 0, policy)).toEqual({ kind: 'none', recheckAt: undefined });
    expect(nextProtectionAction(idle, MINUTE, { ...policy, offDelayMs: 5000 })).toEqual({
      kind: 'none',
      recheckAt: MINUTE + 5000,
    });
  });
});

describe('task protection keeper', () => {
  it('is on while calls are in flight, renewed every 3 minutes, and off when the last ends', async () => {
    const { time, agent, keeper, t0 } = setup();
    keeper.update(1);
    keeper.update(2);
    await time.settle();
    expect(keeper.protected).toBe(true);
    await time.advance(7 * MINUTE);
    keeper.update(0);
    await time.settle();
    expect(agent.requests).toEqual([
      { at: t0, enabled: true, expiresInMinutes: 10 },
      { at: t0 + 3 * MINUTE, enabled: true, expiresInMinutes: 10 },
      { at: t0 + 6 * MINUTE, enabled: true, expiresInMinutes: 10 },
      { at: t0 + 7 * MINUTE, enabled: false },
    ]);
    expect(keeper.protected).toBe(false);
    await time.advance(30 * MINUTE);
    expect(agent.requests).toHaveLength(4);
    expect(time.pendingTimers).toBe(0);
  });

  it('retries a failing agent with backoff, logs it, and never throws to the broker', async () => {
    const { time, agent, keeper, warnings, t0 } = setup();
    agent.failures = 2;
    expect(() => keeper.update(1)).not.toThrow();
    await time.advance(10_000);
    expect(agent.requests.map((r) => r.at - t0)).toEqual([0, 1000, 3000]);
    expect(warnings).toHaveLength(2);
    expect(keeper.protected).toBe(true);
  });

  it('survives a port that throws instead of rejecting', async () => {
    const { time, agent, keeper, warnings } = setup();
    agent.throwSync = true;
    keeper.update(1);
    await time.advance(2000);
    expect(warnings).toHaveLength(1);
    expect(keeper.protected).toBe(true);
  });

  it('sends one request at a time and ends where the calls ended', async () => {
    const { time, agent, keeper } = setup();
    agent.lagMs = 500;
    keeper.update(1);
    keeper.update(0);
    keeper.update(1);
    keeper.update(0);
    await time.advance(2000);
    expect(agent.requests.map((r) => r.enabled)).toEqual([true, false]);
    expect(keeper.protected).toBe(false);
  });

  it('with an off delay, a call starting soon after the last one keeps protection without a flip', async () => {
    const { time, agent, keeper, t0 } = setup({ offDelayMs: 5000 });
    keeper.update(1);
    keeper.update(0);
    await time.advance(2000);
    keeper.update(1);
    keeper.update(0);
    await time.advance(4000);
    expect(agent.requests.map((r) => r.enabled)).toEqual([true]);
    await time.advance(1000);
    expect(agent.requests.map((r) => [r.at - t0, r.enabled])).toEqual([
      [0, true],
      [7000, false],
    ]);
  });

  it('release turns protection off now and stops; later updates change nothing', async () => {
    const { time, agent, keeper } = setup({ offDelayMs: 60_000 });
    keeper.update(1);
    await time.settle();
    await keeper.release();
    keeper.update(3);
    await time.advance(10 * MINUTE);
    expect(agent.requests.map((r) => r.enabled)).toEqual([true, false]);
    expect(time.pendingTimers).toBe(0);
  });

  it('release gives up after three failed tries without throwing', async () => {
    const { time, agent, keeper, warnings } = setup();
    keeper.update(1);
    await time.settle();
    agent.failures = 100;
    let released = false;
    void keeper.release().then(() => {
      released = true;
    });
    await time.advance(10_000);
    expect(released).toBe(true);
    expect(agent.requests.filter((r) => !r.enabled)).toHaveLength(3);
    expect(warnings).toHaveLength(3);
  });

  it('refuses a policy ECS would not accept', () => {
    const time = new FakeTime();
    const base = { port: new Agent(time), clock: time, timers: time, logger: { warn: () => {} } };
    expect(() => new TaskProtectionKeeper({ ...base, policy: { expiresInMinutes: 0 } })).toThrow(RangeError);
    expect(() => new TaskProtectionKeeper({ ...base, policy: { expiresInMinutes: 2881 } })).toThrow(
      RangeError,
    );
    expect(() => new TaskProtectionKeeper({ ...base, policy: { renewEveryMs: 10 * MINUTE } })).toThrow(
      RangeError,
    );
  });
});
