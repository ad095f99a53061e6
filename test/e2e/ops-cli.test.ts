/**
 * The operator CLI (`scripts/ops.ts`) as a user runs it: a child process of the project's Node,
 * against a local stack with a broker fleet, found the way `npm start` announces itself (its state
 * file) or through `--endpoint` with AWS credentials from the environment (the SDK's chain). It
 * checks client settings, a job created from a list with a rejected and a skipped row and watched
 * until done, the report, the opt-out lookup after an unfollow, and that errors are one line with
 * a non-zero exit status; pause, resume and cancel of a job scheduled for later; a list too large
 * refused before upload; and that no presigned URL's signature, credential or token is printed.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { writeLocalState } from '#local/state-file.ts';
import type { JobView } from '#shared/jobs/api.ts';
import type { OptOutsAnswer } from '#shared/jobs/opt-outs.ts';
import { MAX_UPLOAD_BYTES } from '#shared/jobs/upload-limit.ts';
import { eventually } from '../support/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const OPS = path.join(ROOT, 'scripts/ops.ts');
const LIST = path.join(ROOT, 'test/fixtures/ops/small-call-list.csv');
const CLIENT = 'ops-client';
const OTHER = 'ops-other';
const CHANNEL = {
  channelId: 'ops-channel',
  clientId: CLIENT,
  channelSecret: 'ops-channel-secret',
  accessToken: 'ops-channel-access-token',
  autoAnswer: 'push',
  rules: [],
};
const GONE = `U${'0'.repeat(31)}7`;

let stack: LocalStack;
let dir: string;
let stateFile: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  dir = mkdtempSync(path.join(tmpdir(), 'ops-cli-'));
  stack = await startLocalStack({
    stage: 'e2eops',
    port: 0,
    fleet: true,
    maxBrokers: 1,
    jobManagerIntervalMs: 1_000,
    // Calls ring and talk for a second or so of wall time.
    telephonyTimeScale: 10,
    brokerEnv: { BROKER_IDLE_WAIT_MS: '300', DEFAULT_MAX_CALL_SECONDS: '4' },
  });
  await stack.putChannel(CHANNEL);
  // What npm start writes for the CLI, in a file of this test's own.
  stateFile = path.join(dir, 'local.json');
  writeLocalState(
    { apiUrl: stack.api.url, region: stack.cloud.region, credentials: LOCAL_CREDENTIALS },
    stateFile,
  );
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the CLI in a folder of its own (no cdk-outputs.json there), without AWS settings of the host. */
function ops(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));
  const child = spawn(process.execPath, [OPS, ...args], {
    cwd: dir,
    env: { ...clean, SWITCHBOARD_LOCAL_STATE: stateFile, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const local = (...args: string[]) => ops(['--local', ...args]);

/** The one line an error is. */
function errorLine(run: Run): string {
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines, run.stderr).toHaveLength(1);
  return lines[0]!;
}

const SETTINGS = [
  '--max-concurrent-calls',
  '2',
  '--calls-per-second',
  '5',
  '--time-zone',
  'Asia/Tokyo',
  '--calling-hours',
  'all=00:00-24:00',
  '--default-region',
  'JP',
];

describe('npm run ops', () => {
  it('puts and gets client settings, through the state file of npm start and through --endpoint with AWS credentials', async () => {
    const put = await local('clients', 'put', CLIENT, ...SETTINGS);
    expect(put.code, put.stderr).toBe(0);
    expect(put.stdout).toContain('concurrent calls: 2');
    expect(put.stdout).toContain('calling hours:    mon–sun 00:00–24:00');
    expect((await local('clients', 'put', OTHER, ...SETTINGS)).code).toBe(0);

    const listed = await local('clients', 'list');
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^${CLIENT}  2 calls, 5/s, Asia/Tokyo$`, 'm'));
    expect(listed.stdout).toMatch(new RegExp(`^${OTHER}  `, 'm'));

    const got = await local('clients', 'get', CLIENT, '--json');
    expect(got.code, got.stderr).toBe(0);
    expect(JSON.parse(got.stdout)).toMatchObject({
      clientId: CLIENT,
      maxConcurrentCalls: 2,
      callsPerSecond: 5,
      timeZone: 'Asia/Tokyo',
      defaultRegion: 'JP',
    });

    // Against a "deployed" API: the URL given, the credentials from the SDK's default chain.
    const aws = {
      AWS_REGION: stack.cloud.region,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
    };
    const signed = await ops(['clients', 'get', CLIENT, '--endpoint', stack.api.url, '--json'], aws);
    expect(signed.code, signed.stderr).toBe(0);
    expect(JSON.parse(signed.stdout).clientId).toBe(CLIENT);
    const forged = await ops(['clients', 'get', CLIENT, '--endpoint', stack.api.url], {
      ...aws,
      AWS_SECRET_ACCESS_KEY: 'not-the-secret',
    });
    expect(forged.code).toBe(1);
    expect(errorLine(forged)).toMatch(/^error: GET \/clients\/ops-client: 403 /);
    expect(forged.stderr).not.toContain('not-the-secret');
  });

  it("says what is wrong in one line: the API's 400 with its field errors, a usage error, an unknown job", async () => {
    const bad = await local('clients', 'put', CLIENT, '--merge', '--calls-per-second', '0');
    expect(bad.code).toBe(1);
    expect(errorLine(bad)).toBe(
      'error: PUT /clients/ops-client: 400 invalid client settings — callsPerSecond: must be at least 0.01 (a call every 100 s)',
    );
    expect(bad.stdout).toBe('');

    const badJob = await local('jobs', 'create', '--client', CLIENT, '--csv', LIST, '--max-attempts', '11');
    expect(badJob.code).toBe(1);
    expect(errorLine(badJob)).toMatch(
      /^error: POST \/clients\/ops-client\/jobs: 400 invalid job options — maxAttempts: /,
    );

    const usage = await local('jobs', 'lisst', '--client', CLIENT);
    expect(usage.code).toBe(2);
    expect(errorLine(usage)).toBe(
      'error: unknown command "jobs lisst": use jobs create|list|show|pause|resume|cancel|report (did you mean jobs list?)',
    );

    const missing = await local('jobs', 'show', '--client', CLIENT, 'NOSUCHJOB');
    expect(missing.code).toBe(1);
    expect(errorLine(missing)).toBe(
      // The request as sent: the CLI asks a job why it starts nothing (`?why=next-task`).
      'error: GET /clients/ops-client/jobs/NOSUCHJOB?why=next-task: 404 no job NOSUCHJOB for client ops-client',
    );
  });

  it('creates a job from a list, shows the rejected and skipped rows, watches it to the end, and downloads its report', async () => {
    const created = await local(
      'jobs',
      'create',
      '--client',
      CLIENT,
      '--csv',
      LIST,
      '--name',
      'ops e2e',
      '--max-attempts',
      '1',
      '--watch',
      '--timeout',
      '200',
    );
    expect(created.code, `${created.stdout}\n${created.stderr}`).toBe(0);
    // stderr: the job, the upload, then progress lines (not a terminal: one line per change).
    const jobId = /^job (\w+) created for client ops-client$/m.exec(created.stderr)?.[1];
    expect(jobId, created.stderr).toBeDefined();
    expect(created.stderr).toMatch(/^uploaded small-call-list\.csv \(\d+ B\) in [\d.]+ s$/m);
    expect(created.stderr).toMatch(/^running +▕/m);
    // stdout: the ingest's result, row, column and reason of each problem row, Japanese intact; then the end.
    const lines = created.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('list read: 5 rows: 3 tasks, 1 rejected, 1 skipped');
    expect(lines[1]).toMatch(/^ROW +OUTCOME +COLUMN +REASON +VALUE$/);
    expect(lines[2]).toMatch(/^4 +rejected +電話番号 +invalid phone number +12345$/);
    expect(lines[3]).toMatch(/^6 +skipped +電話番号 +duplicate of row 2 +090-1000-0001$/);
    expect(lines.at(-1)).toMatch(
      new RegExp(
        `^job ${jobId} completed: \\d completed, \\d failed, 0 cancelled of 3 tasks \\(5 rows, 1 rejected, 1 skipped\\)$`,
      ),
    );

    const shown = await local('jobs', 'show', '--client', CLIENT, jobId!, '--json');
    const job = JSON.parse(shown.stdout) as JobView;
    expect(job.status).toBe('completed');
    expect(job.counts.completed + job.counts.failed).toBe(3);

    const listed = await local('jobs', 'list', '--client', CLIENT, '--json');
    expect((JSON.parse(listed.stdout) as { jobs: JobView[] }).jobs.map((j) => j.jobId)).toContain(jobId);

    const report = await local('jobs', 'report', '--client', CLIENT, jobId!, '--out', 'report.csv');
    expect(report.code, report.stderr).toBe(0);
    expect(report.stderr.trimEnd()).toMatch(
      new RegExp(`^report of job ${jobId} \\(completed\\): \\d+ B written to report\\.csv$`),
    );
    const rows = parse(readFileSync(path.join(dir, 'report.csv')), { bom: true, columns: true }) as Record<
      string,
      string
    >[];
    const byRow = Object.fromEntries(rows.map((r) => [r.row, r]));
    expect(Object.keys(byRow).sort()).toEqual(['2', '3', '4', '5', '6']);
    expect(byRow['4']).toMatchObject({
      outcome: 'rejected',
      reason: 'invalid phone number',
      column: '電話番号',
    });
    expect(byRow['6']).toMatchObject({ outcome: 'skipped', reason: 'duplicate of row 2' });
    expect(byRow['2']!.recipient).toBe("'+819010000001");
    for (const row of ['2', '3', '5']) expect(['completed', 'failed']).toContain(byRow[row]!.outcome);
  });

  it('pauses, resumes and cancels a job scheduled for later, a status line and exit 0 each, and never prints a signature or a secret', async () => {
    // A deployed stack's way: the user's credentials from the environment, a session token among
    // them (the local stack checks the signature over it as AWS does).
    const SESSION_TOKEN = 'ops-session-token-never-printed-0001';
    const aws = {
      AWS_REGION: stack.cloud.region,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_SESSION_TOKEN: SESSION_TOKEN,
    };
    const endpoint = ['--endpoint', stack.api.url];
    const runs: Run[] = [];
    const run = async (...args: string[]) => {
      const done = await ops([...args, ...endpoint], aws);
      runs.push(done);
      return done;
    };
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const created = await run(
      'jobs',
      'create',
      '--client',
      CLIENT,
      '--csv',
      LIST,
      '--name',
      'later',
      '--start-at',
      later,
    );
    expect(created.code, created.stderr).toBe(0);
    const jobId = created.stdout.trim();
    expect(created.stderr).toContain(`job ${jobId} created for client ops-client`);
    // The ingest reads the list: the job waits for its start time, scheduled.
    await eventually(async () => {
      const shown = await run('jobs', 'show', '--client', CLIENT, jobId, '--json');
      expect(shown.code, shown.stderr).toBe(0);
      return (JSON.parse(shown.stdout) as JobView).status === 'scheduled' ? true : undefined;
    }, `job ${jobId} to be scheduled`);

    const paused = await run('jobs', 'pause', '--client', CLIENT, jobId);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toMatch(
      new RegExp(`^job ${jobId}: paused +▕░+▏ +0% · 0/3 ended · 3 outstanding\n$`),
    );
    const resumed = await run('jobs', 'resume', '--client', CLIENT, jobId);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`^job ${jobId}: scheduled +▕`));
    const cancelled = await run('jobs', 'cancel', '--client', CLIENT, jobId);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toMatch(new RegExp(`^job ${jobId}: cancelled +▕`));
    const json = await run('jobs', 'show', '--client', CLIENT, jobId, '--json');
    expect((JSON.parse(json.stdout) as JobView).status).toBe('cancelled');
    // A cancelled job cannot be resumed: one line, exit 1.
    const again = await run('jobs', 'resume', '--client', CLIENT, jobId);
    expect(again.code).toBe(1);
    expect(errorLine(again)).toBe(
      `error: POST /clients/ops-client/jobs/${jobId}/resume: 409 cannot resume a job that is cancelled`,
    );

    for (const { stdout, stderr } of runs) {
      const printed = stdout + stderr;
      expect(printed).not.toMatch(/X-Amz-(Signature|Credential|Security-Token|Date)|AWS4-HMAC-SHA256/i);
      expect(printed).not.toContain(SESSION_TOKEN);
      expect(printed).not.toContain(CHANNEL.channelSecret);
      expect(printed).not.toContain(CHANNEL.accessToken);
    }
  });

  it('refuses a list larger than the ingest reads before creating a job, in the words of the ingest', async () => {
    const huge = path.join(dir, 'huge.csv');
    writeFileSync(huge, '');
    // Sparse: a gigabyte and a byte that take no disk.
    truncateSync(huge, MAX_UPLOAD_BYTES + 1);
    const before = await local('jobs', 'list', '--client', CLIENT, '--json');
    const refused = await local('jobs', 'create', '--client', CLIENT, '--csv', huge);
    expect(refused.code).toBe(2);
    expect(errorLine(refused)).toBe(
      `error: --csv: ${huge}: the file is 1.0 GiB (1073741825 bytes): a list may be at most 1 GiB (1073741824 bytes); split it into smaller lists`,
    );
    const after = await local('jobs', 'list', '--client', CLIENT, '--json');
    const ids = (run: Run) => (JSON.parse(run.stdout) as { jobs: JobView[] }).jobs.map((j) => j.jobId);
    expect(ids(after)).toEqual(ids(before));
  });

  it("looks up opt-outs: a user who unfollowed the client's channel, in its list only", async () => {
    const sent = await stack.line.sendWebhook({
      url: stack.webhookUrl(CHANNEL.channelId),
      channelSecret: CHANNEL.channelSecret,
      events: [stack.line.events.unfollow({ channelId: CHANNEL.channelId, from: GONE })],
    });
    expect(sent.status).toBe(200);
    // The processor records the unfollow from its queue: wait for the list to have it.
    const deadline = Date.now() + 60_000;
    let listed: OptOutsAnswer | undefined;
    while (Date.now() < deadline) {
      const run = await local('optouts', 'list', '--client', CLIENT, '--json');
      expect(run.code, run.stderr).toBe(0);
      listed = JSON.parse(run.stdout) as OptOutsAnswer;
      if (listed.optOuts.length > 0) break;
    }
    expect(listed?.optOuts).toEqual([{ recipient: GONE, optedOut: true, since: expect.any(String) }]);

    const lookup = await local('optouts', 'lookup', '--client', CLIENT, GONE, '090-1000-0001');
    expect(lookup.code, lookup.stderr).toBe(0);
    const table = lookup.stdout.trimEnd().split('\n');
    expect(table[0]).toMatch(/^RECIPIENT +OPTED OUT +SINCE +AS TYPED$/);
    expect(table[1]).toMatch(new RegExp(`^${GONE} +yes +\\d{4}-\\d\\d-\\d\\dT`));
    expect(table[2]).toMatch(/^\+819010000001 +no +never opted out +090-1000-0001$/);

    // Another client's list is its own.
    const other = await local('optouts', 'lookup', '--client', OTHER, GONE, '--json');
    expect(JSON.parse(other.stdout)).toEqual({ optOuts: [{ recipient: GONE, optedOut: false }] });

    const bad = await local('optouts', 'lookup', '--client', CLIENT, 'nobody');
    expect(bad.code).toBe(1);
    expect(errorLine(bad)).toBe(
      'error: GET /clients/ops-client/opt-outs?recipient=nobody: 400 invalid opt-out query — recipient: "nobody" is neither a phone number nor a LINE user id (U + 32 hex digits)',
    );
  });
});
