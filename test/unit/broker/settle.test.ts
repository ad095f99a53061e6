import { describe, expect, it } from 'vitest';
import {
  CallbackMismatchError,
  callbackUrlFor,
  makeRecordCallStatus,
  retimedRetry,
  settlementFor,
} from '#shared/broker/settle.ts';
import { retryReadyAt } from '#shared/jobs/recipient-timing.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import type { SuppressionEntry } from '#shared/suppressions/model.ts';
import { SignatureMismatchError, signCallback } from '#shared/telephony/callback-signature.ts';
import type { CallStatusEvent } from '#shared/telephony/port.ts';
import { MalformedCallStatusError } from '#shared/telephony/status-event.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { FakeTime } from '../pacing/fake-time.ts';
import { clientSettings, job, MemoryTaskStore, SECRET, T0, tasksFor } from './fakes.ts';

describe('settlementFor', () => {
  const j = { maxAttempts: 3, retryDelaySeconds: 300 };
  it('completes an answered call and fails a failed one with its reason', () => {
    expect(settlementFor('completed', { attempts: 1, now: T0 }, j)).toEqual({
      state: 'completed',
      lastResult: 'completed',
    });
    expect(settlementFor('failed', { attempts: 1, now: T0, reason: 'unreachable' }, j)).toEqual({
      state: 'failed',
      lastResult: 'failed',
      reason: 'unreachable',
    });
  });

  it('retries busy and no-answer after the delay while attempts remain, then fails', () => {
    expect(settlementFor('busy', { attempts: 2, now: T0 }, j)).toEqual({
      state: 'retry-wait',
      lastResult: 'busy',
      readyAt: T0 + 300_000,
    });
    expect(settlementFor('no-answer', { attempts: 3, now: T0 }, j)).toEqual({
      state: 'failed',
      lastResult: 'no-answer',
      reason: 'no-answer on all 3 attempts',
    });
  });
});

describe('recording a call status', () => {
  async function setup() {
    const time = new FakeTime(T0);
    const store = new MemoryTaskStore(new MemoryLeaseStore(), time);
    const j = job({ maxAttempts: 2, retryDelaySeconds: 60 });
    const [task] = tasksFor(j, 1);
    store.add(clientSettings(), j, [{ ...task!, state: 'in-flight', attempts: 1, startedAt: T0 }]);
    store.flying.set('c1', new Set([`${j.jobId}/${task!.taskId}`]));
    const nudges: string[] = [];
    const suppressed: SuppressionEntry[] = [];
    const record = makeRecordCallStatus({
      suppressions: { add: async (_clientId, entries) => void suppressed.push(...entries) },
      tasks: store,
      leases: { endpointOf: async () => 'http://broker' },
      notifier: { callEnded: async (endpoint, ended) => void nudges.push(`${endpoint} ${ended.taskId}`) },
      clock: time,
      secrets: ['old-secret', SECRET],
    });
    const ref = { jobId: j.jobId, taskId: task!.taskId, attempt: 1 };
    let sequence = 0;
    const event = (
      status: CallStatusEvent['status'],
      over: Partial<CallStatusEvent> = {},
    ): CallStatusEvent => ({
      callId: 'call-1',
      idempotencyKey: attemptKey(ref.jobId, ref.taskId, 1),
      status,
      at: new Date(time.now()).toISOString(),
      sequence: ++sequence,
      ...over,
    });
    const send = (e: CallStatusEvent, secret = SECRET, r = ref) => {
      const body = JSON.stringify(e);
      return record({
        signature: signCallback(secret, body, Math.floor(time.now() / 1000)),
        rawBody: body,
        ref: r,
      });
    };
    const stored = () => store.all()[0]!;
    return { time, store, send, event, stored, nudges, ref, record, suppressed };
  }

  it('settles the attempt once and nudges the lease holder; a duplicate changes nothing', async () => {
    const s = await setup();
    const completed = s.event('completed', { durationSeconds: 42 });
    expect(await s.send(completed)).toBe('settled');
    expect(s.stored()).toMatchObject({ state: 'completed', callId: 'call-1', attempts: 1 });
    expect(await s.send(completed)).toBe('already-settled');
    expect(s.stored()).toMatchObject({ state: 'completed' });
    expect(s.nudges).toEqual(['http://broker task-0000', 'http://broker task-0000']);
    expect(await s.store.inFlight('c1')).toEqual([]);
  });

  it('puts the number on the suppression list when the outcome asks to opt out, even on a late event', async () => {
    const s = await setup();
    expect(await s.send(s.event('completed', { optOut: true }))).toBe('settled');
    expect(await s.send(s.event('completed', { optOut: true }))).toBe('already-settled');
    const recipient = s.stored().recipient;
    expect(s.suppressed.map((e) => [e.recipient, e.source, e.kind])).toEqual([
      [recipient, 'call-outcome', 'phone'],
      [recipient, 'call-outcome', 'phone'],
    ]);
    expect(s.stored()).toMatchObject({ state: 'completed' });
  });

  it('never lets a late or conflicting status regress a final one', async () => {
    const s = await setup();
    const ringing = s.event('ringing');
    const answered = s.event('answered');
    const completed = s.event('completed');
    expect(await s.send(completed)).toBe('settled');
    expect(await s.send(answered)).toBe('stale');
    expect(await s.send(ringing)).toBe('stale');
    expect(await s.send(s.event('failed', { reason: 'unreachable' }))).toBe('already-settled');
    expect(s.stored()).toMatchObject({ state: 'completed', lastResult: 'completed' });
  });

  it('records the call id on progress and puts a busy attempt back for a retry after the delay', async () => {
    const s = await setup();
    expect(await s.send(s.event('ringing'))).toBe('progress');
    expect(s.stored()).toMatchObject({ state: 'in-flight', callId: 'call-1' });
    expect(await s.send(s.event('busy'))).toBe('settled');
    expect(s.stored()).toMatchObject({ state: 'retry-wait', lastResult: 'busy', readyAt: T0 + 60_000 });
  });

  it('ignores a callback about an attempt the task has moved past', async () => {
    const s = await setup();
    const task = s.stored();
    s.store.tasks.set(`${task.jobId}/${task.taskId}`, { ...task, attempts: 2 });
    expect(await s.send(s.event('completed'))).toBe('stale');
    expect(s.stored().state).toBe('in-flight');
  });

  it('refuses a wrong signature, a malformed body, and a callback whose key is not the attempt its URL names', async () => {
    const s = await setup();
    await expect(s.send(s.event('completed'), 'wrong')).rejects.toBeInstanceOf(SignatureMismatchError);
    const body = '{"callId":';
    await expect(
      s.record({
        signature: signCallback(SECRET, body, Math.floor(s.time.now() / 1000)),
        rawBody: body,
        ref: s.ref,
      }),
    ).rejects.toBeInstanceOf(MalformedCallStatusError);
    await expect(s.send(s.event('completed'), SECRET, { ...s.ref, attempt: 2 })).rejects.toBeInstanceOf(
      CallbackMismatchError,
    );
    expect(s.stored().state).toBe('in-flight');
  });

  it('builds callback URLs that name the attempt', () => {
    const url = new URL(
      callbackUrlFor('https://api.example/providers/acme/calls/status', {
        jobId: 'J',
        taskId: 't/1',
        attempt: 3,
      }),
    );
    expect(url.pathname).toBe('/providers/acme/calls/status');
    expect(Object.fromEntries(url.searchParams)).toEqual({ job: 'J', task: 't/1', attempt: '3' });
  });
});

describe("a retry in its recipient's zone (issue 14 #4)", () => {
  // 09:00-18:00 every day; T0 is 10:00 on Monday in Tokyo, 20:00 on Sunday in New York (EST).
  const weekdays = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
  const client = clientSettings({
    callingHours: {
      timeZone: 'Asia/Tokyo',
      weekly: Object.fromEntries(weekdays.map((d) => [d, [{ start: '09:00', end: '18:00' }]])),
    },
  });
  const recipientJob = job({ timeZoneBy: 'recipient', maxAttempts: 2, retryDelaySeconds: 60 });
  const [base] = tasksFor(recipientJob, 1);
  const inNewYork = { ...base!, timeZone: 'America/New_York' };
  const inTokyo = { ...base!, timeZone: 'Asia/Tokyo' };
  const newYorkMonday9 = Date.parse('2026-03-02T14:00:00Z');
  const retry = { state: 'retry-wait', lastResult: 'busy', readyAt: T0 + 60_000 } as const;

  it("waits for the later of its delay and the recipient's next opening, in the recipient's zone", () => {
    expect(retryReadyAt(client, recipientJob, inNewYork, T0 + 60_000)).toBe(newYorkMonday9);
    expect(retimedRetry(retry, { client, job: recipientJob, task: inNewYork })).toEqual({
      ...retry,
      readyAt: newYorkMonday9,
      notBefore: retry.readyAt,
    });
    // Open in Tokyo: the delay alone.
    expect(retimedRetry(retry, { client, job: recipientJob, task: inTokyo })).toEqual(retry);
    // A job read in the client's zone keeps its delay (its hours are checked at the job).
    expect(retryReadyAt(client, job({ timeZoneBy: 'client' }), inNewYork, T0 + 60_000)).toBe(T0 + 60_000);
    expect(retimedRetry(retry, { client: undefined, job: recipientJob, task: inNewYork })).toEqual(retry);
  });

  it("skips restricted periods read in the recipient's zone, and expires when the opening is past the job's end", () => {
    // Monday the 2nd is restricted where the recipient is: Tuesday 09:00 in New York.
    const closedMonday = job({ timeZoneBy: 'recipient', restrictedPeriods: [{ start: '2026-03-02' }] });
    expect(retimedRetry(retry, { client, job: closedMonday, task: inNewYork })).toEqual({
      ...retry,
      readyAt: Date.parse('2026-03-03T14:00:00Z'),
      notBefore: retry.readyAt,
    });
    const endsFirst = job({ timeZoneBy: 'recipient', endAt: newYorkMonday9 });
    expect(retimedRetry(retry, { client, job: endsFirst, task: inNewYork })).toMatchObject({
      state: 'expired',
      lastResult: 'busy',
    });
  });

  it('a busy call of a New York recipient at their night is retried at their morning, not after the delay', async () => {
    const time = new FakeTime(T0);
    const store = new MemoryTaskStore(new MemoryLeaseStore(), time);
    store.add(client, recipientJob, [{ ...inNewYork, state: 'in-flight', attempts: 1, startedAt: T0 }]);
    store.flying.set('c1', new Set([`${recipientJob.jobId}/${inNewYork.taskId}`]));
    const record = makeRecordCallStatus({
      tasks: store,
      leases: { endpointOf: async () => undefined },
      notifier: { callEnded: async () => {} },
      clock: time,
      secrets: SECRET,
    });
    const ref = { jobId: recipientJob.jobId, taskId: inNewYork.taskId, attempt: 1 };
    const body = JSON.stringify({
      callId: 'call-ny',
      idempotencyKey: attemptKey(ref.jobId, ref.taskId, 1),
      status: 'busy',
      at: new Date(T0).toISOString(),
      sequence: 1,
    });
    const signature = signCallback(SECRET, body, Math.floor(T0 / 1000));
    expect(await record({ signature, rawBody: body, ref })).toBe('settled');
    expect(store.all()[0]).toMatchObject({
      state: 'retry-wait',
      lastResult: 'busy',
      readyAt: newYorkMonday9,
    });
  });
});
