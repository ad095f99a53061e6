/**
 * Message ends written on claim pages (plain conditional updates naming the page, the job's counts
 * moved once per page with its close): exact counts through a takeover, a lost answer, and a
 * broker that stopped between its outcomes and the page's close. Against DynamoDB Local.
 */
import { DynamoDBClient, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { readOpenClaims } from '#shared/adapters/dynamo-claim-pages.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import type { ClaimedTask, TaskOutcome } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import type { Job } from '#shared/jobs/model.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { claimAll, messageHolder } from '../../support/message-sessions.ts';
import { seedMessageJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const HOUR = 3_600_000;
const PERSONAL: MessageTemplate = { messages: [{ type: 'text', text: 'こんにちは {{name}} さん' }] };

const seed = (tasks: number): Promise<Job> => {
  const clientId = uniqueName('op').replace(/-/g, '');
  return seedMessageJob(
    cloud.doc,
    { controlTable, tasksTable },
    { clientId, channelId: 'channel-1', tasks, message: PERSONAL, jobIdPrefix: 'OP' },
  );
};

const countsOf = async (job: Job) =>
  (await new DynamoJobStore(cloud.doc, controlTable).get(job.clientId, job.jobId))!.counts;

const delivered = (t: ClaimedTask, at: number): TaskOutcome => ({
  jobId: t.jobId,
  taskId: t.taskId,
  attempt: t.attempt,
  kind: 'delivered',
  lastResult: 'delivered',
  at,
});

/** A DynamoDB client of its own on the local cloud (a test adds its faults to it). */
const localDynamo = () =>
  new DynamoDBClient({
    region: cloud.info.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: cloud.info.dynamoEndpoint,
  });

/** A broker's lease and a message session under it, against `doc`. */
const holder = (job: Job, owner: string, now: () => number, doc = cloud.doc) =>
  messageHolder(job, owner, now, { tables: { controlTable, tasksTable }, leaseDoc: cloud.doc, doc });

describe('message ends written on claim pages', () => {
  it('counts each end once with its page: a holder that lost the client to another cannot end what the new one took over', async () => {
    const job = await seed(6);
    let now = Date.now();
    const clock = () => now;
    const a = await holder(job, 'a', clock);
    const claimed = await claimAll(a, 6);
    expect(claimed).toHaveLength(6);

    // One end written: the task has ended, the page still holds the other five, the counts wait for it.
    await a.report.write([delivered(claimed[0]!, now)]);
    expect(
      (await readTasks(cloud.doc, tasksTable, job.jobId)).find((t) => t.taskId === claimed[0]!.taskId),
    ).toMatchObject({ state: 'completed' });
    expect(await countsOf(job)).toMatchObject({ completed: 0 });

    // `a` stops renewing; `b` takes the client over: it closes a's page, counting the one end on it,
    // and claims the five again (they may have been sent).
    now += HOUR + 1;
    const b = await holder(job, 'b', clock);
    const again = await claimAll(b, 5);
    expect(again.map((t) => t.taskId).sort()).toEqual(
      claimed
        .slice(1)
        .map((t) => t.taskId)
        .sort(),
    );
    expect(again.every((t) => t.maybeSent)).toBe(true);
    expect(await countsOf(job)).toMatchObject({ completed: 1 });

    // `a`'s late end of a task `b` took over is refused (b ends it under the same retry key).
    await a.report.write([delivered(claimed[1]!, now)]);
    const late = (await readTasks(cloud.doc, tasksTable, job.jobId)).find(
      (t) => t.taskId === claimed[1]!.taskId,
    );
    expect(late?.state).toBe('pending');

    await b.report.write(again.map((t) => delivered(t, now)));
    const tasks = await readTasks(cloud.doc, tasksTable, job.jobId);
    expect(tasks.every((t) => t.state === 'completed')).toBe(true);
    expect(await countsOf(job)).toMatchObject({ completed: 6, failed: 0, cancelled: 0 });
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
  });

  it('an end applied whose answer was lost is counted once, when the retry is refused', async () => {
    const job = await seed(4);
    const now = Date.now();
    // A client that applies the first PartiQL batch, then loses its answer (the SDK sends it again).
    const ddb = localDynamo();
    let lost = 0;
    ddb.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (context.commandName === 'BatchExecuteStatementCommand' && lost++ === 0) {
          throw Object.assign(new Error('socket hang up'), {
            name: 'TimeoutError',
            code: 'ECONNRESET',
            $metadata: {},
          });
        }
        return result;
      },
      { step: 'finalizeRequest', priority: 'low', name: 'testLoseFirstAnswer' },
    );
    const session = await holder(job, 'a', () => now, makeDocumentClient(ddb));
    const claimed = await claimAll(session, 4);
    await session.report.write(claimed.map((t) => delivered(t, now)));
    expect(lost).toBeGreaterThan(1);
    expect(await countsOf(job)).toMatchObject({ completed: 4 });
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
    ddb.destroy();
  });

  it('a page whose tasks all ended but was never closed (its broker stopped) is closed before the job completes, counted once', async () => {
    const job = await seed(5);
    const now = Date.now();
    // A client whose page closes all fail: the broker "stops" between its outcomes and the close.
    const ddb = localDynamo();
    ddb.middlewareStack.add(
      (next, context) => async (args) => {
        const input = (args as { input: { TransactItems?: { Delete?: unknown }[] } }).input;
        if (context.commandName === 'TransactWriteItemsCommand' && input.TransactItems?.[0]?.Delete) {
          // As if another had closed it: the page stays, its counts unmoved.
          throw new TransactionCanceledException({
            message: 'stopped',
            $metadata: {},
            CancellationReasons: [{ Code: 'ConditionalCheckFailed' }, { Code: 'None' }],
          });
        }
        return next(args);
      },
      { step: 'initialize', name: 'testNoClose' },
    );
    const session = await holder(job, 'a', () => now, makeDocumentClient(ddb));
    const claimed = await claimAll(session, 5);
    await session.report.write(claimed.map((t) => delivered(t, now)));
    expect((await readTasks(cloud.doc, tasksTable, job.jobId)).every((t) => t.state === 'completed')).toBe(
      true,
    );
    expect(await countsOf(job)).toMatchObject({ completed: 0 });
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toHaveLength(1);

    const fleet = new DynamoFleetStore(cloud.doc, { controlTable, tasksTable });
    expect(await fleet.hasOpenTask(job.jobId)).toBe(false);
    await fleet.settleClaimPages!(job.clientId, job.jobId);
    await fleet.settleClaimPages!(job.clientId, job.jobId);
    expect(await countsOf(job)).toMatchObject({ completed: 5 });
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
    ddb.destroy();
  });
});
