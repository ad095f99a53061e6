import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CallSnapshot, CallStatusEvent, ReportedCallStatus } from '#shared/telephony/port.ts';
import { isFinal, mergeStatus, supersedes } from '#shared/telephony/port.ts';

const callId = 'CA42';
const idempotencyKey = '6f1d2c3b-1111-5222-8333-444455556666';

function event(
  status: ReportedCallStatus,
  sequence: number,
  extra: Partial<CallStatusEvent> = {},
): CallStatusEvent {
  const at = new Date(Date.parse('2026-01-05T09:00:00Z') + sequence * 1000).toISOString();
  return { callId, idempotencyKey, status, at, sequence, ...extra };
}

/** Every way a call really unfolds, in the provider's order. */
const histories: readonly (readonly CallStatusEvent[])[] = [
  [event('ringing', 1), event('answered', 2), event('completed', 3, { durationSeconds: 95 })],
  [
    event('ringing', 1),
    event('answered', 2),
    event('completed', 3, { durationSeconds: 600, reason: 'max-duration' }),
  ],
  [event('ringing', 1), event('busy', 2)],
  [event('ringing', 1), event('no-answer', 2)],
  [event('failed', 1, { reason: 'unreachable' })],
];
const queued: CallSnapshot = {
  callId,
  idempotencyKey,
  status: 'queued',
  at: '2026-01-05T09:00:00.000Z',
  sequence: 0,
};

function mergeAll(
  start: CallSnapshot | undefined,
  events: readonly CallSnapshot[],
): CallSnapshot | undefined {
  return events.reduce<CallSnapshot | undefined>((state, e) => mergeStatus(state, e), start);
}

/** A history, then the same events delivered duplicated and in any order. */
const deliveries = fc.constantFrom(...histories).chain((history) =>
  fc
    .array(fc.nat({ max: history.length - 1 }), { maxLength: 8 })
    .map((extra) => [...history, ...extra.map((i) => history[i]!)])
    .chain((all) => fc.shuffledSubarray(all, { minLength: all.length, maxLength: all.length }))
    .map((delivered) => ({ history, delivered })),
);

describe('mergeStatus', () => {
  it('ends in the true final state whatever the order and duplication of callbacks', () => {
    fc.assert(
      fc.property(deliveries, fc.boolean(), ({ history, delivered }, polledFirst) => {
        const merged = mergeAll(polledFirst ? queued : undefined, delivered);
        expect(merged).toEqual(history.at(-1));
        expect(isFinal(merged!.status)).toBe(true);
      }),
    );
  });

  it('with callbacks lost as well, ends where in-order delivery of the survivors would', () => {
    const lossy = deliveries.chain(({ delivered }) =>
      fc.subarray(delivered).map((survivors) => ({
        survivors,
        inOrder: [...survivors].sort((a, b) => a.sequence - b.sequence),
      })),
    );
    fc.assert(
      fc.property(lossy, ({ survivors, inOrder }) => {
        expect(mergeAll(undefined, survivors)).toEqual(mergeAll(undefined, inOrder));
      }),
    );
  });

  it('ignores ringing after answered, and keeps the first final state', () => {
    const answered = mergeStatus(undefined, event('answered', 2));
    expect(mergeStatus(answered, event('ringing', 1))).toBe(answered);
    const failed = mergeStatus(answered, event('failed', 3, { reason: 'carrier' }));
    expect(failed.status).toBe('failed');
    expect(mergeStatus(failed, event('completed', 4, { durationSeconds: 10 }))).toBe(failed);
    expect(supersedes(failed, event('completed', 4))).toBe(false);
  });

  it('moves a polled queued call on with its first callback', () => {
    expect(mergeStatus(queued, event('ringing', 1)).status).toBe('ringing');
    expect(mergeStatus(event('ringing', 1), queued).status).toBe('ringing');
  });
});
