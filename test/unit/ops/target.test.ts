import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LocalState } from '#local/state-file.ts';
import type { GlobalOptions } from '../../../scripts/ops/args.ts';
import { apiUrlFromOutputs, regionOfUrl, resolveTarget } from '../../../scripts/ops/target.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'ops-target-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const LOCAL: LocalState = {
  apiUrl: 'http://127.0.0.1:3000',
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  pid: 1,
  startedAt: '2026-11-20T00:00:00.000Z',
};
const AWS = async () => ({ accessKeyId: 'AKID', secretAccessKey: 'from-the-chain' });
const API = 'https://abc123.execute-api.ap-northeast-1.amazonaws.com';

function target(
  global: Partial<GlobalOptions>,
  options: { env?: Record<string, string>; cwd?: string; local?: LocalState } = {},
) {
  return resolveTarget(
    { local: false, json: false, ...global },
    {
      env: options.env ?? {},
      cwd: options.cwd ?? dir,
      localState: () => options.local,
      awsCredentials: () => AWS,
    },
  );
}

describe('where the CLI finds the API', () => {
  it('reads the region of an API Gateway URL', () => {
    expect(regionOfUrl(API)).toBe('ap-northeast-1');
    expect(regionOfUrl('https://api.example.com')).toBeUndefined();
    expect(regionOfUrl('not a url')).toBeUndefined();
  });

  it('takes --endpoint first, then SWITCHBOARD_API_URL, signing with the AWS chain', () => {
    expect(target({ endpoint: `${API}/` }, { local: LOCAL })).toEqual({
      baseUrl: API,
      region: 'ap-northeast-1',
      credentials: AWS,
      source: '--endpoint',
      local: false,
    });
    const fromEnv = target(
      {},
      { env: { SWITCHBOARD_API_URL: 'https://api.example.com', AWS_REGION: 'eu-west-1' } },
    );
    expect(fromEnv).toMatchObject({
      baseUrl: 'https://api.example.com',
      region: 'eu-west-1',
      source: 'SWITCHBOARD_API_URL',
    });
    expect(() => target({ endpoint: 'https://api.example.com' })).toThrow(
      'which region is https://api.example.com in? give --region or set AWS_REGION',
    );
    expect(() => target({ endpoint: 'ftp://x' })).toThrow('--endpoint: not an http(s) URL: "ftp://x"');
  });

  it("reads the stack's HttpApiUrl from cdk-outputs.json", () => {
    const cwd = mkdtempSync(path.join(dir, 'outputs-'));
    writeFileSync(
      path.join(cwd, 'cdk-outputs.json'),
      JSON.stringify({ 'Switchboard-dev': { HttpApiUrl: API, WebhookUrl: 'x' } }),
    );
    expect(target({}, { cwd, local: LOCAL })).toMatchObject({
      baseUrl: API,
      region: 'ap-northeast-1',
      source: 'cdk-outputs.json (Switchboard-dev)',
      local: false,
    });
    const two = JSON.stringify({
      'Switchboard-dev': { HttpApiUrl: API },
      'Switchboard-prod': { HttpApiUrl: API },
    });
    expect(() => apiUrlFromOutputs(two, 'o.json')).toThrow(
      'o.json has several stacks (Switchboard-dev, Switchboard-prod): pick one with --stack',
    );
    expect(apiUrlFromOutputs(two, 'o.json', 'Switchboard-prod').stack).toBe('Switchboard-prod');
    expect(() => apiUrlFromOutputs('{}', 'o.json')).toThrow(
      'o.json has no HttpApiUrl output of a Switchboard stack',
    );
    expect(() => target({ outputs: 'missing.json' })).toThrow('--outputs: no such file missing.json');
  });

  it('falls back to the running npm start, with its own credentials; --local asks for it', () => {
    expect(target({}, { local: LOCAL })).toEqual({
      baseUrl: 'http://127.0.0.1:3000',
      region: 'us-east-1',
      credentials: LOCAL.credentials,
      source: 'npm start',
      local: true,
    });
    expect(target({ local: true, endpoint: 'http://127.0.0.1:4000' }, { local: LOCAL })).toMatchObject({
      baseUrl: 'http://127.0.0.1:4000',
      credentials: LOCAL.credentials,
    });
    expect(() => target({ local: true })).toThrow(/^no npm start is running here/);
    expect(() => target({})).toThrow(/^which API\? give --endpoint URL, set SWITCHBOARD_API_URL/);
  });
});
