/**
 * The SES v2 stand-in driven by the real `@aws-sdk/client-sesv2` (`endpoint` set, static
 * credentials, one attempt so no SDK retry hides a refusal): what it accepts, what it refuses and
 * with which SDK error, the configuration set's events as EventBridge delivers them, and the faults.
 * Events are awaited as they arrive, never by sleeping; time for the quotas is a clock the test moves.
 */

import {
  AccountSuspendedException,
  BadRequestException,
  CreateEmailTemplateCommand,
  GetAccountCommand,
  GetEmailTemplateCommand,
  LimitExceededException,
  MessageRejected,
  NotFoundException,
  SESv2Client,
  SESv2ServiceException,
  SendBulkEmailCommand,
  type SendBulkEmailCommandInput,
  SendEmailCommand,
  type SendEmailCommandInput,
  SendingPausedException,
  TooManyRequestsException,
} from '@aws-sdk/client-sesv2';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type EventBridgeEvent,
  LOCAL_SES,
  type SesEmulatorOptions,
  startSesEmulator,
} from '#local/ses-emulator.ts';
import { StandInHarness, TestClock } from '../../support/stand-in-harness.ts';

const SIMULATOR = 'simulator.amazonses.com';

const harness = new StandInHarness({
  start: (deliver, options: SesEmulatorOptions = {}) => startSesEmulator({ deliver, ...options }),
  client: (endpoint, credentials) =>
    new SESv2Client({ region: LOCAL_SES.region, endpoint, credentials, maxAttempts: 1 }),
  messageIdOf: (event: EventBridgeEvent) => (event.detail.mail as { messageId: string }).messageId,
  credentials: LOCAL_SES,
});

afterEach(() => harness.close());

const start = (options?: SesEmulatorOptions): Promise<SESv2Client> => harness.start(options);

function simple(to: string[], overrides: Partial<SendEmailCommandInput> = {}): SendEmailCommandInput {
  return {
    FromEmailAddress: `Switchboard <${LOCAL_SES.from}>`,
    Destination: { ToAddresses: to },
    ConfigurationSetName: LOCAL_SES.configurationSet,
    Content: {
      Simple: {
        Subject: { Data: 'Your appointment' },
        Body: { Text: { Data: 'See you at 10:00.' }, Html: { Data: '<p>See you at 10:00.</p>' } },
        Headers: [
          { Name: 'List-Unsubscribe', Value: '<https://switchboard.example/u/abc>' },
          { Name: 'List-Unsubscribe-Post', Value: 'List-Unsubscribe=One-Click' },
        ],
      },
    },
    EmailTags: [{ Name: 'task', Value: 'task-1' }],
    ...overrides,
  };
}

async function refusal(promise: Promise<unknown>): Promise<SESv2ServiceException> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SESv2ServiceException);
  return error as SESv2ServiceException;
}

const types = (events: EventBridgeEvent[]) => events.map((event) => event['detail-type']);
const detail = <T>(event: EventBridgeEvent | undefined, key: string) => event?.detail[key] as T;

describe('SES v2 stand-in', () => {
  it('SendEmail is accepted, recorded, and its SEND then DELIVERY events arrive in order as EventBridge delivers them', async () => {
    const ses = await start();
    const { MessageId } = await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`])));
    expect(MessageId).toMatch(/^0100[0-9a-f]{12}-[0-9a-f-]{36}-000000$/);
    expect(harness.standIn.sent()).toMatchObject([
      {
        messageId: MessageId,
        from: `Switchboard <${LOCAL_SES.from}>`,
        to: [`success@${SIMULATOR}`],
        subject: 'Your appointment',
        text: 'See you at 10:00.',
        html: '<p>See you at 10:00.</p>',
        tags: { task: 'task-1' },
        configurationSet: LOCAL_SES.configurationSet,
      },
    ]);
    const [sent, delivered] = await harness.inbox.await(MessageId!, 2);
    expect(types([sent!, delivered!])).toEqual(['Email Sent', 'Email Delivered']);
    expect(sent).toMatchObject({
      version: '0',
      source: 'aws.ses',
      account: '000000000000',
      region: LOCAL_SES.region,
      resources: [
        `arn:aws:ses:${LOCAL_SES.region}:000000000000:configuration-set/${LOCAL_SES.configurationSet}`,
      ],
      detail: { eventType: 'Send', send: {} },
    });
    const mail = detail<Record<string, unknown>>(sent, 'mail');
    expect(mail).toMatchObject({
      messageId: MessageId,
      source: `Switchboard <${LOCAL_SES.from}>`,
      sourceArn: `arn:aws:ses:${LOCAL_SES.region}:000000000000:identity/${LOCAL_SES.domain}`,
      sendingAccountId: '000000000000',
      destination: [`success@${SIMULATOR}`],
      headersTruncated: false,
      commonHeaders: { subject: 'Your appointment', to: [`success@${SIMULATOR}`] },
      tags: {
        task: ['task-1'],
        'ses:configuration-set': [LOCAL_SES.configurationSet],
        'ses:from-domain': [LOCAL_SES.domain],
        'ses:caller-identity': [LOCAL_SES.accessKeyId],
        'ses:source-ip': ['127.0.0.1'],
      },
    });
    expect(mail.headers).toContainEqual({
      name: 'List-Unsubscribe-Post',
      value: 'List-Unsubscribe=One-Click',
    });
    expect(detail(delivered, 'delivery')).toMatchObject({ recipients: [`success@${SIMULATOR}`] });
  });

  it('the mailbox simulator: bounce@, complaint@, suppressionlist@ and ooto@ (labels too) produce their events', async () => {
    const ses = await start();
    const send = async (local: string) =>
      (await ses.send(new SendEmailCommand(simple([`${local}@${SIMULATOR}`])))).MessageId!;
    const [bounce, complaint, suppressed, ooto] = await Promise.all(
      ['bounce+job1', 'complaint', 'suppressionlist', 'ooto'].map(send),
    );
    const bounced = await harness.inbox.await(bounce!, 2);
    expect(types(bounced)).toEqual(['Email Sent', 'Email Bounced']);
    expect(detail(bounced[1], 'bounce')).toMatchObject({
      bounceType: 'Permanent',
      bounceSubType: 'General',
      bouncedRecipients: [{ emailAddress: `bounce+job1@${SIMULATOR}`, status: '5.1.1' }],
    });
    const complained = await harness.inbox.await(complaint!, 3);
    expect(types(complained)).toEqual(['Email Sent', 'Email Delivered', 'Email Complaint Received']);
    expect(detail(complained[2], 'complaint')).toMatchObject({
      complainedRecipients: [{ emailAddress: `complaint@${SIMULATOR}` }],
      complaintFeedbackType: 'abuse',
    });
    const suppression = await harness.inbox.await(suppressed!, 2);
    expect(types(suppression)).toEqual(['Email Sent', 'Email Bounced']);
    expect(detail(suppression[1], 'bounce')).toMatchObject({
      bounceType: 'Permanent',
      bounceSubType: 'OnAccountSuppressionList',
    });
    expect(types(await harness.inbox.await(ooto!, 2))).toEqual(['Email Sent', 'Email Delivered']);
    await harness.standIn.idle();
    expect(harness.inbox.of(ooto!)).toHaveLength(2);
  });

  it('a From address that is not a verified identity is refused with the SDK’s MessageRejected; a subdomain of a verified domain may send', async () => {
    const ses = await start();
    const error = await refusal(
      ses.send(
        new SendEmailCommand(simple(['someone@example.org'], { FromEmailAddress: 'news@unverified.test' })),
      ),
    );
    expect(error).toBeInstanceOf(MessageRejected);
    expect(error.$metadata.httpStatusCode).toBe(400);
    expect(error.message).toBe(
      'Email address is not verified. The following identities failed the check in region US-EAST-1: news@unverified.test',
    );
    expect(harness.standIn.sent()).toEqual([]);
    await ses.send(
      new SendEmailCommand(simple(['someone@example.org'], { FromEmailAddress: 'info@mail.example.com' })),
    );
    expect(harness.standIn.sent()).toHaveLength(1);
  });

  it('in the sandbox unverified recipients are refused, the mailbox simulator is not, and GetAccount says so', async () => {
    const ses = await start({ account: { sandbox: true } });
    const error = await refusal(ses.send(new SendEmailCommand(simple(['person@elsewhere.test']))));
    expect(error).toBeInstanceOf(MessageRejected);
    expect(error.message).toContain('failed the check in region US-EAST-1: person@elsewhere.test');
    await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`, 'team@example.com'])));
    const account = await ses.send(new GetAccountCommand({}));
    expect(account).toMatchObject({
      ProductionAccessEnabled: false,
      SendingEnabled: true,
      EnforcementStatus: 'HEALTHY',
      SendQuota: { Max24HourSend: 200, MaxSendRate: 1, SentLast24Hours: 1 },
    });
  });

  it('a request signed with a wrong secret or an unknown key is refused 403 and sends nothing', async () => {
    await start();
    const wrong = await refusal(
      harness
        .client({ accessKeyId: LOCAL_SES.accessKeyId, secretAccessKey: 'not-the-secret' })
        .send(new SendEmailCommand(simple([`success@${SIMULATOR}`]))),
    );
    expect(wrong.name).toBe('SignatureDoesNotMatch');
    expect(wrong.$metadata.httpStatusCode).toBe(403);
    const unknown = await refusal(
      harness.client({ accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'x' }).send(new GetAccountCommand({})),
    );
    expect(unknown.name).toBe('UnrecognizedClientException');
    expect(unknown.$metadata.httpStatusCode).toBe(403);
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('more than 50 destinations are refused: 51 recipients of SendEmail, 51 entries of SendBulkEmail', async () => {
    const ses = await start({ account: { maxSendRate: 1_000 } });
    const many = Array.from({ length: 51 }, (_, i) => `person${i}@example.org`);
    const tooManyRecipients = await refusal(ses.send(new SendEmailCommand(simple(many))));
    expect(tooManyRecipients).toBeInstanceOf(BadRequestException);
    expect(tooManyRecipients.message).toBe('Recipient count exceeds 50.');
    const tooManyEntries = await refusal(
      ses.send(new SendBulkEmailCommand(bulk(many.map((to) => entry(to))))),
    );
    expect(tooManyEntries).toBeInstanceOf(BadRequestException);
    expect(tooManyEntries.$metadata.httpStatusCode).toBe(400);
    await ses.send(new SendBulkEmailCommand(bulk(many.slice(0, 50).map((to) => entry(to)))));
    expect(harness.standIn.sent()).toHaveLength(50);
  });

  it('the sending rate: a burst above MaxSendRate is 429 TooManyRequestsException; a bulk call gets ACCOUNT_THROTTLED entries beside SUCCESS ones', async () => {
    const clock = new TestClock();
    const ses = await start({ clock, account: { maxSendRate: 3 } });
    for (let i = 0; i < 3; i++) await ses.send(new SendEmailCommand(simple([`p${i}@example.org`])));
    const throttled = await refusal(ses.send(new SendEmailCommand(simple(['p3@example.org']))));
    expect(throttled).toBeInstanceOf(TooManyRequestsException);
    expect(throttled.$metadata.httpStatusCode).toBe(429);
    expect(throttled.message).toBe('Maximum sending rate exceeded.');

    clock.advance(1_000);
    const { BulkEmailEntryResults } = await ses.send(
      new SendBulkEmailCommand(bulk(['a', 'b', 'c', 'd', 'e'].map((name) => entry(`${name}@example.org`)))),
    );
    expect(BulkEmailEntryResults!.map((result) => result.Status)).toEqual([
      'SUCCESS',
      'SUCCESS',
      'SUCCESS',
      'ACCOUNT_THROTTLED',
      'ACCOUNT_THROTTLED',
    ]);
    expect(BulkEmailEntryResults![0]!.MessageId).toBeTruthy();
    expect(BulkEmailEntryResults![3]!.MessageId).toBeUndefined();
    // Nothing fits at all: the bulk call is refused as a whole.
    const none = await refusal(ses.send(new SendBulkEmailCommand(bulk([entry('f@example.org')]))));
    expect(none).toBeInstanceOf(TooManyRequestsException);
    clock.advance(1_000);
    await ses.send(new SendEmailCommand(simple(['g@example.org'])));
    expect(harness.standIn.sent()).toHaveLength(7);
  });

  it('the daily quota: past Max24HourSend SendEmail is LimitExceededException and bulk entries ACCOUNT_DAILY_QUOTA_EXCEEDED; the simulator does not count', async () => {
    const clock = new TestClock();
    const ses = await start({ clock, account: { max24HourSend: 2 } });
    await ses.send(new SendEmailCommand(simple(['a@example.org', 'b@example.org'])));
    const exceeded = await refusal(ses.send(new SendEmailCommand(simple(['c@example.org']))));
    expect(exceeded).toBeInstanceOf(LimitExceededException);
    expect(exceeded.message).toBe('Daily message quota exceeded.');
    await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`])));
    const { BulkEmailEntryResults } = await ses.send(
      new SendBulkEmailCommand(bulk([entry('d@example.org'), entry(`success+x@${SIMULATOR}`)])),
    );
    expect(BulkEmailEntryResults!.map((result) => result.Status)).toEqual([
      'ACCOUNT_DAILY_QUOTA_EXCEEDED',
      'SUCCESS',
    ]);
    expect((await ses.send(new GetAccountCommand({}))).SendQuota).toEqual({
      Max24HourSend: 2,
      MaxSendRate: 14,
      SentLast24Hours: 2,
    });
    clock.advance(24 * 3600 * 1000);
    await ses.send(new SendEmailCommand(simple(['c@example.org'])));
  });

  it('a paused account is SendingPausedException, a suspended one AccountSuspendedException', async () => {
    const ses = await start();
    harness.standIn.account.set({ sendingEnabled: false });
    expect(await refusal(ses.send(new SendEmailCommand(simple(['a@example.org']))))).toBeInstanceOf(
      SendingPausedException,
    );
    harness.standIn.account.set({ sendingEnabled: true, suspended: true });
    expect(await refusal(ses.send(new SendBulkEmailCommand(bulk([entry('a@example.org')]))))).toBeInstanceOf(
      AccountSuspendedException,
    );
    expect((await ses.send(new GetAccountCommand({}))).EnforcementStatus).toBe('SHUTDOWN');
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('a configuration set that does not exist is NotFoundException; tags SES would refuse are BadRequestException', async () => {
    const ses = await start();
    const missing = await refusal(
      ses.send(new SendEmailCommand(simple(['a@example.org'], { ConfigurationSetName: 'no-such-set' }))),
    );
    expect(missing).toBeInstanceOf(NotFoundException);
    expect(missing.$metadata.httpStatusCode).toBe(404);
    const badTag = await refusal(
      ses.send(
        new SendEmailCommand(simple(['a@example.org'], { EmailTags: [{ Name: 'task', Value: 'job#1' }] })),
      ),
    );
    expect(badTag).toBeInstanceOf(BadRequestException);
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('a message larger than the limit is refused; a raw message is measured and read for its headers', async () => {
    const ses = await start({ maxMessageBytes: 2_000 });
    const big = simple(['a@example.org']);
    big.Content!.Simple!.Body = { Text: { Data: 'x'.repeat(3_000) } };
    expect(await refusal(ses.send(new SendEmailCommand(big)))).toBeInstanceOf(MessageRejected);
    const raw = [
      `From: ${LOCAL_SES.from}`,
      'To: person@example.org',
      'Subject: Raw hello',
      'Content-Type: text/plain; charset=UTF-8',
      '',
      'Hello.',
    ].join('\r\n');
    const { MessageId } = await ses.send(
      new SendEmailCommand({
        ConfigurationSetName: LOCAL_SES.configurationSet,
        Content: { Raw: { Data: new TextEncoder().encode(raw) } },
      }),
    );
    expect(harness.standIn.sent()).toMatchObject([
      { messageId: MessageId, to: ['person@example.org'], subject: 'Raw hello' },
    ]);
    const [sent] = await harness.inbox.await(MessageId!, 1);
    expect(detail<{ headers: unknown[] }>(sent, 'mail').headers).toContainEqual({
      name: 'Subject',
      value: 'Raw hello',
    });
  });

  it('SendBulkEmail renders a stored template per entry, with per-entry headers and tags, and its events carry the tags', async () => {
    const ses = await start();
    await ses.send(
      new CreateEmailTemplateCommand({
        TemplateName: 'reminder',
        TemplateContent: {
          Subject: 'Hello {{name}}',
          Text: 'Dear {{name}}, your code is {{code}}.',
          Html: '<p>Dear {{name}}</p>',
        },
      }),
    );
    expect(
      (await ses.send(new GetEmailTemplateCommand({ TemplateName: 'reminder' }))).TemplateContent,
    ).toEqual({
      Subject: 'Hello {{name}}',
      Text: 'Dear {{name}}, your code is {{code}}.',
      Html: '<p>Dear {{name}}</p>',
    });
    const { BulkEmailEntryResults } = await ses.send(
      new SendBulkEmailCommand({
        FromEmailAddress: LOCAL_SES.from,
        ConfigurationSetName: LOCAL_SES.configurationSet,
        DefaultEmailTags: [{ Name: 'campaign', Value: 'spring' }],
        DefaultContent: {
          Template: {
            TemplateName: 'reminder',
            TemplateData: JSON.stringify({ code: 'X1' }),
            Headers: [{ Name: 'List-Unsubscribe', Value: '<https://switchboard.example/u/default>' }],
          },
        },
        BulkEmailEntries: [
          entry(`success+aiko@${SIMULATOR}`, { name: 'Aiko' }, 'task-a', '<https://switchboard.example/u/a>'),
          entry(`success+ben@${SIMULATOR}`, { name: 'Ben', code: 'B2' }, 'task-b'),
        ],
      }),
    );
    expect(BulkEmailEntryResults!.map((result) => result.Status)).toEqual(['SUCCESS', 'SUCCESS']);
    const [aiko, ben] = harness.standIn.sent();
    expect(aiko).toMatchObject({
      subject: 'Hello Aiko',
      text: 'Dear Aiko, your code is X1.',
      template: 'reminder',
    });
    expect(ben).toMatchObject({ subject: 'Hello Ben', text: 'Dear Ben, your code is B2.' });
    expect(aiko!.headers).toEqual([{ name: 'List-Unsubscribe', value: '<https://switchboard.example/u/a>' }]);
    expect(ben!.headers).toEqual([
      { name: 'List-Unsubscribe', value: '<https://switchboard.example/u/default>' },
    ]);
    const [aikoSent] = await harness.inbox.await(aiko!.messageId, 2);
    const [benSent] = await harness.inbox.await(ben!.messageId, 2);
    expect(detail<{ tags: unknown }>(aikoSent, 'mail').tags).toMatchObject({
      campaign: ['spring'],
      task: ['task-a'],
    });
    expect(detail<{ tags: unknown }>(benSent, 'mail').tags).toMatchObject({
      campaign: ['spring'],
      task: ['task-b'],
    });
  });

  it('a template naming data that is missing is accepted, then fails to render: one Email Rendering Failed event', async () => {
    const ses = await start();
    const { MessageId } = await ses.send(
      new SendEmailCommand({
        FromEmailAddress: LOCAL_SES.from,
        Destination: { ToAddresses: [`success@${SIMULATOR}`] },
        ConfigurationSetName: LOCAL_SES.configurationSet,
        Content: {
          Template: { TemplateContent: { Subject: 'Hi {{name}}', Text: 'x' }, TemplateData: '{}' },
        },
      }),
    );
    const [failed] = await harness.inbox.await(MessageId!, 1);
    expect(failed).toMatchObject({
      'detail-type': 'Email Rendering Failed',
      detail: {
        eventType: 'Rendering Failure',
        failure: { errorMessage: "Attribute 'name' is not present in the rendering data." },
      },
    });
    await harness.standIn.idle();
    expect(harness.inbox.of(MessageId!)).toHaveLength(1);
  });

  it('an answer lost after the send: the SDK sees a network error, yet the email was sent and its SEND event arrives', async () => {
    const ses = await start();
    harness.standIn.faults.force('answer-lost');
    const error = await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`]))).then(
      () => undefined,
      (e: unknown) => e as Error & { $metadata?: { httpStatusCode?: number } },
    );
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(SESv2ServiceException);
    expect(error!.$metadata?.httpStatusCode).toBeUndefined();
    const [lost] = harness.standIn.sent();
    expect(lost).toBeDefined();
    const [sent] = await harness.inbox.await(lost!.messageId, 1);
    expect(sent!['detail-type']).toBe('Email Sent');
  });

  it('5xx and 429 faults send nothing', async () => {
    const ses = await start();
    harness.standIn.faults.force('internal-failure');
    harness.standIn.faults.force('service-unavailable');
    harness.standIn.faults.force('throttled');
    const statuses: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const error = await refusal(ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`]))));
      statuses.push([error.name, error.$metadata.httpStatusCode, error.$fault]);
    }
    expect(statuses).toEqual([
      ['TooManyRequestsException', 429, 'client'],
      ['InternalFailure', 500, 'server'],
      ['ServiceUnavailable', 503, 'server'],
    ]);
    expect(harness.standIn.sent()).toEqual([]);
  });

  it('events: duplicated, lost, and retried with backoff when the target fails (at least once)', async () => {
    let failures = 1;
    const arrived: EventBridgeEvent[] = [];
    const ses = await start({
      retry: { firstDelayMs: 5 },
      deliver: async (event) => {
        if (failures-- > 0) throw new Error('target unavailable');
        arrived.push(event);
        await harness.inbox.deliver(event);
      },
    });
    harness.standIn.faults.force('duplicated');
    const { MessageId } = await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`])));
    const events = await harness.inbox.await(MessageId!, 3);
    expect(types(events)).toEqual(['Email Sent', 'Email Sent', 'Email Delivered']);
    expect(events[0]!.id).toBe(events[1]!.id);
    await harness.standIn.idle();
    expect(
      harness.standIn.events().map(({ fate, attempts, deliveries }) => ({ fate, attempts, deliveries })),
    ).toEqual([
      { fate: 'delivered', attempts: 3, deliveries: 2 },
      { fate: 'delivered', attempts: 1, deliveries: 1 },
    ]);

    harness.standIn.faults.force('lost');
    const second = (await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`])))).MessageId!;
    expect(types(await harness.inbox.await(second, 1))).toEqual(['Email Delivered']);
    await harness.standIn.idle();
    expect(harness.standIn.events().filter((e) => e.fate === 'lost')).toHaveLength(1);
    expect(arrived).toHaveLength(4);
  });

  it('events reordered: a message’s events may arrive out of order', async () => {
    const ses = await start({ random: () => 0 });
    harness.standIn.faults.force('reordered');
    const { MessageId } = await ses.send(new SendEmailCommand(simple([`success@${SIMULATOR}`])));
    expect(types(await harness.inbox.await(MessageId!, 2))).toEqual(['Email Delivered', 'Email Sent']);
    expect(harness.standIn.events().every((e) => e.reordered)).toBe(true);
  });

  it('GetAccount reports a production account’s quotas and what was sent', async () => {
    const ses = await start();
    await ses.send(new SendEmailCommand(simple(['a@example.org', `success@${SIMULATOR}`])));
    expect(await ses.send(new GetAccountCommand({}))).toMatchObject({
      ProductionAccessEnabled: true,
      SendingEnabled: true,
      EnforcementStatus: 'HEALTHY',
      SendQuota: { Max24HourSend: 50_000, MaxSendRate: 14, SentLast24Hours: 1 },
    });
  });
});

function entry(
  to: string,
  data?: Record<string, string>,
  task?: string,
  unsubscribe?: string,
): NonNullable<SendBulkEmailCommandInput['BulkEmailEntries']>[number] {
  return {
    Destination: { ToAddresses: [to] },
    ...(data
      ? {
          ReplacementEmailContent: { ReplacementTemplate: { ReplacementTemplateData: JSON.stringify(data) } },
        }
      : {}),
    ...(task ? { ReplacementTags: [{ Name: 'task', Value: task }] } : {}),
    ...(unsubscribe ? { ReplacementHeaders: [{ Name: 'List-Unsubscribe', Value: unsubscribe }] } : {}),
  };
}

function bulk(entries: SendBulkEmailCommandInput['BulkEmailEntries']): SendBulkEmailCommandInput {
  return {
    FromEmailAddress: LOCAL_SES.from,
    ConfigurationSetName: LOCAL_SES.configurationSet,
    DefaultContent: {
      Template: {
        TemplateContent: { Subject: 'News', Text: 'Hello {{name}}' },
        TemplateData: '{"name":"there"}',
      },
    },
    BulkEmailEntries: entries,
  };
}
