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
import { DeleteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { type Chunk, type MemberApart, membersEndedApart, membersInState } from '#shared/jobs/chunks.ts';
import { keys, type Task } from '#shared/jobs/model.ts';
import { countEnd, jobCountsUpdate, noEnds } from './dynamo-claim-pages.ts';
import { taskItem } from './dynamo-job-tasks.ts';
import { transactWrite } from './dynamo-message-table.ts';

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
 * Spills `chunk` (as just read, strongly consistent) into tasks. True when every member is out and
 * the chunk deleted; false when the chunk moved on meanwhile (a sweep ended it): nothing more done.
 */
export async function spillChunk(tables: SpillTables, chunk: Chunk, now: number): Promise<boolean> {
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
          Item: taskItem(memberTask(chunk, m.recipient, m.row, now)),
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      })),
    ]);
    if (codes !== undefined) {
      if (codes[0] === 'ConditionalCheckFailed') return false;
      throw new Error(`chunk ${chunk.taskId} not spilled: ${codes.join(', ')}`);
    }
    except = next;
  }
  const apart = membersEndedApart({ except });
  const remove = {
    Delete: {
      TableName: tables.tasksTable,
      Key: keys.task(chunk.jobId, chunk.taskId),
      ...asRead(chunk, except),
    },
  };
  if (apart.length === 0) {
    try {
      await tables.doc.send(new DeleteCommand(remove.Delete));
      return true;
    } catch (error) {
      if ((error as Error).name === 'ConditionalCheckFailedException') return false;
      throw error;
    }
  }
  const counts = noEnds();
  for (const end of apart) countEnd(counts, end.state, end.reason);
  const codes = await transactWrite(tables.doc, [
    remove,
    jobCountsUpdate(tables.controlTable, chunk.clientId, chunk.jobId, counts),
  ]);
  return codes === undefined;
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

/** A member as the task it stands for, waiting as the chunk was. */
function memberTask(chunk: Chunk, recipient: string, row: number, now: number): Task {
  return {
    clientId: chunk.clientId,
    jobId: chunk.jobId,
    taskId: recipientTaskId(chunk.jobId, recipient),
    row,
    channel: 'message',
    recipient,
    variables: {},
    state: chunk.state,
    attempts: 0,
    readyAt: chunk.readyAt,
    updatedAt: now,
  };
}
