/**
 * Which API the CLI talks to, in which region, with which credentials.
 *
 * The API: `--endpoint`, else `$SWITCHBOARD_API_URL`, else the `HttpApiUrl` output of the stack in
 * `cdk-outputs.json` (`cdk deploy --outputs-file`; `--outputs` names another file, `--stack` picks
 * a stack when it holds several), else the `npm start` running in this checkout. `--local` asks for
 * that one outright. The region: `--region`, else the URL's (`{id}.execute-api.{region}.amazonaws.com`),
 * else `$AWS_REGION` / `$AWS_DEFAULT_REGION`. Credentials: the local ones for `npm start`, else the
 * AWS SDK's default provider chain (profiles, SSO, environment, container and instance roles),
 * asked lazily, so `--help` and usage errors never touch them.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { OperatorClientOptions } from '#local/operator-client.ts';
import { type LocalState, localStatePath, readLocalState } from '#local/state-file.ts';
import type { GlobalOptions } from './args.ts';
import { OpsError, UsageError } from './errors.ts';

export interface Target {
  readonly baseUrl: string;
  readonly region: string;
  readonly credentials: OperatorClientOptions['credentials'];
  /** Where the API was found, for messages: `npm start`, `--endpoint`, `cdk-outputs.json (Switchboard-dev)`. */
  readonly source: string;
  readonly local: boolean;
}

export interface TargetEnvironment {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** The running `npm start` (default: the state file it writes). */
  readonly localState?: () => LocalState | undefined;
  /** The AWS SDK's default credential chain (default: `fromNodeProviderChain`, loaded on first use). */
  readonly awsCredentials?: () => OperatorClientOptions['credentials'];
}

/** The output key the CDK app gives the HTTP API's URL (`cdk/constructs/http-api.ts`). */
export const API_URL_OUTPUT = 'HttpApiUrl';

const EXECUTE_API_HOST = /^[a-z0-9]+\.execute-api\.([a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?$/;

/** The region in an API Gateway URL, if it is one. */
export function regionOfUrl(url: string): string | undefined {
  try {
    return EXECUTE_API_HOST.exec(new URL(url).hostname)?.[1];
  } catch {
    return undefined;
  }
}

function checkedUrl(url: string, where: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`${where}: not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
    throw new UsageError(`${where}: not an http(s) URL: ${JSON.stringify(url)}`);
  if (parsed.search || parsed.hash)
    throw new UsageError(`${where}: the API's base URL takes no query: ${parsed.origin}${parsed.pathname}`);
  return url.replace(/\/+$/, '');
}

/** The API URL of the stack in a `cdk deploy --outputs-file` file. */
export function apiUrlFromOutputs(
  text: string,
  file: string,
  stack?: string,
): { url: string; stack: string } {
  let outputs: Record<string, Record<string, unknown>>;
  try {
    outputs = JSON.parse(text) as Record<string, Record<string, unknown>>;
  } catch {
    throw new UsageError(`${file} is not JSON (write it with: npm run cdk -- deploy --outputs-file ${file})`);
  }
  const stacks = Object.entries(outputs ?? {}).filter(
    ([, values]) =>
      typeof values === 'object' && values !== null && typeof values[API_URL_OUTPUT] === 'string',
  );
  if (stack !== undefined) {
    const found = stacks.find(([name]) => name === stack);
    if (!found) {
      throw new UsageError(
        `${file} has no stack ${stack} with ${API_URL_OUTPUT}${stacks.length ? ` (it has ${stacks.map(([n]) => n).join(', ')})` : ''}`,
      );
    }
    return { url: found[1][API_URL_OUTPUT] as string, stack };
  }
  if (stacks.length === 0)
    throw new UsageError(`${file} has no ${API_URL_OUTPUT} output of a Switchboard stack`);
  if (stacks.length > 1) {
    throw new UsageError(
      `${file} has several stacks (${stacks.map(([n]) => n).join(', ')}): pick one with --stack`,
    );
  }
  const [name, values] = stacks[0]!;
  return { url: values[API_URL_OUTPUT] as string, stack: name };
}

/** Where the API is, its region and the credentials to sign with (see the module's comment). */
export function resolveTarget(global: GlobalOptions, environment: TargetEnvironment): Target {
  const { env, cwd } = environment;
  const localState = environment.localState ?? (() => readLocalState(localStatePath(env)));
  const aws = environment.awsCredentials ?? defaultAwsCredentials;

  if (global.local) {
    const state = localState();
    if (!state) {
      throw new OpsError(
        `no npm start is running here (${path.relative(cwd, localStatePath(env)) || localStatePath(env)} is missing or stale): start it with npm start, or give --endpoint`,
      );
    }
    return {
      baseUrl: global.endpoint ? checkedUrl(global.endpoint, '--endpoint') : state.apiUrl,
      region: global.region ?? state.region,
      credentials: state.credentials,
      source: 'npm start',
      local: true,
    };
  }
  const explicit = global.endpoint
    ? { url: checkedUrl(global.endpoint, '--endpoint'), source: '--endpoint' }
    : env.SWITCHBOARD_API_URL
      ? { url: checkedUrl(env.SWITCHBOARD_API_URL, 'SWITCHBOARD_API_URL'), source: 'SWITCHBOARD_API_URL' }
      : undefined;
  const found = explicit ?? fromOutputsFile(global, cwd);
  if (found) {
    const region = global.region ?? regionOfUrl(found.url) ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
    if (!region) {
      throw new UsageError(`which region is ${found.url} in? give --region or set AWS_REGION`);
    }
    return { baseUrl: found.url, region, credentials: aws(), source: found.source, local: false };
  }
  const state = localState();
  if (state) {
    return {
      baseUrl: state.apiUrl,
      region: global.region ?? state.region,
      credentials: state.credentials,
      source: 'npm start',
      local: true,
    };
  }
  throw new UsageError(
    'which API? give --endpoint URL, set SWITCHBOARD_API_URL, deploy with `npm run cdk -- deploy --outputs-file cdk-outputs.json`, or run npm start here',
  );
}

function fromOutputsFile(global: GlobalOptions, cwd: string): { url: string; source: string } | undefined {
  const file = global.outputs ?? 'cdk-outputs.json';
  const full = path.resolve(cwd, file);
  if (!existsSync(full)) {
    if (global.outputs !== undefined) throw new UsageError(`--outputs: no such file ${file}`);
    return undefined;
  }
  const { url, stack } = apiUrlFromOutputs(readFileSync(full, 'utf8'), file, global.stack);
  return { url: checkedUrl(url, `${file} (${stack})`), source: `${file} (${stack})` };
}

/**
 * The SDK's default chain, imported on first use (a local run never loads it). Memoised by the
 * SDK: temporary credentials are refreshed when they near their expiry.
 */
function defaultAwsCredentials(): OperatorClientOptions['credentials'] {
  let provider:
    | (() => Promise<{ accessKeyId: string; secretAccessKey: string; sessionToken?: string }>)
    | undefined;
  return async () => {
    if (!provider) {
      const { fromNodeProviderChain } = await import('@aws-sdk/credential-providers');
      provider = fromNodeProviderChain();
    }
    return provider();
  };
}
