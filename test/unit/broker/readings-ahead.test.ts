/** A start's reading begun ahead (`shared/adapters/readings-ahead.ts`): used once, only while fresh, read again when it failed. */
import { describe, expect, it } from 'vitest';
import { READING_FRESH_MS, ReadingsAhead } from '#shared/adapters/readings-ahead.ts';

const task = (taskId: string, attempts = 0) => ({ clientId: 'c', jobId: 'j', taskId, attempts });

function harness(answers: (taskId: string, n: number) => Promise<string>) {
  let now = 0;
  const reads: string[] = [];
  const ahead = new ReadingsAhead<ReturnType<typeof task>, string>(
    (t) => {
      reads.push(t.taskId);
      return answers(t.taskId, reads.length);
    },
    () => now,
  );
  return { ahead, reads, advance: (ms: number) => (now += ms) };
}

describe('readings made ahead of a start', () => {
  it('a start after prepare uses the reading begun then, once; a second start of the same attempt reads again', async () => {
    const h = harness(async (id, n) => `${id}#${n}`);
    h.ahead.prepare(task('t1'));
    h.ahead.prepare(task('t1'));
    expect(h.reads).toEqual(['t1']);
    await expect(h.ahead.reading(task('t1'))).resolves.toBe('t1#1');
    await expect(h.ahead.reading(task('t1'))).resolves.toBe('t1#2');
  });

  it('a reading is for its attempt: another attempt of the task reads its own', async () => {
    const h = harness(async (id, n) => `${id}#${n}`);
    h.ahead.prepare(task('t1', 0));
    await expect(h.ahead.reading(task('t1', 1))).resolves.toBe('t1#2');
  });

  it('a reading begun too long ago is not used: the start reads now', async () => {
    const h = harness(async (id, n) => `${id}#${n}`);
    h.ahead.prepare(task('t1'));
    h.advance(READING_FRESH_MS);
    await expect(h.ahead.reading(task('t1'))).resolves.toBe('t1#2');
  });

  it('a failed reading ahead is no unhandled rejection; the start reads again', async () => {
    const h = harness(async (id, n) => (n === 1 ? Promise.reject(new Error('throttled')) : `${id}#${n}`));
    h.ahead.prepare(task('t1'));
    await new Promise((r) => setImmediate(r));
    await expect(h.ahead.reading(task('t1'))).resolves.toBe('t1#2');
  });

  it('forgets readings gone stale that no start used', () => {
    const h = harness(async (id) => id);
    h.ahead.prepare(task('t1'));
    h.advance(READING_FRESH_MS);
    h.ahead.prepare(task('t2'));
    h.ahead.prepare(task('t1'));
    expect(h.reads).toEqual(['t1', 't2', 't1']);
  });
});
