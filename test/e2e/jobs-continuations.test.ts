/**
 * A Shift_JIS list too long for one ingest run, end to end on the local cloud: created through
 * the operator API, uploaded to its presigned URL, noticed by the S3 notifier, and ingested by the
 * ingest Lambda in four runs chained by continuation messages on the real ingest queue (each run
 * reads the file from its cursor with a ranged GET and restores the duplicate filter from S3).
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import iconv from 'iconv-lite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiGatewayServer, startApiGateway } from '#local/api-gateway.ts';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { type JobsLocal, startJobsLocal } from '#local/jobs-wiring.ts';
import { makeSignedFetch } from '#local/operator-client.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { routes } from '#shared/routes.ts';
import { testCloud, uniqueName } from '../support/cloud.ts';

const ROWS = 2_000;
const ROWS_PER_RUN = 500;
const cloud = testCloud();
const signedFetch = makeSignedFetch({ region: cloud.info.region, credentials: LOCAL_CREDENTIALS });

let jobs: JobsLocal;
let api: ApiGatewayServer;

beforeAll(async () => {
  // Read by the ingest Lambda's main.ts at import: every run pauses after 500 rows.
  Object.assign(process.env, cloud.env, {
    LOG_LEVEL: 'error',
    POWERTOOLS_METRICS_DISABLED: 'true',
    INGEST_MAX_ROWS_PER_RUN: String(ROWS_PER_RUN),
  });
  jobs = await startJobsLocal({ cloud: cloud.info, notifyIntervalMs: 100 });
  api = await startApiGateway({ routes, functions: { ...jobs.httpFunctions } });
});

afterAll(async () => {
  await api?.stop();
  await jobs?.stop();
});

async function call<T = Record<string, unknown>>(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const response = await signedFetch(method, new URL(`${api.url}${path}`), {
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as T };
}

/** Row i: every 50th number is invalid; rows from 1,500 on repeat the numbers of rows 0-499. */
function listAndOracle() {
  const lines = ['電話番号,氏名,メモ'];
  const first = new Map<string, number>();
  const tasks: [number, string][] = [];
  let rejected = 0;
  let skipped = 0;
  for (let i = 0; i < ROWS; i++) {
    const row = i + 2;
    const k = i % 1_500;
    const invalid = i % 50 === 49;
    lines.push(`${invalid ? 'abc' : `090-2000-${1_000 + k}`},顧客${i},"メモ, ${i}"`);
    const e164 = `+81902000${1_000 + k}`;
    if (invalid) rejected++;
    else if (first.has(e164)) skipped++;
    else {
      first.set(e164, row);
      tasks.push([row, e164]);
    }
  }
  return { bytes: iconv.encode(`${lines.join('\r\n')}\r\n`, 'cp932'), tasks, rejected, skipped };
}

describe('a Shift_JIS list longer than one run', () => {
  it('is ingested across runs into exactly the tasks of one pass', async () => {
    const clientId = uniqueName('sjis');
    const settings = {
      maxConcurrentCalls: 3,
      callsPerSecond: 1,
      timeZone: 'Asia/Tokyo',
      callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
      defaultRegion: 'JP',
    };
    expect((await call('PUT', `/clients/${clientId}`, settings)).status).toBe(200);
    const { jobId, upload } = (
      await call<{ jobId: string; upload: { url: string } }>('POST', `/clients/${clientId}/jobs`, {
        name: '顧客リスト',
      })
    ).body;
    const oracle = listAndOracle();
    const before = jobs.ingest.stats().records;
    expect((await fetch(upload.url, { method: 'PUT', body: oracle.bytes })).status).toBe(200);

    type JobBody = { status: string; counts: Record<string, number>; failureReason?: string };
    let job: JobBody | undefined;
    const deadline = Date.now() + 180_000;
    while (Date.now() < deadline) {
      job = (await call<JobBody>('GET', `/clients/${clientId}/jobs/${jobId}`)).body;
      if (job?.status === 'scheduled' || job?.status === 'failed') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(job?.failureReason).toBeUndefined();
    expect(job?.status).toBe('scheduled');
    expect(job?.counts).toMatchObject({
      rows: ROWS,
      rejected: oracle.rejected,
      skipped: oracle.skipped,
      tasks: oracle.tasks.length,
    });
    // The upload's notification, then a continuation for each of the three pauses.
    expect(jobs.ingest.stats().records - before).toBe(ROWS / ROWS_PER_RUN);

    const stored: [number, string, string, unknown][] = [];
    for (let shard = 0; shard < TASK_SHARDS; shard++) {
      let start: Record<string, unknown> | undefined;
      do {
        const out = await cloud.doc.send(
          new QueryCommand({
            TableName: cloud.info.tableNames.tasks!,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': `${jobId}#${shard}` },
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        for (const t of out.Items ?? []) stored.push([t.row, t.recipient, t.name, t.variables]);
        start = out.LastEvaluatedKey;
      } while (start);
    }
    stored.sort((a, b) => a[0] - b[0]);
    expect(stored.map(([row, recipient]) => [row, recipient])).toEqual(oracle.tasks);
    expect(stored[0]).toEqual([2, '+819020001000', '顧客0', { メモ: 'メモ, 0' }]);
  });
});
