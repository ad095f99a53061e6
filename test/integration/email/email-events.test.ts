/**
 * SES's events into tasks and the suppression list, against DynamoDB Local, wired as deployed
 * (`local/email-wiring.ts`): the real `SESv2Client` sends to the mailbox simulator's addresses with
 * the broker's four tags and the stage's configuration set; the SES stand-in publishes each email's
 * events to the rule, the rule to the deployed email-events handler (`lambdas/email-events/main.ts`)
 * with the real DynamoDB stores. Each seeded task ends in its email's state, and the bounced and
 * complaining addresses are on the client's list — with the stand-in's events duplicated, reordered
 * and delayed too. Events are awaited (`recorded()`: published, queued and recorded), never slept on.
 *
 * The store's own rules (forward only across attempts, `sentAttempt`, a task of another client) are
 * checked below against the same table.
 */
import { SESv2Client, SendEmailCommand } from '@aws-sdk/client-sesv2';
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { type LocalEmail, startLocalEmail } from '#local/email-wiring.ts';
import { LOCAL_SES, type SesFaultRates } from '#local/ses-emulator.ts';
import { DynamoDeliveryOutcomeStore } from '#shared/adapters/dynamo-delivery-outcomes.ts';
import { taskItem } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { EMAIL_TAGS, type EmailStateChange } from '#shared/email/email-outcomes.ts';
import { EMAIL_DELIVERY_RANK } from '#shared/email/ses-events.ts';
import { keys, type Task } from '#shared/jobs/model.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const tasksTable = cloud.info.tableNames.tasks!;
const controlTable = cloud.info.tableNames.control!;
const suppressions = new DynamoSuppressionStore(cloud.doc, controlTable);

const SIMULATOR = 'simulator.amazonses.com';
/** Each simulator address, and what its task and the list must end with. */
const EXPECTED = {
  [`success@${SIMULATOR}`]: { deliveryState: 'delivered', suppressed: undefined },
  [`bounce@${SIMULATOR}`]: { deliveryState: 'bounced', suppressed: 'bounce' },
  [`complaint@${SIMULATOR}`]: { deliveryState: 'complained', suppressed: 'complaint' },
  [`suppressionlist@${SIMULATOR}`]: { deliveryState: 'bounced', suppressed: 'bounce' },
} as const;
const ADDRESSES = Object.keys(EXPECTED);

let email: LocalEmail | undefined;
let ses: SESv2Client | undefined;

afterEach(async () => {
  ses?.destroy();
  await email?.stop();
  email = undefined;
  ses = undefined;
});

async function start(faults: Partial<SesFaultRates> = {}): Promise<LocalEmail> {
  // A rate no test reaches: these tests are about events, not pacing.
  email = await startLocalEmail({ cloud: cloud.info, ses: { faults, account: { maxSendRate: 1000 } } });
  ses = new SESv2Client({
    region: LOCAL_SES.region,
    endpoint: email.ses.url,
    credentials: { accessKeyId: LOCAL_SES.accessKeyId, secretAccessKey: LOCAL_SES.secretAccessKey },
    maxAttempts: 1,
  });
  return email;
}

/** A job of a client of its own, with one task per address (its task id: `t{i}`). */
async function seedJob(addresses: readonly string[]) {
  const clientId = uniqueName('mail');
  const jobId = uniqueName('job');
  const tasks = addresses.map(
    (recipient, i): Task => ({
      clientId,
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
  return { clientId, jobId, tasks };
}

/** Sends each task its email, as the broker's SES transport does: the configuration set and the four tags. */
async function sendEach(local: LocalEmail, tasks: readonly Task[], attempt = 1): Promise<void> {
  for (const task of tasks) {
    await ses!.send(
      new SendEmailCommand({
        FromEmailAddress: LOCAL_SES.from,
        Destination: { ToAddresses: [task.recipient] },
        ConfigurationSetName: local.configurationSet,
        Content: { Simple: { Subject: { Data: 'Spring sale' }, Body: { Text: { Data: 'Hello' } } } },
        EmailTags: [
          { Name: EMAIL_TAGS.client, Value: task.clientId },
          { Name: EMAIL_TAGS.job, Value: task.jobId },
          { Name: EMAIL_TAGS.task, Value: task.taskId },
          { Name: EMAIL_TAGS.attempt, Value: String(attempt) },
        ],
      }),
    );
  }
}

async function item(jobId: string, taskId: string): Promise<Record<string, unknown> | undefined> {
  const out = await cloud.doc.send(
    new GetCommand({ TableName: tasksTable, Key: keys.task(jobId, taskId), ConsistentRead: true }),
  );
  return out.Item;
}

/** Every task in its address's expected state, and exactly the bounced and complaining addresses on the list. */
async function expectOutcomes(clientId: string, jobId: string, tasks: readonly Task[]): Promise<void> {
  for (const task of tasks) {
    const expected = EXPECTED[task.recipient as keyof typeof EXPECTED];
    expect(await item(jobId, task.taskId), task.recipient).toMatchObject({
      deliveryState: expected.deliveryState,
      deliveryAttempt: 1,
      sentAttempt: 1,
      deliveryEventAt: expect.any(Number),
      // The task's own state is the broker's: events do not touch it.
      state: 'in-flight',
    });
  }
  const listed = await suppressions.suppressed(clientId, ADDRESSES);
  for (const address of ADDRESSES) {
    const expected = EXPECTED[address as keyof typeof EXPECTED].suppressed;
    expect(listed.get(address)?.source, address).toBe(expected);
    if (expected) expect(listed.get(address)).toMatchObject({ kind: 'email', recipient: address });
  }
}

describe("SES's events on the tasks and the suppression list", () => {
  it('success@, bounce@, complaint@ and suppressionlist@ end delivered, bounced, complained and bounced; the bounced and the complaining are suppressed', async () => {
    const local = await start();
    const { clientId, jobId, tasks } = await seedJob(ADDRESSES);
    await sendEach(local, tasks);
    await local.recorded();
    await expectOutcomes(clientId, jobId, tasks);
    expect(await item(jobId, 't1')).toMatchObject({
      deliveryReason: expect.stringMatching(/^Permanent\/General: smtp; 550 5\.1\.1/),
    });
    expect(await item(jobId, 't3')).toMatchObject({
      deliveryReason: expect.stringMatching(/^Permanent\/OnAccountSuppressionList/),
    });
    expect((await item(jobId, 't0'))!.deliveryReason).toBeUndefined();
    expect(local.ses.events().every((e) => e.fate === 'delivered')).toBe(true);
  });

  it('every event delivered twice: the same ends', async () => {
    const local = await start({ eventDuplicated: 1 });
    const { clientId, jobId, tasks } = await seedJob(ADDRESSES);
    await sendEach(local, tasks);
    await local.recorded();
    expect(local.ses.events().every((e) => e.deliveries === 2)).toBe(true);
    await expectOutcomes(clientId, jobId, tasks);
  });

  it("each email's events reordered, duplicated and delayed: the same ends", async () => {
    const local = await start({ eventReordered: 1, eventDuplicated: 0.5, eventDelayMs: { min: 0, max: 40 } });
    // Three jobs of the four addresses: twelve shuffles, so a late Send or Delivery is all but certain.
    const jobs = [await seedJob(ADDRESSES), await seedJob(ADDRESSES), await seedJob(ADDRESSES)];
    for (const { tasks } of jobs) await sendEach(local, tasks);
    await local.recorded();
    expect(local.ses.events().every((e) => e.reordered && e.fate === 'delivered')).toBe(true);
    for (const { clientId, jobId, tasks } of jobs) await expectOutcomes(clientId, jobId, tasks);
  });

  it("an email of no task (another client's job id, no task) changes no task, and is acknowledged", async () => {
    const local = await start();
    const { jobId, tasks } = await seedJob([`success@${SIMULATOR}`]);
    await sendEach(local, [{ ...tasks[0]!, clientId: uniqueName('other') }]);
    await sendEach(local, [{ ...tasks[0]!, taskId: 'no-such-task' }]);
    await local.recorded();
    expect(local.ses.events().map((e) => e.fate)).toEqual(Array(4).fill('delivered'));
    expect(await item(jobId, 't0')).not.toHaveProperty('deliveryState');
    expect(await item(jobId, 'no-such-task')).toBeUndefined();
  });
});

describe('the DynamoDB delivery outcome store, with email’s ranks', () => {
  const store = new DynamoDeliveryOutcomeStore(cloud.doc, tasksTable, EMAIL_DELIVERY_RANK, 'email');

  async function seeded() {
    const { clientId, jobId } = await seedJob([`success@${SIMULATOR}`]);
    const change = (
      attempt: number,
      state: EmailStateChange['state'],
      extra: Partial<EmailStateChange> = {},
    ) =>
      ({ clientId, jobId, taskId: 't0', attempt, state, at: 1_000 * attempt, sent: true, ...extra }) as const;
    return { jobId, change };
  }

  it('moves forward only: a lower rank of the attempt, or an earlier attempt, is stale', async () => {
    const { jobId, change } = await seeded();
    expect(await store.record(change(1, 'delivered'))).toBe('recorded');
    expect(await store.record(change(1, 'sent'))).toBe('stale');
    expect(await store.record(change(1, 'delivered'))).toBe('stale');
    expect(await store.record(change(1, 'soft-bounced', { reason: 'Transient/MailboxFull' }))).toBe(
      'recorded',
    );
    expect(await item(jobId, 't0')).toMatchObject({
      deliveryState: 'soft-bounced',
      deliveryRank: 6,
      deliveryAttempt: 1,
      deliveryReason: 'Transient/MailboxFull',
    });
    // The second attempt supersedes the first, whatever their states; its state has no reason.
    expect(await store.record(change(2, 'delivered'))).toBe('recorded');
    expect(await store.record(change(1, 'complained'))).toBe('stale');
    const after = await item(jobId, 't0');
    expect(after).toMatchObject({
      deliveryState: 'delivered',
      deliveryAttempt: 2,
      sentAttempt: 2,
      deliveryEventAt: 2_000,
    });
    expect(after).not.toHaveProperty('deliveryReason');
  });

  it('sentAttempt is the highest attempt proved sent, even when that proof arrives after a later rejection', async () => {
    const { jobId, change } = await seeded();
    expect(await store.record(change(2, 'rejected', { sent: false, reason: 'Bad content' }))).toBe(
      'recorded',
    );
    expect(await item(jobId, 't0')).not.toHaveProperty('sentAttempt');
    expect(await store.record(change(1, 'sent'))).toBe('stale');
    expect(await item(jobId, 't0')).toMatchObject({
      deliveryState: 'rejected',
      deliveryAttempt: 2,
      sentAttempt: 1,
    });
    expect(await store.record(change(1, 'delivered'))).toBe('stale');
    expect(await item(jobId, 't0')).toMatchObject({ sentAttempt: 1 });
  });

  it('reads an item written under email’s names of before, and moves it to the new names', async () => {
    const { jobId, change } = await seeded();
    await cloud.doc.send(
      new UpdateCommand({
        TableName: tasksTable,
        Key: keys.task(jobId, 't0'),
        UpdateExpression:
          'SET emailState = :state, emailRank = :rank, emailAttempt = :one, emailEventAt = :at, emailReason = :reason',
        ExpressionAttributeValues: {
          ':state': 'soft-bounced',
          ':rank': EMAIL_DELIVERY_RANK['soft-bounced'],
          ':one': 1,
          ':at': 1_000,
          ':reason': 'Transient/MailboxFull',
        },
      }),
    );
    expect(await store.record(change(1, 'delivered'))).toBe('stale');
    const moved = change(2, 'delivered');
    expect(await store.record(moved)).toBe('recorded');
    const after = await item(jobId, 't0');
    expect(after).toMatchObject({ deliveryState: 'delivered', deliveryAttempt: 2, sentAttempt: 2 });
    for (const old of ['emailState', 'emailRank', 'emailAttempt', 'emailEventAt', 'emailReason']) {
      expect(after).not.toHaveProperty(old);
    }
  });

  it('never touches another client’s task, nor creates one', async () => {
    const { jobId, change } = await seeded();
    expect(await store.record({ ...change(1, 'delivered'), clientId: 'someone-else' })).toBe('unknown-task');
    expect(await store.record({ ...change(1, 'delivered'), taskId: 'missing' })).toBe('unknown-task');
    expect(await item(jobId, 't0')).not.toHaveProperty('deliveryState');
    expect(await item(jobId, 'missing')).toBeUndefined();
  });
});
