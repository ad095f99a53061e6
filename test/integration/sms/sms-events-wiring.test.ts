/**
 * SMS's events and customers' texts back into Switchboard, against DynamoDB Local, wired as deployed
 * (`local/sms-wiring.ts`): the real `PinpointSMSVoiceV2Client` sends each task its text with the
 * broker's `Context` and the stage's configuration set; the stand-in publishes each text's events to
 * the SNS destination, whose raw subscription puts them on the `sms-events` queue, read in batches
 * by the deployed sms-events handler (`lambdas/sms-events/main.ts`) with the real DynamoDB store. A
 * customer's STOP to a client's number (`sms.reply`) goes the same way through the `sms-inbound`
 * queue to the deployed sms-inbound handler, which finds the client by its number in the clients'
 * settings and puts the sender on its suppression list. Events are awaited (`recorded()`), never
 * slept on; with the stand-in's events duplicated, reordered and delayed too.
 */
import {
  ConflictException,
  PinpointSMSVoiceV2Client,
  SendTextMessageCommand,
} from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_SMS, type SmsFaultRates, type SmsOutcome } from '#local/sms-emulator.ts';
import { type LocalSms, startLocalSms } from '#local/sms-wiring.ts';
import { taskItem } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { keys, type Task } from '#shared/jobs/model.ts';
import { SMS_CONTEXT } from '#shared/sms/settings.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const tasksTable = cloud.info.tableNames.tasks!;
const controlTable = cloud.info.tableNames.control!;
const suppressions = new DynamoSuppressionStore(cloud.doc, controlTable);

/** This file's two numbers (unique per run: the clients' list is shared by the worker's files). */
const digits = () => String(1000 + Math.floor(Math.random() * 9000));
const NUMBER = `+1844555${digits()}`;
const OTHER_NUMBER = `+1844556${digits()}`;
const CLIENT = uniqueName('sms');
const CLIENT_2 = uniqueName('sms');
const OTHER_CLIENT = uniqueName('sms');

/** Each destination's outcome at the stand-in, and the state its task must end in. */
const OUTCOMES: Record<string, { outcome: SmsOutcome; state: string; rank: number }> = {
  '+14255550101': { outcome: 'delivered', state: 'delivered', rank: 9 },
  '+14255550102': { outcome: 'successful', state: 'sent', rank: 2 },
  '+14255550103': { outcome: 'TEXT_BLOCKED', state: 'blocked', rank: 7 },
  '+14255550104': { outcome: 'TEXT_CARRIER_UNREACHABLE', state: 'unreachable', rank: 6 },
};
const DESTINATIONS = Object.keys(OUTCOMES);

let local: LocalSms | undefined;
let client: PinpointSMSVoiceV2Client | undefined;

/** A client item as the clients' API stores it: its settings, and its entry of the clients' list. */
async function putClient(clientId: string, originationIdentity: string): Promise<void> {
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: {
        ...keys.client(clientId),
        statusKey: 'CLIENTS',
        dueKey: clientId,
        clientId,
        sms: { originationIdentity, messageType: 'TRANSACTIONAL' },
        updatedAt: Date.now(),
      },
    }),
  );
}

beforeAll(async () => {
  // Every client exists before the first text back: the directory reads the list once and keeps it.
  await putClient(CLIENT, NUMBER);
  await putClient(CLIENT_2, NUMBER);
  await putClient(OTHER_CLIENT, OTHER_NUMBER);
});

afterEach(async () => {
  client?.destroy();
  await local?.stop();
  local = undefined;
  client = undefined;
});

afterAll(() => {});

async function start(faults: Partial<SmsFaultRates> = {}): Promise<LocalSms> {
  local = await startLocalSms({
    cloud: cloud.info,
    sms: {
      faults,
      identities: [
        { kind: 'phone-number', phoneNumber: NUMBER, mps: 100 },
        { kind: 'phone-number', phoneNumber: OTHER_NUMBER, mps: 100 },
      ],
      outcomes: Object.fromEntries(DESTINATIONS.map((to) => [to, OUTCOMES[to]!.outcome])),
    },
  });
  client = new PinpointSMSVoiceV2Client({
    region: LOCAL_SMS.region,
    endpoint: local.sms.url,
    credentials: { accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: LOCAL_SMS.secretAccessKey },
    maxAttempts: 1,
  });
  return local;
}

/** A job of the client, one task per destination (its task id: `t{i}`). */
async function seedJob(): Promise<{ jobId: string; tasks: Task[] }> {
  const jobId = uniqueName('job');
  const tasks = DESTINATIONS.map(
    (recipient, i): Task => ({
      clientId: CLIENT,
      jobId,
      taskId: `t${i}`,
      row: i + 2,
      channel: 'message',
      recipient,
      variables: {},
      state: 'in-flight',
      attempts: 1,
      readyAt: Date.now(),
      updatedAt: Date.now(),
    }),
  );
  for (const task of tasks)
    await cloud.doc.send(new PutCommand({ TableName: tasksTable, Item: taskItem(task) }));
  return { jobId, tasks };
}

/** Sends each task its text as the SMS transport does: the configuration set and the four context keys. */
async function sendEach(sms: LocalSms, tasks: readonly Task[]): Promise<void> {
  for (const task of tasks) {
    await client!.send(
      new SendTextMessageCommand({
        DestinationPhoneNumber: task.recipient,
        OriginationIdentity: NUMBER,
        MessageBody: 'Your appointment is tomorrow at 10:00.',
        MessageType: 'TRANSACTIONAL',
        ConfigurationSetName: sms.configurationSet,
        Context: {
          [SMS_CONTEXT.client]: task.clientId,
          [SMS_CONTEXT.job]: task.jobId,
          [SMS_CONTEXT.task]: task.taskId,
          [SMS_CONTEXT.attempt]: '1',
        },
      }),
    );
  }
}

async function expectOutcomes(jobId: string, tasks: readonly Task[]): Promise<void> {
  for (const task of tasks) {
    const out = await cloud.doc.send(
      new GetCommand({ TableName: tasksTable, Key: keys.task(jobId, task.taskId), ConsistentRead: true }),
    );
    const expected = OUTCOMES[task.recipient]!;
    expect(out.Item, task.recipient).toMatchObject({
      deliveryState: expected.state,
      deliveryRank: expected.rank,
      deliveryAttempt: 1,
      sentAttempt: 1,
    });
    if (expected.rank >= 3 && expected.rank < 9) expect(String(out.Item!.deliveryReason)).toMatch(/^TEXT_/);
    else expect(out.Item!.deliveryReason).toBeUndefined();
  }
}

describe('SMS delivery events, SNS → sms-events → the task', () => {
  it("records each text's final state on its task, and that it was sent", async () => {
    const sms = await start();
    const { jobId, tasks } = await seedJob();
    await sendEach(sms, tasks);
    await sms.recorded();
    expect(sms.sms.events().length).toBe(5);
    await expectOutcomes(jobId, tasks);
  });

  it('ends the same with events duplicated, reordered and delayed', async () => {
    const sms = await start({ eventReordered: 1, eventDuplicated: 0.5, eventDelayMs: { min: 0, max: 40 } });
    const { jobId, tasks } = await seedJob();
    await sendEach(sms, tasks);
    await sms.recorded();
    await expectOutcomes(jobId, tasks);
  });
});

describe("customers' texts back, SNS → sms-inbound → the suppression list", () => {
  it("puts a number that texts STOP on the list of each client sending from the number it texted, and on the number's opt-out list", async () => {
    const sms = await start();
    const customer = '+14255550199';
    const payload = sms.sms.reply(customer, NUMBER, 'Stop');
    expect(payload).toMatchObject({
      originationNumber: customer,
      destinationNumber: NUMBER,
      messageKeyword: 'STOP',
    });
    await sms.recorded();
    for (const clientId of [CLIENT, CLIENT_2]) {
      const entry = (await suppressions.suppressed(clientId, [customer])).get(customer);
      expect(entry, clientId).toMatchObject({ recipient: customer, kind: 'phone', source: 'sms-stop' });
      expect(entry!.reason).toBe(`texted STOP to ${NUMBER}`);
    }
    expect((await suppressions.suppressed(OTHER_CLIENT, [customer])).size).toBe(0);
    // The service refuses the number from now on, as its opt-out list says.
    await expect(
      client!.send(
        new SendTextMessageCommand({
          DestinationPhoneNumber: customer,
          OriginationIdentity: NUMBER,
          MessageBody: 'Hi',
        }),
      ),
    ).rejects.toBeInstanceOf(ConflictException);
  });

  it('leaves the list alone for a reply, and for the same STOP delivered twice writes one entry', async () => {
    const sms = await start({ eventDuplicated: 1 });
    const chatty = '+14255550198';
    const stopper = '+14255550197';
    sms.sms.reply(chatty, OTHER_NUMBER, 'Thanks, see you then');
    sms.sms.reply(stopper, OTHER_NUMBER, 'UNSUBSCRIBE');
    await sms.recorded();
    expect(sms.sms.inboundTexts().every((t) => t.deliveries === 2)).toBe(true);
    expect((await suppressions.suppressed(OTHER_CLIENT, [chatty])).size).toBe(0);
    expect((await suppressions.suppressed(OTHER_CLIENT, [stopper])).get(stopper)).toMatchObject({
      source: 'sms-stop',
      reason: `texted UNSUBSCRIBE to ${OTHER_NUMBER}`,
    });
    const page = await suppressions.page(OTHER_CLIENT, { limit: 10 });
    expect(page.entries.map((e) => e.recipient)).toEqual([stopper]);
  });
});
