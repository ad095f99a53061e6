/**
 * bench/pacing's arithmetic: the scenarios (what every number does when called), the physical
 * lower bound of a scenario's makespan, and what the far side's ring records say about a run
 * (makespan, the latency from a call's end to the start it let through, starts per call-second).
 * Pure: no servers, no clock.
 */
import type { RingRecord, ScriptedCall } from '#local/telephony-sandbox.ts';

/** One call of a scenario: its recipient, what the sandbox makes it do, and how long it is in flight. */
export interface PlannedCall {
  readonly to: string;
  readonly script: ScriptedCall;
  /** Call seconds from the start to the final status (ring + talk). */
  readonly seconds: number;
}

export interface PacingScenario {
  readonly id: string;
  readonly title: string;
  /** The contract: calls in flight at once. */
  readonly limit: number;
  /** The contract: call starts per call-second. */
  readonly rate: number;
  /** Call seconds per wall second for this scenario's run. */
  readonly timeScale: number;
  /** In the order every broker starts them (task order). */
  readonly calls: readonly PlannedCall[];
  /** True when every call lasts the same: the lower bound is then exact (the greedy schedule). */
  readonly fixedDuration: boolean;
}

/** A small seeded PRNG (mulberry32): the same scenario on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const numberOf = (i: number) => `+8190${String(30_000_000 + i)}`;

/** `count` answered calls of `seconds` each (6 s ringing, the rest talking). */
export function fixedScenario(input: {
  id: string;
  count: number;
  seconds: number;
  limit: number;
  rate: number;
  timeScale: number;
}): PacingScenario {
  const ring = Math.min(6, input.seconds);
  const calls = Array.from({ length: input.count }, (_, i) => ({
    to: numberOf(i),
    script: { outcome: 'answered', ringSeconds: ring, durationSeconds: input.seconds - ring } as const,
    seconds: input.seconds,
  }));
  return {
    id: input.id,
    title: `${input.count} calls × ${input.seconds} s, limit ${input.limit}, ${input.rate} call/s`,
    limit: input.limit,
    rate: input.rate,
    timeScale: input.timeScale,
    calls,
    fixedDuration: true,
  };
}

/**
 * `count` calls of mixed fates, retries off: 70 % answered (5–10 s ringing + 25–170 s talk, so
 * 30–180 s in flight), 15 % busy (5–15 s), 15 % no answer (30 s of ringing).
 */
export function mixedScenario(input: {
  id: string;
  count: number;
  limit: number;
  rate: number;
  timeScale: number;
  seed?: number;
}): PacingScenario {
  const next = random(input.seed ?? 20_261_122);
  const between = (min: number, max: number) => min + Math.floor(next() * (max - min + 1));
  const calls: PlannedCall[] = [];
  for (let i = 0; i < input.count; i++) {
    const fate = next();
    if (fate < 0.7) {
      const ring = between(5, 10);
      const talk = between(25, 170);
      calls.push({
        to: numberOf(i),
        script: { outcome: 'answered', ringSeconds: ring, durationSeconds: talk },
        seconds: ring + talk,
      });
    } else if (fate < 0.85) {
      const ring = between(5, 15);
      calls.push({ to: numberOf(i), script: { outcome: 'busy', ringSeconds: ring }, seconds: ring });
    } else {
      calls.push({ to: numberOf(i), script: { outcome: 'no-answer', ringSeconds: 30 }, seconds: 30 });
    }
  }
  return {
    id: input.id,
    title: `${input.count} calls, mixed 5–180 s (answered/busy/no-answer, retries off), limit ${input.limit}, ${input.rate} call/s`,
    limit: input.limit,
    rate: input.rate,
    timeScale: input.timeScale,
    calls,
    fixedDuration: false,
  };
}

/**
 * The makespan of the greedy schedule in list order: each call starts as early as both limits
 * allow (a free slot, and 1/rate after the previous start). For equal durations this is optimal,
 * hence the exact physical bound; for mixed ones it is what a zero-latency broker taking tasks in
 * this order achieves.
 */
export function greedyMakespan(durations: readonly number[], limit: number, rate: number): number {
  const ends: number[] = [];
  let lastStart = Number.NEGATIVE_INFINITY;
  let makespan = 0;
  for (const d of durations) {
    let start = Math.max(0, lastStart + 1 / rate);
    if (ends.length >= limit) {
      ends.sort((a, b) => a - b);
      start = Math.max(start, ends.shift()!);
    }
    ends.push(start + d);
    lastStart = start;
    makespan = Math.max(makespan, start + d);
  }
  return makespan;
}

/**
 * A lower bound on any schedule's makespan, call seconds. Any order: the slots must carry
 * sum(d) call-seconds (≥ sum/limit), the last start is ≥ (N−1)/rate after the first and lasts ≥
 * min(d), and the longest call must fit. Equal durations: the greedy schedule, which is exact.
 */
export function lowerBound(scenario: PacingScenario): number {
  const d = scenario.calls.map((c) => c.seconds);
  if (scenario.fixedDuration) return greedyMakespan(d, scenario.limit, scenario.rate);
  const sum = d.reduce((a, b) => a + b, 0);
  return Math.max(sum / scenario.limit, (d.length - 1) / scenario.rate + Math.min(...d), Math.max(...d));
}

/** Nearest-rank percentile of `values` (unsorted); NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export interface RunFigures {
  /** First start to last end, wall ms. */
  readonly makespanWallMs: number;
  /**
   * Per freed slot, wall ms: the start it let through minus the moment both limits allowed it
   * (the slot's call ended at the far side, and the line's rate token was due).
   */
  readonly reactionMs: readonly number[];
  /** Most starts in any window of one call-second (1000 / timeScale wall ms), from the ring records. */
  readonly maxStartsPerCallSecond: number;
}

/**
 * Reads a run from its ring records. The k-th end (in time) frees the slot of the (limit + k)-th
 * start: with at most `limit` in flight that start cannot come before k calls have ended.
 */
export function figuresOf(
  rings: readonly RingRecord[],
  input: { limit: number; wallIntervalMs: number; timeScale: number },
): RunFigures {
  const starts = rings.map((r) => r.startedAt).sort((a, b) => a - b);
  const ends = rings.map((r) => r.endedAt ?? Number.NaN).sort((a, b) => a - b);
  const reactionMs = reactionTimes(starts, ends, input);
  const windowMs = 1000 / input.timeScale;
  let maxStarts = 0;
  for (let i = 0, j = 0; j < starts.length; j++) {
    while (starts[j]! - starts[i]! >= windowMs) i++;
    maxStarts = Math.max(maxStarts, j - i + 1);
  }
  return {
    makespanWallMs: (ends.at(-1) ?? 0) - (starts[0] ?? 0),
    reactionMs,
    maxStartsPerCallSecond: maxStarts,
  };
}

/**
 * Per freed slot, wall ms from the moment both limits allowed a start to that start: the k-th
 * `freed` instant (in time) pairs with the (limit + k)-th start, whose token was due 1/rate after
 * the start before it. `freed` may be the calls' ends at the far side, or the nudges' arrivals.
 */
export function reactionTimes(
  starts: readonly number[],
  freed: readonly number[],
  input: { limit: number; wallIntervalMs: number },
): number[] {
  const s = [...starts].sort((a, b) => a - b);
  const f = [...freed].sort((a, b) => a - b);
  const out: number[] = [];
  for (let k = 0; input.limit + k < s.length && k < f.length; k++) {
    const allowed = Math.max(f[k]!, s[input.limit + k - 1]! + input.wallIntervalMs);
    out.push(Math.max(0, s[input.limit + k]! - allowed));
  }
  return out;
}
