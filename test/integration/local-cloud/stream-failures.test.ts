/**
 * The stream event source mapping stand-in against DynamoDB Local's stream, with the deployed
 * mapping's failure handling (issue 35 #4): one record the function always fails is split out of its
 * batch, retried a bounded number of times, described to the on-failure destination by its shard
 * and sequence number, and the shard goes on — the records around it and after it are delivered.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import {
  type StreamFailureRecord,
  type StreamPoller,
  startStreamPoller,
} from '#local/dynamodb-stream-poller.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud } from '../../support/cloud.ts';
import { until } from '../../support/wait.ts';

const cloud = testCloud();
let table: string;
let poller: StreamPoller | undefined;

beforeAll(async () => {
  const stage = `sf${process.pid % 100000}${Math.random().toString(36).slice(2, 6)}`;
  table = await createTable(cloud.ddb, stage, tableSpec('control'), { stream: true });
});
afterAll(async () => {
  await poller?.stop();
});

const idOf = (r: DynamoDBRecord) => r.dynamodb?.Keys?.sk?.S ?? '';

describe('a stream mapping that cannot stall', () => {
  it('splits a failing batch, gives the one bad record up to the on-failure destination after its retries, and goes on', async () => {
    const delivered: string[] = [];
    const triesOfBad: number[] = [];
    const failures: StreamFailureRecord[] = [];
    poller = startStreamPoller({
      endpoint: cloud.info.dynamoEndpoint,
      region: cloud.info.region,
      tableName: table,
      functionName: 'outcome-events',
      handler: async (event: DynamoDBStreamEvent) => {
        const ids = event.Records.map(idOf);
        if (ids.includes('JOB#bad')) {
          triesOfBad.push(ids.length);
          throw new Error('a record this function cannot handle');
        }
        delivered.push(...ids);
      },
      functionTimeoutMs: 5_000,
      batchSize: 100,
      maxBatchingWindowMs: 500,
      filters: [],
      failureHandling: { bisectBatchOnError: true, retryAttempts: 2, maxRecordAgeSeconds: 3600 },
      onFailure: async (record) => void failures.push(record),
      retryBaseMs: 1,
    });
    const put = (sk: string) =>
      cloud.doc.send(new PutCommand({ TableName: table, Item: { pk: 'CLIENT#sf', sk } }));
    for (const sk of ['JOB#a', 'JOB#b', 'JOB#bad', 'JOB#c', 'JOB#d']) await put(sk);

    await until(
      () => failures.length === 1 && delivered.length === 4,
      'the bad record given up, the rest delivered',
    );
    await put('JOB#after');
    await until(() => delivered.includes('JOB#after'), 'the shard to go on after the bad record');

    expect(delivered.sort()).toEqual(['JOB#a', 'JOB#after', 'JOB#b', 'JOB#c', 'JOB#d']);
    // Split down to the bad record alone, then tried 1 + 2 retries on its own.
    expect(triesOfBad.at(-1)).toBe(1);
    expect(triesOfBad.filter((n) => n === 1)).toHaveLength(3);
    const [failure] = failures;
    expect(failure).toMatchObject({
      requestContext: { condition: 'RetryAttemptsExhausted', approximateInvokeCount: 3 },
      version: '1.0',
      DDBStreamBatchInfo: { batchSize: 1, streamArn: expect.stringContaining(table) },
    });
    const info = failure!.DDBStreamBatchInfo;
    expect(info.startSequenceNumber).toBe(info.endSequenceNumber);
    expect(info.shardId).toMatch(/^shardId-/);
    expect(poller.stats().discarded).toBe(1);
  });
});
