/**
 * The quota rule: which message jobs LINE's monthly quota left can cover, oldest admitted first,
 * and the reason a job is paused with.
 */
import { describe, expect, it } from 'vitest';
import { messagesLeft, quotaPauseReason, quotaRemaining, quotaShortfalls } from '#shared/campaign/quota.ts';

const counts = (
  tasks: number,
  ended: { completed?: number; failed?: number; cancelled?: number; expired?: number } = {},
) => ({
  rows: tasks,
  rejected: 0,
  skipped: 0,
  tasks,
  completed: ended.completed ?? 0,
  failed: ended.failed ?? 0,
  cancelled: ended.cancelled ?? 0,
  ...(ended.expired === undefined ? {} : { expired: ended.expired }),
});

describe('what a job still needs and what the quota leaves', () => {
  it('counts the tasks not ended yet, each one message', () => {
    expect(messagesLeft(counts(1000))).toBe(1000);
    expect(messagesLeft(counts(1000, { completed: 600, failed: 10, cancelled: 5, expired: 5 }))).toBe(380);
  });

  it('reads a limited plan as limit minus used, and no limit as unlimited', () => {
    expect(quotaRemaining({ limit: 5000, used: 4200 })).toBe(800);
    expect(quotaRemaining({ limit: 5000, used: 5100 })).toBe(0);
    expect(quotaRemaining({ used: 1_000_000 })).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('quotaShortfalls', () => {
  it('covers jobs in the order given, and names each one the rest cannot cover', () => {
    const short = quotaShortfalls(1000, [
      { jobId: 'a', left: 600 },
      { jobId: 'b', left: 500 },
      { jobId: 'c', left: 400 },
    ]);
    // a takes 600; b's 500 does not fit in the 400 left; c's 400 does.
    expect(short).toEqual([{ jobId: 'b', left: 500, available: 400 }]);
  });

  it('a job that needs exactly what is left is covered; one message more is not', () => {
    expect(quotaShortfalls(800, [{ jobId: 'a', left: 800 }])).toEqual([]);
    expect(quotaShortfalls(800, [{ jobId: 'a', left: 801 }])).toEqual([
      { jobId: 'a', left: 801, available: 800 },
    ]);
  });

  it('adds the slack of requests in flight while the quota was read', () => {
    expect(quotaShortfalls(300, [{ jobId: 'a', left: 800 }], 500)).toEqual([]);
  });

  it('an unlimited plan covers everything', () => {
    expect(quotaShortfalls(Number.POSITIVE_INFINITY, [{ jobId: 'a', left: 10_000_000 }])).toEqual([]);
  });
});

describe('quotaPauseReason', () => {
  it('says what is missing, with the plan figures and what to do', () => {
    const reason = quotaPauseReason({ jobId: 'a', left: 2000, available: 1500 }, { limit: 5000, used: 3500 });
    expect(reason).toBe(
      "line-quota: LINE's monthly message quota cannot cover this job: 2,000 messages left to send, 1,500 left in the quota for it (the channel's plan allows 5,000 a month, 3,500 used). Raise the plan's limit and resume, or set allowPartialDelivery on the client to send what the quota allows",
    );
  });
});
