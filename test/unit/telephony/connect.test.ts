/**
 * The Amazon Connect adapter against the Connect emulator: the real `@aws-sdk/client-connect`
 * over the REST-JSON protocol, SigV4-checked; contact events as EventBridge delivers them, read by
 * the same rule as `DescribeContact`.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '#local/cloud.ts';
import { type EventBridgeEvent, LOCAL_CONNECT, startConnectEmulator } from '#local/connect-emulator.ts';
import type { ScriptedCall, TelephonyEmulator, TelephonyFaults } from '#local/telephony-sandbox.ts';
import { makeConnectClient } from '#shared/adapters/aws-clients.ts';
import { ConnectContactAttributes } from '#shared/adapters/connect-contact-attributes.ts';
import { ConnectTelephonyProvider } from '#shared/adapters/connect-telephony.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import {
  attemptOfContact,
  CONNECT_EVENT_RULES,
  CONNECT_OPT_OUT_ATTRIBUTE,
  connectInstanceOf,
  contactAsksToOptOut,
  contactStatusEvent,
  matchesContactRule,
  readContactEvent,
} from '#shared/telephony/connect-contact.ts';
import type { CallRequest, CallSnapshot, TelephonyProvider } from '#shared/telephony/port.ts';
import { mergeStatus } from '#shared/telephony/port.ts';
import type { ConnectSettings } from '#shared/telephony/settings.ts';
import { ManualTime } from './manual-time.ts';

const settings: ConnectSettings = {
  provider: 'connect',
  instanceId: LOCAL_CONNECT.instanceId,
  contactFlowId: LOCAL_CONNECT.contactFlowId,
  sourcePhoneNumber: LOCAL_CONNECT.sourcePhoneNumber,
};

let emulator: TelephonyEmulator | undefined;
let time: ManualTime;
let events: EventBridgeEvent[];
let client: ReturnType<typeof makeConnectClient>;

afterEach(async () => {
  await emulator?.stop();
  emulator = undefined;
});

async function start(
  options: { overrides?: Record<string, ScriptedCall>; faults?: Partial<TelephonyFaults> } = {},
  connect: Partial<ConnectSettings> = {},
  credentials: { accessKeyId: string; secretAccessKey: string } = LOCAL_CREDENTIALS,
): Promise<TelephonyProvider> {
  time = new ManualTime();
  events = [];
  emulator = await startConnectEmulator({
    time,
    ringSeconds: 5,
    durationSeconds: 60,
    ...options,
    deliver: async (event) => {
      events.push(event);
    },
  });
  client = makeConnectClient({ region: LOCAL_REGION, endpoint: emulator.url, credentials });
  return new ConnectTelephonyProvider(client, { ...settings, ...connect });
}

let counter = 0;
function request(to: string, overrides: Partial<CallRequest> = {}): CallRequest {
  return {
    to,
    clientId: 'c1',
    jobId: 'job-1',
    taskId: `task-${++counter}`,
    attempt: 1,
    callbackUrl: 'https://unused.example/cb',
    maxDurationSeconds: 600,
    variables: { name: 'あいこ' },
    ...overrides,
  };
}

async function place(provider: TelephonyProvider, call: CallRequest): Promise<string> {
  const outcome = await provider.initiate(call, attemptKey(call.jobId, call.taskId, call.attempt));
  if (outcome.kind !== 'accepted') throw new Error(JSON.stringify(outcome));
  return outcome.callId;
}

/** Every event delivered for a contact, read and merged as connect-events does. */
function fromEvents(contactId: string): CallSnapshot | undefined {
  let state: CallSnapshot | undefined;
  for (const event of events) {
    const reading = readContactEvent(event);
    if (reading.kind !== 'status' || reading.contact.contactId !== contactId) continue;
    state = mergeStatus(state, contactStatusEvent(reading.contact, 'k'));
  }
  return state;
}

async function settle(): Promise<void> {
  for (let i = 0; i < 100 && (time.pendingTimers > 0 || emulator!.pending().callbacksInFlight > 0); i++) {
    time.runAll();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('Amazon Connect adapter and emulator', () => {
  it('places a call with the attempt key as ClientToken: a repeat returns the same contact, nothing rings again', async () => {
    const provider = await start();
    const call = request('+815011110001');
    const first = await place(provider, call);
    const again = await place(provider, call);
    expect(again).toBe(first);
    expect(emulator!.stats('c1').rings).toBe(1);
    expect(emulator!.rings()[0]).toMatchObject({ taskId: call.taskId, attempt: 1, to: call.to });
  });

  it('answered → completed with the talk time, from DescribeContact and from the contact events alike', async () => {
    const provider = await start({
      overrides: { '+815011110002': { outcome: 'answered', ringSeconds: 4, durationSeconds: 42 } },
    });
    const contactId = await place(provider, request('+815011110002'));
    expect((await provider.getCall(contactId))?.status).toBe('ringing');
    await settle();
    const described = await provider.getCall(contactId);
    expect(described).toMatchObject({ status: 'completed', durationSeconds: 42, sequence: 3 });
    expect(described?.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(fromEvents(contactId)).toMatchObject({ status: 'completed', durationSeconds: 42 });
    const types = events.map((e) => e.detail.eventType);
    expect(types).toEqual(['INITIATED', 'CONNECTED_TO_SYSTEM', 'DISCONNECTED']);
    expect(events[0]).toMatchObject({ source: 'aws.connect', 'detail-type': 'Amazon Connect Contact Event' });
  });

  it('maps busy, no answer, a failed number and (with AMD) an answering machine', async () => {
    const overrides: Record<string, ScriptedCall> = {
      '+815011110003': { outcome: 'busy' },
      '+815011110004': { outcome: 'no-answer', ringSeconds: 30 },
      '+815011110005': { outcome: 'failed' },
      '+815011110006': { outcome: 'machine', durationSeconds: 20 },
    };
    const provider = await start({ overrides }, { answeringMachineDetection: true });
    const ids = [];
    for (const to of Object.keys(overrides)) ids.push(await place(provider, request(to)));
    await settle();
    const statuses = await Promise.all(ids.map(async (id) => (await provider.getCall(id))?.status));
    expect(statuses).toEqual(['busy', 'no-answer', 'failed', 'voicemail']);
    expect(ids.map((id) => fromEvents(id)?.status)).toEqual(statuses);
    expect(emulator!.stats('c1').outcomes).toMatchObject({
      busy: 1,
      'no-answer': 1,
      failed: 1,
      voicemail: 1,
    });
  });

  it('the job ring timeout makes a long ring a no-answer (RingTimeoutInSeconds)', async () => {
    const provider = await start({
      overrides: { '+815011110007': { outcome: 'answered', ringSeconds: 40 } },
    });
    const contactId = await place(provider, request('+815011110007', { ringTimeoutSeconds: 20 }));
    await settle();
    expect((await provider.getCall(contactId))?.status).toBe('no-answer');
  });

  it('throttling is rate-limited; a 500 after the contact started is retried with the same token: one ring', async () => {
    const provider = await start({ faults: { rateLimitRate: 1 } });
    const call = request('+815011110008');
    const key = attemptKey(call.jobId, call.taskId, 1);
    expect(await provider.initiate(call, key)).toMatchObject({ kind: 'rate-limited' });
    emulator!.setFaults({ rateLimitRate: 0, initiateErrorAfterCreateRate: 1 });
    expect(await provider.initiate(call, key)).toMatchObject({ kind: 'retryable' });
    emulator!.setFaults({ initiateErrorAfterCreateRate: 0 });
    expect(await provider.initiate(call, key)).toMatchObject({ kind: 'accepted' });
    expect(emulator!.stats('c1').rings).toBe(1);
    expect(emulator!.stats('c1').repeatedRings).toEqual([]);
  });

  it('a misconfiguration is a final rejection naming the cause, not a retry', async () => {
    const provider = await start({}, { contactFlowId: '11111111-1111-4111-8111-111111111111' });
    expect(await provider.initiate(request('+815011110009'), 'k-1')).toMatchObject({
      kind: 'rejected',
      status: 404,
      code: 'ResourceNotFoundException',
    });
    const forged = await start({}, {}, { accessKeyId: 'local', secretAccessKey: 'wrong' });
    expect(await forged.initiate(request('+815011110009'), 'k-2')).toMatchObject({
      kind: 'rejected',
      status: 403,
      code: 'InvalidSignatureException',
    });
    expect(emulator!.stats('c1').rings).toBe(0);
    // An access key Connect does not know, as AWS answers it (issue 35 #5).
    const stranger = await start({}, {}, { accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'any' });
    expect(await stranger.initiate(request('+815011110009'), 'k-3')).toMatchObject({
      kind: 'rejected',
      status: 403,
      code: 'UnrecognizedClientException',
    });
    expect(emulator!.stats('c1').rings).toBe(0);
  });

  it('hangUp stops a contact in progress (StopContact): it ends as completed with its talk time, or no-answer while ringing', async () => {
    const provider = await start({
      overrides: {
        '+815011110010': { outcome: 'answered', ringSeconds: 1, durationSeconds: 600 },
        '+815011110011': { outcome: 'answered', ringSeconds: 50 },
      },
    });
    const talking = await place(provider, request('+815011110010'));
    const ringing = await place(provider, request('+815011110011'));
    time.advance(11_000);
    expect(await provider.hangUp!(talking)).toBe(true);
    expect(await provider.hangUp!(ringing)).toBe(true);
    expect(await provider.hangUp!(talking)).toBe(false);
    expect(await provider.getCall(talking)).toMatchObject({ status: 'completed', durationSeconds: 10 });
    expect((await provider.getCall(ringing))?.status).toBe('no-answer');
    expect(emulator!.stats('c1').inFlight).toBe(0);
    // Past the ends the calls had planned (issue 35 #9: the far side ended a stopped call a second
    // time there, and threw on a loaded machine): a stopped contact stays as it was stopped.
    time.advance(700_000);
    expect(await provider.getCall(talking)).toMatchObject({ status: 'completed', durationSeconds: 10 });
    expect((await provider.getCall(ringing))?.status).toBe('no-answer');
    expect(emulator!.stats('c1').inFlight).toBe(0);
  });

  it('an unknown contact is undefined; a malformed event is refused by name', async () => {
    const provider = await start();
    expect(await provider.getCall('22222222-2222-4222-8222-222222222222')).toBeUndefined();
    expect(() => readContactEvent({ source: 'aws.connect', detail: {} })).toThrow(/detail-type/);
    expect(
      readContactEvent({
        source: 'aws.connect',
        'detail-type': 'Amazon Connect Contact Event',
        detail: { eventType: 'QUEUED', contactId: 'x', channel: 'VOICE' },
      }),
    ).toEqual({ kind: 'ignored', why: 'event QUEUED' });
  });

  it("GetContactAttributes: the start's attributes, and the contact flow's once a person answered", async () => {
    const optOut = { [CONNECT_OPT_OUT_ATTRIBUTE]: 'TRUE' };
    const provider = await start({
      overrides: {
        '+815011110012': {
          outcome: 'answered',
          ringSeconds: 2,
          durationSeconds: 30,
          contactAttributes: optOut,
        },
        '+815011110013': { outcome: 'busy', contactAttributes: optOut },
      },
    });
    const answered = await place(provider, request('+815011110012', { taskId: 'task-opt-out' }));
    const busy = await place(provider, request('+815011110013'));
    const attributes = new ConnectContactAttributes(() => client);
    const instanceArn = String(events[0]?.detail.instanceArn);
    // Before the answer the flow has set nothing.
    expect(contactAsksToOptOut(await attributes.read(instanceArn, answered))).toBe(false);
    await settle();
    const end = events.find((e) => e.detail.contactId === answered && e.detail.eventType === 'DISCONNECTED')!;
    const reading = readContactEvent(end);
    expect(reading).toMatchObject({ kind: 'status', instanceArn, initialContactId: answered });
    const read = await attributes.read(instanceArn, answered);
    expect(contactAsksToOptOut(read)).toBe(true);
    expect(attemptOfContact(read)).toEqual({ clientId: 'c1', jobId: 'job-1', taskId: 'task-opt-out' });
    expect(read).toMatchObject({ name: 'あいこ' });
    // Nobody answered the busy call: its flow never ran.
    expect(contactAsksToOptOut(await attributes.read(instanceArn, busy))).toBe(false);
    // An unknown contact, or an instance that is not one, is undefined (Connect's 404).
    expect(await attributes.read(instanceArn, '22222222-2222-4222-8222-222222222222')).toBeUndefined();
    expect(await attributes.read('not an arn', answered)).toBeUndefined();
    expect(connectInstanceOf(instanceArn)).toEqual({
      region: LOCAL_REGION,
      instanceId: LOCAL_CONNECT.instanceId,
    });
  });

  it('only "true" (any case, trimmed) asks to opt out', () => {
    expect(contactAsksToOptOut({ [CONNECT_OPT_OUT_ATTRIBUTE]: ' True ' })).toBe(true);
    for (const value of ['false', '1', 'yes', ''])
      expect(contactAsksToOptOut({ [CONNECT_OPT_OUT_ATTRIBUTE]: value })).toBe(false);
    expect(contactAsksToOptOut(undefined)).toBe(false);
    expect(attemptOfContact({ switchboard_client: 'c1' })).toBeUndefined();
  });
});

describe("the stack's contact event rules", () => {
  const routed = (detail: Record<string, unknown>) =>
    (['connect-events', 'connect-opt-outs'] as const).filter((id) =>
      matchesContactRule(detail, CONNECT_EVENT_RULES[id]),
    );

  it("send connect-events only the calls Switchboard started, and connect-opt-outs every contact's end", () => {
    expect(routed({ eventType: 'INITIATED', initiationMethod: 'API' })).toEqual(['connect-events']);
    expect(routed({ eventType: 'DISCONNECTED', initiationMethod: 'API' })).toEqual([
      'connect-events',
      'connect-opt-outs',
    ]);
    // An instance's own inbound calls and transfers: never a call of a task.
    expect(routed({ eventType: 'CONNECTED_TO_SYSTEM', initiationMethod: 'INBOUND' })).toEqual([]);
    expect(routed({ eventType: 'DISCONNECTED', initiationMethod: 'TRANSFER' })).toEqual(['connect-opt-outs']);
    expect(routed({ eventType: 'QUEUED', initiationMethod: 'API' })).toEqual([]);
    expect(routed({ eventType: 'INITIATED' })).toEqual([]);
  });

  it('reads a contact that never connected and gives no reason as unanswered, not as failed for good', () => {
    const reading = readContactEvent({
      source: 'aws.connect',
      'detail-type': 'Amazon Connect Contact Event',
      detail: {
        eventType: 'DISCONNECTED',
        contactId: 'c-1',
        channel: 'VOICE',
        initiationMethod: 'API',
        initiationTimestamp: '2026-01-01T00:00:00.000Z',
        disconnectTimestamp: '2026-01-01T00:01:00.000Z',
      },
    });
    if (reading.kind !== 'status') throw new Error('expected a status reading');
    expect(contactStatusEvent(reading.contact, 'k')).toMatchObject({
      status: 'no-answer',
      reason: 'not connected (no disconnect reason given)',
    });
  });
});
