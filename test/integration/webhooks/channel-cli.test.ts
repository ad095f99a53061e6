import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DynamoCallbackSecretStore } from '#shared/adapters/dynamo-callback-secrets.ts';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { liveSecrets } from '#shared/channels/channel.ts';
import { ClientTelephonySecrets } from '#shared/telephony/callback-secrets.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const table = cloud.info.tableNames.channels!;
const store = new DynamoChannelStore(cloud.doc, table);
const SCRIPT = path.resolve(import.meta.dirname, '../../../scripts/channel.ts');
const ROOT = path.resolve(import.meta.dirname, '../../..');
const SECRET = 'c0ffee00c0ffee00c0ffee00c0ffee00';
const NEW_SECRET = 'feedface0000feedface0000feedface';
const TOKEN = 'chAnnel+Access/Token0123456789abcdefghijklmnopqrstuvwxyz=';

const dir = mkdtempSync(path.join(tmpdir(), 'channel-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What an operator sets to reach the local cloud (as the --help says), and nothing else. */
const localEnv = {
  PATH: process.env.PATH ?? '',
  AWS_ENDPOINT_URL_DYNAMODB: cloud.info.dynamoEndpoint,
  AWS_REGION: cloud.info.region,
  AWS_ACCESS_KEY_ID: 'local',
  AWS_SECRET_ACCESS_KEY: 'local',
  CHANNELS_TABLE: table,
};

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(args: string[], options: { env?: Record<string, string>; input?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], {
      cwd: ROOT,
      env: options.env ?? localEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

function channelFile(content: unknown): string {
  const file = path.join(dir, `${uniqueName('channel')}.json`);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

function input(channelId: string, overrides: Record<string, unknown> = {}) {
  return {
    channelId,
    clientId: 'client-a',
    channelSecret: SECRET,
    accessToken: TOKEN,
    autoAnswer: 'reply',
    greeting: 'ようこそ！',
    rules: [{ match: 'contains', pattern: 'help', answer: 'An operator will call', ignoreCase: true }],
    ...overrides,
  };
}

function expectNoSecrets(run: Run, ...secrets: string[]): void {
  for (const secret of [SECRET, NEW_SECRET, TOKEN, ...secrets]) {
    expect(run.stdout).not.toContain(secret);
    expect(run.stderr).not.toContain(secret);
  }
}

async function created(): Promise<string> {
  const channelId = uniqueName('ch');
  const run = await cli(['put', '--file', channelFile(input(channelId))]);
  expect(run.status).toBe(0);
  return channelId;
}

describe('npm run channel', () => {
  it('explains itself, including how to reach the local cloud', async () => {
    const run = await cli(['--help'], { env: { PATH: localEnv.PATH } });
    expect(run.status).toBe(0);
    for (const needed of [
      'put --file FILE',
      'rotate-secret --channel ID --secret S [--grace-hours H]',
      'show --channel ID',
      'AWS_ENDPOINT_URL_DYNAMODB=',
      'AWS_REGION=',
      'AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local',
      'CHANNELS_TABLE=switchboard-local-channels',
    ]) {
      expect(run.stdout).toContain(needed);
    }
  });

  it('says clearly when no table is given', async () => {
    const { CHANNELS_TABLE: _t, ...env } = localEnv;
    const run = await cli(['show', '--channel', 'demo'], { env });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('no channels table: pass --table NAME or set CHANNELS_TABLE');
  });

  it.each([
    [[], 'which command?'],
    [['delete', '--channel', 'x'], 'unknown command "delete"'],
    [['show'], 'show needs --channel'],
    [['put', '--channel', 'x'], 'put takes no --channel'],
    [['show', '--channel', 'x', '--bogus'], "Unknown option '--bogus'"],
  ])('refuses the usage %j with exit status 2', async (args, message) => {
    const run = await cli(args);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(message);
  });

  it('creates a channel from a file and prints it without its secret or token', async () => {
    const channelId = uniqueName('ch');
    const run = await cli(['put', '--file', channelFile(input(channelId))]);
    expect(run.status).toBe(0);
    expectNoSecrets(run);
    const printed = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(printed).toMatchObject({
      channelId,
      clientId: 'client-a',
      autoAnswer: 'reply',
      greeting: 'ようこそ！',
    });
    const stored = await store.get(channelId);
    expect(stored).toMatchObject({ channelId, accessToken: TOKEN, secrets: [{ value: SECRET }] });
  });

  it('replaces a channel with put', async () => {
    const channelId = await created();
    const run = await cli([
      'put',
      '--file',
      channelFile(input(channelId, { autoAnswer: 'push', fallback: 'Sorry?' })),
    ]);
    expect(run.status).toBe(0);
    expect(await store.get(channelId)).toMatchObject({ autoAnswer: 'push', fallback: 'Sorry?' });
  });

  it('prints each invalid field on a line of its own, writes nothing and exits 2', async () => {
    const channelId = uniqueName('ch');
    const file = channelFile(
      input(channelId, {
        clientId: 'bad client',
        channelSecret: 'zq9Kp',
        rules: [{ match: 'regex', pattern: '(', answer: 'x' }],
      }),
    );
    const run = await cli(['put', '--file', file]);
    expect(run.status).toBe(2);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe('invalid channel:');
    expect(lines.slice(1)).toEqual([
      '  clientId: must be 1-64 letters, digits, "_" or "-"',
      '  channelSecret: looks too short for a LINE channel secret',
      expect.stringMatching(/^ {2}rules\.0\.pattern: not a valid regex \(RE2 syntax/),
    ]);
    expectNoSecrets(run, 'zq9Kp');
    expect(await store.get(channelId)).toBeUndefined();
  });

  it('refuses a file that is not JSON without quoting it (it holds a secret)', async () => {
    const file = channelFile(`{"channelSecret": "${SECRET}" "accessToken": "${TOKEN}"}`);
    const run = await cli(['put', '--file', file]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('is not valid JSON');
    expectNoSecrets(run);
  });

  it('refuses a file that does not exist', async () => {
    const run = await cli(['put', '--file', path.join(dir, 'missing.json')]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('cannot read');
  });

  it('shows a channel masked, and says when there is none', async () => {
    const channelId = await created();
    const run = await cli(['show', '--channel', channelId]);
    expect(run.status).toBe(0);
    expectNoSecrets(run);
    expect(JSON.parse(run.stdout)).toMatchObject({ channelId, rules: [{ pattern: 'help' }] });

    const missing = await cli(['show', '--channel', 'no-such-channel']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(`no channel no-such-channel in ${table}`);
  });

  it('rotates a secret: both verify during the grace period, only the new one after', async () => {
    const channelId = await created();
    const before = Date.now();
    const run = await cli([
      'rotate-secret',
      '--channel',
      channelId,
      '--secret',
      NEW_SECRET,
      '--grace-hours',
      '2',
    ]);
    expect(run.status).toBe(0);
    expectNoSecrets(run);
    const stored = (await store.get(channelId))!;
    const retiresAt = stored.secrets[1]!.retiresAt!;
    expect(retiresAt).toBeGreaterThanOrEqual(before + 2 * 3600_000);
    expect(liveSecrets(stored, retiresAt - 1)).toEqual([NEW_SECRET, SECRET]);
    expect(liveSecrets(stored, retiresAt)).toEqual([NEW_SECRET]);
    expect((JSON.parse(run.stdout) as { secrets: unknown[] }).secrets).toHaveLength(2);
  });

  it('reads the new secret from standard input when given "-"', async () => {
    const channelId = await created();
    const run = await cli(['rotate-secret', '--channel', channelId, '--secret', '-'], {
      input: `${NEW_SECRET}\n`,
    });
    expect(run.status).toBe(0);
    expect(liveSecrets((await store.get(channelId))!, Date.now())).toEqual([NEW_SECRET, SECRET]);
  });

  it('refuses a rotation to a secret that is too short, or with a bad grace period', async () => {
    const channelId = await created();
    const short = await cli(['rotate-secret', '--channel', channelId, '--secret', 'short']);
    expect(short.status).toBe(2);
    expect(short.stderr).toContain('  channelSecret: looks too short for a LINE channel secret');
    const grace = await cli([
      'rotate-secret',
      '--channel',
      channelId,
      '--secret',
      NEW_SECRET,
      '--grace-hours',
      'soon',
    ]);
    expect(grace.status).toBe(2);
    expect(grace.stderr).toContain('--grace-hours must be a number of hours ≥ 0');
    expect((await store.get(channelId))!.secrets).toEqual([{ value: SECRET }]);
  });

  it('fails a rotation of a channel that does not exist', async () => {
    const run = await cli(['rotate-secret', '--channel', 'no-such-channel', '--secret', NEW_SECRET]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('no channel no-such-channel');
  });

  it('takes the table from --table when the environment has none', async () => {
    const channelId = await created();
    const { CHANNELS_TABLE: _t, ...env } = localEnv;
    const run = await cli(['show', '--channel', channelId, '--table', table], { env });
    expect(run.status).toBe(0);
  });

  it('reports a DynamoDB failure (a table that does not exist) with exit status 1', async () => {
    const run = await cli(['show', '--channel', 'demo', '--table', 'switchboard-nowhere-channels']);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('ResourceNotFoundException');
  });
});

describe('npm run channel: the telephony callback secret', () => {
  it('sets it from stdin, keeps the previous one 24 h, shows it masked, and refuses a short one', async () => {
    const provider = `p-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const first = 'first-callback-secret-0123456789';
    const second = 'second-callback-secret-0123456789';
    const set = async (secret: string) =>
      cli(['put-callback-secret', '--provider', provider, '--secret', '-'], { input: `${secret}\n` });
    expect((await set(first)).status).toBe(0);
    const rotated = await set(second);
    expect(rotated.status).toBe(0);
    expect(rotated.stderr).toMatch(/previous one verifies until/);
    const secrets = new DynamoCallbackSecretStore(cloud.doc, table);
    const record = await secrets.get(provider);
    expect(record).toMatchObject({ current: second, previous: first });
    const shown = await cli(['show-callback-secret', '--provider', provider]);
    expect(shown.status).toBe(0);
    for (const run of [rotated, shown])
      expect(`${run.stdout}${run.stderr}`).not.toMatch(/callback-secret-0123/);
    const short = await set('short');
    expect(short.status).toBe(2);
    expect(short.stderr).toContain('invalid callback secret: secret:');
    expect((await cli(['show-callback-secret', '--provider', 'nobody-here'])).status).toBe(1);
  });
});

describe("npm run channel: a client's telephony secret (its Twilio auth token)", () => {
  it('stores it where the broker and the status route read it, never prints it, and refuses a bad client id', async () => {
    const clientId = `twilio-${process.pid}`;
    const token = '0123456789abcdef0123456789abcdef';
    const set = await cli(
      ['put-telephony-secret', '--client', clientId, '--secret', '-', '--grace-hours', '0'],
      {
        input: `${token}\n`,
      },
    );
    expect(set.status).toBe(0);
    const secrets = new ClientTelephonySecrets({
      store: new DynamoCallbackSecretStore(cloud.doc, table),
      clock: { now: Date.now },
    });
    expect(await secrets.current(clientId)).toBe(token);
    const shown = await cli(['show-telephony-secret', '--client', clientId]);
    expect(shown.status).toBe(0);
    for (const run of [set, shown]) expect(`${run.stdout}${run.stderr}`).not.toContain(token);
    expect((await cli(['put-telephony-secret', '--client', 'no/slashes', '--secret', token])).status).toBe(2);
    expect((await cli(['show-telephony-secret', '--client', 'nobody-here'])).status).toBe(1);
  });
});
