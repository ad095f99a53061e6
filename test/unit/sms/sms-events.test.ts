/**
 * End User Messaging SMS's delivery events read for the task they are about: the user guide's own
 * example record (with Switchboard's context), as SQS hands it with raw delivery and inside an SNS
 * envelope; what each event type records; what is ignored and why; events in any order.
 */
import { describe, expect, it } from 'vitest';
import { readSmsEvent, SMS_DELIVERY_RANK, smsSupersedes } from '#shared/sms/sms-events.ts';

/** "SMS example log" of the user guide (configuration-sets-event-format), its context Switchboard's. */
const DOCUMENTED = {
  eventType: 'TEXT_SUCCESSFUL',
  eventVersion: '1.0',
  eventTimestamp: 1686975103470,
  isFinal: true,
  originationPhoneNumber: '+12065550152',
  destinationPhoneNumber: '+14255550156',
  isInternationalSend: false,
  mcc: '310',
  mnc: '800',
  messageId: '862a8790-60c0-4430-9b2b-658bdexample',
  messageRequestTimestamp: 1686975103170,
  messageEncoding: 'GSM',
  messageType: 'PROMOTIONAL',
  messageStatus: 'SUCCESSFUL',
  messageStatusDescription: 'Message has been accepted by phone carrier',
  context: { 'sb-client': 'shop', 'sb-job': 'J1', 'sb-task': 't00007', 'sb-attempt': '2' },
  totalMessageParts: 1,
  totalMessagePrice: 0.09582,
  totalCarrierFee: 0.0,
};

const withType = (eventType: string, messageStatusDescription = '') => ({
  ...DOCUMENTED,
  eventType,
  messageStatus: eventType.slice('TEXT_'.length),
  messageStatusDescription,
});

describe('SMS delivery events', () => {
  it("reads the guide's example, raw or in an SNS notification", () => {
    const expected = {
      clientId: 'shop',
      jobId: 'J1',
      taskId: 't00007',
      attempt: 2,
      state: 'sent',
      at: 1686975103470,
      accepted: true,
      messageId: '862a8790-60c0-4430-9b2b-658bdexample',
      parts: 1,
      price: 0.09582,
    };
    expect(readSmsEvent(JSON.stringify(DOCUMENTED))).toEqual(expected);
    const sns = {
      Type: 'Notification',
      MessageId: 'x',
      TopicArn: 'arn:aws:sns:…',
      Message: JSON.stringify(DOCUMENTED),
    };
    expect(readSmsEvent(JSON.stringify(sns))).toEqual(expected);
  });

  it.each([
    ['TEXT_QUEUED', 'queued', false],
    ['TEXT_PENDING', 'queued', false],
    ['TEXT_DELIVERED', 'delivered', false],
    ['TEXT_BLOCKED', 'blocked', true],
    ['TEXT_CARRIER_BLOCKED', 'blocked', true],
    ['TEXT_SPAM', 'blocked', true],
    ['TEXT_INVALID', 'invalid-number', true],
    ['TEXT_INVALID_MESSAGE', 'invalid-message', true],
    ['TEXT_UNREACHABLE', 'unreachable', true],
    ['TEXT_CARRIER_UNREACHABLE', 'unreachable', true],
    ['TEXT_TTL_EXPIRED', 'expired', true],
    ['TEXT_UNKNOWN', 'unknown', true],
  ])('%s records %s (a reason: %s)', (type, state, reasoned) => {
    const change = readSmsEvent(withType(type, 'what the carrier said'));
    expect(change).toMatchObject({ state, accepted: true });
    expect('reason' in change && change.reason).toBe(reasoned ? `${type}: what the carrier said` : false);
  });

  it.each([
    ['not JSON', '{'],
    ['not an object', '[1]'],
    ['eventType', { ...DOCUMENTED, eventType: 'VOICE_ANSWERED' }],
    ['no messageId', { ...DOCUMENTED, messageId: '' }],
    ['no eventTimestamp', { ...DOCUMENTED, eventTimestamp: 'soon' }],
    ['no context', { ...DOCUMENTED, context: undefined }],
    ['no sb- context', { ...DOCUMENTED, context: { account: 'bar' } }],
    [
      'sb-task is missing or malformed',
      { ...DOCUMENTED, context: { ...DOCUMENTED.context, 'sb-task': 'a b' } },
    ],
    ['not a whole number from 1', { ...DOCUMENTED, context: { ...DOCUMENTED.context, 'sb-attempt': '0' } }],
    ['over 64 KB', 'x'.repeat(70_000)],
  ])('ignores an event with %s', (why, body) => {
    const read = readSmsEvent(body);
    expect(read).toHaveProperty('ignored');
    expect((read as { ignored: string }).ignored).toContain(why);
  });

  it('a prototype-named context key is data, not inherited', () => {
    const context = JSON.parse('{"__proto__":{"sb-client":"x"},"sb-job":"J1"}');
    expect(readSmsEvent({ ...DOCUMENTED, context })).toEqual({
      ignored: 'context sb-client is missing or malformed',
    });
  });

  it('moves forward only, whatever the order: the highest state of the highest attempt wins', () => {
    const states = ['queued', 'sent', 'delivered', 'queued', 'sent'] as const;
    for (const order of [states, [...states].reverse()]) {
      let recorded: { attempt: number; state: keyof typeof SMS_DELIVERY_RANK } | undefined;
      for (const state of order) {
        const change = { attempt: 1, state };
        if (smsSupersedes(change, recorded)) recorded = change;
      }
      expect(recorded?.state).toBe('delivered');
    }
    expect(smsSupersedes({ attempt: 2, state: 'queued' }, { attempt: 1, state: 'delivered' })).toBe(true);
    expect(smsSupersedes({ attempt: 1, state: 'delivered' }, { attempt: 2, state: 'queued' })).toBe(false);
    const finals = [
      'invalid-message',
      'expired',
      'unknown',
      'unreachable',
      'blocked',
      'invalid-number',
      'delivered',
    ] as const;
    for (const f of finals) expect(SMS_DELIVERY_RANK[f]).toBeGreaterThan(SMS_DELIVERY_RANK.sent);
  });
});
