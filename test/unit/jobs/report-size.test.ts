/**
 * Reports of any size (issue 35 #2): a report small enough goes back in the response, base64-encoded
 * inside the Lambda result, which must stay under Lambda's 6 MB response limit with room for its
 * headers; anything larger is written to the bucket and answered 303 to a presigned URL.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeJobsApiHandler } from '#lambdas/jobs-api/handler.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { LAMBDA_PAYLOAD_MAX_BYTES } from '#shared/functions.ts';
import { JobsApi, type JobView, REPORT_INLINE_MAX_BYTES } from '#shared/jobs/api.ts';
import { silentLogger } from '#shared/log.ts';
import { job as makeJob } from '../fleet/fakes.ts';
import { memoryClients, memoryFiles, memoryJobs, memoryQueue, memoryReports, memoryTasks } from './fakes.ts';

/** Headroom kept under the limit for what a response carries besides the CSV. */
const MARGIN_BYTES = 256 * 1024;

function reportEvent(jobId: string): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: 'GET /clients/{clientId}/jobs/{jobId}/report',
    rawPath: `/clients/acme/jobs/${jobId}/report`,
    rawQueryString: '',
    headers: {},
    pathParameters: { clientId: 'acme', jobId },
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

describe('the report response and the Lambda response limit', () => {
  it('a report of the largest inline size, with the longest headers, leaves a margin under 6 MB', async () => {
    const job = makeJob('acme', { status: 'running' });
    const longMessage = 'お待ちください '.repeat(400);
    const view = {
      ...job,
      startAt: new Date(job.startAt).toISOString(),
      createdAt: new Date(job.createdAt).toISOString(),
      updatedAt: new Date(job.updatedAt).toISOString(),
      waiting: { reason: 'calling-hours', until: new Date().toISOString(), message: longMessage },
    } as unknown as JobView;
    const api = {
      report: async () => ({ kind: 'inline', csv: Buffer.alloc(REPORT_INLINE_MAX_BYTES, 0x41), job: view }),
    } as unknown as JobsApi;
    const handler = makeJobsApiHandler({ api, log: silentLogger });

    const result = (await handler(
      reportEvent(job.jobId),
      {} as Context,
    )) as APIGatewayProxyStructuredResultV2;

    expect(result.statusCode).toBe(200);
    expect(Buffer.from(result.body!, 'base64').byteLength).toBe(REPORT_INLINE_MAX_BYTES);
    // What Lambda counts against its response limit: the result as JSON.
    expect(Buffer.byteLength(JSON.stringify(result))).toBeLessThan(LAMBDA_PAYLOAD_MAX_BYTES - MARGIN_BYTES);
  });

  it('a report just over the inline size is written to the bucket and answered 303 to it; just under goes inline', async () => {
    const files = memoryFiles();
    const jobs = memoryJobs();
    const validationReports = memoryReports();
    const job = makeJob('acme', { status: 'completed' });
    await jobs.create(job);
    // Rejected rows of ~1 KB each: just over the inline size (by ~100 KB), and 150 fewer under it.
    const entries: ReportEntry[] = Array.from(
      { length: Math.ceil(REPORT_INLINE_MAX_BYTES / 1000) + 5 },
      (_, i) => ({
        row: i + 2,
        outcome: 'rejected',
        code: 'ragged-row',
        reason: 'x'.repeat(1000),
      }),
    );
    await validationReports.putPage('acme', job.jobId, entries);
    const api = new JobsApi({
      region: 'ap-northeast-1',
      clients: memoryClients(),
      jobs,
      tasks: memoryTasks(),
      files,
      validationReports,
      queue: memoryQueue(),
      bucket: 'uploads-bucket',
      clock: { now: () => Date.parse('2026-11-20T00:00:00Z') },
    });

    const report = await api.report('acme', job.jobId);

    expect(report.kind).toBe('redirect');
    const [key, written] = [...files.objects.entries()].find(([k]) => k.startsWith('reports/acme/'))!;
    expect(written.byteLength).toBeGreaterThan(REPORT_INLINE_MAX_BYTES);
    expect(written.byteLength).toBeLessThan(REPORT_INLINE_MAX_BYTES + 200_000);
    expect(report.kind === 'redirect' && report.url).toContain(key);
    // Without the rows that tip it over, it goes back inline.
    await validationReports.putPage('acme', job.jobId, entries.slice(0, -150));
    expect((await api.report('acme', job.jobId)).kind).toBe('inline');
  });
});
