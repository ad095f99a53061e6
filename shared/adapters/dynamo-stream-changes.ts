/**
 * DynamoDB Streams records (NEW_AND_OLD_IMAGES, as Lambda delivers them) of the tasks and control
 * tables, as the outcome domain's {@link RecordChange}s: a task item (it has a `state` and a
 * `taskId`) or a job item (sort key `JOB#…`, a `status`). Removals and other items are none.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { JobImage, RecordChange, TaskImage } from '#shared/outcomes/events.ts';

type Image = Record<string, unknown>;

function imageOf(raw: Record<string, unknown> | undefined): Image | undefined {
  return raw ? unmarshall(raw as Record<string, AttributeValue>) : undefined;
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

/** The changes of a stream batch, in its order. */
export function changesOfStreamRecords(records: readonly DynamoDBRecord[]): RecordChange[] {
  const out: RecordChange[] = [];
  for (const record of records) {
    const change = changeOfStreamRecord(record);
    if (change) out.push(change);
  }
  return out;
}
