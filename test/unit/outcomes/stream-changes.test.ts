import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { changeOfStreamRecord } from '#shared/adapters/dynamo-stream-changes.ts';

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
});
