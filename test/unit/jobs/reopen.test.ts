/** A fallback after the send (an email's hard bounce): when an ended task moves on, and when it does not. */
import { describe, expect, it } from 'vitest';
import type { Job, Task } from '#shared/jobs/model.ts';
import {
  makeReopenUnreached,
  type Reopening,
  ReopenLater,
  type ReopenStore,
  type ReopenWrite,
  reopening,
  type UnreachedAttempt,
  unreachedReason,
} from '#shared/jobs/reopen.ts';

const NOW = Date.parse('2026-11-20T00:00:00Z');

const JOB: Job = {
  clientId: 'acme',
  jobId: 'j1',
  name: 'n',
  channel: 'line',
  fallback: ['email', 'sms'],
  scenarioId: 'default',
  startAt: NOW - 60_000,
  endAt: NOW + 60_000,
  maxAttempts: 1,
  retryDelaySeconds: 0,
  status: 'running',
  counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 },
  createdAt: NOW,
  updatedAt: NOW,
};

/** A task that left LINE (opted out) and whose email was accepted: attempt 1 on email. */
const TASK: Task = {
  clientId: 'acme',
  jobId: 'j1',
  taskId: 't1',
  row: 2,
  channel: 'message',
  recipient: 'a@example.com',
  reach: { line: 'U1', email: 'a@example.com', sms: '+819011112222' },
  via: 'email',
  tried: [{ channel: 'line', reason: 'opted-out' }],
  variables: {},
  state: 'completed',
  attempts: 1,
  readyAt: NOW - 60_000,
  updatedAt: NOW - 1000,
};

const BOUNCE: UnreachedAttempt = {
  clientId: 'acme',
  jobId: 'j1',
  taskId: 't1',
  attempt: 1,
  channel: 'email',
  result: 'bounced',
  reason: 'Permanent/General: smtp; 550 5.1.1 user unknown',
  entrySource: 'bounce',
};

describe('reopening', () => {
  it('moves a completed task whose email bounced to its next channel, its attempts kept, the bounce in tried', () => {
    expect(reopening(JOB, TASK, BOUNCE, NOW)).toEqual({
      reopen: {
        clientId: 'acme',
        jobId: 'j1',
        taskId: 't1',
        from: 'a@example.com',
        endedAs: 'completed',
        attempts: 1,
        lastResult: 'bounced',
        next: { from: 'email', channel: 'sms', recipient: '+819011112222', skipped: [] },
        tried: [{ channel: 'email', reason: 'bounced: Permanent/General: smtp; 550 5.1.1 user unknown' }],
        readyAt: NOW,
      },
    });
  });

  it('moves a task that ended in doubt too: the bounce proves the email left and did not arrive', () => {
    const decision = reopening(JOB, { ...TASK, state: 'failed', reason: 'in-doubt' }, BOUNCE, NOW);
    expect(decision).toMatchObject({ reopen: { endedAs: 'failed' } });
  });

  it('moves a task its claim ended for the address’s bounce entry (a send in doubt claimed again after the bounce)', () => {
    const suppressed = {
      ...TASK,
      state: 'cancelled' as const,
      reason: 'suppressed: bounce',
      lastResult: 'suppressed',
    };
    expect(reopening(JOB, suppressed, BOUNCE, NOW)).toMatchObject({ reopen: { endedAs: 'cancelled' } });
    // Cancelled for anything else (an operator's entry, a cancelled job) stays so.
    for (const reason of [
      'suppressed: api',
      'suppressed: bounce (another identifier of the same person)',
      'job cancelled',
    ])
      expect(reopening(JOB, { ...suppressed, reason }, BOUNCE, NOW)).toEqual({
        keep: 'the task ended cancelled',
      });
  });

  it('keeps what it must not move', () => {
    const keep = (job: Job | undefined, task: Task | undefined, at = NOW) =>
      (reopening(job, task, BOUNCE, at) as { keep?: string }).keep;
    expect(keep(JOB, undefined)).toBe('no such task');
    expect(keep(JOB, { ...TASK, clientId: 'other' })).toBe('no such task');
    expect(keep({ ...JOB, channel: 'email', fallback: undefined }, { ...TASK, via: undefined })).toBe(
      'the job does not fall back',
    );
    // Already on SMS (another copy of the event moved it), or a later attempt than the bounced one.
    expect(keep(JOB, { ...TASK, via: 'sms', recipient: '+819011112222' })).toBe(
      'the task has moved on already',
    );
    expect(keep(JOB, { ...TASK, attempts: 2 })).toBe('the task is on attempt 2');
    expect(keep(JOB, { ...TASK, state: 'cancelled' })).toBe('the task ended cancelled');
    expect(keep(JOB, { ...TASK, reach: { email: 'a@example.com' } })).toBe('no next channel');
    expect(keep({ ...JOB, status: 'completed' }, TASK)).toBe('the job is completed');
    expect(keep({ ...JOB, status: 'cancelled' }, TASK)).toBe('the job is cancelled');
    expect(keep(JOB, TASK, JOB.endAt)).toBe('the job has reached its end');
    // A paused job's task moves: it waits with the job.
    expect(reopening({ ...JOB, status: 'paused' }, TASK, BOUNCE, NOW)).toHaveProperty('reopen');
  });

  it('waits for a task that has not ended on the bounced attempt yet (its outcome not written)', () => {
    for (const state of ['pending', 'in-flight', 'retry-wait'] as const)
      expect(reopening(JOB, { ...TASK, state }, BOUNCE, NOW)).toEqual({
        later: 'the task has not ended yet',
      });
    // Claimed on a claim page, a task shows the attempt before (0 for a first) until its outcome.
    expect(reopening(JOB, { ...TASK, state: 'pending', attempts: 0 }, BOUNCE, NOW)).toEqual({
      later: 'the task has not ended yet',
    });
  });

  it('passes over the channels the task has no identifier for, and says so', () => {
    const job: Job = { ...JOB, channel: 'email', fallback: ['line', 'sms'] };
    const task: Task = { ...TASK, via: undefined, reach: { email: 'a@example.com', sms: '+819011112222' } };
    expect(reopening(job, task, BOUNCE, NOW)).toMatchObject({
      reopen: {
        next: { channel: 'sms' },
        tried: [
          { channel: 'email', reason: expect.stringMatching(/^bounced: /) },
          { channel: 'line', reason: 'no-identifier' },
        ],
      },
    });
  });

  it('cuts a long reason, and names the result alone when there is none', () => {
    expect(unreachedReason({ result: 'bounced', reason: 'x'.repeat(500) })).toHaveLength(200);
    expect(unreachedReason({ result: 'bounced' })).toBe('bounced');
  });
});

/** A store of one task and one job, writing what it is told to answer. */
class OneTask implements ReopenStore {
  readonly writes: Reopening[] = [];
  jobReads = 0;
  readonly stored: { task?: Task; job?: Job };
  readonly answer: ReopenWrite;
  constructor(stored: { task?: Task; job?: Job }, answer: ReopenWrite = 'reopened') {
    this.stored = stored;
    this.answer = answer;
  }
  async task() {
    return this.stored.task;
  }
  async job() {
    this.jobReads++;
    return this.stored.job;
  }
  async reopen(move: Reopening) {
    this.writes.push(move);
    return this.answer;
  }
}

describe('the reopen use case', () => {
  const clock = { now: () => NOW };

  it('writes the move and says where the task went', async () => {
    const store = new OneTask({ task: TASK, job: JOB });
    await expect(makeReopenUnreached(store, clock)(BOUNCE)).resolves.toEqual({
      outcome: 'reopened',
      to: 'sms',
    });
    expect(store.writes).toHaveLength(1);
  });

  it('reads no job for a task of a job that does not fall back', async () => {
    const store = new OneTask({ task: { ...TASK, reach: undefined, via: undefined }, job: JOB });
    await expect(makeReopenUnreached(store, clock)(BOUNCE)).resolves.toMatchObject({ outcome: 'kept' });
    expect(store.jobReads).toBe(0);
  });

  it('gives the event back while the task has not ended, or its end is on a page not closed yet', async () => {
    const early = new OneTask({ task: { ...TASK, state: 'in-flight' }, job: JOB });
    await expect(makeReopenUnreached(early, clock)(BOUNCE)).rejects.toThrow(ReopenLater);
    expect(early.writes).toEqual([]);
    const uncounted = new OneTask({ task: TASK, job: JOB }, 'uncounted');
    await expect(makeReopenUnreached(uncounted, clock)(BOUNCE)).rejects.toThrow(ReopenLater);
  });

  it('a write refused because the task or the job changed is kept, not retried', async () => {
    const store = new OneTask({ task: TASK, job: JOB }, 'changed');
    await expect(makeReopenUnreached(store, clock)(BOUNCE)).resolves.toMatchObject({ outcome: 'kept' });
  });
});
