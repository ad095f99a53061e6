/**
 * A chunk *spilled* back into tasks (docs/multicast-chunks.md, "Contact limits: spill"): a chunk's
 * first claim while the client has contact limits over LINE would take a counter per member and
 * limit, more than a claim transaction holds, so its members become tasks of their own (their
 * usual `recipientTaskId`, so nothing can be held twice) and are claimed, counted and capped as
 * tasks are. Only a chunk never claimed is spilled (attempt 0, not `maybeSent`): one sent before
 * is resent whole under its retry key, and a resend takes no contact slot.
 *
 * Each transaction puts up to {@link MEMBERS_PER_SPILL} members as tasks and marks them moved out
 * in the chunk's `except` (conditional on the chunk as read), so at every moment each member is
 * spoken for once: by the chunk or by its task. The chunk is deleted once every member is out.
 * A crash midway leaves a chunk with members moved out, which the next claim spills on.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import {
  type Chunk,
  type ChunkMember,
  type MemberApart,
  membersEndedApart,
  membersInState,
} from '#shared/jobs/chunks.ts';
import { keys, type Task } from '#shared/jobs/model.ts';
import { countEnd, jobCountsUpdate, noEnds } from './dynamo-claim-pages.ts';
import { taskItem } from './dynamo-job-tasks.ts';
import { type TransactItems, transactWrite } from './dynamo-message-table.ts';

/** Member tasks put per transaction (+ the chunk's update: under DynamoDB's 100 items). */
export const MEMBERS_PER_SPILL = 98;

/** True when a chunk as stored must be spilled before it may be claimed: some members already moved out. */
export function spillStarted(chunk: Pick<Chunk, 'except'>): boolean {
  return Object.values(chunk.except ?? {}).some((apart) => 'moved' in apart);
}

/** True when a chunk may be spilled: it was never claimed. */
export function spillable(chunk: { readonly attempts: number; readonly maybeSent?: unknown }): boolean {
  return Number(chunk.attempts) === 0 && chunk.maybeSent !== true;
}

export interface SpillTables {
  readonly doc: DynamoDBDocumentClient;
  readonly tasksTable: string;
  readonly controlTable: string;
}

/**
 * Spills `chunk` (as just read, strongly consistent) into tasks, every write fenced by the
 * spilling broker's lease (`fence`: a holder that lost the client spills nothing a newer one may be
 * sending). `done` when every member is out and the chunk deleted; `moved` when the chunk moved on
 * meanwhile (a sweep ended it); `fenced` when the lease is lost. Nothing more is done after either.
 */
export async function spillChunk(
  tables: SpillTables,
  chunk: Chunk,
  now: number,
  fence: TransactItems[number],
): Promise<'done' | 'moved' | 'fenced'> {
  if (!spillable(chunk)) throw new Error(`chunk ${chunk.taskId} was claimed before: it is resent whole`);
  let except: Record<string, MemberApart> = { ...(chunk.except ?? {}) };
  const waiting = membersInState(chunk);
  for (let i = 0; i < waiting.length; i += MEMBERS_PER_SPILL) {
    const part = waiting.slice(i, i + MEMBERS_PER_SPILL);
    const next = {
      ...except,
      ...Object.fromEntries(part.map((m) => [String(m.index), { moved: true } as const])),
    };
    const seen = asRead(chunk, except);
    const codes = await transactWrite(tables.doc, [
      fence,
      {
        Update: {
          TableName: tables.tasksTable,
          Key: keys.task(chunk.jobId, chunk.taskId),
          UpdateExpression: 'SET #except = :next, updatedAt = :now',
          ...seen,
          ExpressionAttributeValues: { ...seen.ExpressionAttributeValues, ':next': next, ':now': now },
        },
      },
      ...part.map((m) => ({
        Put: {
          TableName: tables.tasksTable,
          Item: taskItem(memberTask(chunk, m, now)),
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      })),
    ]);
    const refused = refusal(codes, chunk);
    if (refused) return refused;
    except = next;
  }
  const apart = membersEndedApart({ except });
  const counts = noEnds();
  for (const end of apart) countEnd(counts, end.state, end.reason);
  const codes = await transactWrite(tables.doc, [
    fence,
    {
      Delete: {
        TableName: tables.tasksTable,
        Key: keys.task(chunk.jobId, chunk.taskId),
        ...asRead(chunk, except),
      },
    },
    ...(apart.length === 0
      ? []
      : [jobCountsUpdate(tables.controlTable, chunk.clientId, chunk.jobId, counts)]),
  ]);
  return refusal(codes, chunk) ?? 'done';
}

/** What a refused spill transaction (the fence first, the chunk second) says; undefined when applied. */
function refusal(codes: (string | undefined)[] | undefined, chunk: Chunk): 'moved' | 'fenced' | undefined {
  if (codes === undefined) return undefined;
  if (codes[0] === 'ConditionalCheckFailed') return 'fenced';
  if (codes[1] === 'ConditionalCheckFailed') return 'moved';
  throw new Error(`chunk ${chunk.taskId} not spilled: ${codes.join(', ')}`);
}

/** The condition that the chunk is as read: same state, still unclaimed, its `except` as `except`. */
function asRead(chunk: Chunk, except: Record<string, MemberApart>) {
  const size = Object.keys(except).length;
  return {
    ConditionExpression:
      '#state = :state AND attempts = :zero AND attribute_not_exists(maybeSent) AND ' +
      (size === 0 ? 'attribute_not_exists(#except)' : 'size(#except) = :size'),
    ExpressionAttributeNames: { '#state': 'state', '#except': 'except' },
    ExpressionAttributeValues: {
      ':state': chunk.state,
      ':zero': 0,
      ...(size === 0 ? {} : { ':size': size }),
    },
  };
}

/** A member as the task it stands for (its name and variables too), waiting as the chunk was. */
function memberTask(chunk: Chunk, member: ChunkMember, now: number): Task {
  const { recipient, row, name, variables } = member;
  return {
    clientId: chunk.clientId,
    jobId: chunk.jobId,
    taskId: recipientTaskId(chunk.jobId, recipient),
    row,
    channel: 'message',
    recipient,
    ...(name === undefined ? {} : { name }),
    variables: { ...(variables ?? {}) },
    state: chunk.state,
    attempts: 0,
    readyAt: chunk.readyAt,
    updatedAt: now,
  };
}
