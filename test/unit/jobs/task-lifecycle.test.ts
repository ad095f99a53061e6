/** The task lifecycle's named rules that the DynamoDB adapters write their conditions from. */
import { describe, expect, it } from 'vitest';
import {
  callSettlementOfCancelledJob,
  JOB_CANCELLED_MAYBE_SENT_REASON,
  JOB_CANCELLED_REASON,
  JOB_ENDED_MAYBE_SENT_REASON,
  JOB_ENDED_REASON,
  messageOutcomeMove,
  TASK_MOVES,
} from '#shared/jobs/task-lifecycle.ts';

describe('a call settled after its job was cancelled', () => {
  it('ends cancelled instead of waiting for a retry the cancel sweep would never reach', () => {
    const retry = { state: 'retry-wait', lastResult: 'busy', readyAt: 1_000 } as const;
    expect(callSettlementOfCancelledJob(retry)).toEqual({
      state: 'cancelled',
      lastResult: 'busy',
      reason: JOB_CANCELLED_REASON,
    });
  });

  it('keeps an end as it is', () => {
    const ended = {
      state: 'failed',
      lastResult: 'no-answer',
      reason: 'no-answer on all 3 attempts',
    } as const;
    expect(callSettlementOfCancelledJob(ended)).toBe(ended);
    const completed = { state: 'completed', lastResult: 'completed' } as const;
    expect(callSettlementOfCancelledJob(completed)).toBe(completed);
  });
});

describe("a released message's move (issue 35 #10)", () => {
  const released = { kind: 'released', lastResult: 'stopped' } as const;
  const live = { cancelled: false, endedBeforeReady: false };

  it('waits again with the same attempt while its job runs, maybe sent or not', () => {
    expect(messageOutcomeMove({ ...released, maybeSent: true }, live)).toEqual({
      move: TASK_MOVES.releaseMessage,
      state: 'retry-wait',
    });
  });

  it("ends cancelled with its job, saying so when an attempt's answer was lost", () => {
    const cancelled = { cancelled: true, endedBeforeReady: false };
    expect(messageOutcomeMove({ ...released, maybeSent: false }, cancelled)).toMatchObject({
      state: 'cancelled',
      reason: JOB_CANCELLED_REASON,
    });
    expect(messageOutcomeMove({ ...released, maybeSent: true }, cancelled)).toMatchObject({
      state: 'cancelled',
      reason: JOB_CANCELLED_MAYBE_SENT_REASON,
    });
  });

  it("ends expired past its job's end, saying so when an attempt's answer was lost", () => {
    const ended = { cancelled: false, endedBeforeReady: true };
    expect(messageOutcomeMove(released, ended)).toMatchObject({ state: 'expired', reason: JOB_ENDED_REASON });
    expect(messageOutcomeMove({ ...released, maybeSent: true }, ended)).toMatchObject({
      state: 'expired',
      reason: JOB_ENDED_MAYBE_SENT_REASON,
    });
  });
});
