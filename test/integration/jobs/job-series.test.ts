/**
 * A job's series on DynamoDB Local: samples written as the broker writes them, read back after a
 * point in time, merged per window across brokers, paged, expired by the table's TTL, and never
 * mixed with the job's tasks or another client's job.
 */
import { DescribeTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { DynamoJobSeries, jobSeriesPk } from '#shared/adapters/dynamo-job-series.ts';
import type { JobSample } from '#shared/broker/job-series.ts';
import type { Job } from '#shared/jobs/model.ts';
import { readJobSeries } from '#shared/jobs/series.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
let tasksTable: string;
let series: DynamoJobSeries;

// The hour this run started: samples carry a TTL DynamoDB Local enforces, so never a fixed past date.
const T0 = Math.floor(Date.now() / 3_600_000) * 3_600_000;
const job = { clientId: 'c1', jobId: '01JSERIES0000000000000000A', channel: 'call' } as Job;

const sample = (k: number, brokerId = 'b1', starts = 10): JobSample => ({
  clientId: job.clientId,
  jobId: job.jobId,
  at: T0 + k * 10_000,
  seconds: 10,
  brokerId,
  peakInFlight: 4 + (k % 3),
  maxConcurrentCalls: 6,
  callsPerSecond: 2,
  starts,
  messagesSent: 0,
  rateLimited: 0,
});

beforeAll(async () => {
  tasksTable = await createTable(cloud.ddb, uniqueName('series'), tableSpec('tasks'));
  series = new DynamoJobSeries(cloud.doc, tasksTable, { retentionDays: 14 });
  for (let k = 0; k < 12; k++) await series.put(sample(k));
  // A takeover in window 5: the next holder wrote its part of the same window.
  await series.put(sample(5, 'b2', 3));
});

describe('the job series store', () => {
  it('keeps one small item per sample with the TTL attribute the table expires on', async () => {
    const ttl = await cloud.ddb.send(new DescribeTimeToLiveCommand({ TableName: tasksTable }));
    expect(ttl.TimeToLiveDescription?.AttributeName).toBe('expiresAt');
    const { Item } = await cloud.doc.send(
      new GetCommand({
        TableName: tasksTable,
        Key: { pk: jobSeriesPk(job.jobId), sk: `${new Date(T0).toISOString()}#b1` },
      }),
    );
    expect(Item).toMatchObject({ clientId: 'c1', starts: 10, peakInFlight: 4 });
    expect(Item?.expiresAt).toBe(T0 / 1000 + 14 * 86_400);
    expect(JSON.stringify(Item).length).toBeLessThan(400);
  });

  it('answers the samples after `since`, one per window (two brokers merged), oldest first', async () => {
    const answer = await readJobSeries(series, job, { since: new Date(T0 + 30_000).toISOString() }, T0);
    expect(answer.samples.map((s) => s.at)).toEqual(
      [4, 5, 6, 7, 8, 9, 10, 11].map((k) => new Date(T0 + k * 10_000).toISOString()),
    );
    expect(answer.samples[1]).toMatchObject({ starts: 13, callsInFlight: 6, maxConcurrentCalls: 6 });
    expect(answer.next).toBeUndefined();
  });

  it("answers, without `since`, the job's last hour: before now while it runs, else before its end", async () => {
    const later = T0 + 5 * 3_600_000;
    const running = await readJobSeries(series, { ...job, status: 'running' }, {}, later);
    expect(running.samples).toEqual([]);
    const ended = { ...job, status: 'completed', updatedAt: T0 + 115_000 } as Job;
    expect((await readJobSeries(series, ended, {}, later)).samples).toHaveLength(12);
  });

  it('pages with `next`, never splitting a window between pages', async () => {
    const seen: string[] = [];
    let since: string | undefined = new Date(T0 - 1).toISOString();
    while (since) {
      const page = await readJobSeries(series, job, { since, limit: '5' }, T0);
      seen.push(...page.samples.map((s) => `${s.at}:${s.starts}`));
      since = page.next;
    }
    expect(seen).toHaveLength(12);
    expect(seen[5]).toBe(`${new Date(T0 + 50_000).toISOString()}:13`);
  });

  it("reads nothing of another client's job, nor of the job's tasks", async () => {
    const other = await series.since('c2', job.jobId, T0 - 1, 360);
    expect(other.samples).toEqual([]);
    expect(await readTasks(cloud.doc, tasksTable, job.jobId)).toEqual([]);
  });

  it('refuses a `since` that is not a time and a limit over an hour of samples', async () => {
    await expect(readJobSeries(series, job, { since: 'yesterday' }, T0)).rejects.toMatchObject({
      fieldErrors: { since: expect.any(Array) },
    });
    await expect(readJobSeries(series, job, { limit: '361' }, T0)).rejects.toMatchObject({
      fieldErrors: { limit: expect.any(Array) },
    });
  });
});
