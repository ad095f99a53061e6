/**
 * Writes a client, its running job and the job's tasks to DynamoDB (Local) as the ingest would —
 * the items and index keys of `shared/jobs/model.ts` — for benches that hand the job to a broker.
 * Tasks go in `BatchWriteItem`s of 25, several at once, retrying `UnprocessedItems`.
 */
import { BatchWriteCommand, type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { chunkItem } from '#shared/adapters/dynamo-job-tasks.ts';
import { isSharedMessage } from '#shared/campaign/template.ts';
import { newUlid } from '#shared/ids.ts';
import { type Chunk, packMembers, pageChunks } from '#shared/jobs/chunks.ts';
import { type ClientSettings, type Job, type JobCounts, keys, type Task } from '#shared/jobs/model.ts';

export async function seedRunningJob(
  doc: DynamoDBDocumentClient,
  tables: { readonly controlTable: string; readonly tasksTable: string },
  seed: {
    readonly client: ClientSettings;
    readonly job: Job;
    readonly tasks: (i: number) => Task;
    readonly count: number;
    /**
     * Hold the recipients in chunks as ingest does (`shared/jobs/chunks.ts`): 500 a chunk, with
     * their variables when the job's message is personalised. The tasks must be LINE users.
     */
    readonly chunks?: boolean;
  },
): Promise<void> {
  const { controlTable, tasksTable } = tables;
  const { client, job } = seed;
  await doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.client(client.clientId), ...client } }),
  );
  await doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: { ...keys.job(job.clientId, job.jobId), ...job, ...keys.jobStatusIndex(job) },
    }),
  );
  if (seed.chunks) {
    const personalised = !isSharedMessage(job.message);
    const list = Array.from({ length: seed.count }, (_, i) => seed.tasks(i));
    const items = pageChunks(2, list, personalised).map(({ taskId, members }) => {
      const first = members[0]!;
      const chunk: Chunk = {
        clientId: first.clientId,
        jobId: first.jobId,
        taskId,
        channel: 'message',
        state: 'pending',
        attempts: 0,
        readyAt: first.readyAt,
        updatedAt: first.updatedAt,
        ...packMembers(members, personalised),
      };
      return chunkItem(chunk);
    });
    for (let i = 0; i < items.length; i += 25) {
      let left: Record<string, unknown>[] | undefined = items
        .slice(i, i + 25)
        .map((Item) => ({ PutRequest: { Item } }));
      while (left && left.length > 0) {
        const out = await doc.send(new BatchWriteCommand({ RequestItems: { [tasksTable]: left as never } }));
        left = out.UnprocessedItems?.[tasksTable] as Record<string, unknown>[] | undefined;
      }
    }
    return;
  }
  let next = 0;
  const writer = async () => {
    while (next < seed.count) {
      const first = next;
      next = Math.min(seed.count, first + 25);
      let left: Record<string, unknown>[] | undefined = [];
      for (let i = first; i < next; i++) {
        const task = seed.tasks(i);
        left.push({
          PutRequest: {
            Item: { ...keys.task(task.jobId, task.taskId), ...task, ...keys.outstandingIndex(task) },
          },
        });
      }
      while (left && left.length > 0) {
        const out = await doc.send(new BatchWriteCommand({ RequestItems: { [tasksTable]: left as never } }));
        left = out.UnprocessedItems?.[tasksTable] as Record<string, unknown>[] | undefined;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));
}

/**
 * Task `i` of `job` as ingest writes it: pending, not yet tried, from row `i + 2` (the header is
 * row 1), its id `t` and `i` in `digits` digits.
 */
export function pendingTask(
  job: Pick<Job, 'clientId' | 'jobId'>,
  i: number,
  task: Pick<Task, 'channel' | 'recipient' | 'variables' | 'readyAt' | 'updatedAt'>,
  digits = 7,
): Task {
  return {
    clientId: job.clientId,
    jobId: job.jobId,
    taskId: `t${String(i).padStart(digits, '0')}`,
    row: i + 2,
    ...task,
    state: 'pending',
    attempts: 0,
  };
}

/** The counts of a job whose `n` rows were all accepted as tasks, none of them ended yet. */
export function freshCounts(n: number): JobCounts {
  return { rows: n, rejected: 0, skipped: 0, tasks: n, completed: 0, failed: 0, cancelled: 0 };
}

/** A job running since `now` with `n` tasks, none ended: `fields` with its status, counts and times. */
export function runningJob(
  fields: Omit<Job, 'clientId' | 'jobId' | 'status' | 'counts' | 'createdAt' | 'updatedAt'>,
  clientId: string,
  n: number,
  now: number,
): Job {
  return {
    clientId,
    jobId: newUlid(now),
    ...fields,
    status: 'running',
    counts: freshCounts(n),
    createdAt: now,
    updatedAt: now,
  };
}
