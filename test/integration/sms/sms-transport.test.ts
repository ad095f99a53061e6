/**
 * The SMS transport (`shared/adapters/sms-transport.ts`) through the real
 * `PinpointSMSVoiceV2Client` against the End User Messaging SMS stand-in: what a text carries (its
 * rendered body, the client's identity and configuration set, the task in `Context`), what it costs
 * in parts, and what each of the service's answers means for the task.
 */
import { PinpointSMSVoiceV2Client } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { afterEach, describe, expect, it } from 'vitest';
import {
  LOCAL_SMS,
  type SmsEmulator,
  type SmsEmulatorOptions,
  startSmsEmulator,
} from '#local/sms-emulator.ts';
import { SMS_CLIENT_CONFIG, SMS_LANE, SmsTransport } from '#shared/adapters/sms-transport.ts';
import type { ClaimedTask } from '#shared/campaign/ports.ts';
import { pushUnit } from '#shared/campaign/send-queue.ts';
import { UnpreparableError } from '#shared/campaign/transport.ts';
import type { SmsSettings } from '#shared/sms/settings.ts';
import { readSmsEvent } from '#shared/sms/sms-events.ts';
import type { SmsTemplate } from '#shared/sms/template.ts';

const AIKO = '+819012345678';
const REMINDER: SmsTemplate = { body: '{{name}}様、明日{{time}}のご予約です。変更は店舗まで。' };

let emulator: SmsEmulator | undefined;
let client: PinpointSMSVoiceV2Client | undefined;

afterEach(async () => {
  client?.destroy();
  await emulator?.close();
  emulator = undefined;
  client = undefined;
});

async function transport(
  options: SmsEmulatorOptions = {},
  settings: Partial<SmsSettings> = {},
  sharedParts?: { take(parts: number): Promise<void> },
): Promise<SmsTransport> {
  emulator = await startSmsEmulator({ deliver: async () => {}, ...options });
  client = new PinpointSMSVoiceV2Client({
    region: LOCAL_SMS.region,
    endpoint: emulator.url,
    credentials: { accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: LOCAL_SMS.secretAccessKey },
    ...SMS_CLIENT_CONFIG,
  });
  return new SmsTransport({
    sms: client,
    clientId: 'shop',
    settings: { originationIdentity: LOCAL_SMS.originationNumber, ...settings },
    defaultConfigurationSet: LOCAL_SMS.configurationSet,
    partsPerSecond: 100,
    ...(sharedParts ? { sharedParts } : {}),
  });
}

function task(overrides: Partial<ClaimedTask<SmsTemplate>> = {}): ClaimedTask<SmsTemplate> {
  return {
    jobId: 'J1',
    taskId: 't00007',
    recipient: AIKO,
    variables: { name: '佐藤', time: '10:00' },
    template: REMINDER,
    attempt: 1,
    attemptStartedAt: Date.now(),
    ...overrides,
  };
}

async function sendOne(t: SmsTransport, claimed = task()) {
  const prepared = t.prepare(pushUnit(claimed));
  await t.ready(prepared);
  return { prepared, outcome: await t.send(prepared) };
}

describe('the SMS transport', () => {
  it('sends each recipient their own text from the client identity, naming the task in Context; accepted, not delivered', async () => {
    const sms = await transport();
    expect(sms).toMatchObject({
      channel: 'sms',
      idempotent: false,
      acceptedAs: 'accepted',
      resendsInDoubt: false,
    });
    expect(sms.limits).toEqual({
      recipientsPerRequest: 1,
      lanes: { [SMS_LANE]: 100 },
      countsRecipients: false,
    });
    expect(sms.groupOf()).toBeUndefined();
    const { prepared, outcome } = await sendOne(sms);
    expect(outcome).toMatchObject({ kind: 'delivered', requestId: emulator!.sent()[0]!.messageId });
    expect(prepared.request.parts).toBe(1);
    expect(emulator!.sent()).toMatchObject([
      {
        destination: AIKO,
        originationIdentity: LOCAL_SMS.originationNumber,
        body: '佐藤様、明日10:00のご予約です。変更は店舗まで。',
        encoding: 'UCS2',
        parts: 1,
        messageType: 'TRANSACTIONAL',
        configurationSet: LOCAL_SMS.configurationSet,
        context: { 'sb-client': 'shop', 'sb-job': 'J1', 'sb-task': 't00007', 'sb-attempt': '1' },
      },
    ]);
  });

  it('a long Japanese text costs its UCS-2 parts, taken from the identity shared rate before it goes', async () => {
    const taken: number[] = [];
    const sms = await transport(
      {},
      { messageType: 'PROMOTIONAL' },
      { take: async (parts) => void taken.push(parts) },
    );
    const long = task({ template: { body: `{{name}}様 ${'セール開催中！'.repeat(20)}` } });
    const { prepared } = await sendOne(sms, long);
    expect(prepared.request.parts).toBe(3); // 144 UTF-16 units: more than 2 × 67
    expect(taken).toEqual([3]);
    expect(emulator!.sent()[0]).toMatchObject({ parts: 3, messageType: 'PROMOTIONAL' });
  });

  it('a missing variable or an over-long text is not sent: the task fails with the reason', async () => {
    const sms = await transport();
    expect(() => sms.prepare(pushUnit(task({ variables: { name: '佐藤' } })))).toThrow(
      expect.objectContaining({ reason: 'missing-variable: time' }),
    );
    const tooLong = task({ template: { body: '{{name}}'.concat('あ'.repeat(1_599)) } });
    expect(() => sms.prepare(pushUnit(tooLong))).toThrow(UnpreparableError);
    expect(emulator!.sent()).toEqual([]);
  });

  it('a number opted out at the identity (STOP) is refused for that recipient, with the reason', async () => {
    const sms = await transport();
    emulator!.optOut(AIKO);
    const { outcome } = await sendOne(sms);
    expect(outcome).toMatchObject({
      kind: 'per-recipient',
      entries: [
        {
          kind: 'rejected',
          lastResult: 'sms-destination-phone-number-opted-out',
          reason: expect.stringContaining('opted out'),
        },
      ],
    });
  });

  it('throttling waits; the month spend limit stops the run; an unknown identity holds the client', async () => {
    const sms = await transport({ spend: { monthlySpendLimit: 0.001, pricePerPart: 0.01 } });
    emulator!.faults.force('throttled');
    expect((await sendOne(sms)).outcome).toMatchObject({ kind: 'rate-limited' });
    await sendOne(sms); // spends past the limit
    expect((await sendOne(sms)).outcome).toMatchObject({ kind: 'quota-used-up', quota: 'monthly' });
    const nowhere = transportWith({ originationIdentity: '+18445550199' });
    expect((await sendOne(nowhere)).outcome).toMatchObject({ kind: 'held' });
  });

  it('a 500 or an answer lost after the text was accepted leaves it in doubt; a refused connection does not', async () => {
    const sms = await transport();
    emulator!.faults.force('internal-failure');
    expect((await sendOne(sms)).outcome).toMatchObject({
      kind: 'retryable',
      maybeDelivered: true,
      status: 500,
    });
    emulator!.faults.force('answer-lost');
    expect((await sendOne(sms)).outcome).toMatchObject({ kind: 'retryable', maybeDelivered: true });
    expect(emulator!.sent()).toHaveLength(1); // the lost answer's text went out
    const url = emulator!.url;
    await emulator!.close();
    emulator = undefined;
    const closed = new SmsTransport({
      sms: new PinpointSMSVoiceV2Client({
        region: LOCAL_SMS.region,
        endpoint: url,
        credentials: { accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: LOCAL_SMS.secretAccessKey },
        ...SMS_CLIENT_CONFIG,
      }),
      clientId: 'shop',
      settings: { originationIdentity: LOCAL_SMS.originationNumber },
      defaultConfigurationSet: undefined,
      partsPerSecond: 1,
    });
    expect((await sendOne(closed)).outcome).toMatchObject({ kind: 'retryable', maybeDelivered: false });
  });

  it("the text's events, as the stand-in publishes them, name its task and attempt and move it to delivered", async () => {
    const events: unknown[] = [];
    const sms = await transport({ deliver: async (event) => void events.push(JSON.stringify(event)) });
    const { outcome } = await sendOne(sms, task({ attempt: 2 }));
    await emulator!.idle();
    const changes = events.map((body) => readSmsEvent(body));
    expect(changes).toMatchObject([
      { clientId: 'shop', jobId: 'J1', taskId: 't00007', attempt: 2, state: 'sent', accepted: true },
      { clientId: 'shop', jobId: 'J1', taskId: 't00007', attempt: 2, state: 'delivered', parts: 1 },
    ]);
    expect(
      changes.every((c) => 'messageId' in c && c.messageId === (outcome as { requestId: string }).requestId),
    ).toBe(true);
  });

  it('at-least-once is the client choice: a text left in doubt may be sent once more', async () => {
    expect((await transport({}, { delivery: 'at-least-once' })).resendsInDoubt).toBe(true);
  });
});

/** Another transport on the running stand-in and client, with other settings. */
function transportWith(settings: Partial<SmsSettings>): SmsTransport {
  return new SmsTransport({
    sms: client!,
    clientId: 'shop',
    settings: { originationIdentity: LOCAL_SMS.originationNumber, ...settings },
    defaultConfigurationSet: LOCAL_SMS.configurationSet,
    partsPerSecond: 100,
  });
}
