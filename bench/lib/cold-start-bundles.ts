/**
 * Bundles for bench/cold-start, built with esbuild the way `cdk/constructs/function.ts` has CDK
 * build them (ESM for Node 24, minified, linked source map without sources, the `require` shim,
 * the SDK bundled): a function's own entry again, with the metafile on (CDK writes none), to see
 * what its bundle carries; and the baselines, written to a scratch folder, to be imported beside
 * the real bundles.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BuildOptions, build, type Metafile } from 'esbuild';
import { LAMBDA_BUNDLING } from '#cdk/constructs/function.ts';

/** The repository root (the project's `package.json`, lockfile and `node_modules`). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const RECEIVER_BASELINE = fileURLToPath(new URL('./cold-start-baseline-receiver.ts', import.meta.url));

// The options SwitchboardFunction gives NodejsFunction's `bundling` (`LAMBDA_BUNDLING`), as CDK passes them to esbuild.
const CDK_LIKE: BuildOptions = {
  bundle: true,
  platform: 'node',
  target: LAMBDA_BUNDLING.target,
  format: 'esm',
  minify: LAMBDA_BUNDLING.minify,
  keepNames: LAMBDA_BUNDLING.keepNames,
  sourcemap: LAMBDA_BUNDLING.sourceMap,
  sourcesContent: LAMBDA_BUNDLING.sourcesContent,
  mainFields: [...LAMBDA_BUNDLING.mainFields],
  banner: { js: LAMBDA_BUNDLING.banner },
  absWorkingDir: REPO_ROOT,
  logLevel: 'silent',
};

/** What a bundle is made of, by package (or by folder of this repository). */
export interface Contributor {
  readonly name: string;
  readonly bytes: number;
  /** Its largest input file and that file's bytes in the bundle. */
  readonly largest: { readonly file: string; readonly bytes: number };
}

export interface Analysis {
  /** The rebuilt bundle's size (to check it against CDK's). */
  readonly bytes: number;
  readonly contributors: readonly Contributor[];
}

/** Rebuilds `entry` (relative to the repository) as CDK does, in memory, and reads its metafile. */
export async function analyse(entry: string): Promise<Analysis> {
  const outfile = path.join(REPO_ROOT, '.cold-start', 'index.mjs');
  const result = await build({
    ...CDK_LIKE,
    entryPoints: [path.join(REPO_ROOT, entry)],
    outfile,
    write: false,
    metafile: true,
  });
  const output = result.outputFiles.find((file) => file.path === outfile);
  if (!output) throw new Error(`esbuild wrote no ${outfile} for ${entry}`);
  const meta = result.metafile.outputs[path.relative(REPO_ROOT, outfile)];
  if (!meta) throw new Error(`esbuild's metafile has no output for ${entry}`);
  return { bytes: output.contents.byteLength, contributors: contributors(meta) };
}

/** The name an input of the metafile is counted under: its package, or its folder in this repo. */
export function contributorOf(input: string): string {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) {
    const parts = input.split('/');
    return parts.length > 2 ? `${parts[0]}/${parts[1]}/` : input;
  }
  const [scopeOrName, name] = input.slice(at + 'node_modules/'.length).split('/');
  return scopeOrName!.startsWith('@') ? `${scopeOrName}/${name}` : scopeOrName!;
}

function contributors(meta: Metafile['outputs'][string]): Contributor[] {
  const byName = new Map<string, { bytes: number; largest: { file: string; bytes: number } }>();
  for (const [file, { bytesInOutput }] of Object.entries(meta.inputs)) {
    const name = contributorOf(file);
    const entry = byName.get(name) ?? { bytes: 0, largest: { file, bytes: 0 } };
    entry.bytes += bytesInOutput;
    if (bytesInOutput > entry.largest.bytes) entry.largest = { file, bytes: bytesInOutput };
    byName.set(name, entry);
  }
  return [...byName]
    .map(([name, { bytes, largest }]) => ({ name, bytes, largest }))
    .sort((a, b) => b.bytes - a.bytes);
}

// `shared/adapters/aws-clients.ts`'s factories, by the SDK package of the client each builds.
const SDK_FACTORIES: Readonly<Record<string, string>> = {
  makeDynamoClient: '@aws-sdk/client-dynamodb',
  makeDocumentClient: '@aws-sdk/lib-dynamodb',
  makeSqsClient: '@aws-sdk/client-sqs',
  makeConnectClient: '@aws-sdk/client-connect',
  makeSesClient: '@aws-sdk/client-sesv2',
  makeEcsClient: '@aws-sdk/client-ecs',
  makeSecretsManagerClient: '@aws-sdk/client-secrets-manager',
  makeS3Client: '@aws-sdk/client-s3',
  makeS3PresignClient: '@aws-sdk/client-s3',
};
const AWS_CLIENTS = path.join(REPO_ROOT, 'shared/adapters/aws-clients.ts');

/**
 * The SDK packages whose clients a function's `main.ts` builds (through `aws-clients.ts`'s
 * factories): what the function uses, not what its bundle happens to carry (every bundle that
 * imports `aws-clients.ts` carries DynamoDB's client, used or not).
 */
export function sdkPackagesOf(entry: string): string[] {
  const factories = new Set(
    [...readFileSync(AWS_CLIENTS, 'utf8').matchAll(/export function (make\w+Client)\(/g)].map((m) => m[1]!),
  );
  const unknown = [...factories].filter((name) => !(name in SDK_FACTORIES));
  if (unknown.length > 0)
    throw new Error(`bench/lib/cold-start-bundles.ts: add ${unknown.join(', ')} to SDK_FACTORIES`);
  const source = readFileSync(path.join(REPO_ROOT, entry), 'utf8');
  const used = [...source.matchAll(/\b(make\w+Client)\(/g)].map((m) => SDK_FACTORIES[m[1]!]);
  return [...new Set(used.filter((pkg): pkg is string => pkg !== undefined))].sort();
}

/** The client class an SDK client package exports (`./SQSClient` in its `dist-es/index.js`). */
function clientClassOf(pkg: string): string {
  const index = readFileSync(path.join(REPO_ROOT, 'node_modules', pkg, 'dist-es', 'index.js'), 'utf8');
  const name = /export \* from "\.\/(\w+Client)"/.exec(index)?.[1];
  if (!name) throw new Error(`no client class found in ${pkg}`);
  return name;
}

/**
 * A bare handler's source that builds one client of each SDK package in `sdkPackages` at import
 * (the document client over a DynamoDB client for `lib-dynamodb`) and answers at once.
 */
export function clientsBaselineSource(sdkPackages: readonly string[]): string {
  const clients = sdkPackages.filter((pkg) => pkg.startsWith('@aws-sdk/client-'));
  const document = sdkPackages.includes('@aws-sdk/lib-dynamodb');
  if (document && !clients.includes('@aws-sdk/client-dynamodb')) clients.push('@aws-sdk/client-dynamodb');
  const imports = clients.map((pkg) => `import { ${clientClassOf(pkg)} } from '${pkg}';`);
  const built = clients.map((pkg) => `new ${clientClassOf(pkg)}({})`);
  if (document) {
    imports.push("import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';");
    built.push('DynamoDBDocumentClient.from(new DynamoDBClient({}))');
  }
  return [
    ...imports,
    `const clients = [${built.join(', ')}];`,
    'export const handler = async () => ({ statusCode: 200, body: String(clients.length) });',
    '',
  ].join('\n');
}

/** Builds a baseline to `outfile` (with its source map): the receiver's file, or a generated source. */
export async function buildBaseline(
  baseline: { readonly kind: 'receiver' } | { readonly kind: 'clients'; readonly source: string },
  outfile: string,
): Promise<void> {
  await build({
    ...CDK_LIKE,
    ...(baseline.kind === 'receiver'
      ? { entryPoints: [RECEIVER_BASELINE] }
      : {
          stdin: {
            contents: baseline.source,
            resolveDir: REPO_ROOT,
            sourcefile: 'cold-start-baseline.ts',
            loader: 'ts',
          },
        }),
    outfile,
    write: true,
  });
}
