import { describe, expect, it } from 'vitest';
import { CLOCK_OFFSET_ENV, ConfigError, clockFromEnv } from '#shared/config.ts';

describe('the clock a process reads (issue 35 #8)', () => {
  it('is the system’s when no offset is set, as in AWS', () => {
    const before = Date.now();
    const now = clockFromEnv({}).now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });

  it('is shifted by the local cloud’s offset, and runs on from there', () => {
    const offset = Date.parse('2027-01-01T00:00:00Z') - Date.now();
    const clock = clockFromEnv({ [CLOCK_OFFSET_ENV]: String(offset) });
    expect(Math.abs(clock.now() - Date.parse('2027-01-01T00:00:00Z'))).toBeLessThan(1_000);
  });

  it('refuses an offset that is not whole milliseconds, naming the variable', () => {
    expect(() => clockFromEnv({ [CLOCK_OFFSET_ENV]: '3 days' })).toThrow(ConfigError);
    expect(() => clockFromEnv({ [CLOCK_OFFSET_ENV]: '1.5' })).toThrow(/SWITCHBOARD_CLOCK_OFFSET_MS/);
  });
});
