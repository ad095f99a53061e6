import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeJobsApiHandler } from '#lambdas/jobs-api/handler.ts';
import type { JobSample } from '#shared/broker/job-series.ts';
import { JobsApi } from '#shared/jobs/api.ts';
import { silentLogger } from '#shared/log.ts';
import { matchRoute, routeKey, routes } from '#shared/routes.ts';
import {
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

let now = Date.parse('2026-11-20T00:00:00Z');

/** Samples the brokers wrote, read as the series store does (after a time, oldest first). */
const samples: JobSample[] = [];

function setup() {
  const files = memoryFiles();
  const jobs = memoryJobs();
  const api = new JobsApi({
    region: 'ap-northeast-1',
    series: {
      since: async (clientId, jobId, afterMs, limit) => {
        const found = samples.filter((x) => x.clientId === clientId && x.jobId === jobId && x.at > afterMs);
        return { samples: found.slice(0, limit), more: found.length > limit };
      },
    },
    clients: memoryClients(),
    jobs,
    tasks: memoryTasks(),
    files,
    validationReports: memoryReports(),
    queue: memoryQueue(),
    bucket: 'uploads-bucket',
    clock: { now: () => now++ },
  });
  const handler = makeJobsApiHandler({ api, log: silentLogger });
  const call = async (
    method: string,
    path: string,
    options: { body?: string; base64?: boolean; contentType?: string; query?: Record<string, string> } = {},
  ) => {
    const match = matchRoute(routes, method, path);
    if (!match) throw new Error(`no route for ${method} ${path}`);
    const event = {
      version: '2.0',
      routeKey: routeKey(match.route),
      rawPath: path,
      rawQueryString: new URLSearchParams(options.query).toString(),
      headers: { 'content-type': options.contentType ?? 'application/json' },
      pathParameters: match.pathParameters,
      ...(options.query ? { queryStringParameters: options.query } : {}),
      ...(options.body === undefined ? {} : { body: options.body }),
      isBase64Encoded: options.base64 ?? false,
    } as unknown as APIGatewayProxyEventV2;
    const result = (await handler(event, {} as Context)) as APIGatewayProxyStructuredResultV2;
    const text = result.isBase64Encoded
      ? Buffer.from(result.body ?? '', 'base64').toString('utf8')
      : (result.body ?? '');
    const isJson = String(result.headers?.['content-type'] ?? '').startsWith('application/json');
    return {
      status: result.statusCode,
      body: isJson ? JSON.parse(text) : text,
      headers: result.headers ?? {},
    };
  };
  return { call, files, jobs };
}

describe('operator API: client settings', () => {
  it("refuses an Amazon Connect instance in another region than the deployment's, saying why; takes its own", async () => {
    const { call } = setup();
    const connect = (region?: string) => ({
      ...TOKYO_CLIENT,
      telephony: {
        provider: 'connect',
        instanceId: '11111111-2222-3333-4444-555555555555',
        contactFlowId: '66666666-7777-8888-9999-000000000000',
        sourcePhoneNumber: '+815012345678',
        ...(region ? { region } : {}),
      },
    });
    const foreign = await call('PUT', '/clients/acme', { body: JSON.stringify(connect('eu-west-2')) });
    expect(foreign.status).toBe(400);
    expect(foreign.body.fieldErrors['telephony.region']).toEqual([
      expect.stringMatching(/^must be this deployment's region \(ap-northeast-1\) or left out: .*eu-west-2/),
    ]);
    expect((await call('GET', '/clients/acme')).status).toBe(404);
    expect(
      (await call('PUT', '/clients/acme', { body: JSON.stringify(connect('ap-northeast-1')) })).status,
    ).toBe(200);
    expect((await call('PUT', '/clients/acme', { body: JSON.stringify(connect()) })).status).toBe(200);
  });

  it('stores settings and reads them back; answers 400 with field errors, 404 for an unknown client', async () => {
    const { call } = setup();
    expect((await call('GET', '/clients/acme')).status).toBe(404);
    const bad = await call('PUT', '/clients/acme', {
      body: JSON.stringify({ ...TOKYO_CLIENT, timeZone: 'Tokyo' }),
    });
    expect(bad).toMatchObject({
      status: 400,
      body: { message: 'invalid client settings', fieldErrors: { timeZone: [expect.any(String)] } },
    });
    expect((await call('PUT', '/clients/acme', { body: '{not json' })).status).toBe(400);
    expect((await call('PUT', '/clients/acme', { body: JSON.stringify(TOKYO_CLIENT) })).status).toBe(200);
    const got = (await call('GET', '/clients/acme')).body;
    expect(got).toMatchObject({ clientId: 'acme', defaultRegion: 'JP', maxConcurrentCalls: 5 });
    // A GET's answer PUT back, with one change: its read-only parts are no unknown fields.
    const back = await call('PUT', '/clients/acme', {
      body: JSON.stringify({ ...got, maxConcurrentCalls: 6 }),
    });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ maxConcurrentCalls: 6, callingHours: got.callingHours });
    const elsewhere = await call('PUT', '/clients/acme', {
      body: JSON.stringify({ ...got, clientId: 'other' }),
    });
    expect(elsewhere).toMatchObject({
      status: 400,
      body: { fieldErrors: { clientId: [expect.any(String)] } },
    });
  });
});

describe('operator API: jobs', () => {
  async function withClient() {
    const s = setup();
    await s.call('PUT', '/clients/acme', { body: JSON.stringify(TOKYO_CLIENT) });
    return s;
  }

  it('creates a job with a presigned upload URL for its key', async () => {
    const { call } = await withClient();
    const created = await call('POST', '/clients/acme/jobs', {
      body: JSON.stringify({ name: 'March', scenarioId: 'renewal' }),
    });
    expect(created.status).toBe(201);
    const { jobId, upload, status } = created.body;
    expect(status).toBe('uploading');
    expect(upload).toEqual({
      url: expect.stringContaining(`uploads/acme/${jobId}.csv`),
      method: 'PUT',
      expiresAt: expect.any(String),
    });
    const job = await call('GET', `/clients/acme/jobs/${jobId}`);
    expect(job.body).toMatchObject({
      jobId,
      name: 'March',
      scenarioId: 'renewal',
      status: 'uploading',
      counts: { tasks: 0, outstanding: 0 },
    });
  });

  it('stores an inline CSV, base64-encoded or not, under the job key', async () => {
    const { call, files } = await withClient();
    const csv = 'phone,name\r\n09011110001,Aiko\r\n';
    const text = await call('POST', '/clients/acme/jobs', {
      body: csv,
      contentType: 'text/csv',
      query: { name: 'inline' },
    });
    expect(text.status).toBe(201);
    expect(text.body.upload).toBeUndefined();
    expect(Buffer.from(files.objects.get(`uploads/acme/${text.body.jobId}.csv`)!).toString()).toBe(csv);
    const sjis = Buffer.from([0x93, 0x64, 0x98, 0x62, 0x0d, 0x0a]);
    const binary = await call('POST', '/clients/acme/jobs', {
      body: sjis.toString('base64'),
      base64: true,
      contentType: 'application/octet-stream',
      query: { name: 'sjis', maxAttempts: '2' },
    });
    expect(Buffer.from(files.objects.get(`uploads/acme/${binary.body.jobId}.csv`)!)).toEqual(sjis);
    const missingName = await call('POST', '/clients/acme/jobs', { body: csv, contentType: 'text/csv' });
    expect(missingName).toMatchObject({ status: 400, body: { fieldErrors: { name: [expect.any(String)] } } });
    // text/csv arrives as text read as UTF-8: another charset is refused, with the way that keeps its bytes.
    const shiftJis = await call('POST', '/clients/acme/jobs', {
      body: csv,
      contentType: 'text/csv; charset=Shift_JIS',
      query: { name: 'sjis-as-text' },
    });
    expect(shiftJis).toMatchObject({
      status: 415,
      body: { message: expect.stringContaining('application/octet-stream') },
    });
    const utf8 = await call('POST', '/clients/acme/jobs', {
      body: csv,
      contentType: 'text/csv; charset="UTF-8"',
      query: { name: 'utf8' },
    });
    expect(utf8.status).toBe(201);
    const plain = await call('POST', '/clients/acme/jobs', {
      body: csv,
      contentType: 'text/plain',
      query: { name: 'p' },
    });
    expect(plain).toMatchObject({ status: 400, body: { message: expect.stringContaining('text/csv') } });
  });

  it('says what a running job waits for, in the job, the list and the report headers (issue 13 #8)', async () => {
    const { call, jobs } = await withClient();
    const { jobId } = (await call('POST', '/clients/acme/jobs', { body: JSON.stringify({ name: 'Fri' }) }))
      .body;
    const row = jobs.rows.get(`acme/${jobId}`)!;
    row.job = { ...row.job, status: 'running' };
    // Friday in Tokyo; the client calls on Mondays and Tuesdays.
    const expected = {
      reason: 'calling-hours',
      until: '2026-11-23T00:00:00.000Z',
      message: "outside the client's calling hours; they open at 2026-11-23 09:00 Asia/Tokyo",
    };
    expect((await call('GET', `/clients/acme/jobs/${jobId}`)).body.waiting).toEqual(expected);
    expect((await call('GET', '/clients/acme/jobs')).body.jobs[0].waiting).toEqual(expected);
    const report = await call('GET', `/clients/acme/jobs/${jobId}/report`);
    expect(report.headers).toMatchObject({
      'x-switchboard-job-status': 'running',
      'x-switchboard-waiting': 'calling-hours',
      'x-switchboard-waiting-until': expected.until,
      'x-switchboard-waiting-message': expected.message,
      'x-switchboard-task-retention-days': '90',
    });
    expect((await call('POST', '/clients/acme/pause')).body.paused).toBe(true);
    expect((await call('GET', `/clients/acme/jobs/${jobId}`)).body.waiting.reason).toBe('client-paused');
  });

  it('lists jobs newest first, page by page', async () => {
    const { call } = await withClient();
    const ids: string[] = [];
    for (const name of ['a', 'b', 'c'])
      ids.push((await call('POST', '/clients/acme/jobs', { body: JSON.stringify({ name }) })).body.jobId);
    const first = await call('GET', '/clients/acme/jobs', { query: { limit: '2' } });
    expect(first.body.jobs.map((j: { name: string }) => j.name)).toEqual(['c', 'b']);
    const second = await call('GET', '/clients/acme/jobs', { query: { limit: '2', next: first.body.next } });
    expect(second.body.jobs.map((j: { name: string }) => j.name)).toEqual(['a']);
    expect(second.body.next).toBeUndefined();
    expect(
      (await call('GET', '/clients/acme/jobs', { query: { limit: '0' } })).body.fieldErrors,
    ).toHaveProperty('limit');
  });

  it('answers an illegal transition with 409 and the current status', async () => {
    const { call, jobs } = await withClient();
    const { jobId } = (await call('POST', '/clients/acme/jobs', { body: JSON.stringify({ name: 'x' }) }))
      .body;
    expect(await call('POST', `/clients/acme/jobs/${jobId}/pause`)).toMatchObject({
      status: 409,
      body: { message: 'cannot pause a job that is uploading', status: 'uploading' },
    });
    const row = jobs.rows.get(`acme/${jobId}`)!;
    row.job = { ...row.job, status: 'scheduled' };
    expect(await call('POST', `/clients/acme/jobs/${jobId}/pause`)).toMatchObject({
      status: 200,
      body: { status: 'paused' },
    });
    expect(await call('POST', `/clients/acme/jobs/${jobId}/resume`)).toMatchObject({
      status: 200,
      body: { status: 'scheduled' },
    });
    expect(await call('POST', `/clients/acme/jobs/${jobId}/cancel`)).toMatchObject({
      status: 200,
      body: { status: 'cancelled' },
    });
    expect(await call('POST', `/clients/acme/jobs/${jobId}/resume`)).toMatchObject({
      status: 409,
      body: { status: 'cancelled' },
    });
    expect((await call('POST', '/clients/acme/jobs/01JD0000000000000000000000/cancel')).status).toBe(404);
  });

  it('serves the report as a CSV download', async () => {
    const { call } = await withClient();
    const { jobId } = (await call('POST', '/clients/acme/jobs', { body: JSON.stringify({ name: 'x' }) }))
      .body;
    const report = await call('GET', `/clients/acme/jobs/${jobId}/report`);
    expect(report.status).toBe(200);
    expect(report.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(report.body).toBe('\ufeffrow,recipient,outcome,attempts,last_result,reason,column,value\r\n');
  });
});

describe('operator API: a job series', () => {
  it("answers the job's windows after `since`; 400 for a bad `since`, 404 for another client's job", async () => {
    const { call } = setup();
    await call('PUT', '/clients/acme', { body: JSON.stringify(TOKYO_CLIENT) });
    await call('PUT', '/clients/other', { body: JSON.stringify(TOKYO_CLIENT) });
    const created = await call('POST', '/clients/acme/jobs', { body: JSON.stringify({ name: 'March' }) });
    const jobId = created.body.jobId as string;
    const at = Date.parse('2026-11-20T00:00:00Z');
    for (const k of [0, 1, 2]) {
      samples.push({
        clientId: 'acme',
        jobId,
        at: at + k * 10_000,
        seconds: 10,
        brokerId: 'b1',
        peakInFlight: 3,
        maxConcurrentCalls: 5,
        callsPerSecond: 2,
        starts: 7,
        messagesSent: 0,
        rateLimited: 0,
      });
    }
    const since = new Date(at).toISOString();
    const series = await call('GET', `/clients/acme/jobs/${jobId}/series`, { query: { since } });
    expect(series.status).toBe(200);
    expect(series.body).toMatchObject({ jobId, channel: 'call' });
    expect(series.body.samples).toEqual(
      [1, 2].map((k) => ({
        at: new Date(at + k * 10_000).toISOString(),
        seconds: 10,
        callsInFlight: 3,
        maxConcurrentCalls: 5,
        starts: 7,
        callsPerSecond: 2,
        messagesSent: 0,
        rateLimited: 0,
      })),
    );
    const bad = await call('GET', `/clients/acme/jobs/${jobId}/series`, { query: { since: 'soon' } });
    expect(bad).toMatchObject({ status: 400, body: { fieldErrors: { since: [expect.any(String)] } } });
    expect((await call('GET', `/clients/other/jobs/${jobId}/series`)).status).toBe(404);
  });
});
