/**
 * A broker taking over a client whose holder died mid-campaign (`email-drill.test.ts`): before its
 * first claim it marks every task the dead holder left on its claim pages. A holder dies with up to
 * its queue's worth claimed (a thousand emails); marked one request a task, the next holder sent
 * nothing for 12 s in the drill. Here the marks go 25 to a request, and they still say the same:
 * only the tasks of a recorded request may have been sent, and the dead holder can end none of them.
 * Against DynamoDB Local.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { LOCAL_SES } from '#local/ses-emulator.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { readOpenClaims } from '#shared/adapters/dynamo-claim-pages.ts';
import type { TaskOutcome } from '#shared/campaign/ports.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { claimAll, messageHolder } from '../../support/message-sessions.ts';
import { ALWAYS_OPEN, jobIdFor, writeRunningJob } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const HOUR = 3_600_000;
const TASKS = 120;
/** The dead holder's one recorded request (SES's bulk send: 50 destinations). */
const RECORDED = 50;

/** A running email job of `n` tasks, as ingest writes it. */
async function seed(n: number): Promise<Job> {
  const clientId = uniqueName('et').replace(/-/g, '');
  const now = Date.now();
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 1,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    email: { from: LOCAL_SES.from, delivery: 'at-most-once' },
    updatedAt: now,
  };
  const job: Job = {
    clientId,
    jobId: jobIdFor('ET', clientId),
    name: 'takeover',
    channel: 'email',
    scenarioId: 'default',
    email: { subject: 'ご案内', text: 'こんにちは {{name}} さん' },
    startAt: now - 1000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: n, rejected: 0, skipped: 0, tasks: n, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
  const tasks = Array.from(
    { length: n },
    (_, i): Task => ({
      clientId,
      jobId: job.jobId,
      taskId: `t${String(i).padStart(5, '0')}`,
      row: i + 2,
      channel: 'message',
      recipient: `success+takeover-${i}@simulator.amazonses.com`,
      variables: { name: `顧客${i}` },
      state: 'pending',
      attempts: 0,
      readyAt: now - 1000,
      updatedAt: now,
    }),
  );
  await writeRunningJob(cloud.doc, { controlTable, tasksTable }, client, job, tasks);
  return job;
}

/** A document client of its own on the local cloud, counting the requests that mark left tasks (`leftOn`). */
function markCountingDoc() {
  const marks = { requests: 0 };
  const client = new DynamoDBClient({
    region: cloud.info.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: cloud.info.dynamoEndpoint,
  });
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = args.input as { UpdateExpression?: string; Statements?: { Statement?: string }[] };
      const marking =
        input.UpdateExpression?.includes('leftOn') ||
        input.Statements?.some((s) => s.Statement?.includes('"leftOn" = ?'));
      if (marking) marks.requests += 1;
      return next(args);
    },
    { step: 'initialize', name: 'countLeftTaskMarks' },
  );
  return { doc: makeDocumentClient(client), marks };
}

const accepted = (t: { jobId: string; taskId: string; attempt: number }, at: number): TaskOutcome => ({
  jobId: t.jobId,
  taskId: t.taskId,
  attempt: t.attempt,
  kind: 'delivered',
  lastResult: 'accepted',
  at,
});

describe('a broker taking over from a dead email sender', () => {
  it('marks what a dead holder left 25 to a request: only its recorded request may have gone, and it can end none of them', async () => {
    const job = await seed(TASKS);
    let now = Date.now();
    const clock = () => now;
    const tables = { controlTable, tasksTable };

    // The holder claims the whole list, records one request (just before it would go) and dies.
    const dead = await messageHolder(job, 'dead', clock, { tables, leaseDoc: cloud.doc });
    const claimed = await claimAll(dead, TASKS);
    expect(claimed).toHaveLength(TASKS);
    const recorded = claimed.slice(0, RECORDED).map((t) => t.taskId);
    await dead.batches.record({
      jobId: job.jobId,
      attempt: 1,
      retryKey: 'recorded-request',
      taskIds: recorded,
    });

    // Its lease runs out; the heir's first claim settles the dead holder's pages, then claims.
    now += HOUR + 1;
    const { doc, marks } = markCountingDoc();
    const heir = await messageHolder(job, 'heir', clock, { tables, leaseDoc: cloud.doc, doc });
    const again = await claimAll(heir, TASKS);
    expect(marks.requests).toBeGreaterThan(0);
    expect(marks.requests).toBeLessThanOrEqual(Math.ceil(TASKS / 25));

    // The same tasks, the same attempt; only the recorded request's are taken as maybe sent.
    expect(again.map((t) => t.taskId).sort()).toEqual(claimed.map((t) => t.taskId).sort());
    expect(again.every((t) => t.attempt === 1)).toBe(true);
    const maybeSent = again.filter((t) => t.maybeSent === true).map((t) => t.taskId);
    expect(maybeSent.sort()).toEqual([...recorded].sort());
    const stored = await readTasks<Task & { startedAt?: number; leftOn?: Set<string> }>(
      cloud.doc,
      tasksTable,
      job.jobId,
    );
    expect(stored.every((t) => t.state === 'pending' && t.attempts === 1 && t.startedAt !== undefined)).toBe(
      true,
    );
    expect(stored.every((t) => (t.leftOn?.size ?? 0) > 0)).toBe(true);

    // The dead holder's late outcome is refused: the heir ends the task.
    await dead.report.write([accepted(claimed[RECORDED]!, now)]);
    const late = (await readTasks(cloud.doc, tasksTable, job.jobId)).find(
      (t) => t.taskId === claimed[RECORDED]!.taskId,
    );
    expect(late?.state).toBe('pending');

    // The heir dies too: a third holder marks tasks already marked once (each on its own: `ADD`).
    now += HOUR + 1;
    const third = await messageHolder(job, 'third', clock, { tables, leaseDoc: cloud.doc });
    const thirdTime = await claimAll(third, TASKS);
    expect(thirdTime.map((t) => t.taskId).sort()).toEqual(claimed.map((t) => t.taskId).sort());
    expect(thirdTime.every((t) => t.attempt === 1)).toBe(true);
    expect(
      thirdTime
        .filter((t) => t.maybeSent === true)
        .map((t) => t.taskId)
        .sort(),
    ).toEqual([...recorded].sort());
    const twice = await readTasks<Task & { leftOn?: Set<string> }>(cloud.doc, tasksTable, job.jobId);
    expect(twice.every((t) => t.state === 'pending' && (t.leftOn?.size ?? 0) >= 2)).toBe(true);
    await heir.report.write([accepted(again[0]!, now)]);
    expect((await readTasks(cloud.doc, tasksTable, job.jobId)).every((t) => t.state === 'pending')).toBe(
      true,
    );
    await third.report.write(thirdTime.map((t) => accepted(t, now)));
    expect((await readTasks(cloud.doc, tasksTable, job.jobId)).every((t) => t.state === 'completed')).toBe(
      true,
    );
    expect(await readOpenClaims(cloud.doc, tasksTable, job.clientId)).toEqual([]);
  });
});
