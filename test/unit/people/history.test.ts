/** A person's history entries (`shared/people/history.ts`): a task as the operator reads it. */
import { describe, expect, it } from 'vitest';
import type { Task } from '#shared/jobs/model.ts';
import { historyEntry, personKeysOf } from '#shared/people/history.ts';

const T0 = Date.parse('2026-11-20T01:00:00Z');

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
  it('gives an ended call its length, start to end, with its last result', () => {
    const ended = task({
      state: 'completed',
      attempts: 2,
      lastResult: 'answered',
      startedAt: T0,
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
      result: 'answered',
      startedAt: '2026-11-20T01:00:00.000Z',
      updatedAt: '2026-11-20T01:01:34.400Z',
      durationSeconds: 94,
    });
  });

  it('gives no length to a call in flight, nor to one cancelled before it rang', () => {
    const job = { jobId: '01JOB', name: 'x', channel: 'call' as const };
    expect(
      historyEntry({ task: task({ state: 'in-flight', startedAt: T0 }), job }).durationSeconds,
    ).toBeUndefined();
    expect(historyEntry({ task: task({ state: 'cancelled', reason: 'job cancelled' }), job })).toMatchObject({
      state: 'cancelled',
      reason: 'job cancelled',
    });
    expect(historyEntry({ task: task({ state: 'cancelled' }), job }).durationSeconds).toBeUndefined();
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

describe('the keys a person’s tasks are filed under', () => {
  it('are the person’s and each identifier’s, once each', () => {
    expect(personKeysOf({ person: 'P01', identifiers: ['+819011110001', 'a@example.jp'] })).toEqual([
      'P01',
      '+819011110001',
      'a@example.jp',
    ]);
    expect(personKeysOf({ person: '+819011110001', identifiers: ['+819011110001'] })).toEqual([
      '+819011110001',
    ]);
  });
});
