import { describe, expect, it } from 'vitest';
import { BROKER_TASK_SIZE, brokerV8Flags } from '#shared/broker/runtime.ts';

describe('brokerV8Flags', () => {
  it('fixes the semi-spaces and gives the old space an eighth of the task, at most 128 MB', () => {
    expect(BROKER_TASK_SIZE).toEqual({ cpu: 1024, memoryMiB: 2048 });
    expect(brokerV8Flags()).toEqual(['--max-semi-space-size=16', '--max-old-space-size=128']);
    expect(brokerV8Flags(512)).toEqual(['--max-semi-space-size=16', '--max-old-space-size=64']);
    expect(brokerV8Flags(8192)).toEqual(['--max-semi-space-size=16', '--max-old-space-size=128']);
  });

  it('refuses a task too small for a broker', () => {
    expect(() => brokerV8Flags(256)).toThrow('a broker needs at least 512 MiB, got 256');
    expect(() => brokerV8Flags(Number.NaN)).toThrow(RangeError);
  });
});
