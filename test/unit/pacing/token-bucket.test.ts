import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TokenBucket, type TokenBucketOptions } from '#shared/pacing/token-bucket.ts';

/** The documented bound: the most starts a bucket lets through in any half-open window of `windowMs`. */
function maxStartsInWindow(options: TokenBucketOptions, windowMs: number): number {
  const bucket = new TokenBucket(options);
  // The epsilon keeps 1000 / (1000 / 3) = 3.0000000000000004 from counting as more than 3.
  return Math.ceil(bucket.burst + windowMs / bucket.intervalMs - 1e-9) - 1;
}

/** The most starts in any half-open [t, t + windowMs) (or closed, when `closed`). */
function maxInAnyWindow(starts: readonly number[], windowMs: number, closed = false): number {
  let best = 0;
  let from = 0;
  for (let to = 0; to < starts.length; to++) {
    while (closed ? starts[to]! - starts[from]! > windowMs : starts[to]! - starts[from]! >= windowMs) from++;
    best = Math.max(best, to - from + 1);
  }
  return best;
}

/** Tries a start at each requested instant; returns those that were let through. */
function startsFor(bucket: TokenBucket, requests: readonly number[]): number[] {
  return requests.filter((t) => bucket.tryTake(t));
}

/** Random request instants (integer ms, ascending, several at the same instant allowed). */
const requestTimes = fc
  .array(fc.integer({ min: 0, max: 1500 }), { minLength: 1, maxLength: 400 })
  .map((gaps) => {
    const times: number[] = [];
    let t = 1_700_000_000_000;
    for (const gap of gaps) {
      t += gap;
      times.push(t);
    }
    return times;
  });

const lineRates = fc.oneof(
  fc.constantFrom(0.25, 0.5, 1, 2, 2.5, 3, 6, 7, 10, 1000 / 7, 1000 / 3),
  fc.double({ min: 0.1, max: 50, noNaN: true }),
);

describe('token bucket for a line of R calls per second', () => {
  it('lets one call a second through on a 1 call/s line and says when the next may go', () => {
    const bucket = new TokenBucket({ ratePerSecond: 1 });
    expect(bucket.tryTake(10_000)).toBe(true);
    expect(bucket.tryTake(10_000)).toBe(false);
    expect(bucket.msUntilNextToken(10_400)).toBe(600);
    expect(bucket.tryTake(10_999)).toBe(false);
    expect(bucket.tryTake(11_000)).toBe(true);
    // Idle time does not bank extra starts: burst 1 means one at a time.
    expect(bucket.tryTake(20_000)).toBe(true);
    expect(bucket.tryTake(20_001)).toBe(false);
  });

  it('spaces a half-call-per-second line two seconds apart', () => {
    const bucket = new TokenBucket({ ratePerSecond: 0.5 });
    expect(startsFor(bucket, [0, 1000, 1999, 2000, 3000, 4000])).toEqual([0, 2000, 4000]);
  });

  it('lets a burst go back to back, then holds to the rate', () => {
    const bucket = new TokenBucket({ ratePerSecond: 2, burst: 3 });
    expect(startsFor(bucket, [0, 0, 0, 0, 499, 500, 999, 1000])).toEqual([0, 0, 0, 500, 1000]);
  });

  it('retuned to a new rate, spaces the next start one new interval after the last start', () => {
    const fast = new TokenBucket({ ratePerSecond: 10 });
    expect(fast.tryTake(0)).toBe(true);
    // Slower: the next start waits the full new interval from the last start, not from now.
    const slow = fast.retuned({ ratePerSecond: 0.5 });
    expect(slow.tryTake(100)).toBe(false);
    expect(slow.msUntilNextToken(100)).toBe(1_900);
    expect(slow.tryTake(2_000)).toBe(true);
    // Faster again: the last start was at 2,000, so 2,100 is the earliest.
    const quick = slow.retuned({ ratePerSecond: 10 });
    expect(quick.tryTake(2_050)).toBe(false);
    expect(quick.tryTake(2_100)).toBe(true);
    // A bucket never used stays full.
    expect(new TokenBucket({ ratePerSecond: 1 }).retuned({ ratePerSecond: 2 }).tryTake(0)).toBe(true);
  });

  it('rejects a rate, burst or margin that makes no sense', () => {
    expect(() => new TokenBucket({ ratePerSecond: 0 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSecond: Number.NaN })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSecond: 1, burst: 0 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSecond: 1, burst: 1.5 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSecond: 1, marginMs: -1 })).toThrow(RangeError);
  });

  it('never lets more than ceil(R) calls start in any sliding second (half-open windows)', () => {
    fc.assert(
      fc.property(lineRates, requestTimes, (rate, requests) => {
        const starts = startsFor(new TokenBucket({ ratePerSecond: rate }), requests);
        expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(Math.ceil(rate));
        expect(maxStartsInWindow({ ratePerSecond: rate }, 1000)).toBe(Math.ceil(rate));
      }),
      { numRuns: 500 },
    );
  });

  it('keeps the documented bound for any burst and window width', () => {
    fc.assert(
      fc.property(
        lineRates,
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5000 }),
        requestTimes,
        (rate, burst, windowMs, requests) => {
          const starts = startsFor(new TokenBucket({ ratePerSecond: rate, burst }), requests);
          expect(maxInAnyWindow(starts, windowMs)).toBeLessThanOrEqual(
            maxStartsInWindow({ ratePerSecond: rate, burst }, windowMs),
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it('with a margin, holds integer rates even in closed windows (starts 1000 ms apart)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), requestTimes, (rate, requests) => {
        const loose = startsFor(new TokenBucket({ ratePerSecond: rate }), requests);
        const strict = startsFor(new TokenBucket({ ratePerSecond: rate, marginMs: 1 }), requests);
        expect(maxInAnyWindow(loose, 1000, true)).toBeLessThanOrEqual(rate + 1);
        expect(maxInAnyWindow(strict, 1000, true)).toBeLessThanOrEqual(rate);
      }),
      { numRuns: 300 },
    );
  });

  it('does not waste the line: a caller that waits as told starts within a millisecond of the rate', () => {
    fc.assert(
      fc.property(lineRates, (rate) => {
        const bucket = new TokenBucket({ ratePerSecond: rate });
        const starts: number[] = [];
        let now = 0;
        while (starts.length < 200) {
          if (bucket.tryTake(now)) starts.push(now);
          else now += bucket.msUntilNextToken(now);
        }
        const span = starts.at(-1)! - starts[0]!;
        expect(span).toBeLessThanOrEqual(199 * Math.ceil(1000 / rate));
        expect(span).toBeGreaterThanOrEqual(199 * (1000 / rate) - 1e-6);
      }),
      { numRuns: 200 },
    );
  });
});
