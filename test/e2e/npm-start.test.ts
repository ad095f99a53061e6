import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { DEMO_CHANNEL, LOCAL_TELEPHONY } from '#local/stack.ts';
import { LOCAL_TWILIO } from '#local/twilio-emulator.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';

const children: ChildProcess[] = [];
// Each start's state file goes here, not to the checkout's `.switchboard/local.json`, where it
// would replace the file of a developer's own `npm start`.
const stateDir = mkdtempSync(path.join(tmpdir(), 'npm-start-state-'));
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

/**
 * Runs `npm start`'s entry point and collects its output until `ready`; without the webhook demo
 * and the call job, and without the message, email and SMS campaigns unless `args` ask for them
 * (`--messages N`, `--emails N`, `--sms N`).
 */
function start(
  args: string[],
  options: { webhookDemo?: boolean; callJob?: boolean; env?: Record<string, string> } = {},
): Promise<{ child: ChildProcess; output: () => string; dynamo: string }> {
  const campaign = args.includes('--messages') ? [] : ['--no-messages'];
  const emails = args.includes('--emails') ? [] : ['--no-emails'];
  const texts = args.includes('--sms') ? [] : ['--no-sms'];
  const demo = options.webhookDemo ? [] : ['--no-demo'];
  const job = options.callJob ? [] : ['--no-job'];
  const child = spawn(
    process.execPath,
    ['local/start.ts', '--port', '0', ...demo, ...job, ...campaign, ...emails, ...texts, ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        SWITCHBOARD_LOCAL_STATE: path.join(stateDir, `local-${children.length}.json`),
        ...options.env,
      },
    },
  );
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in time:\n${out}`)), 180_000);
    const check = () => {
      if (out.includes('ready — press Ctrl-C')) {
        clearTimeout(timer);
        const dynamo = /DynamoDB Local\s+(\S+)/.exec(out)![1]!;
        resolve({ child, output: () => out, dynamo });
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before ready:\n${out}`));
    });
  });
}

/** Resolves once `done()` holds, checked as the child's output arrives; fails after 5 minutes. */
function until(child: ChildProcess, done: () => boolean, output: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not done in time:\n${output()}`)), 300_000);
    const check = () => {
      if (!done()) return;
      clearTimeout(timer);
      child.stdout!.off('data', check);
      resolve();
    };
    child.stdout!.on('data', check);
    check();
  });
}

/**
 * The email campaign of `--emails 20` (17 success@, 2 bounce@, 1 complaint@ addresses): a live line,
 * every email accepted once, the events recorded in the report and the suppression list, and every
 * email sent readable as a `.eml` file where the last line says.
 */
function expectEmailCampaign(output: string, stateFile: string): void {
  expect(output).toMatch(
    /^\[switchboard\] emails: running +rows 20 .* emails\/s {2}SES accepted \d+, delivered \d+/m,
  );
  expect(output).toMatch(
    /emails: completed: 20 completed, 0 failed, 0 cancelled of 20 tasks \(20 rows, 0 rejected, 0 skipped\); SES accepted 20 \([^)]*\), delivered 18, bounced 2, complained 1, duplicates 0/,
  );
  const recorded = /emails: the report's email column: (.*); on the suppression list: (.*)$/m.exec(output);
  expect(recorded, output).not.toBeNull();
  expect(recorded![1]!.split(', ').sort()).toEqual(['bounced 2', 'complained 1', 'delivered 17']);
  expect(recorded![2]!.split(', ').sort()).toEqual(['bounce 2', 'complaint 1']);
  expect(output).toMatch(
    /^\[switchboard\] {3}6,bounce\+5@simulator\.amazonses\.com,completed,1,accepted,,,,bounced$/m,
  );
  // Where to read them: the stand-in's outbox beside the state file, one .eml file per email.
  const outbox = path.join(path.dirname(stateFile), 'local-0-emails');
  expect(output).toContain(`emails: read the 20 emails sent in ${outbox}${path.sep} — one .eml file each`);
  const files = readdirSync(outbox).filter((name) => name.endsWith('.eml'));
  expect(files).toHaveLength(20);
  const emails = files.map((name) => readFileSync(path.join(outbox, name), 'utf8'));
  const bounced = emails.filter((eml) => /^To: bounce\+\d+@simulator\.amazonses\.com\r$/m.test(eml));
  expect(bounced).toHaveLength(2);
  const sample = /emails: e\.g\. (\S+\.eml), to (\S+): "(.*)"$/m.exec(output);
  expect(sample, output).not.toBeNull();
  const eml = readFileSync(sample![1]!, 'utf8');
  expect(eml).toContain(`To: ${sample![2]}\r\n`);
  expect(eml).toMatch(/^From: =\?UTF-8\?B\?[^?]+\?= <news@example\.com>\r$/m);
  // The subject as SES sends it (RFC 2047 words), the recipient's own name and coupon in the body.
  const folded = /^Subject: (.*\r\n(?: .*\r\n)*)/m.exec(eml)![1]!;
  const subject = [...folded.matchAll(/=\?UTF-8\?B\?([^?]+)\?=/g)]
    .map((m) => Buffer.from(m[1]!, 'base64').toString('utf8'))
    .join('');
  expect(subject).toBe(sample![3]);
  expect(subject).toMatch(/様、12月のクーポンをお届けします$/);
  expect(eml).toMatch(
    /Content-Type: multipart\/alternative;[\s\S]*12月のクーポン XMAS-M\d{4} をお使いください/,
  );
  // One click to unsubscribe (RFC 8058), to the local API's route.
  expect(eml).toMatch(/^List-Unsubscribe: <http:\/\/127\.0\.0\.1:\d+\/unsubscribe\/[^>]+>\r$/m);
  expect(eml).toContain('List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n');
}

/**
 * The SMS campaign of `--sms 10`: a live line in parts a second, every number but the opted-out one
 * texted once (two parts each: Japanese is UCS-2), the report's sms column from the delivery events,
 * and a customer's STOP back on the suppression list.
 */
function expectSmsCampaign(output: string): void {
  // On a failure the message names the campaign's own lines, not the start of the whole output.
  const lines = output
    .split('\n')
    .filter((line) => /\] (sms:| {2})/.test(line))
    .join('\n');
  expect(output, lines).toMatch(
    /^\[switchboard\] sms: running +rows 10 .* parts\/s {2}texted \d+ \(\d+ parts\)/m,
  );
  expect(output, lines).toMatch(
    /sms: completed: 9 completed, 1 failed, 0 cancelled of 10 tasks \(10 rows, 0 rejected, 0 skipped\); texted 9 numbers, 18 parts \([^)]*\), duplicates 0/,
  );
  expect(output, lines).toMatch(
    /^\[switchboard\] {3}5,'\+819020000003,failed,1,sms-destination-phone-number-opted-out,/m,
  );
  expect(output, lines).toMatch(
    /sms: the report's sms column: delivered 9, none 1; \+819020000000 texted STOP: on the suppression list/,
  );
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

describe('npm start', () => {
  // One start for what needs no restart: what runs where, the webhook demo, a small campaign, a
  // small email campaign, Ctrl-C.
  it('prints what runs where, plays the webhook demo, a message, an email and an SMS campaign, and stops cleanly on Ctrl-C (SIGINT)', async () => {
    const stateFile = path.join(stateDir, `local-${children.length}.json`);
    const { child, output } = await start(['--messages', '150', '--emails', '20', '--sms', '10'], {
      webhookDemo: true,
    });
    expect(output()).toMatch(/SQS \+ S3\s+http:\/\/127\.0\.0\.1:\d+/);
    expect(output()).toMatch(/HTTP API\s+http:\/\/127\.0\.0\.1:\d+/);
    // The console's URL, printed once the stack is up, with who signs in; it serves the page.
    const consoleLine =
      /^\[switchboard\] console: (http:\/\/127\.0\.0\.1:\d+\/console) — sign in as admin \(every client\), demo \(demo-client: admin\), demo-operator \(demo-client: operator\), demo-viewer \(demo-client: viewer\); /m.exec(
        output(),
      );
    expect(consoleLine, output()).not.toBeNull();
    const page = await fetch(consoleLine![1]!);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toMatch(/<script[^>]+src=/);
    // The webhook demo: signed events accepted, a redelivery recognised, a forgery refused, each
    // answer delivered once (greeting, the keyword answer, the fallback), no duplicate.
    expect(output()).toMatch(/demo: {3}→ 200/);
    expect(output()).toMatch(/demo: LINE redelivers the "Hours" event → 200/);
    expect(output()).toMatch(/demo: a forged signature → 401/);
    expect(output().match(/demo: LINE delivered \(push/g)).toHaveLength(3);
    expect(output()).toContain('demo: duplicates seen by LINE: 0');
    // The campaign: every recipient delivered once, the one who unfollowed first skipped.
    const summary =
      /messages: (\w+): (\d+) completed, (\d+) failed, (\d+) cancelled of (\d+) tasks \((\d+) rows, (\d+) rejected, (\d+) skipped\); LINE delivered (\d+) \([^)]*\), duplicates (\d+)/.exec(
        output(),
      );
    expect(summary, output()).not.toBeNull();
    const [, status, completed, failed, cancelled, tasks, rows, rejected, skipped, delivered, duplicates] =
      summary!;
    expect(status).toBe('completed');
    expect({ rows, rejected, skipped, tasks }).toEqual({
      rows: '150',
      rejected: '0',
      skipped: '1',
      tasks: '149',
    });
    expect({ completed, failed, cancelled }).toEqual({ completed: '149', failed: '0', cancelled: '0' });
    expect({ delivered, duplicates }).toEqual({ delivered: '149', duplicates: '0' });
    expect(output()).toMatch(/2,,skipped,0,,opted out,userId,U[d]{31}1/);
    expectEmailCampaign(output(), stateFile);
    expectSmsCampaign(output());
    // The brokers' metric records are CloudWatch's, not the terminal's (SWITCHBOARD_SHOW_METRICS=1).
    expect(output()).not.toMatch(/"CloudWatchMetrics"/);
    child.kill('SIGINT');
    expect(await exited(child)).toBe(0);
    expect(output()).toContain('stopped cleanly');
  });

  // The whole demo (webhooks, a campaign, a call job through Twilio) logging everything, metrics
  // on: every line of every process, Lambdas and brokers, is searched for the demo's secrets.
  it('writes no secret or token to any log line, at debug level with metrics on', async () => {
    const { child, output } = await start(['--messages', '50', '--provider', 'twilio'], {
      webhookDemo: true,
      callJob: true,
      // Metric records printed too (npm start leaves them out unless asked), so they are searched.
      env: { LOG_LEVEL: 'debug', POWERTOOLS_METRICS_DISABLED: 'false', SWITCHBOARD_SHOW_METRICS: '1' },
    });
    await until(
      child,
      () => /job: completed: /.test(output()) && /messages: completed: /.test(output()),
      output,
    );
    child.kill('SIGINT');
    expect(await exited(child)).toBe(0);
    const all = output();
    // Logs and metrics were written (so there was something to search).
    expect(all).toContain('"service":"webhook-receiver"');
    expect(all).toMatch(/"CloudWatchMetrics".*"MessagesSent"/);
    expect(all).toMatch(/"CloudWatchMetrics".*"CallStarts"/);
    const basic = Buffer.from(`${LOCAL_TWILIO.accountSid}:${LOCAL_TWILIO.authToken}`).toString('base64');
    for (const secret of [
      DEMO_CHANNEL.channelSecret,
      DEMO_CHANNEL.accessToken,
      LOCAL_TELEPHONY.callbackSecret,
      LOCAL_TELEPHONY.apiToken,
      LOCAL_TWILIO.authToken,
      basic,
    ]) {
      expect(all.includes(secret), `a log line holds ${secret}`).toBe(false);
    }
  });

  it('keeps DynamoDB data between runs with --data-dir', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'switchboard-data-'));
    try {
      const first = await start(['--data-dir', dir]);
      const doc = (endpoint: string) =>
        makeDocumentClient(
          new DynamoDBClient({ region: 'us-east-1', endpoint, credentials: LOCAL_CREDENTIALS }),
        );
      await doc(first.dynamo).send(
        new PutCommand({
          TableName: 'switchboard-local-control',
          Item: { pk: 'CLIENT#kept', sk: 'PROFILE', n: 1 },
        }),
      );
      first.child.kill('SIGINT');
      expect(await exited(first.child)).toBe(0);

      const second = await start(['--data-dir', dir]);
      const got = await doc(second.dynamo).send(
        new GetCommand({ TableName: 'switchboard-local-control', Key: { pk: 'CLIENT#kept', sk: 'PROFILE' } }),
      );
      expect(got.Item?.n).toBe(1);
      second.child.kill('SIGINT');
      expect(await exited(second.child)).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [['--port', 'abc'], '--port must be a port number'],
    [['--messages', '0'], '--messages must be a whole number ≥ 1, got "0"'],
    [['--emails', '0'], '--emails must be a whole number ≥ 1, got "0"'],
    [['--region', 'XX'], '--region must be a region code such as JP or US, got "XX"'],
  ])('explains a bad option (%j) instead of starting', async (args, explanation) => {
    const child = spawn(process.execPath, ['local/start.ts', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    expect(await exited(child)).toBe(2);
    expect(err).toContain(explanation);
  });
});
