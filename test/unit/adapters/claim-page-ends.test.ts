import { describe, expect, it } from 'vitest';
import { endsOnPage } from '#shared/adapters/dynamo-claim-pages.ts';
import { chunkTaskId, packMembers } from '#shared/jobs/chunks.ts';

const id = (n: number) => `U${n.toString(16).padStart(32, '0')}`;

describe("a claim page's ends", () => {
  it('counts the tasks ended on the page, and every member of a chunk ended on it', () => {
    const chunk = {
      jobId: 'J1',
      taskId: chunkTaskId(2),
      state: 'completed',
      endedOn: 'P1',
      ...packMembers([2, 3, 4, 5].map((row) => ({ recipient: id(row), row }))),
      except: {
        '0': { state: 'cancelled', reason: 'suppressed: bounced', attempts: 0, updatedAt: 1 },
        '3': { state: 'failed', reason: 'LINE refused the user', attempts: 1, updatedAt: 1 },
      },
    };
    const ends = endsOnPage('P1', [
      chunk,
      { jobId: 'J1', taskId: 't1', state: 'failed', endedOn: 'P1' },
      // Ended on another page, or not ended: not this page's.
      { ...chunk, taskId: chunkTaskId(9), endedOn: 'P0' },
      { jobId: 'J1', taskId: 't2', state: 'retry-wait', endedOn: 'P1' },
    ]);
    expect(ends).toEqual({ completed: 2, failed: 2, cancelled: 1, expired: 0, suppressed: 1 });
  });
});
