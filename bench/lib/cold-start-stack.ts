/**
 * The synthesized stack as bench/cold-start sees it: every `AWS::Lambda::Function` of the template
 * in `cdk.out`, its bundled asset (`Metadata["aws:asset:path"]`, the folder CDK's esbuild wrote
 * `index.mjs` to), its spec in `shared/functions.ts`, and the environment Lambda would give it — the
 * function's own variables (references to resources become placeholder names, URLs the AWS stub)
 * plus the variables Lambda's runtime sets.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { type FunctionSpec, functions, outcomeFunctions } from '#shared/functions.ts';

/** A function of the template whose bundle Switchboard builds. */
export interface StackFunction {
  readonly logicalId: string;
  readonly spec: FunctionSpec;
  /** The bundle CDK wrote: `cdk.out/asset.<hash>/index.mjs`. */
  readonly bundle: string;
  /** The function's own variables as the template sets them (unresolved references kept). */
  readonly variables: Readonly<Record<string, unknown>>;
  /** The asset folder of the function's layer (mounted at `/opt` in Lambda), if it has one. */
  readonly layerDir?: string;
}

/** A function of the template that is not Switchboard's (CDK's custom resource handlers). */
export interface OtherFunction {
  readonly logicalId: string;
  readonly reason: string;
}

interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly Metadata?: Record<string, unknown>;
}

const SPECS: readonly FunctionSpec[] = [...Object.values(functions), ...Object.values(outcomeFunctions)];

/** The stack's template in `cdkOut` (the one `*.template.json`; `npm run synth` writes it). */
export function readTemplate(cdkOut: string): { file: string; resources: Record<string, TemplateResource> } {
  if (!existsSync(cdkOut)) throw new Error(`${cdkOut} is missing: run \`npm run synth\` first`);
  const templates = readdirSync(cdkOut).filter((name) => name.endsWith('.template.json'));
  if (templates.length !== 1)
    throw new Error(`expected one stack template in ${cdkOut}, found ${templates.join(', ') || 'none'}`);
  const file = path.join(cdkOut, templates[0]!);
  const template = JSON.parse(readFileSync(file, 'utf8')) as { Resources: Record<string, TemplateResource> };
  return { file, resources: template.Resources };
}

/** The template's Lambda functions: Switchboard's with their bundles, and the others. */
export function stackFunctions(cdkOut: string): {
  readonly template: string;
  readonly synthesizedAt: Date;
  readonly functions: readonly StackFunction[];
  readonly others: readonly OtherFunction[];
} {
  const { file, resources } = readTemplate(cdkOut);
  const found: StackFunction[] = [];
  const others: OtherFunction[] = [];
  for (const [logicalId, resource] of Object.entries(resources)) {
    if (resource.Type !== 'AWS::Lambda::Function') continue;
    const description = resource.Properties?.Description;
    // SwitchboardFunction describes every function as `Switchboard <spec id>`.
    const id = typeof description === 'string' ? /^Switchboard (\S+)$/.exec(description)?.[1] : undefined;
    const spec = SPECS.find((s) => s.id === id);
    const assetPath = resource.Metadata?.['aws:asset:path'];
    if (!spec || typeof assetPath !== 'string') {
      others.push({ logicalId, reason: "CDK's own handler, not a Switchboard bundle" });
      continue;
    }
    const bundle = path.join(cdkOut, assetPath, 'index.mjs');
    if (!existsSync(bundle)) throw new Error(`${logicalId}: ${bundle} is missing: run \`npm run synth\``);
    const environment = resource.Properties?.Environment as
      | { Variables?: Record<string, unknown> }
      | undefined;
    const layerDir = layerOf(cdkOut, resources, resource);
    found.push({
      logicalId,
      spec,
      bundle,
      variables: environment?.Variables ?? {},
      ...(layerDir ? { layerDir } : {}),
    });
  }
  return { template: file, synthesizedAt: statSync(file).mtime, functions: found, others };
}

/** The asset folder of the function's one layer, if it has one (mounted at `/opt` in Lambda). */
function layerOf(
  cdkOut: string,
  resources: Record<string, TemplateResource>,
  fn: TemplateResource,
): string | undefined {
  const layers = (fn.Properties?.Layers ?? []) as { Ref?: string }[];
  const ref = layers[0]?.Ref;
  const assetPath = ref ? resources[ref]?.Metadata?.['aws:asset:path'] : undefined;
  return typeof assetPath === 'string' ? path.join(cdkOut, assetPath) : undefined;
}

const kebab = (name: string) => name.toLowerCase().replaceAll('_', '-');

/**
 * A value for a variable the template sets from a resource (a table's name, a queue's URL, a
 * secret's ARN): a name of the same shape, the AWS stub's address for URLs.
 */
function placeholder(name: string, stubUrl: string, region: string): string {
  if (name.endsWith('_QUEUE_URL')) return `${stubUrl}/000000000000/switchboard-bench-${kebab(name)}`;
  if (name.endsWith('_URL')) return `${stubUrl}/${kebab(name)}`;
  if (name.endsWith('_ARN'))
    return `arn:aws:secretsmanager:${region}:000000000000:secret:switchboard-bench-${kebab(name)}`;
  return `switchboard-bench-${kebab(name)}`;
}

/** The environment a fresh Lambda execution environment gives `fn`, its SDK calls sent to the stub. */
export function lambdaEnvironment(
  fn: StackFunction,
  options: { readonly stubUrl: string; readonly region: string; readonly nodeDir: string },
): Record<string, string> {
  const name = `switchboard-bench-${fn.spec.id}`;
  const variables: Record<string, string> = {};
  for (const [key, value] of Object.entries(fn.variables)) {
    if (typeof value !== 'string') variables[key] = placeholder(key, options.stubUrl, options.region);
    else if (fn.layerDir && value.startsWith('/opt/'))
      variables[key] = path.join(fn.layerDir, value.slice('/opt/'.length));
    else variables[key] = value;
  }
  return {
    // What Lambda's Node.js runtime sets (the documented reserved variables), trimmed to those read.
    PATH: `${options.nodeDir}:/usr/local/bin:/usr/bin:/bin`,
    LANG: 'en_US.UTF-8',
    TZ: ':UTC',
    AWS_REGION: options.region,
    AWS_DEFAULT_REGION: options.region,
    AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs24.x',
    AWS_LAMBDA_FUNCTION_NAME: name,
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.spec.memoryMb),
    AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${name}`,
    AWS_LAMBDA_LOG_STREAM_NAME: 'bench/[$LATEST]cold-start',
    LAMBDA_TASK_ROOT: path.dirname(fn.bundle),
    _HANDLER: 'index.handler',
    AWS_ACCESS_KEY_ID: 'ASIABENCHCOLDSTART00',
    AWS_SECRET_ACCESS_KEY: 'bench-cold-start-secret-access-key',
    AWS_SESSION_TOKEN: 'bench-cold-start-session-token',
    // Active tracing: the daemon's address, and the invocation's trace header, not sampled, so
    // the X-Ray SDK loads and wraps as in AWS but sends nothing.
    AWS_XRAY_DAEMON_ADDRESS: '127.0.0.1:2000',
    AWS_XRAY_CONTEXT_MISSING: 'LOG_ERROR',
    _X_AMZN_TRACE_ID: 'Root=1-6650a1b2-0123456789abcdef01234567;Parent=0123456789abcdef;Sampled=0',
    // Not Lambda's: every SDK client of the bundle calls the stub.
    AWS_ENDPOINT_URL: options.stubUrl,
    ...variables,
  };
}
