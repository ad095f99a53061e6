/**
 * The End User Messaging SMS stand-in driven by the real `@aws-sdk/client-pinpoint-sms-voice-v2`
 * (`endpoint` set, static credentials, one attempt so no SDK retry hides a refusal): what it accepts,
 * what it refuses and with which SDK exception class, parts-per-second throttling, opt-out lists, the
 * configuration set's events and the faults. Events are awaited as they arrive, never by sleeping;
 * time for MPS and spend is a clock the test moves.
 */

import {
  ConflictException,
  DeleteOptedOutNumberCommand,
  DescribeOptedOutNumbersCommand,
  InternalServerException,
  PinpointSMSVoiceV2Client,
  PinpointSMSVoiceV2ServiceException,
  PutOptedOutNumberCommand,
  ResourceNotFoundException,
  SendTextMessageCommand,
  type SendTextMessageCommandInput,
  ServiceQuotaExceededException,
  ThrottlingException,
  ValidationException,
} from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { afterEach, describe, expect, it } from 'vitest';
import { LOCAL_SMS, type SmsEmulatorOptions, type SmsEvent, startSmsEmulator } from '#local/sms-emulator.ts';
import { messageParts } from '#shared/sms/parts.ts';
import { StandInHarness, TestClock } from '../../support/stand-in-harness.ts';

const AIKO = '+819012345678';
const BEN = '+818012345678';
/** A long Japanese reminder: 180 UTF-16 units, 3 UCS-2 parts. */
const LONG_JAPANESE = '【スイッチボード】ご予約の確認です。'.repeat(10);

const harness = new StandInHarness({
  start: (deliver, options: SmsEmulatorOptions = {}) => startSmsEmulator({ deliver, ...options }),
  client: (endpoint, credentials) =>
    new PinpointSMSVoiceV2Client({ region: LOCAL_SMS.region, endpoint, credentials, maxAttempts: 1 }),
  messageIdOf: (event: SmsEvent) => event.messageId,
  credentials: LOCAL_SMS,
});

afterEach(() => harness.close());

const start = (options?: SmsEmulatorOptions): Promise<PinpointSMSVoiceV2Client> => harness.start(options);

function text(to: string, overrides: Partial<SendTextMessageCommandInput> = {}): SendTextMessageCommandInput {
  return {
    DestinationPhoneNumber: to,
    OriginationIdentity: LOCAL_SMS.originationNumber,
    MessageBody: 'Your appointment is tomorrow at 10:00. Reply STOP to opt out.',
    MessageType: 'TRANSACTIONAL',
    ConfigurationSetName: LOCAL_SMS.configurationSet,
    Context: { task: 'job-1/task-7', attempt: 'job-1/task-7/1' },
    ...overrides,
  };
}

async function refusal(promise: Promise<unknown>): Promise<PinpointSMSVoiceV2ServiceException> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PinpointSMSVoiceV2ServiceException);
  return error as PinpointSMSVoiceV2ServiceException;
}

const types = (events: SmsEvent[]) => events.map((event) => event.eventType);

describe('End User Messaging SMS stand-in', () => {
  it('SendTextMessage is accepted and recorded with its parts, and TEXT_SUCCESSFUL then TEXT_DELIVERED arrive with the Context', async () => {
    const sms = await start();
    const { MessageId } = await sms.send(new SendTextMessageCommand(text(AIKO)));
    expect(MessageId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(harness.standIn.sent()).toMatchObject([
      {
        messageId: MessageId,
        destination: AIKO,
        originationIdentity: LOCAL_SMS.originationNumber,
        origin: LOCAL_SMS.originationNumber,
        messageType: 'TRANSACTIONAL',
        configurationSet: LOCAL_SMS.configurationSet,
        context: { task: 'job-1/task-7', attempt: 'job-1/task-7/1' },
        encoding: 'GSM',
        parts: 1,
        characters: 61,
        isoCountryCode: 'JP',
      },
    ]);
    const [successful, delivered] = await harness.inbox.await(MessageId!, 2);
    expect(types([successful!, delivered!])).toEqual(['TEXT_SUCCESSFUL', 'TEXT_DELIVERED']);
    expect(successful).toMatchObject({
      eventVersion: '1.0',
      isFinal: false,
      originationPhoneNumber: LOCAL_SMS.originationNumber,
      destinationPhoneNumber: AIKO,
      messageId: MessageId,
      messageEncoding: 'GSM',
      messageType: 'TRANSACTIONAL',
      messageStatus: 'SUCCESSFUL',
      messageStatusDescription: 'Message has been accepted by phone carrier',
      context: { task: 'job-1/task-7', attempt: 'job-1/task-7/1' },
      totalMessageParts: 1,
      isoCountryCode: 'JP',
    });
    expect(delivered).toMatchObject({ isFinal: true, messageStatus: 'DELIVERED' });
    expect(delivered!.eventTimestamp).toBeGreaterThan(successful!.eventTimestamp);
  });

  it('a Japanese text is UCS-2 and costs its parts; an emoji counts two units', async () => {
    // 100 MPS: the default toll-free number's 3 would be spent by the first text's 3 parts.
    const sms = await start({
      identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 100 }],
    });
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: LONG_JAPANESE })));
    await sms.send(new SendTextMessageCommand(text(BEN, { MessageBody: `ご来店ありがとうございました😀` })));
    expect(
      harness.standIn.sent().map(({ encoding, parts, characters }) => ({ encoding, parts, characters })),
    ).toEqual([
      { encoding: 'UCS2', parts: 3, characters: 180 },
      { encoding: 'UCS2', parts: 1, characters: 16 },
    ]);
  });

  it('a request signed with a wrong secret or an unknown key is refused and sends nothing', async () => {
    await start();
    const wrong = await refusal(
      harness
        .client({ accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: 'not-the-secret' })
        .send(new SendTextMessageCommand(text(AIKO))),
    );
    expect(wrong.name).toBe('InvalidSignatureException');
    expect(wrong.$metadata.httpStatusCode).toBe(400);
    const unknown = await refusal(
      harness
        .client({ accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'x' })
        .send(new SendTextMessageCommand(text(AIKO))),
    );
    expect(unknown.name).toBe('UnrecognizedClientException');
    expect(unknown.message).toBe('The security token included in the request is invalid.');
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('the wire: an unsigned request is refused in AWS JSON 1.0’s error shape, `__type` and `message`', async () => {
    await start();
    const response = await fetch(harness.standIn.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'PinpointSMSVoiceV2.SendTextMessage',
      },
      body: JSON.stringify(text(AIKO)),
    });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toBe('application/x-amz-json-1.0');
    expect(await response.json()).toEqual({
      __type: 'com.amazon.coral.service#MissingAuthenticationTokenException',
      message: 'Missing Authentication Token',
    });
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('the model’s constraints are ValidationException with FIELD_VALIDATION_FAILED and the failing fields', async () => {
    const sms = await start();
    const badNumber = await refusal(sms.send(new SendTextMessageCommand(text('090-1234-5678'))));
    expect(badNumber).toBeInstanceOf(ValidationException);
    expect(badNumber).toMatchObject({
      Reason: 'FIELD_VALIDATION_FAILED',
      Fields: [
        {
          Name: 'DestinationPhoneNumber',
          Message: 'Member must satisfy regular expression pattern: ^\\+?[1-9][0-9]{1,18}$',
        },
      ],
    });
    expect(badNumber.message).toMatch(
      /^1 validation error detected: Value '090-1234-5678' at 'destinationPhoneNumber'/,
    );

    const tooLong = await refusal(
      sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'a'.repeat(1_601) }))),
    );
    expect(tooLong).toBeInstanceOf(ValidationException);
    expect((tooLong as ValidationException).Fields).toEqual([
      { Name: 'MessageBody', Message: 'Member must have length less than or equal to 1600' },
    ]);
    // 1,600 characters are the most a body may have: 1,600 Japanese characters, 24 UCS-2 parts.
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'あ'.repeat(1_600) })));
    expect(harness.standIn.sent()[0]).toMatchObject({ parts: 24, characters: 1_600 });

    const blank = await refusal(sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: '   ' }))));
    expect((blank as ValidationException).Fields?.[0]?.Name).toBe('MessageBody');
    const context = await refusal(
      sms.send(
        new SendTextMessageCommand(
          text(AIKO, { Context: Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`k${i}`, 'v'])) }),
        ),
      ),
    );
    expect((context as ValidationException).Fields).toEqual([
      { Name: 'Context', Message: 'Member must have length less than or equal to 5' },
    ]);
    const twoErrors = await refusal(
      sms.send(new SendTextMessageCommand(text('abc', { MessageType: 'URGENT' as 'PROMOTIONAL' }))),
    );
    expect(twoErrors.message).toMatch(/^2 validation errors detected/);

    const noBody = await refusal(
      sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: undefined }))),
    );
    expect(noBody).toBeInstanceOf(ValidationException);
    expect((noBody as ValidationException).Reason).toBe('MISSING_PARAMETER');
    expect(harness.standIn.sent()).toHaveLength(1);
  });

  it('an unknown origination identity or configuration set is ResourceNotFoundException naming the resource', async () => {
    const sms = await start();
    const identity = await refusal(
      sms.send(new SendTextMessageCommand(text(AIKO, { OriginationIdentity: '+18445550199' }))),
    );
    expect(identity).toBeInstanceOf(ResourceNotFoundException);
    expect(identity).toMatchObject({ ResourceType: 'phone-number', ResourceId: '+18445550199' });
    const pool = await refusal(
      sms.send(new SendTextMessageCommand(text(AIKO, { OriginationIdentity: 'pool-123' }))),
    );
    expect((pool as ResourceNotFoundException).ResourceType).toBe('pool');
    const set = await refusal(
      sms.send(new SendTextMessageCommand(text(AIKO, { ConfigurationSetName: 'no-such-set' }))),
    );
    expect(set).toBeInstanceOf(ResourceNotFoundException);
    expect(set).toMatchObject({ ResourceType: 'configuration-set', ResourceId: 'no-such-set' });
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('an identity is named by its phone number, a sender ID by its name or its ARN', async () => {
    const sms = await start({
      identities: [
        { kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 100 },
        { kind: 'sender-id', senderId: 'SWITCHBRD', isoCountryCode: 'JP', mps: 100 },
      ],
    });
    await sms.send(new SendTextMessageCommand(text(AIKO)));
    await sms.send(new SendTextMessageCommand(text(AIKO, { OriginationIdentity: 'SWITCHBRD' })));
    const arn = `arn:aws:sms-voice:${LOCAL_SMS.region}:000000000000:sender-id/SWITCHBRD/JP`;
    await sms.send(new SendTextMessageCommand(text(AIKO, { OriginationIdentity: arn })));
    expect(harness.standIn.sent().map((sent) => sent.origin)).toEqual([
      LOCAL_SMS.originationNumber,
      'SWITCHBRD',
      'SWITCHBRD',
    ]);
  });

  it('throttling is by message parts per second: a 3-part Japanese text spends a 5 MPS second; the clock refills it', async () => {
    const clock = new TestClock();
    const sms = await start({
      clock,
      identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 5 }],
    });
    expect(messageParts(LONG_JAPANESE).parts).toBe(3);
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: LONG_JAPANESE })));
    await sms.send(new SendTextMessageCommand(text(BEN, { MessageBody: 'Short one.' })));
    await sms.send(new SendTextMessageCommand(text(BEN, { MessageBody: 'Another.' })));
    // 5 parts spent: the next Japanese text (3) is refused, as is a 1-part text.
    const throttled = await refusal(
      sms.send(new SendTextMessageCommand(text(BEN, { MessageBody: LONG_JAPANESE }))),
    );
    expect(throttled).toBeInstanceOf(ThrottlingException);
    expect(throttled.$retryable).toEqual({ throttling: true });
    expect(throttled.$metadata.httpStatusCode).toBe(400);
    clock.advance(400); // 2 parts back: still not 3
    await refusal(sms.send(new SendTextMessageCommand(text(BEN, { MessageBody: LONG_JAPANESE }))));
    clock.advance(200); // 3 parts
    await sms.send(new SendTextMessageCommand(text(BEN, { MessageBody: LONG_JAPANESE })));
    // Sent in 0.6 s: 3 + 1 + 1 + 3 = 8 parts, the first second's 5 and 0.6 s of refill.
    expect(harness.standIn.sent().reduce((sum, sent) => sum + sent.parts, 0)).toBe(8);
  });

  it('a text longer than the bucket goes when it is full and leaves it in debt: the rate holds on average', async () => {
    const clock = new TestClock();
    const sms = await start({
      clock,
      identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: 1 }],
    });
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: LONG_JAPANESE })));
    clock.advance(1_000);
    expect(
      await refusal(sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'hi' })))),
    ).toBeInstanceOf(ThrottlingException);
    clock.advance(2_000);
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'hi' })));
  });

  it('an opted-out destination is ConflictException DESTINATION_PHONE_NUMBER_OPTED_OUT; the lists are read and changed through the API', async () => {
    const sms = await start();
    harness.standIn.optOut(AIKO); // the end user texted STOP
    const refused = await refusal(sms.send(new SendTextMessageCommand(text(AIKO))));
    expect(refused).toBeInstanceOf(ConflictException);
    expect(refused).toMatchObject({
      Reason: 'DESTINATION_PHONE_NUMBER_OPTED_OUT',
      ResourceType: 'opted-out-number',
      ResourceId: AIKO,
    });

    await sms.send(new PutOptedOutNumberCommand({ OptOutListName: 'Default', OptedOutNumber: BEN }));
    const listed = await sms.send(new DescribeOptedOutNumbersCommand({ OptOutListName: 'Default' }));
    expect(listed.OptOutListArn).toBe(
      `arn:aws:sms-voice:${LOCAL_SMS.region}:000000000000:opt-out-list/Default`,
    );
    expect(listed.OptedOutNumbers?.map((n) => [n.OptedOutNumber, n.EndUserOptedOut])).toEqual([
      [AIKO, true],
      [BEN, false],
    ]);
    expect(listed.OptedOutNumbers?.[0]?.OptedOutTimestamp).toBeInstanceOf(Date);
    const byUsers = await sms.send(
      new DescribeOptedOutNumbersCommand({
        OptOutListName: 'Default',
        Filters: [{ Name: 'end-user-opted-out', Values: ['true'] }],
      }),
    );
    expect(byUsers.OptedOutNumbers?.map((n) => n.OptedOutNumber)).toEqual([AIKO]);
    expect(await refusal(sms.send(new SendTextMessageCommand(text(BEN))))).toBeInstanceOf(ConflictException);

    const removed = await sms.send(
      new DeleteOptedOutNumberCommand({ OptOutListName: 'Default', OptedOutNumber: BEN }),
    );
    expect(removed).toMatchObject({ OptedOutNumber: BEN, EndUserOptedOut: false });
    await sms.send(new SendTextMessageCommand(text(BEN)));
    const notThere = await refusal(
      sms.send(new DeleteOptedOutNumberCommand({ OptOutListName: 'Default', OptedOutNumber: BEN })),
    );
    expect(notThere).toBeInstanceOf(ResourceNotFoundException);
    const noList = await refusal(sms.send(new DescribeOptedOutNumbersCommand({ OptOutListName: 'Nope' })));
    expect(noList).toMatchObject({ ResourceType: 'opt-out-list' });
    expect(harness.standIn.sent().map((sent) => sent.destination)).toEqual([BEN]);
  });

  it('an identity on its own opt-out list does not see another list’s numbers', async () => {
    const sms = await start({
      identities: [
        { kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber },
        { kind: 'sender-id', senderId: 'SWITCHBRD', isoCountryCode: 'JP', optOutList: 'Marketing' },
      ],
      optOutLists: { Default: [], Marketing: [AIKO] },
    });
    await sms.send(new SendTextMessageCommand(text(AIKO)));
    expect(
      await refusal(sms.send(new SendTextMessageCommand(text(AIKO, { OriginationIdentity: 'SWITCHBRD' })))),
    ).toBeInstanceOf(ConflictException);
  });

  it('the monthly spend limit: past it ServiceQuotaExceededException MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT, until the month turns', async () => {
    const clock = new TestClock();
    clock.at = Date.parse('2026-03-31T23:59:00.000Z');
    const sms = await start({ clock, spend: { monthlySpendLimit: 0.05, pricePerPart: 0.01 } });
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: LONG_JAPANESE }))); // 3 parts
    clock.advance(1_000);
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'One.' })));
    clock.advance(1_000);
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'Two.' })));
    expect(harness.standIn.account.spentThisMonth()).toBeCloseTo(0.05);
    clock.advance(1_000);
    const over = await refusal(sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'Three.' }))));
    expect(over).toBeInstanceOf(ServiceQuotaExceededException);
    expect((over as ServiceQuotaExceededException).Reason).toBe('MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT');
    clock.advance(60_000); // April
    await sms.send(new SendTextMessageCommand(text(AIKO, { MessageBody: 'Three.' })));
    expect(harness.standIn.sent()).toHaveLength(4);
  });

  it('DryRun checks the text and answers a message id, but sends, records and charges nothing', async () => {
    const sms = await start();
    const { MessageId } = await sms.send(new SendTextMessageCommand(text(AIKO, { DryRun: true })));
    expect(MessageId).toBeTruthy();
    harness.standIn.optOut(BEN);
    expect(await refusal(sms.send(new SendTextMessageCommand(text(BEN, { DryRun: true }))))).toBeInstanceOf(
      ConflictException,
    );
    await harness.standIn.idle();
    expect(harness.standIn.sent()).toEqual([]);
    expect(harness.standIn.events()).toEqual([]);
    expect(harness.standIn.account.spentThisMonth()).toBe(0);
  });

  it('an answer lost after the send: the SDK sees a network error, yet the text was sent and its events arrive', async () => {
    const sms = await start();
    harness.standIn.faults.force('answer-lost');
    const error = await sms.send(new SendTextMessageCommand(text(AIKO))).then(
      () => undefined,
      (e: unknown) => e as Error & { $metadata?: { httpStatusCode?: number } },
    );
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(PinpointSMSVoiceV2ServiceException);
    expect(error!.$metadata?.httpStatusCode).toBeUndefined();
    const [lost] = harness.standIn.sent();
    expect(lost).toBeDefined();
    const events = await harness.inbox.await(lost!.messageId, 2);
    expect(events[0]!.context).toEqual({ task: 'job-1/task-7', attempt: 'job-1/task-7/1' });
  });

  it('500, 503 and a burst of ThrottlingException send nothing', async () => {
    const sms = await start();
    harness.standIn.faults.set({ throttleBurst: 2 });
    harness.standIn.faults.force('throttled');
    harness.standIn.faults.force('internal-failure');
    harness.standIn.faults.force('service-unavailable');
    const seen: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const error = await refusal(sms.send(new SendTextMessageCommand(text(AIKO))));
      seen.push([error.name, error.$metadata.httpStatusCode, error.$fault]);
      if (i === 0) expect(error).toBeInstanceOf(ThrottlingException);
      if (i === 2) expect(error).toBeInstanceOf(InternalServerException);
    }
    expect(seen).toEqual([
      ['ThrottlingException', 400, 'client'],
      ['ThrottlingException', 400, 'client'],
      ['InternalServerException', 500, 'server'],
      ['ServiceUnavailable', 503, 'server'],
    ]);
    expect(harness.standIn.sent()).toEqual([]);
    await sms.send(new SendTextMessageCommand(text(AIKO)));
    expect(harness.standIn.sent()).toHaveLength(1);
  });

  it('events: duplicated, lost, and retried with backoff when the consumer fails (at least once)', async () => {
    let failures = 1;
    const arrived: SmsEvent[] = [];
    const sms = await start({
      retry: { firstDelayMs: 5 },
      deliver: async (event) => {
        if (failures-- > 0) throw new Error('consumer unavailable');
        arrived.push(event);
        await harness.inbox.deliver(event);
      },
    });
    harness.standIn.faults.force('duplicated');
    const { MessageId } = await sms.send(new SendTextMessageCommand(text(AIKO)));
    const events = await harness.inbox.await(MessageId!, 3);
    expect(types(events)).toEqual(['TEXT_SUCCESSFUL', 'TEXT_SUCCESSFUL', 'TEXT_DELIVERED']);
    await harness.standIn.idle();
    expect(
      harness.standIn.events().map(({ fate, attempts, deliveries }) => ({ fate, attempts, deliveries })),
    ).toEqual([
      { fate: 'delivered', attempts: 3, deliveries: 2 },
      { fate: 'delivered', attempts: 1, deliveries: 1 },
    ]);

    harness.standIn.faults.force('lost');
    const second = (await sms.send(new SendTextMessageCommand(text(BEN)))).MessageId!;
    expect(types(await harness.inbox.await(second, 1))).toEqual(['TEXT_DELIVERED']);
    await harness.standIn.idle();
    expect(harness.standIn.events().filter((e) => e.fate === 'lost')).toHaveLength(1);
    expect(arrived).toHaveLength(4);
  });

  it('events reordered: a text’s final event may arrive before the carrier’s acceptance', async () => {
    const sms = await start({ random: () => 0 });
    harness.standIn.faults.force('reordered');
    const { MessageId } = await sms.send(new SendTextMessageCommand(text(AIKO)));
    expect(types(await harness.inbox.await(MessageId!, 2))).toEqual(['TEXT_DELIVERED', 'TEXT_SUCCESSFUL']);
    expect(harness.standIn.events().every((e) => e.reordered)).toBe(true);
  });

  it('failures: a destination’s outcome is its one final event; a number that is no phone number ends TEXT_INVALID', async () => {
    const sms = await start({ outcomes: { [BEN]: 'TEXT_BLOCKED' } });
    const blocked = (await sms.send(new SendTextMessageCommand(text(BEN)))).MessageId!;
    const invalid = (await sms.send(new SendTextMessageCommand(text('+8100000000')))).MessageId!;
    expect(await harness.inbox.await(blocked, 1)).toMatchObject([
      { eventType: 'TEXT_BLOCKED', messageStatus: 'BLOCKED', isFinal: true },
    ]);
    expect(await harness.inbox.await(invalid, 1)).toMatchObject([
      { eventType: 'TEXT_INVALID', messageStatus: 'INVALID', isFinal: true },
    ]);
    await harness.standIn.idle();
    expect(harness.inbox.events).toHaveLength(2);
  });

  it('a configuration set’s destination publishes only the event types it matches; no set, no events', async () => {
    const sms = await start({
      configurationSets: {
        finals: { eventTypes: ['TEXT_DELIVERED', 'TEXT_BLOCKED'] },
        quiet: { eventTypes: [] },
      },
    });
    const finals = (
      await sms.send(new SendTextMessageCommand(text(AIKO, { ConfigurationSetName: 'finals' })))
    ).MessageId!;
    await sms.send(new SendTextMessageCommand(text(AIKO, { ConfigurationSetName: 'quiet' })));
    await sms.send(new SendTextMessageCommand(text(AIKO, { ConfigurationSetName: undefined })));
    expect(types(await harness.inbox.await(finals, 1))).toEqual(['TEXT_DELIVERED']);
    await harness.standIn.idle();
    expect(harness.inbox.events).toHaveLength(1);
    expect(harness.standIn.sent()).toHaveLength(3);
  });
});
