import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CallingHours, InvalidCallingHoursError, isOpen } from '#shared/pacing/calling-hours.ts';
import { InvalidContractError, Pacer, type PacingContract, PacingGate } from '#shared/pacing/pacer.ts';
import { FakeTime } from './fake-time.ts';

const at = (iso: string): number => Date.parse(iso);
const MINUTE = 60_000;

const tokyoOffice: CallingHours = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri'].map((d) => [d, [{ start: '09:00', end: '18:00' }]]),
  ),
};

describe('pacing decision', () => {
  it('starts while under the limit and the rate allows, then says what it waits for', () => {
    const pacer = new Pacer({ maxConcurrentCalls: 2, callsPerSecond: 1 });
    expect(pacer.decide(0, 0)).toEqual({ kind: 'start' });
    expect(pacer.decide(10, 1)).toEqual({ kind: 'wait', until: 1000, reason: 'rate' });
    expect(pacer.decide(1000, 1)).toEqual({ kind: 'start' });
    expect(pacer.decide(5000, 2)).toEqual({ kind: 'wait', until: Number.POSITIVE_INFINITY, reason: 'limit' });
  });

  it('does not spend the rate while waiting on the limit', () => {
    const pacer = new Pacer({ maxConcurrentCalls: 1, callsPerSecond: 1 });
    expect(pacer.decide(0, 0).kind).toBe('start');
    expect(pacer.decide(5000, 1).kind).toBe('wait');
    expect(pacer.decide(5000, 0)).toEqual({ kind: 'start' });
  });

  it('waits for the calling hours to open, or forever if they never do', () => {
    const pacer = new Pacer({ maxConcurrentCalls: 6, callsPerSecond: 1, callingHours: tokyoOffice });
    // Saturday noon in Tokyo; the hours next open Monday 09:00 JST.
    expect(pacer.decide(at('2025-06-07T03:00:00Z'), 6)).toEqual({
      kind: 'wait',
      until: at('2025-06-09T00:00:00Z'),
      reason: 'closed',
    });
    const never = new Pacer({
      maxConcurrentCalls: 6,
      callsPerSecond: 1,
      callingHours: { timeZone: 'UTC', weekly: {} },
    });
    expect(never.decide(0, 0)).toEqual({ kind: 'wait', until: Number.POSITIVE_INFINITY, reason: 'closed' });
  });

  it('rejects a contract without a positive limit and rate, or with bad hours', () => {
    expect(() => new Pacer({ maxConcurrentCalls: 0, callsPerSecond: 1 })).toThrow(InvalidContractError);
    expect(() => new Pacer({ maxConcurrentCalls: 1.5, callsPerSecond: 1 })).toThrow(InvalidContractError);
    expect(() => new Pacer({ maxConcurrentCalls: 1, callsPerSecond: 0 })).toThrow(InvalidContractError);
    const badHours = { timeZone: 'Asia/Tokio', weekly: {} };
    expect(() => new Pacer({ maxConcurrentCalls: 1, callsPerSecond: 1, callingHours: badHours })).toThrow(
      InvalidCallingHoursError,
    );
  });
});

function gateFor(
  contract: PacingContract,
  time: FakeTime,
  onInFlightChange?: (n: number) => void,
): PacingGate {
  return new PacingGate({ pacer: new Pacer(contract), clock: time, timers: time, onInFlightChange });
}

describe('pacing gate', () => {
  it('starts the next call the moment a call ends, with no timer armed while it waits', async () => {
    const time = new FakeTime();
    const gate = gateFor({ maxConcurrentCalls: 1, callsPerSecond: 1 }, time);
    const first = await gate.acquire();
    let second = false;
    void gate.acquire().then(() => {
      second = true;
    });
    await time.advance(60_000);
    expect(second).toBe(false);
    expect(time.pendingTimers).toBe(0); // waiting on the limit: an event, not a poll
    first.release();
    await time.settle();
    expect(second).toBe(true);
    expect(gate.inFlight).toBe(1);
  });

  it('holds back a start until the line’s rate allows, then starts on time', async () => {
    const time = new FakeTime();
    const gate = gateFor({ maxConcurrentCalls: 5, callsPerSecond: 0.5 }, time);
    const t0 = time.now();
    const startedAt: number[] = [];
    for (let i = 0; i < 3; i++) void gate.acquire().then(() => startedAt.push(time.now()));
    await time.runUntil(() => startedAt.length === 3);
    expect(startedAt.map((t) => t - t0)).toEqual([0, 2000, 4000]);
    expect(gate.waitingFor).toBeUndefined();
  });

  it('starts at the opening of the calling hours, not before', async () => {
    const time = new FakeTime(at('2025-06-06T08:59:58Z')); // Fri 17:59:58 JST
    const gate = gateFor({ maxConcurrentCalls: 6, callsPerSecond: 1, callingHours: tokyoOffice }, time);
    const startedAt: number[] = [];
    for (let i = 0; i < 3; i++) void gate.acquire().then(() => startedAt.push(time.now()));
    await time.runUntil(() => startedAt.length === 3);
    expect(startedAt).toEqual([
      at('2025-06-06T08:59:58Z'),
      at('2025-06-06T08:59:59Z'),
      at('2025-06-09T00:00:00Z'),
    ]);
  });

  it('gives up a wait when its signal aborts, and serves the others', async () => {
    const time = new FakeTime();
    const gate = gateFor({ maxConcurrentCalls: 1, callsPerSecond: 10 }, time);
    const first = await gate.acquire();
    const stop = new AbortController();
    const abandoned = gate.acquire(stop.signal);
    const next = gate.acquire();
    stop.abort(new Error('lease lost'));
    await expect(abandoned).rejects.toThrow('lease lost');
    first.release();
    await time.advance(100); // the 10/s line's next token
    await expect(next).resolves.toBeDefined();
    await expect(gate.acquire(stop.signal)).rejects.toThrow('lease lost');
  });

  it('counts adopted calls against the limit and reports every change in flight', async () => {
    const time = new FakeTime();
    const seen: number[] = [];
    const gate = gateFor({ maxConcurrentCalls: 2, callsPerSecond: 100 }, time, (n) => seen.push(n));
    const adopted = [gate.adopt(), gate.adopt()];
    let started = false;
    void gate.acquire().then(() => {
      started = true;
    });
    await time.advance(10_000);
    expect(started).toBe(false);
    expect(gate.waitingFor?.reason).toBe('limit');
    adopted[0]!.release();
    adopted[0]!.release(); // twice is once
    await time.settle();
    expect(started).toBe(true);
    expect(seen).toEqual([1, 2, 1, 2]);
  });

  it('resolves idle() when the last call ends, for a draining broker', async () => {
    const time = new FakeTime();
    const gate = gateFor({ maxConcurrentCalls: 3, callsPerSecond: 100 }, time);
    await expect(gate.idle()).resolves.toBeUndefined();
    const a = await gate.acquire();
    await time.advance(10);
    const b = await gate.acquire();
    let idle = false;
    void gate.idle().then(() => {
      idle = true;
    });
    a.release();
    await time.settle();
    expect(idle).toBe(false);
    b.release();
    await time.settle();
    expect(idle).toBe(true);
  });
});

interface SimulationResult {
  starts: number[];
  ends: number[];
  makespan: number;
  maxInFlight: number;
}

/** A broker that always has work: it starts `durations.length` calls as fast as the gate allows. */
async function simulate(contract: PacingContract, durations: readonly number[], time: FakeTime) {
  const t0 = time.now();
  let inFlight = 0;
  let maxInFlight = 0;
  const gate = gateFor(contract, time, (n) => {
    inFlight = n;
    maxInFlight = Math.max(maxInFlight, inFlight);
  });
  const starts: number[] = [];
  const ends: number[] = [];
  let done = false;
  const broker = (async () => {
    for (const duration of durations) {
      const slot = await gate.acquire();
      starts.push(time.now());
      time.setTimeout(() => {
        ends.push(time.now());
        slot.release();
      }, duration);
    }
    await gate.idle();
    done = true;
  })();
  await time.runUntil(() => done, 60 * 86_400_000);
  await broker;
  return { starts, ends, makespan: Math.max(...ends) - t0, maxInFlight } satisfies SimulationResult;
}

function maxStartsInAnySecond(starts: readonly number[]): number {
  let best = 0;
  let from = 0;
  for (let to = 0; to < starts.length; to++) {
    while (starts[to]! - starts[from]! >= 1000) from++;
    best = Math.max(best, to - from + 1);
  }
  return best;
}

/**
 * Each start happened no earlier than the limits allowed (a slot free: the (i - limit)-th call
 * had ended; the rate: the interval since the last start) and at most `reactMs` later.
 */
function expectPromptStarts(result: SimulationResult, contract: PacingContract, reactMs = 250): void {
  const sortedEnds = [...result.ends].sort((a, b) => a - b);
  const interval = 1000 / contract.callsPerSecond;
  result.starts.forEach((start, i) => {
    if (i === 0) return;
    const slotFree = i >= contract.maxConcurrentCalls ? sortedEnds[i - contract.maxConcurrentCalls]! : 0;
    const ready = Math.max(slotFree, result.starts[i - 1]! + interval);
    expect(start).toBeGreaterThanOrEqual(Math.floor(ready));
    expect(start - ready).toBeLessThanOrEqual(reactMs);
  });
}

/** A small seeded generator, so the mixed-durations run is the same every time. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('pacing simulation (simulated clock)', () => {
  const contract: PacingContract = { maxConcurrentCalls: 6, callsPerSecond: 1 };

  it('600 one-minute calls, 6 at a time, 1 a second: done in about 100 minutes, no limit broken', async () => {
    const result = await simulate(contract, Array(600).fill(MINUTE), new FakeTime());
    const bound = Math.max(Math.ceil(600 / 6) * MINUTE, (600 / 1) * 1000);
    expect(bound).toBe(100 * MINUTE);
    expect(result.makespan).toBeGreaterThanOrEqual(bound);
    expect(result.makespan).toBeLessThanOrEqual(bound * 1.02);
    expect(result.maxInFlight).toBe(6);
    expect(maxStartsInAnySecond(result.starts)).toBe(1);
    expectPromptStarts(result, contract);
  });

  it('mixed durations finish within 2% of the physical bound', async () => {
    const random = seeded(42);
    const durations = Array.from({ length: 600 }, () => Math.round(30_000 + random() * 60_000));
    const result = await simulate(contract, durations, new FakeTime());
    const total = durations.reduce((a, b) => a + b, 0);
    const bound = Math.max(total / 6, 600 * 1000, Math.max(...durations));
    expect(result.makespan).toBeLessThanOrEqual(bound * 1.02);
    expect(result.maxInFlight).toBe(6);
    expect(maxStartsInAnySecond(result.starts)).toBe(1);
    expectPromptStarts(result, contract);
  });

  it('short calls are held to the line’s rate, not the limit', async () => {
    const result = await simulate(contract, Array(120).fill(2000), new FakeTime());
    // 120 starts at 1 a second: the last starts at 119 s and ends 2 s later.
    expect(result.makespan).toBe(121_000);
    expect(result.maxInFlight).toBeLessThanOrEqual(3);
  });

  it('stops starting at the close of calling hours and resumes at the next opening', async () => {
    const office = { ...contract, callingHours: tokyoOffice };
    const time = new FakeTime(at('2025-06-06T08:50:00Z')); // Fri 17:50 JST
    const result = await simulate(office, Array(100).fill(MINUTE), time);
    expect(result.starts.every((t) => isOpen(tokyoOffice, t))).toBe(true);
    const afterClose = result.starts.filter((t) => t >= at('2025-06-06T09:00:00Z'));
    expect(afterClose[0]).toBe(at('2025-06-09T00:00:00Z')); // Mon 09:00 JST sharp
    expect(result.starts.length - afterClose.length).toBeGreaterThan(50);
    expect(result.maxInFlight).toBe(6);
  });

  it('for any contract and any call lengths: never over the limit or the rate, and never idle for long', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom(0.5, 1, 2, 3.5, 10),
        fc.array(fc.integer({ min: 50, max: 30_000 }), { minLength: 1, maxLength: 60 }),
        async (maxConcurrentCalls, callsPerSecond, durations) => {
          const c = { maxConcurrentCalls, callsPerSecond };
          const result = await simulate(c, durations, new FakeTime());
          expect(result.starts).toHaveLength(durations.length);
          expect(result.maxInFlight).toBeLessThanOrEqual(maxConcurrentCalls);
          expect(maxStartsInAnySecond(result.starts)).toBeLessThanOrEqual(Math.ceil(callsPerSecond));
          expectPromptStarts(result, c);
        },
      ),
      { numRuns: 60 },
    );
  });
});
