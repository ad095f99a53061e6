import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { changeOfStreamRecord, changesOfStreamRecords } from '#shared/adapters/dynamo-stream-changes.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { chunkTaskId, packMembers } from '#shared/jobs/chunks.ts';
import { eventOfChange } from '#shared/outcomes/events.ts';

const task = (state: string) => ({
  pk: { S: 'J1#0' },
  sk: { S: 't1' },
  clientId: { S: 'c1' },
  jobId: { S: 'J1' },
  taskId: { S: 't1' },
  row: { N: '2' },
  state: { S: state },
  attempts: { N: '1' },
  // As DynamoDB Local streams an empty map: not an AttributeValue at all.
  variables: {},
  updatedAt: { N: '1700000000000' },
});

const record = (oldImage: object, newImage: object): DynamoDBRecord => ({
  eventName: 'MODIFY',
  dynamodb: { SequenceNumber: '100', OldImage: oldImage as never, NewImage: newImage as never },
});

describe('stream records as outcome changes', () => {
  it('decodes only what an event reads, so an attribute it cannot decode fails nothing', () => {
    const change = changeOfStreamRecord(record(task('in-flight'), task('completed')));
    expect(change).toEqual({
      kind: 'task',
      sequence: '100',
      before: {
        sk: 't1',
        clientId: 'c1',
        jobId: 'J1',
        taskId: 't1',
        row: 2,
        state: 'in-flight',
        attempts: 1,
        updatedAt: 1700000000000,
      },
      after: {
        sk: 't1',
        clientId: 'c1',
        jobId: 'J1',
        taskId: 't1',
        row: 2,
        state: 'completed',
        attempts: 1,
        updatedAt: 1700000000000,
      },
    });
  });

  it('leaves out a read attribute that is not decodable rather than failing the batch', () => {
    const change = changeOfStreamRecord(record(task('in-flight'), { ...task('failed'), reason: {} }));
    expect(change?.kind === 'task' && change.after).toMatchObject({ state: 'failed' });
    expect(change?.kind === 'task' && 'reason' in change.after).toBe(false);
  });

  it('is none for a removal and for an item that is neither a task nor a job', () => {
    expect(
      changeOfStreamRecord({
        eventName: 'REMOVE',
        dynamodb: { SequenceNumber: '1', OldImage: task('completed') as never },
      }),
    ).toBeUndefined();
    expect(
      changeOfStreamRecord(record({ pk: { S: 'LEASE#c1' } }, { pk: { S: 'LEASE#c1' }, sk: { S: 'LEASE' } })),
    ).toBeUndefined();
  });

  it("tells a chunk's end as each member's, one that ended apart with its own end", () => {
    const id = (n: number) => `U${n.toString(16).padStart(32, '0')}`;
    const chunk = (state: string, extra: object = {}) =>
      marshall(
        {
          pk: 'J1#3',
          sk: chunkTaskId(2),
          clientId: 'c1',
          jobId: 'J1',
          taskId: chunkTaskId(2),
          channel: 'message',
          state,
          attempts: 1,
          updatedAt: 1_700_000_000_000,
          ...packMembers([2, 3, 4].map((row) => ({ recipient: id(row), row }))),
          except: {
            '2': { state: 'cancelled', reason: 'opted out', attempts: 0, updatedAt: 1_600_000_000_000 },
          },
          ...extra,
        },
        { removeUndefinedValues: true },
      );
    const changes = changesOfStreamRecords([
      record(chunk('in-flight'), chunk('completed', { lastResult: 'delivered' })),
    ]);
    const events = changes.map((c) => eventOfChange(c, 0));
    expect(events.map((e) => e?.data)).toEqual([
      {
        jobId: 'J1',
        taskId: recipientTaskId('J1', id(2)),
        row: 2,
        channel: 'message',
        state: 'completed',
        outcome: 'delivered',
        attempts: 1,
      },
      {
        jobId: 'J1',
        taskId: recipientTaskId('J1', id(3)),
        row: 3,
        channel: 'message',
        state: 'completed',
        outcome: 'delivered',
        attempts: 1,
      },
      {
        jobId: 'J1',
        taskId: recipientTaskId('J1', id(4)),
        row: 4,
        channel: 'message',
        state: 'cancelled',
        reason: 'opted out',
        attempts: 0,
      },
    ]);
    expect(new Set(events.map((e) => e?.id)).size).toBe(3);
    // As Lambda hands a stream record over: JSON, a binary value (members, rows) as base64 text.
    const asLambda = (image: object) =>
      JSON.parse(
        JSON.stringify(image, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v)),
      );
    const fromLambda = changesOfStreamRecords([
      record(asLambda(chunk('in-flight')), asLambda(chunk('completed', { lastResult: 'delivered' }))),
    ]);
    expect(fromLambda.map((c) => eventOfChange(c, 0)?.data)).toEqual(events.map((e) => e?.data));
  });
});
