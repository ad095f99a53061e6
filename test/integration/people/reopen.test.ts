/**
 * A fallback job's task moved on after its email bounced for good (`shared/jobs/reopen.ts`), against
 * DynamoDB Local through the real adapter (`shared/adapters/dynamo-task-reopen.ts`): the ended task
 * waits again on its next channel, the job's count of its end is taken back in the same transaction,
 * a task whose end is on a claim page not closed yet waits for the close, a completed job is not
 * reopened, a job found with nothing open does not complete over a task opened since, and the email
 * channel's late events no longer touch a task that left it.
 */
import { DeleteCommand, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoDeliveryOutcomeStore } from '#shared/adapters/dynamo-delivery-outcomes.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { taskItem } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoTaskReopen } from '#shared/adapters/dynamo-task-reopen.ts';
import { EMAIL_DELIVERY_RANK } from '#shared/email/ses-events.ts';
import { type Job, keys, type Task } from '#shared/jobs/model.ts';
import { makeReopenUnreached, ReopenLater, type UnreachedAttempt } from '#shared/jobs/reopen.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const tasksTable = cloud.info.tableNames.tasks!;
const controlTable = cloud.info.tableNames.control!;
const store = new DynamoTaskReopen(cloud.doc, { controlTable, tasksTable });
const clock = { now: () => Date.now() };
const reopen = makeReopenUnreached(store, clock);

const ADDRESS = 'a@example.com';
const PHONE = '+819011112222';

/** A running line → email → sms job of a client of its own, one task that was emailed and completed. */
async function seed(task: Partial<Task> & Record<string, unknown> = {}, job: Partial<Job> = {}) {
  const clientId = uniqueName('reopen');
  const jobId = uniqueName('job');
  const now = Date.now();
  const stored: Job = {
    clientId,
    jobId,
    name: 'n',
    channel: 'line',
    fallback: ['email', 'sms'],
    scenarioId: 'default',
    startAt: now - 60_000,
    endAt: now + 3_600_000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 1, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
    ...job,
  };
  const ended: Task = {
    clientId,
    jobId,
    taskId: 't1',
    row: 2,
    channel: 'message',
    recipient: ADDRESS,
    reach: { line: 'U1', email: ADDRESS, sms: PHONE },
    via: 'email',
    tried: [{ channel: 'line', reason: 'opted-out' }],
    variables: {},
    state: 'completed',
    attempts: 1,
    lastResult: 'accepted',
    readyAt: now - 60_000,
    startedAt: now - 5000,
    updatedAt: now - 1000,
    ...task,
  };
  await cloud.doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.job(clientId, jobId), ...stored } }),
  );
  await cloud.doc.send(
    new PutCommand({
      TableName: tasksTable,
      Item: {
        ...taskItem(ended),
        expiresAt: Math.floor(now / 1000) + 86_400,
        deliveryState: 'bounced',
        // The bounce's own proof of sending, set by the delivery store just before the move.
        sentAttempt: 1,
        ...task,
      },
    }),
  );
  const bounce: UnreachedAttempt = {
    clientId,
    jobId,
    taskId: 't1',
    attempt: 1,
    channel: 'email',
    result: 'bounced',
    reason: 'Permanent/General',
    entrySource: 'bounce',
  };
  return { job: stored, bounce };
}

async function read(table: string, key: Record<string, string>) {
  return (await cloud.doc.send(new GetCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item!;
}

describe('a hard bounce moves a fallback job’s ended task on', () => {
  it('the task waits on its next channel, ready at once, and the job counts its end no more', async () => {
    const { job, bounce } = await seed();
    await expect(reopen(bounce)).resolves.toEqual({ outcome: 'reopened', to: 'sms' });
    const task = await read(tasksTable, keys.task(job.jobId, 't1'));
    expect(task).toMatchObject({
      state: 'pending',
      via: 'sms',
      recipient: PHONE,
      // Its attempt kept: the text is no first contact, and takes no second slot.
      attempts: 1,
      lastResult: 'bounced',
      tried: [
        { channel: 'line', reason: 'opted-out' },
        { channel: 'email', reason: 'bounced: Permanent/General' },
      ],
    });
    // Back in the outstanding index; what belonged to the email's send is gone.
    expect(task.openPk).toBe(
      keys.outstandingIndex({ ...job, taskId: 't1', state: 'pending', readyAt: 0 })!.openPk,
    );
    expect(String(task.openSk)).toMatch(new RegExp(`#${job.jobId}#t1$`));
    for (const gone of ['expiresAt', 'deliveryState', 'startedAt', 'sentAttempt'])
      expect(task, gone).not.toHaveProperty(gone);
    const after = await read(controlTable, keys.job(job.clientId, job.jobId));
    expect(after).toMatchObject({ reopened: 1, counts: { completed: 0 } });
    // The same bounce again (SQS, EventBridge deliver at least once): nothing moves twice.
    await expect(reopen(bounce)).resolves.toMatchObject({ outcome: 'kept' });
    expect(await read(controlTable, keys.job(job.clientId, job.jobId))).toMatchObject({
      reopened: 1,
      counts: { completed: 0 },
    });
  });

  it('a task that ended in doubt moves too, its failure taken back', async () => {
    const { job, bounce } = await seed(
      { state: 'failed', reason: 'in-doubt' },
      { counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 0, failed: 1, cancelled: 0 } },
    );
    await expect(reopen(bounce)).resolves.toMatchObject({ outcome: 'reopened' });
    expect(await read(tasksTable, keys.task(job.jobId, 't1'))).not.toHaveProperty('reason');
    expect(await read(controlTable, keys.job(job.clientId, job.jobId))).toMatchObject({
      counts: { failed: 0 },
    });
  });

  it('a task ended for the bounce’s own entry (claimed again after a send in doubt) moves, its cancelled and suppressed counts taken back', async () => {
    const { job, bounce } = await seed(
      { state: 'cancelled', reason: 'suppressed: bounce', lastResult: 'suppressed' },
      {
        counts: {
          rows: 1,
          rejected: 0,
          skipped: 0,
          tasks: 1,
          completed: 0,
          failed: 0,
          cancelled: 1,
          suppressed: 1,
        },
      },
    );
    await expect(reopen(bounce)).resolves.toMatchObject({ outcome: 'reopened', to: 'sms' });
    expect(await read(controlTable, keys.job(job.clientId, job.jobId))).toMatchObject({
      counts: { cancelled: 0, suppressed: 0 },
    });
  });

  it('waits while the claim page its end is on is open (its end not counted yet), and moves it once closed', async () => {
    const page = { pk: `${'x'}#claims`, sk: 'page-1' };
    const { job, bounce } = await seed({ endedOn: 'page-1' });
    page.pk = `${job.clientId}#claims`;
    await cloud.doc.send(
      new PutCommand({ TableName: tasksTable, Item: { ...page, tasks: { [job.jobId]: ['t1'] } } }),
    );
    await expect(reopen(bounce)).rejects.toThrow(ReopenLater);
    expect(await read(tasksTable, keys.task(job.jobId, 't1'))).toMatchObject({ state: 'completed' });
    await cloud.doc.send(new DeleteCommand({ TableName: tasksTable, Key: page }));
    await expect(reopen(bounce)).resolves.toMatchObject({ outcome: 'reopened' });
    expect(await read(tasksTable, keys.task(job.jobId, 't1'))).not.toHaveProperty('endedOn');
  });

  it('waits for a task whose outcome is not written yet', async () => {
    const { bounce } = await seed({ state: 'in-flight' });
    await expect(reopen(bounce)).rejects.toThrow(ReopenLater);
  });

  it('does not reopen a completed job, nor a task a later attempt or another channel is on', async () => {
    const completed = await seed({}, { status: 'completed' });
    await expect(reopen(completed.bounce)).resolves.toEqual({ outcome: 'kept', why: 'the job is completed' });
    const later = await seed({ attempts: 2 });
    await expect(reopen(later.bounce)).resolves.toMatchObject({ outcome: 'kept' });
    const noNext = await seed({ reach: { line: 'U1', email: ADDRESS } });
    await expect(reopen(noNext.bounce)).resolves.toEqual({ outcome: 'kept', why: 'no next channel' });
  });

  it('a job completed between the read and the write refuses the write: nothing moves', async () => {
    const { job, bounce } = await seed();
    const plan = { ...(await store.task(bounce))! };
    // The job manager completes the job after the use case read it running.
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: { ...keys.job(job.clientId, job.jobId), ...job, status: 'completed' },
      }),
    );
    const write = await store.reopen({
      clientId: job.clientId,
      jobId: job.jobId,
      taskId: 't1',
      from: plan.recipient,
      endedAs: 'completed',
      attempts: 1,
      lastResult: 'bounced',
      next: { from: 'email', channel: 'sms', recipient: PHONE, skipped: [] },
      tried: [{ channel: 'email', reason: 'bounced' }],
      readyAt: Date.now(),
    });
    expect(write).toBe('changed');
    expect(await read(tasksTable, keys.task(job.jobId, 't1'))).toMatchObject({
      state: 'completed',
      via: 'email',
    });
  });
});

describe('the job manager and a task opened again', () => {
  it('a job read with nothing open does not complete once a task was opened since; read again, it would', async () => {
    const { job, bounce } = await seed();
    const fleet = new DynamoFleetStore(cloud.doc, { controlTable, tasksTable });
    // The manager's read: running, nothing open.
    const asRead = (await read(controlTable, keys.job(job.clientId, job.jobId))) as unknown as Job;
    expect(await fleet.hasOpenTask(job.jobId)).toBe(false);
    // The bounce moves the task on before the manager's completion is written.
    await reopen(bounce);
    expect(await fleet.completeJob(asRead, Date.now())).toBe(false);
    expect(await read(controlTable, keys.job(job.clientId, job.jobId))).toMatchObject({ status: 'running' });
    expect(await fleet.hasOpenTask(job.jobId)).toBe(true);
    // Read again (the next run), the condition holds: only the open task keeps it running.
    const again = (await read(controlTable, keys.job(job.clientId, job.jobId))) as unknown as Job;
    expect(again.reopened).toBe(1);
    expect(await fleet.completeJob(again, Date.now())).toBe(true);
  });
});

describe("the email channel's late events and a task that left it", () => {
  it('a late email event is stale on a task now on SMS; an email job’s task (no via) still records', async () => {
    const { job, bounce } = await seed();
    await reopen(bounce);
    const emailEvents = new DynamoDeliveryOutcomeStore(cloud.doc, tasksTable, EMAIL_DELIVERY_RANK, 'email');
    const late = { ...bounce, state: 'delivered' as const, at: Date.now(), sent: true };
    await expect(emailEvents.record(late)).resolves.toBe('stale');
    // Neither its state nor its proof of sending: the text's attempt is proved by the text's events.
    const moved = await read(tasksTable, keys.task(job.jobId, 't1'));
    expect(moved).not.toHaveProperty('deliveryState');
    expect(moved).not.toHaveProperty('sentAttempt');
    const plain = await seed(
      { via: undefined, reach: undefined, deliveryState: undefined },
      { channel: 'email', fallback: undefined },
    );
    await expect(
      emailEvents.record({ ...plain.bounce, state: 'delivered', at: Date.now(), sent: true }),
    ).resolves.toBe('recorded');
  });
});
