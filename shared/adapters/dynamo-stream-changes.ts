/**
 * DynamoDB Streams records (NEW_AND_OLD_IMAGES, as Lambda delivers them) of the tasks and control
 * tables, as the outcome domain's {@link RecordChange}s: a task item (it has a `state` and a
 * `taskId`) or a job item (sort key `JOB#…`, a `status`). Removals and other items are none.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { type Chunk, isChunk, memberTasks } from '#shared/jobs/chunks.ts';
import type { JobImage, RecordChange, TaskImage } from '#shared/outcomes/events.ts';

type Image = Record<string, unknown>;

/** The attributes an outcome event reads from a task or job image; the rest is never decoded. */
const READ_ATTRIBUTES = [
  'sk',
  'clientId',
  'jobId',
  'taskId',
  'row',
  'channel',
  'state',
  'attempts',
  'lastResult',
  'reason',
  'updatedAt',
  'name',
  'status',
  'failureReason',
  'counts',
  // A chunk's (`shared/jobs/chunks.ts`): its members, their rows, those that ended apart.
  'members',
  'rows',
  'except',
] as const;

/**
 * The image's attributes an event reads, decoded one by one: an attribute that cannot be decoded
 * (DynamoDB Local streams an empty map as `{}`) is left out instead of failing the whole batch,
 * which would hold the shard until the records expire.
 */
function imageOf(raw: Record<string, unknown> | undefined): Image | undefined {
  if (!raw) return undefined;
  const image: Image = {};
  for (const name of READ_ATTRIBUTES) {
    const value = raw[name];
    if (value === undefined) continue;
    try {
      // A stream event in Lambda carries a binary value (a chunk's members and rows) as base64 text.
      const binary = (value as { B?: unknown }).B;
      image[name] =
        typeof binary === 'string'
          ? new Uint8Array(Buffer.from(binary, 'base64'))
          : unmarshall({ v: value as AttributeValue }).v;
    } catch {
      // Not decodable: left out (a task or job without it is not an event, or one without the field).
    }
  }
  return image;
}

function isTask(image: Image): boolean {
  return (
    typeof image.state === 'string' && typeof image.taskId === 'string' && typeof image.clientId === 'string'
  );
}

function isJob(image: Image): boolean {
  return typeof image.sk === 'string' && image.sk.startsWith('JOB#') && typeof image.status === 'string';
}

/** The change a stream record is, when it is a task's or a job's. */
export function changeOfStreamRecord(record: DynamoDBRecord): RecordChange | undefined {
  if (record.eventName === 'REMOVE') return undefined;
  const stream = record.dynamodb;
  const after = imageOf(stream?.NewImage);
  const sequence = stream?.SequenceNumber;
  if (!after || !sequence) return undefined;
  const before = imageOf(stream?.OldImage);
  if (isTask(after)) {
    return {
      kind: 'task',
      sequence,
      ...(before && isTask(before) ? { before: before as unknown as TaskImage } : {}),
      after: after as unknown as TaskImage,
    };
  }
  if (isJob(after)) {
    return {
      kind: 'job',
      sequence,
      ...(before && isJob(before) ? { before: before as unknown as JobImage } : {}),
      after: after as unknown as JobImage,
    };
  }
  return undefined;
}

/**
 * A chunk's change as its members': each member's task image after, and before it the chunk's own
 * state. A member's end is told once, with its chunk's (the stream's filter passes a chunk's
 * change only when the chunk ends), also for a member that ended apart earlier: its counts move
 * then too (`endsOnPage`).
 */
function memberChanges(change: Extract<RecordChange, { kind: 'task' }>): RecordChange[] {
  const after = memberTasks(change.after as unknown as Chunk);
  return after.map((member) => ({
    kind: 'task',
    sequence: change.sequence,
    ...(change.before ? { before: { ...member, state: change.before.state } } : {}),
    after: member,
  }));
}

/** The changes of a stream batch, in its order (a chunk's as its members'). */
export function changesOfStreamRecords(records: readonly DynamoDBRecord[]): RecordChange[] {
  const out: RecordChange[] = [];
  for (const record of records) {
    const change = changeOfStreamRecord(record);
    if (change?.kind === 'task' && isChunk(change.after)) out.push(...memberChanges(change));
    else if (change) out.push(change);
  }
  return out;
}
