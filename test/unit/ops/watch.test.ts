import { describe, expect, it } from 'vitest';
import type { JobView } from '#shared/jobs/api.ts';
import { ApiError, NetworkError } from '../../../scripts/ops/errors.ts';
import { JobWatcher, nextDelay, POLL_BACKOFF, RETRY_BACKOFF } from '../../../scripts/ops/watch.ts';

describe('polling backoff', () => {
  it('starts quick, slows while nothing changes, and is quick again after a change', () => {
    let delay: number | undefined;
    const delays: number[] = [];
    for (const changed of [true, false, false, false, false, false, false, false, true]) {
      delay = nextDelay(delay, changed, POLL_BACKOFF);
      delays.push(delay);
    }
    expect(delays).toEqual([500, 800, 1280, 2048, 3277, 5243, 8000, 8000, 500]);
    expect(nextDelay(undefined, false, RETRY_BACKOFF)).toBe(1000);
  });
});

/** A job at a status with `completed` tasks done; the watcher sees the API's answers in turn. */
function view(status: string, completed = 0): JobView {
  return {
    jobId: 'J',
    status,
    counts: {
      rows: 2,
      rejected: 0,
      skipped: 0,
      tasks: 2,
      completed,
      failed: 0,
      cancelled: 0,
      outstanding: 2 - completed,
    },
  } as JobView;
}

function watcher(answers: (JobView | Error)[], deadline?: number) {
  let clock = 0;
  const slept: number[] = [];
  const updates: string[] = [];
  const retries: string[] = [];
  const w = new JobWatcher({
    fetchJob: async () => {
      const next = answers.shift();
      if (!next) throw new Error('asked once too often');
      if (next instanceof Error) throw next;
      return next;
    },
    onUpdate: (job) => updates.push(`${job.status} ${job.counts.completed}`),
    onRetry: (error, ms) => retries.push(`${error.message} ${ms}`),
    sleep: async (ms) => {
      slept.push(ms);
      clock += ms;
    },
    now: () => clock,
    outageLimitMs: 10_000,
    ...(deadline === undefined ? {} : { deadline }),
  });
  return { w, slept, updates, retries };
}

describe('watching a job', () => {
  it('reports each change once and stops when the job is done', async () => {
    const { w, slept, updates } = watcher([
      view('running', 0),
      view('running', 0),
      view('running', 1),
      view('completed', 2),
    ]);
    const result = await w.until((job) => job.status === 'completed');
    expect(result.kind).toBe('done');
    expect(updates).toEqual(['running 0', 'running 1', 'completed 2']);
    expect(slept).toEqual([500, 800, 500]);
  });

  it('waits out network errors and 5xx with their own backoff, and gives up after the outage limit', async () => {
    const flaky = watcher([
      new NetworkError('cannot reach x'),
      new ApiError('GET: 503', 503),
      view('completed'),
    ]);
    expect((await flaky.w.until(() => true)).kind).toBe('done');
    expect(flaky.retries).toEqual(['cannot reach x 1000', 'GET: 503 2000']);

    const down = watcher(Array.from({ length: 10 }, () => new NetworkError('cannot reach x')));
    await expect(down.w.until(() => true)).rejects.toThrow('cannot reach x; gave up after 10 s of retries');
  });

  it('ends at once on a 4xx, and answers timed-out at the deadline', async () => {
    await expect(watcher([new ApiError('GET: 404 no job', 404)]).w.until(() => true)).rejects.toThrow(
      '404 no job',
    );
    const slow = watcher([view('running'), view('running'), view('running')], 1000);
    expect(await slow.w.until(() => false)).toEqual({ kind: 'timed-out', job: view('running') });
  });
});
