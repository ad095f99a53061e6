/**
 * Writes a client, its running job and the job's tasks to DynamoDB (Local) as the ingest would —
 * the items and index keys of `shared/jobs/model.ts` — for benches that hand the job to a broker.
 * Tasks go in `BatchWriteItem`s of 25, several at once, retrying `UnprocessedItems`.
 */
import { BatchWriteCommand, type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';

export async function seedRunningJob(
  doc: DynamoDBDocumentClient,
  tables: { readonly controlTable: string; readonly tasksTable: string },
  seed: {
    readonly client: ClientSettings;
    readonly job: Job;
    readonly tasks: (i: number) => Task;
    readonly count: number;
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
