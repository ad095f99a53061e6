import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTelephonySandbox, type TelephonySandbox } from '#local/telephony-sandbox.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { HttpTelephonyProvider, serialiseCallRequest } from '#shared/telephony/http-provider.ts';
import type { CallRequest, TelephonyProvider } from '#shared/telephony/port.ts';
import { TelephonyRequestError, TelephonyUnavailableError } from '#shared/telephony/port.ts';
import { type CallbackReceiver, startCallbackReceiver } from './callback-receiver.ts';

const secret = 'callback-secret';
const clock = { now: () => Date.now() };
let sandbox: TelephonySandbox;
let receiver: CallbackReceiver;
let provider: TelephonyProvider;

function request(overrides: Partial<CallRequest> = {}): CallRequest {
  return {
    to: '+819012345678',
    clientId: 'client-a',
    jobId: 'job-1',
    taskId: 'task-1',
    attempt: 1,
    callbackUrl: receiver.url,
    maxDurationSeconds: 600,
    variables: { name: 'Aiko', slot: '10:00' },
    ...overrides,
  };
}

beforeAll(async () => {
  receiver = await startCallbackReceiver(secret, clock);
  // Calls are an hour long: nothing ends while a test looks at it.
  sandbox = await startTelephonySandbox({
    callbackSecret: secret,
    outcomes: { answered: 1, busy: 0, noAnswer: 0, failed: 0 },
    ringSeconds: 3_600,
  });
  provider = new HttpTelephonyProvider({
    baseUrl: sandbox.url,
    apiToken: sandbox.apiToken,
    clock,
    timeoutMs: 2_000,
  });
});
afterEach(() => sandbox.reset());
afterAll(async () => {
  await sandbox.stop();
  await receiver.stop();
});

describe('HTTP telephony provider against the sandbox', () => {
  it('places a call and can read it back', async () => {
    const key = attemptKey('job-1', 'task-1', 1);
    const outcome = await provider.initiate(request(), key);
    expect(outcome).toEqual({ kind: 'accepted', callId: expect.any(String), duplicate: false });
    const callId = outcome.kind === 'accepted' ? outcome.callId : '';
    expect(await provider.getCall(callId)).toMatchObject({ callId, idempotencyKey: key, status: 'ringing' });
    expect(sandbox.rings()).toMatchObject([{ callId, to: '+819012345678', taskId: 'task-1', attempt: 1 }]);
  });

  it('answers a repeated key with the same call and rings only once', async () => {
    const key = attemptKey('job-1', 'task-1', 1);
    const first = await provider.initiate(request(), key);
    const again = await provider.initiate(request({ variables: { slot: '10:00', name: 'Aiko' } }), key);
    expect(again).toEqual({
      kind: 'accepted',
      callId: (first as { callId: string }).callId,
      duplicate: true,
    });
    const stats = sandbox.stats('client-a');
    expect(stats.rings).toBe(1);
    expect(stats.ringsPerRecipient).toEqual({ '+819012345678': { 'task-1': 1 } });
    expect(stats.repeatedRings).toEqual([]);
  });

  it('refuses a key reused for another request, without ringing', async () => {
    const key = attemptKey('job-1', 'task-1', 1);
    await provider.initiate(request(), key);
    const outcome = await provider.initiate(request({ to: '+819099998888' }), key);
    expect(outcome).toMatchObject({ kind: 'rejected', status: 422, code: 'idempotency_key_reused' });
    expect(sandbox.rings()).toHaveLength(1);
  });

  it('lets a new attempt ring again under its new key', async () => {
    await provider.initiate(request(), attemptKey('job-1', 'task-1', 1));
    await provider.initiate(request({ attempt: 2 }), attemptKey('job-1', 'task-1', 2));
    const stats = sandbox.stats('client-a');
    expect(stats.ringsPerRecipient).toEqual({ '+819012345678': { 'task-1': 2 } });
    expect(stats.repeatedRings).toEqual([]);
  });

  it('reports a 5xx before the call exists as retryable; the retry places it once', async () => {
    const key = attemptKey('job-1', 'task-1', 1);
    sandbox.setFaults({ initiateErrorRate: 1 });
    expect(await provider.initiate(request(), key)).toEqual({
      kind: 'retryable',
      reason: 'HTTP 503 unavailable',
    });
    expect(sandbox.rings()).toHaveLength(0);
    sandbox.setFaults({ initiateErrorRate: 0 });
    expect(await provider.initiate(request(), key)).toMatchObject({ kind: 'accepted', duplicate: false });
    expect(sandbox.rings()).toHaveLength(1);
  });

  it('reports a 5xx after the call was placed as retryable; the retry finds that call instead of ringing again', async () => {
    const key = attemptKey('job-1', 'task-1', 1);
    sandbox.setFaults({ initiateErrorAfterCreateRate: 1 });
    expect(await provider.initiate(request(), key)).toMatchObject({ kind: 'retryable' });
    const [ring] = sandbox.rings();
    sandbox.setFaults({ initiateErrorAfterCreateRate: 0 });
    expect(await provider.initiate(request(), key)).toEqual({
      kind: 'accepted',
      callId: ring!.callId,
      duplicate: true,
    });
    expect(sandbox.stats('client-a').rings).toBe(1);
  });

  it('reports no answer in time as retryable; the retry finds the call', async () => {
    const impatient = new HttpTelephonyProvider({
      baseUrl: sandbox.url,
      apiToken: sandbox.apiToken,
      clock,
      timeoutMs: 50,
    });
    const key = attemptKey('job-1', 'task-1', 1);
    sandbox.setFaults({ initiateDelayMs: 60_000 });
    const outcome = await impatient.initiate(request(), key);
    expect(outcome).toEqual({ kind: 'retryable', reason: 'no answer within 50 ms' });
    sandbox.setFaults({ initiateDelayMs: 0 });
    const retry = await impatient.initiate(request(), key);
    expect(retry).toEqual({ kind: 'accepted', callId: sandbox.rings()[0]!.callId, duplicate: true });
    expect(sandbox.rings()).toHaveLength(1);
  });

  it('reports 429 as rate-limited with the wait the provider asked for, and places nothing', async () => {
    sandbox.setFaults({ rateLimitRate: 1, retryAfterSeconds: 2 });
    const outcome = await provider.initiate(request(), attemptKey('job-1', 'task-1', 1));
    expect(outcome).toEqual({ kind: 'rate-limited', retryAfterMs: 2_000 });
    expect(sandbox.rings()).toHaveLength(0);
  });

  it('reports a refused connection as retryable', async () => {
    const port = await closedPort();
    const nowhere = new HttpTelephonyProvider({ baseUrl: `http://127.0.0.1:${port}`, apiToken: 'x', clock });
    const outcome = await nowhere.initiate(request(), attemptKey('job-1', 'task-1', 1));
    expect(outcome).toMatchObject({ kind: 'retryable', reason: expect.stringContaining('ECONNREFUSED') });
    await expect(nowhere.getCall('CA1')).rejects.toThrow(TelephonyUnavailableError);
  });

  it('rejects a bad number or a wrong token for good', async () => {
    const key = attemptKey('job-1', 'task-1', 1);
    expect(await provider.initiate(request({ to: '09012345678' }), key)).toMatchObject({
      kind: 'rejected',
      status: 400,
      code: 'invalid_request',
      message: 'to must be an E.164 number',
    });
    const stranger = new HttpTelephonyProvider({ baseUrl: sandbox.url, apiToken: 'wrong', clock });
    expect(await stranger.initiate(request(), key)).toMatchObject({ kind: 'rejected', status: 401 });
    await expect(stranger.getCall('CA1')).rejects.toThrow(TelephonyRequestError);
    expect(sandbox.rings()).toHaveLength(0);
  });

  it('returns undefined for a call the provider does not know', async () => {
    expect(await provider.getCall('CA-unknown')).toBeUndefined();
  });
});

describe('serialiseCallRequest', () => {
  it('gives the same bytes for the same request, whatever order its variables were built in', () => {
    const base = {
      to: '+819012345678',
      clientId: 'c',
      jobId: 'j',
      taskId: 't',
      attempt: 1,
      callbackUrl: 'https://example.test/cb',
      maxDurationSeconds: 60,
    };
    const a = serialiseCallRequest({ ...base, variables: { b: '2', a: '1' } });
    const b = serialiseCallRequest({ variables: { a: '1', b: '2' }, ...base });
    expect(a).toBe(b);
    expect(a).toBe(
      '{"to":"+819012345678","clientId":"c","taskId":"t","attempt":1,"callbackUrl":"https://example.test/cb",' +
        '"maxDurationSeconds":60,"variables":{"a":"1","b":"2"}}',
    );
  });
});

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
