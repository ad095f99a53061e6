/**
 * Seeding a running job on the local cloud as ingest leaves it: the client's settings, the job
 * (with its status index) and its tasks (with their outstanding index), for tests that start a
 * broker on it.
 */

import { createHash } from 'node:crypto';
import { BatchWriteCommand, type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { chunkItem, taskItem } from '#shared/adapters/dynamo-job-tasks.ts';
import { isSharedMessage, type MessageTemplate } from '#shared/campaign/template.ts';
import { type Chunk, packMembers, pageChunks } from '#shared/jobs/chunks.ts';
import { type ClientSettings, type Job, keys, type Task } from '#shared/jobs/model.ts';

export interface JobTables {
  readonly controlTable: string;
  readonly tasksTable: string;
}

/** Every day, all day, in Tokyo. */
export const ALWAYS_OPEN = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};

/** Writes the client, the running job and its tasks (25 to a batch), with their index keys. */
export async function writeRunningJob(
  doc: DynamoDBDocumentClient,
  tables: JobTables,
  client: ClientSettings,
  job: Job,
  tasks: readonly Task[],
): Promise<void> {
  await doc.send(
    new PutCommand({ TableName: tables.controlTable, Item: { ...keys.client(client.clientId), ...client } }),
  );
  await doc.send(
    new PutCommand({
      TableName: tables.controlTable,
      Item: { ...keys.job(job.clientId, job.jobId), ...job, ...keys.jobStatusIndex(job) },
    }),
  );
  const items = tasks.map(taskItem);
  for (let i = 0; i < items.length; i += 25) {
    await doc.send(
      new BatchWriteCommand({
        RequestItems: {
          [tables.tasksTable]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })),
        },
      }),
    );
  }
}

/**
 * A LINE user id per (client, index). The client part is a hash of the whole id: the hex letters of
 * `take…` and `pause…` ids once made two tests' recipients the same users.
 */
export const lineUserOf = (clientId: string, i: number) =>
  `U${createHash('sha256').update(clientId).digest('hex').slice(0, 8)}${i.toString(16).padStart(24, '0')}`;

/** A job id of 26 characters made of `prefix` and the client id (one job per client in a test). */
export const jobIdFor = (prefix: string, clientId: string) =>
  `${prefix}${clientId.toUpperCase().replace(/[^0-9A-Z]/g, '')}${'0'.repeat(26)}`.slice(0, 26);

export interface MessageJobSeed {
  readonly clientId: string;
  readonly channelId: string;
  readonly tasks: number;
  readonly message: MessageTemplate;
  /** The job id's first characters (the test's own, so its jobs never meet another's). */
  readonly jobIdPrefix: string;
  readonly settings?: Partial<ClientSettings>;
  /** Hold the recipients in chunks of 500 as ingest does (one ingest page; a personalised message's with their variables). */
  readonly chunks?: boolean;
}

/** A client on `channelId` with a running message job of `tasks` recipients, all ready now. */
export async function seedMessageJob(
  doc: DynamoDBDocumentClient,
  tables: JobTables,
  seed: MessageJobSeed,
): Promise<Job> {
  const { clientId, tasks } = seed;
  const now = Date.now();
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 1,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    messageChannelId: seed.channelId,
    updatedAt: now,
    ...seed.settings,
  };
  const job: Job = {
    clientId,
    jobId: jobIdFor(seed.jobIdPrefix, clientId),
    name: 'campaign',
    channel: 'line',
    scenarioId: 'default',
    message: seed.message,
    startAt: now - 1000,
    maxAttempts: 1,
    retryDelaySeconds: 0,
    status: 'running',
    counts: { rows: tasks, rejected: 0, skipped: 0, tasks, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
  const list = Array.from(
    { length: tasks },
    (_, i): Task => ({
      clientId,
      jobId: job.jobId,
      taskId: `t${String(i).padStart(5, '0')}`,
      row: i + 2,
      channel: 'message',
      recipient: lineUserOf(clientId, i),
      variables: { name: `顧客${i}` },
      state: 'pending',
      attempts: 0,
      readyAt: now - 1000,
      updatedAt: now,
    }),
  );
  if (!seed.chunks) {
    await writeRunningJob(doc, tables, client, job, list);
    return job;
  }
  await writeRunningJob(doc, tables, client, job, []);
  // A personalised message's chunks carry each member's variables, as ingest writes them.
  const personalised = !isSharedMessage(seed.message);
  for (const { taskId, members } of pageChunks(2, list, personalised)) {
    const chunk: Chunk = {
      clientId,
      jobId: job.jobId,
      taskId,
      channel: 'message',
      state: 'pending',
      attempts: 0,
      readyAt: now - 1000,
      updatedAt: now,
      ...packMembers(members, personalised),
    };
    await doc.send(new PutCommand({ TableName: tables.tasksTable, Item: chunkItem(chunk) }));
  }
  return job;
}

/** A client's own LINE channel record, as the channels API writes it (a broker sends only through it). */
export async function putLineChannel(
  doc: DynamoDBDocumentClient,
  channelsTable: string,
  channel: { readonly channelId: string; readonly clientId: string; readonly accessToken: string },
): Promise<void> {
  await doc.send(
    new PutCommand({
      TableName: channelsTable,
      Item: {
        ...channel,
        secrets: [{ secret: 's', addedAt: 0 }],
        autoAnswer: 'push',
        rules: [],
        updatedAt: 1,
      },
    }),
  );
}
