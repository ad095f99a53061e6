/**
 * A list larger than the limit, on the local cloud as in AWS: uploaded to its presigned URL (or
 * dropped in `incoming/`), stored by S3 (the strict stand-in in front of fauxqs), announced by the
 * S3 notifier with the object's size, and refused by the ingest Lambda with a reason naming the
 * limit — the job fails before a row is read. The limit is lowered for this file (the ingest's
 * `INGEST_MAX_UPLOAD_BYTES`), so a few hundred bytes stand in for a gigabyte.
 */
import { readFileSync } from 'node:fs';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import type { JobView } from '#shared/jobs/api.ts';
import { uploadTooLargeReason } from '#shared/jobs/upload-limit.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, eventually, useJobsApi } from '../../support/jobs-api.ts';

const LIMIT = 200;
// Read by the ingest Lambda's main.ts when the harness loads it (in beforeAll).
process.env.INGEST_MAX_UPLOAD_BYTES = String(LIMIT);

const cloud = testCloud();
const harness = useJobsApi(cloud);
const { call } = harness;
const mixedList = readFileSync(new URL('../../fixtures/jobs/mixed-list.csv', import.meta.url));
const smallList = Buffer.from('phone,name\n090-1111-0001,Aiko\n', 'utf8');

async function newClient(): Promise<string> {
  const clientId = uniqueName('limit');
  expect((await call('PUT', `/clients/${clientId}`, CLIENT)).status).toBe(200);
  return clientId;
}

/** Creates a job and PUTs `body` to its presigned URL, as the console and the CLI do. */
async function uploaded(clientId: string, name: string, body: Buffer): Promise<string> {
  const created = await call('POST', `/clients/${clientId}/jobs`, { name });
  expect(created.status).toBe(201);
  const { jobId, upload } = created.body;
  const put = await fetch(upload.url, {
    method: upload.method,
    body,
    headers: { 'content-type': 'text/csv' },
  });
  expect(put.status, await put.text()).toBe(200);
  return jobId;
}

function ingested(clientId: string, jobId: string): Promise<JobView> {
  return eventually(async () => {
    const job = (await call('GET', `/clients/${clientId}/jobs/${jobId}`)).body as JobView;
    return job.status === 'uploading' || job.status === 'validating' ? undefined : job;
  }, `job ${jobId} to be ingested`);
}

describe('a list larger than the limit', () => {
  it('uploaded to its presigned URL, fails its job with the reason naming the limit; a list within it is read', async () => {
    expect(mixedList.length).toBeGreaterThan(LIMIT);
    expect(smallList.length).toBeLessThanOrEqual(LIMIT);
    const clientId = await newClient();
    const big = await ingested(clientId, await uploaded(clientId, 'too large', mixedList));
    expect(big.status).toBe('failed');
    expect(big.failureReason).toBe(uploadTooLargeReason(mixedList.length, LIMIT));
    expect(big.failureReason).toBe(
      `the file is ${mixedList.length} bytes: a list may be at most ${LIMIT} bytes; split it into smaller lists`,
    );
    expect(big.counts).toMatchObject({ rows: 0, tasks: 0, rejected: 0, skipped: 0 });
    const problems = await call('GET', `/clients/${clientId}/jobs/${big.jobId}/row-problems`);
    expect(problems.body.entries).toEqual([]);

    const small = await ingested(clientId, await uploaded(clientId, 'small', smallList));
    expect(small.status).toBe('scheduled');
    expect(small.counts).toMatchObject({ rows: 1, tasks: 1 });
  });

  it('dropped in incoming/, fails the job it creates the same way', async () => {
    const clientId = await newClient();
    await cloud.s3.send(
      new PutObjectCommand({
        Bucket: harness.uploadsBucket(),
        Key: `incoming/${clientId}/huge.csv`,
        Body: mixedList,
      }),
    );
    const job = await eventually(async () => {
      const jobs = (await call('GET', `/clients/${clientId}/jobs`)).body.jobs as JobView[];
      return jobs.find((j) => j.name === 'huge' && j.status !== 'uploading' && j.status !== 'validating');
    }, 'the dropped file to fail its job');
    expect(job.status).toBe('failed');
    expect(job.failureReason).toBe(uploadTooLargeReason(mixedList.length, LIMIT));
  });
});
