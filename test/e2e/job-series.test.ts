/**
 * A call job's series on the local stack, end to end: a real broker process samples the job (one
 * window a second here) while it calls through the telephony sandbox, and the operator route
 * answers it. The series says what the far side saw: never more calls in flight than the limit,
 * never more starts a second than the line's rate, and every call the job started, counted once;
 * a message job's, every recipient LINE delivered to and every 429 it answered. A refresh of the
 * console's job page (the job and its newer windows) costs at most five DynamoDB requests, never a
 * read of the job's tasks.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobWithList, putDemoClient, runDemoJob } from '#local/demo-job.ts';
import { runDemoMessages } from '#local/demo-messages.ts';
import { LOCAL_CONSOLE_USERS, type LocalStack, startLocalStack } from '#local/stack.ts';
import type { JobView } from '#shared/jobs/api.ts';
import type { JobSeriesAnswer } from '#shared/jobs/series.ts';
import { CONSOLE_API_PREFIX } from '#shared/routes.ts';
import { type DynamoRequest, DynamoRequestLog } from '../support/dynamo-requests.ts';
import { eventually } from '../support/wait.ts';

const LIMIT = 4;
const RATE = 4;
const ROWS = 40;

let stack: LocalStack;
let dir: string;
// Counts the jobs function's DynamoDB requests: installed before the stack builds its clients.
const dynamoRequests = new DynamoRequestLog();
dynamoRequests.install();

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  dir = mkdtempSync(path.join(tmpdir(), 'job-series-'));
  stack = await startLocalStack({
    stage: 'e2eseries',
    port: 0,
    fleet: true,
    telephonyTimeScale: 10,
    maxBrokers: 1,
    jobManagerIntervalMs: 1_000,
    brokerEnv: {
      JOB_SERIES_SECONDS: '1',
      LEASE_MS: '3000',
      BROKER_IDLE_WAIT_MS: '300',
      BROKER_RECHECK_MS: '500',
      // A call with no final callback is asked of the provider 5 s after it started.
      DEFAULT_MAX_CALL_SECONDS: '4',
      RECONCILE_MARGIN_MS: '1000',
      // A message job of a few hundred recipients sends for a few seconds: several windows.
      LINE_RATE_PER_SECOND: '100',
    },
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Every window of the job's series, waited for until `done` holds of them (the last is written as the broker lets go). */
function seriesOf(clientId: string, jobId: string, done: (answer: JobSeriesAnswer) => boolean) {
  const since = new Date(Date.now() - 3_600_000).toISOString();
  return eventually(async () => {
    const got = await stack.operator(
      'GET',
      `/clients/${clientId}/jobs/${jobId}/series?since=${encodeURIComponent(since)}`,
    );
    expect(got.status).toBe(200);
    const answer = got.json<JobSeriesAnswer>();
    return done(answer) ? answer : undefined;
  }, `the series of job ${jobId}`);
}

const total = (answer: JobSeriesAnswer, of: (s: JobSeriesAnswer['samples'][number]) => number) =>
  answer.samples.reduce((sum, s) => sum + of(s), 0);

function callList(rows: number): string {
  const lines = ['電話番号,氏名'];
  for (let i = 0; i < rows; i++) lines.push(`090-5150-${1000 + i},顧客 ${i + 1}`);
  const file = path.join(dir, 'series.csv');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

describe("a job's series", () => {
  it('shows calls in flight within the limit and starts within the rate, every start counted once', async () => {
    const clientId = 'series-client';
    const view = await runDemoJob(stack, () => {}, {
      csvPath: callList(ROWS),
      clientId,
      maxConcurrentCalls: LIMIT,
      callsPerSecond: RATE,
      timeoutMs: 200_000,
    });
    expect(view.status).toBe('completed');
    const rings = stack.telephony.stats(clientId).rings;
    const series = await seriesOf(clientId, view.jobId, (answer) => total(answer, (s) => s.starts) === rings);
    expect(series.channel).toBe('call');
    expect(series.samples.length).toBeGreaterThan(3);
    for (const sample of series.samples) {
      expect(sample.seconds).toBe(1);
      expect(sample.callsInFlight).toBeLessThanOrEqual(LIMIT);
      expect(sample).toMatchObject({ maxConcurrentCalls: LIMIT, callsPerSecond: RATE });
      expect(sample.starts / sample.seconds).toBeLessThanOrEqual(RATE);
    }
    // The series follows the calls in flight (calls here last 0.2-1.6 s at 4 a second).
    expect(Math.max(...series.samples.map((s) => s.callsInFlight))).toBeGreaterThan(1);

    // A refresh asks only for the windows after the last one shown: there are none now.
    const last = series.samples.at(-1)!.at;
    const seriesPath = `/clients/${clientId}/jobs/${view.jobId}/series`;
    const after = await stack.operator('GET', `${seriesPath}?since=${encodeURIComponent(last)}`);
    expect(after.json<JobSeriesAnswer>().samples).toEqual([]);
  });

  it("costs at most 5 DynamoDB requests a refresh of the console's job page, and never reads the job's tasks", async () => {
    const clientId = 'series-refresh';
    await putDemoClient(stack, { clientId, maxConcurrentCalls: LIMIT, callsPerSecond: RATE });
    const jobId = await createJobWithList(
      stack,
      clientId,
      { name: 'refreshed', channel: 'call', scenarioId: 'reminder', maxAttempts: 1 },
      readFileSync(callList(ROWS)),
    );
    const token = (await stack.cognito.issueTokens(LOCAL_CONSOLE_USERS[0]!.username)).AccessToken;
    const path = `${stack.api.url}${CONSOLE_API_PREFIX}/clients/${clientId}/jobs/${jobId}`;
    const get = async <T>(url: string): Promise<T> => {
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      expect(response.status).toBe(200);
      return (await response.json()) as T;
    };
    // The page's refresh, as console/src/pages/job.ts makes it: the job, and the windows after the last shown.
    let since = new Date(Date.now() - 3_600_000).toISOString();
    const refreshes: { status: string; requests: DynamoRequest[] }[] = [];
    await eventually(
      async () => {
        const { result, requests } = await dynamoRequests.during('jobs-api', () =>
          Promise.all([
            get<JobView>(path),
            get<JobSeriesAnswer>(`${path}/series?since=${encodeURIComponent(since)}`),
          ]),
        );
        const [job, series] = result;
        refreshes.push({ status: job.status, requests });
        since = series.samples.at(-1)?.at ?? since;
        return ['completed', 'failed', 'cancelled'].includes(job.status) ? job : undefined;
      },
      `job ${jobId} to end`,
      { timeoutMs: 200_000, everyMs: 250 },
    );
    // Refreshed while it ran (the costliest refresh: the client's calls in flight too) and after.
    expect(refreshes.map((r) => r.status)).toContain('running');
    const tasksTable = stack.cloud.tableNames.tasks!;
    for (const { status, requests } of refreshes) {
      const what = `${status}: ${requests.map((r) => `${r.operation} ${r.table}`).join(', ')}`;
      expect(requests.length, what).toBeGreaterThan(0);
      expect(requests.length, what).toBeLessThanOrEqual(5);
      // The tasks table is read only for the job's series partition: one Query, never a task shard.
      const ofTasksTable = requests.filter((r) => r.table === tasksTable);
      expect(
        ofTasksTable.map((r) => r.operation),
        what,
      ).toEqual(['Query']);
      expect(ofTasksTable[0]!.input.IndexName, what).toBeUndefined();
      expect(JSON.stringify(ofTasksTable[0]!.input.ExpressionAttributeValues), what).toContain(
        `${jobId}#series`,
      );
    }
  });

  it("shows a message job's messages and LINE's 429s, each counted once", async () => {
    const clientId = 'series-messages';
    // LINE refuses the campaign's first five pushes with 429: the broker backs off and sends again.
    stack.line.faults.burst429(5, 'push');
    const summary = await runDemoMessages(stack, () => {}, { clientId, count: 300, timeoutMs: 200_000 });
    expect(summary.job.status).toBe('completed');
    const series = await seriesOf(
      clientId,
      summary.job.jobId,
      (answer) => total(answer, (s) => s.messagesSent) === summary.delivered,
    );
    expect(series.channel).toBe('line');
    expect(total(series, (s) => s.rateLimited)).toBe(5);
    expect(total(series, (s) => s.starts)).toBe(0);
    expect(series.samples.length).toBeGreaterThan(1);
  });
});
