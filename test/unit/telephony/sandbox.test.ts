import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CallLedger } from '#local/telephony-sandbox/ledger.ts';
import {
  type ScriptedCall,
  startTelephonySandbox,
  type TelephonySandbox,
  type TelephonySandboxOptions,
} from '#local/telephony-sandbox.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { HttpTelephonyProvider } from '#shared/telephony/http-provider.ts';
import type {
  CallRequest,
  CallSnapshot,
  CallStatusEvent,
  TelephonyProvider,
} from '#shared/telephony/port.ts';
import { mergeStatus } from '#shared/telephony/port.ts';
import { type CallbackReceiver, startCallbackReceiver } from './callback-receiver.ts';
import { ManualTime } from './manual-time.ts';

const secret = 'sandbox-callback-secret';
let time: ManualTime;
let receiver: CallbackReceiver;
let sandbox: TelephonySandbox | undefined;
let provider: TelephonyProvider;

beforeEach(async () => {
  time = new ManualTime();
  receiver = await startCallbackReceiver(secret, time);
});
afterEach(async () => {
  await sandbox?.stop();
  sandbox = undefined;
  await receiver.stop();
});

async function start(options: Partial<TelephonySandboxOptions> = {}): Promise<TelephonySandbox> {
  sandbox = await startTelephonySandbox({ callbackSecret: secret, time, ringSeconds: 5, ...options });
  provider = new HttpTelephonyProvider({ baseUrl: sandbox.url, apiToken: sandbox.apiToken, clock: time });
  return sandbox;
}

let taskCounter = 0;
async function call(to: string, overrides: Partial<CallRequest> = {}): Promise<string> {
  const taskId = overrides.taskId ?? `task-${++taskCounter}`;
  const outcome = await provider.initiate(
    {
      to,
      clientId: 'client-a',
      jobId: 'job-1',
      taskId,
      attempt: 1,
      callbackUrl: receiver.url,
      maxDurationSeconds: 600,
      variables: {},
      ...overrides,
    },
    attemptKey('job-1', taskId, overrides.attempt ?? 1),
  );
  if (outcome.kind !== 'accepted') throw new Error(`call not accepted: ${JSON.stringify(outcome)}`);
  return outcome.callId;
}

/** Waits (for real I/O, not for logic) until every callback post has been answered. */
async function callbacksArrived(): Promise<void> {
  while (sandbox!.pending().callbacksInFlight > 0) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** Runs every timer and delivery to the end, retries included. */
async function runToEnd(): Promise<void> {
  for (;;) {
    await callbacksArrived();
    if (time.pendingTimers === 0) return;
    time.runAll();
  }
}

function received(callId: string): CallStatusEvent[] {
  return receiver.events.filter((e) => e.callId === callId);
}

function merged(callId: string): CallSnapshot | undefined {
  return received(callId).reduce<CallSnapshot | undefined>((state, e) => mergeStatus(state, e), undefined);
}

describe('call outcomes and their signed callbacks', () => {
  const script: Record<string, ScriptedCall> = {
    '+815000000001': { outcome: 'answered', ringSeconds: 4, durationSeconds: 120 },
    '+815000000002': { outcome: 'busy', ringSeconds: 2 },
    '+815000000003': { outcome: 'no-answer', ringSeconds: 30 },
    '+815000000004': { outcome: 'failed', reason: 'invalid-number' },
    '+815000000005': { outcome: 'answered', ringSeconds: 1, durationSeconds: 9_999 },
  };

  it('answered → completed, with the talk time in call seconds at a 60× time scale', async () => {
    await start({ overrides: script, timeScale: 60 });
    const callId = await call('+815000000001');
    time.advance(4_000 / 60);
    await callbacksArrived();
    expect(received(callId).map((e) => e.status)).toEqual(['ringing', 'answered']);
    // 120 call seconds at 60× are 2 wall seconds.
    time.advance(2_000);
    await callbacksArrived();
    expect(received(callId).map((e) => [e.status, e.sequence])).toEqual([
      ['ringing', 1],
      ['answered', 2],
      ['completed', 3],
    ]);
    expect(received(callId).at(-1)).toMatchObject({ durationSeconds: 120 });
    expect(sandbox!.rings()[0]).toMatchObject({ outcome: 'completed', endedAt: time.now() });
    expect(receiver.rejected).toEqual([]);
  });

  it('busy, no-answer and failed each end the call with one final callback', async () => {
    await start({ overrides: script });
    const busy = await call('+815000000002');
    const noAnswer = await call('+815000000003');
    const failed = await call('+815000000004');
    await runToEnd();
    expect(received(busy).map((e) => e.status)).toEqual(['ringing', 'busy']);
    expect(received(noAnswer).map((e) => e.status)).toEqual(['ringing', 'no-answer']);
    expect(received(failed)).toMatchObject([{ status: 'failed', reason: 'invalid-number', sequence: 1 }]);
    expect(sandbox!.stats('client-a').outcomes).toEqual({
      completed: 0,
      busy: 1,
      'no-answer': 1,
      failed: 1,
      voicemail: 0,
    });
  });

  it('hangs up an answered call at maxDurationSeconds and says so', async () => {
    await start({ overrides: script });
    const callId = await call('+815000000005', { maxDurationSeconds: 300 });
    await runToEnd();
    expect(received(callId).at(-1)).toMatchObject({
      status: 'completed',
      durationSeconds: 300,
      reason: 'max-duration',
    });
  });
});

describe('far-side accounting of a client’s calls', () => {
  it('measures the most calls in flight and the most starts in any 1 s window', async () => {
    await start({
      overrides: {
        '+815100000001': { outcome: 'answered', ringSeconds: 1, durationSeconds: 2 }, // 0 → 3000
        '+815100000002': { outcome: 'busy', ringSeconds: 1 }, // 0 → 1000
        '+815100000003': { outcome: 'failed' }, // 500 → 500
        '+815100000004': { outcome: 'no-answer', ringSeconds: 1 }, // 999 → 1999
        '+815100000005': { outcome: 'answered', ringSeconds: 1, durationSeconds: 1 }, // 1500 → 3500
        '+815100000006': { outcome: 'answered', ringSeconds: 1, durationSeconds: 10 }, // 1600 → 12600
      },
    });
    await call('+815100000001');
    await call('+815100000002');
    time.advance(500);
    await call('+815100000003');
    time.advance(499);
    await call('+815100000004');
    expect(sandbox!.stats('client-a')).toMatchObject({ inFlight: 3, maxInFlight: 3, maxStartsPerSecond: 4 });
    time.advance(501);
    await call('+815100000005');
    time.advance(100);
    await call('+815100000006');
    expect(sandbox!.stats('client-a')).toMatchObject({ inFlight: 4, maxInFlight: 4, maxStartsPerSecond: 4 });
    await runToEnd();
    expect(sandbox!.stats('client-a')).toMatchObject({
      rings: 6,
      inFlight: 0,
      maxInFlight: 4,
      maxStartsPerSecond: 4,
      outcomes: { completed: 3, busy: 1, 'no-answer': 1, failed: 1, voicemail: 0 },
      repeatedRings: [],
    });
    expect(sandbox!.stats('client-b')).toMatchObject({ rings: 0, maxInFlight: 0, maxStartsPerSecond: 0 });
  });

  it('counts rings per recipient and task, and names an attempt that rang twice', async () => {
    await start({ overrides: { '+815200000001': { outcome: 'busy', ringSeconds: 1 } } });
    await call('+815200000001', { taskId: 't1' });
    await call('+815200000001', { taskId: 't1', attempt: 2 });
    await call('+815200000001', { taskId: 't2' });
    // A broker that lost its key and made a fresh one for the same attempt: the far side sees it.
    await provider.initiate(
      {
        to: '+815200000001',
        clientId: 'client-a',
        jobId: 'job-1',
        taskId: 't2',
        attempt: 1,
        callbackUrl: receiver.url,
        maxDurationSeconds: 60,
        variables: {},
      },
      '00000000-0000-4000-8000-000000000001',
    );
    const stats = sandbox!.stats('client-a');
    expect(stats.ringsPerRecipient).toEqual({ '+815200000001': { t1: 2, t2: 2 } });
    expect(stats.repeatedRings).toEqual([{ to: '+815200000001', taskId: 't2', attempt: 1, rings: 2 }]);
  });
});

describe('CallLedger', () => {
  it('counts starts exactly one window apart in different windows', () => {
    const ledger = new CallLedger();
    for (let i = 0; i <= 10; i++) ledger.start('c', 1_000_000 + i * 100);
    expect(ledger.counts('c').maxStartsPerWindow).toBe(10);
    ledger.start('d', 0);
    ledger.start('d', 1_000);
    ledger.start('d', 2_000);
    expect(ledger.counts('d')).toMatchObject({ maxStartsPerWindow: 1, maxInFlight: 3, inFlight: 3 });
  });

  it('frees a slot when a call ends, so the next start does not raise the peak', () => {
    const ledger = new CallLedger();
    ledger.start('c', 0);
    ledger.start('c', 10);
    ledger.end('c');
    ledger.start('c', 20);
    ledger.end('c');
    ledger.end('c');
    expect(ledger.counts('c')).toEqual({ starts: 3, inFlight: 0, maxInFlight: 2, maxStartsPerWindow: 3 });
    expect(() => ledger.end('c')).toThrow(RangeError);
  });
});

describe('callback faults are observable', () => {
  const answered = { '+815300000001': { outcome: 'answered', ringSeconds: 2, durationSeconds: 30 } } as const;

  it('lost callbacks never arrive, are recorded as lost, and the call can still be read', async () => {
    await start({ overrides: answered, faults: { callbackLossRate: 1 } });
    const callId = await call('+815300000001');
    await runToEnd();
    expect(received(callId)).toEqual([]);
    expect(sandbox!.callbacks().map((c) => [c.status, c.fate])).toEqual([
      ['ringing', 'lost'],
      ['answered', 'lost'],
      ['completed', 'lost'],
    ]);
    expect(sandbox!.stats('client-a').callbacks).toMatchObject({ events: 3, lost: 3, delivered: 0 });
    expect(await provider.getCall(callId)).toMatchObject({
      status: 'completed',
      sequence: 3,
      durationSeconds: 30,
    });
  });

  it('duplicated callbacks arrive twice and still merge to the one final state', async () => {
    await start({ overrides: answered, faults: { callbackDuplicateRate: 1 } });
    const callId = await call('+815300000001');
    await runToEnd();
    expect(received(callId)).toHaveLength(6);
    expect(sandbox!.stats('client-a').callbacks).toMatchObject({ events: 3, duplicated: 3, delivered: 3 });
    expect(merged(callId)).toEqual(sandbox!.call(callId));
  });

  it('late callbacks arrive only after their delay', async () => {
    await start({ overrides: answered, faults: { callbackDelayMs: 60_000 } });
    const callId = await call('+815300000001');
    time.advance(32_000);
    await callbacksArrived();
    expect(sandbox!.call(callId)?.status).toBe('completed');
    expect(received(callId)).toEqual([]);
    time.advance(60_000);
    await callbacksArrived();
    expect(merged(callId)?.status).toBe('completed');
  });

  it('reordered callbacks are held until the call ends, then all arrive and merge correctly', async () => {
    await start({ overrides: answered, faults: { callbackReorderRate: 1 } });
    const callId = await call('+815300000001');
    time.advance(10_000);
    await callbacksArrived();
    expect(sandbox!.call(callId)?.status).toBe('answered');
    expect(received(callId)).toEqual([]);
    await runToEnd();
    expect(received(callId)).toHaveLength(3);
    expect(sandbox!.callbacks().every((c) => c.reordered && c.fate === 'delivered')).toBe(true);
    expect(merged(callId)).toEqual(sandbox!.call(callId));
  });

  it('retries a callback that gets no 2xx, then records it undeliverable', async () => {
    await start({ overrides: { '+815300000002': { outcome: 'failed' } }, callbackRetries: 2 });
    receiver.answerWith(500);
    await call('+815300000002');
    await runToEnd();
    expect(sandbox!.callbacks()).toMatchObject([
      { status: 'failed', fate: 'undeliverable', attempts: 3, deliveries: 0 },
    ]);
    expect(sandbox!.stats('client-a').callbacks.undeliverable).toBe(1);
  });

  it('stop cancels calls and callbacks still pending', async () => {
    await start({ overrides: answered });
    await call('+815300000001');
    await callbacksArrived();
    expect(time.pendingTimers).toBeGreaterThan(0);
    await sandbox!.stop();
    expect(time.pendingTimers).toBe(0);
    expect(sandbox!.pending()).toEqual({ timers: 0, callbacksInFlight: 0 });
  });
});

describe('outcome distribution', () => {
  async function outcomes(seed: number): Promise<string[]> {
    const weights = { answered: 0.7, busy: 0.1, noAnswer: 0.15, failed: 0.05 };
    // Callbacks are dropped here: only the outcomes matter, and they are in the ring records.
    await start({ seed, outcomes: weights, faults: { callbackLossRate: 1 } });
    // Placed concurrently: outcomes depend on seed and key, not on the order requests arrive in.
    const ids = Array.from({ length: 100 }, (_, i) => i);
    await Promise.all(ids.map((i) => call(`+8160${String(i).padStart(8, '0')}`, { taskId: `dist-${i}` })));
    await runToEnd();
    const result = sandbox!
      .rings()
      .toSorted((a, b) => a.to.localeCompare(b.to))
      .map((ring) => ring.outcome ?? 'in flight');
    await sandbox!.stop();
    sandbox = undefined;
    return result;
  }

  it('is repeatable for a seed and follows the weights', async () => {
    const first = await outcomes(7);
    expect(await outcomes(7)).toEqual(first);
    expect(await outcomes(8)).not.toEqual(first);
    const completed = first.filter((o) => o === 'completed').length;
    expect(completed).toBeGreaterThan(55);
    expect(completed).toBeLessThan(85);
    expect(new Set(first)).toEqual(new Set(['completed', 'busy', 'no-answer', 'failed']));
  });

  it('reset forgets calls and keys, so the same key rings again', async () => {
    await start({ overrides: { '+815400000001': { outcome: 'busy' } } });
    const key = attemptKey('job-1', 'task-reset', 1);
    const req = {
      to: '+815400000001',
      clientId: 'client-a',
      jobId: 'job-1',
      taskId: 'task-reset',
      attempt: 1,
      callbackUrl: receiver.url,
      maxDurationSeconds: 60,
      variables: {},
    };
    await provider.initiate(req, key);
    await callbacksArrived();
    sandbox!.reset();
    expect(sandbox!.rings()).toEqual([]);
    expect(sandbox!.stats('client-a').rings).toBe(0);
    expect(await provider.initiate(req, key)).toMatchObject({ kind: 'accepted', duplicate: false });
  });
});
