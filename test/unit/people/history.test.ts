/** A person's history entries (`shared/people/history.ts`): a task as the operator reads it. */
import { describe, expect, it } from 'vitest';
import type { Task } from '#shared/jobs/model.ts';
import { historyEntry } from '#shared/people/history.ts';

const T0 = Date.parse('2026-11-20T01:00:00Z');
const CALL_JOB = { jobId: '01JOB', name: 'x', channel: 'call' as const };

function task(overrides: Partial<Task>): Task {
  return {
    clientId: 'acme',
    jobId: '01JOB',
    taskId: 't1',
    row: 2,
    channel: 'call',
    recipient: '+819011110001',
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: T0,
    updatedAt: T0,
    ...overrides,
  };
}

describe('a history entry', () => {
  it('gives an ended call its length, its start to its end, with its last result', () => {
    const ended = task({
      state: 'completed',
      attempts: 2,
      lastResult: 'completed',
      startedAt: T0,
      callEndedAt: T0 + 94_400,
      updatedAt: T0 + 94_400,
    });
    expect(
      historyEntry({ task: ended, job: { jobId: '01JOB', name: '更新のご案内', channel: 'call' } }),
    ).toEqual({
      jobId: '01JOB',
      jobName: '更新のご案内',
      channel: 'call',
      recipient: '+819011110001',
      state: 'completed',
      attempts: 2,
      result: 'completed',
      startedAt: '2026-11-20T01:00:00.000Z',
      updatedAt: '2026-11-20T01:01:34.400Z',
      durationSeconds: 94,
    });
  });

  it('gives no length to a call in flight, to a second attempt ringing, nor to one cancelled before it rang', () => {
    const ringing = task({ state: 'in-flight', startedAt: T0 });
    expect(historyEntry({ task: ringing, job: CALL_JOB }).durationSeconds).toBeUndefined();
    // The first attempt's end is before the second's start.
    const second = task({
      state: 'in-flight',
      attempts: 2,
      startedAt: T0 + 3_600_000,
      callEndedAt: T0 + 30_000,
    });
    expect(historyEntry({ task: second, job: CALL_JOB }).durationSeconds).toBeUndefined();
    const cancelled = task({ state: 'cancelled', reason: 'job cancelled' });
    expect(historyEntry({ task: cancelled, job: CALL_JOB })).toMatchObject({
      state: 'cancelled',
      reason: 'job cancelled',
    });
    expect(historyEntry({ task: cancelled, job: CALL_JOB }).durationSeconds).toBeUndefined();
  });

  it('keeps the last call’s length when a sweep ends the task waiting to retry hours later', () => {
    const swept = task({
      state: 'cancelled',
      attempts: 1,
      lastResult: 'busy',
      startedAt: T0,
      callEndedAt: T0 + 12_000,
      updatedAt: T0 + 5 * 3_600_000,
    });
    expect(historyEntry({ task: swept, job: CALL_JOB }).durationSeconds).toBe(12);
  });

  it('names the channel a fallback moved the task to, the channels it left and its delivery state', () => {
    const moved = task({
      channel: 'message',
      recipient: 'taro@example.jp',
      via: 'email',
      tried: [{ channel: 'line', reason: 'opted-out' }],
      state: 'completed',
      attempts: 1,
      lastResult: 'sent',
      deliveryState: 'bounced',
    });
    expect(
      historyEntry({ task: moved, job: { jobId: '01JOB', name: 'notice', channel: 'line' } }),
    ).toMatchObject({
      channel: 'email',
      tried: [{ channel: 'line', reason: 'opted-out' }],
      result: 'sent',
      delivery: 'bounced',
    });
  });

  it('reads a task whose job is not found by its side and its recipient', () => {
    const of = (t: Partial<Task>) => historyEntry({ task: task(t), job: undefined }).channel;
    expect(of({ channel: 'call' })).toBe('call');
    expect(of({ channel: 'message', recipient: '+819011110001' })).toBe('sms');
    expect(of({ channel: 'message', recipient: 'a@example.jp' })).toBe('email');
    expect(of({ channel: 'message', recipient: `U${'a'.repeat(32)}` })).toBe('line');
  });
});
