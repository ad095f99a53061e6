/**
 * What must apply to every AWS SDK client Switchboard builds (`aws-clients.ts`): plugins on its
 * middleware stack (the local cloud's record of calls for the IAM conformance check, a bench's
 * meter) and hooks told of it (X-Ray). Apart from the factories, so registering imports no SDK
 * client: a Lambda that builds none (the console) bundles none.
 */

/** A client's resolved configuration, as far as a plugin reads it. */
export interface AwsClientConfig {
  /** The region the client calls (the SDK resolves it to a provider). */
  readonly region?: string | (() => Promise<string>);
}

/**
 * Something that adds middleware to a client's stack (the SDK's `Pluggable`), told the client's
 * configuration (its region: the IAM conformance check names the region a call goes to).
 */
export interface AwsClientPlugin {
  applyToStack(stack: { add: (...args: never[]) => void } & object, config?: AwsClientConfig): void;
}

const plugins: AwsClientPlugin[] = [];

/**
 * Applies `plugin` to every client built by `aws-clients.ts` from now on. Register before the clients
 * are built (before a handler's `main.ts` is imported, or in a `--import` preload).
 */
export function onEveryAwsClient(plugin: AwsClientPlugin): () => void {
  plugins.push(plugin);
  return () => {
    const at = plugins.indexOf(plugin);
    if (at >= 0) plugins.splice(at, 1);
  };
}

type AwsClientHook = (client: never) => unknown;
const hooks: AwsClientHook[] = [];

/**
 * Hands every client built by `aws-clients.ts` from now on to `hook` (X-Ray's
 * `tracer.captureAWSv3Client` in Lambda). Register before the clients are built.
 */
export function onEveryAwsClientBuilt<C>(hook: (client: C) => unknown): void {
  hooks.push(hook as AwsClientHook);
}

/** `client`, with every registered plugin applied and every hook told of it. */
export function withPlugins<C extends { middlewareStack: object; config: object }>(client: C): C {
  for (const plugin of plugins)
    plugin.applyToStack(client.middlewareStack as never, client.config as AwsClientConfig);
  for (const hook of hooks) hook(client as never);
  return client;
}
