/**
 * The whole of Switchboard on the local cloud: what `npm start` runs and what end-to-end tests
 * and benchmarks start. Handlers are the very modules deployed to Lambda; they read the same
 * environment variables, here pointed at the emulators.
 */

import { routes } from '#shared/routes.ts';
import { type ApiGatewayServer, startApiGateway } from './api-gateway.ts';
import { type LocalCloud, startLocalCloud } from './cloud.ts';

export interface LocalStackOptions {
  readonly dataDir?: string;
  /** HTTP API port (0: a free one). */
  readonly port?: number;
  /** Create the demo channel and play a few webhooks through it. */
  readonly demo?: boolean;
  readonly stage?: string;
  readonly log?: (line: string) => void;
}

export interface LocalStack {
  readonly cloud: LocalCloud;
  readonly api: ApiGatewayServer;
  stop(): Promise<void>;
}

/** Starts the local cloud, then everything that runs on it. */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const log = options.log ?? (() => {});
  const cloud = await startLocalCloud({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    stage: options.stage ?? 'local',
    log,
  });
  // Handlers read their configuration from the environment once, at import: set it first.
  Object.assign(process.env, cloud.env());
  const stoppers: (() => Promise<void>)[] = [];
  try {
    const api = await startApiGateway({
      routes,
      functions: {},
      port: options.port ?? 0,
      onError: (error, route) => log(`${route} failed: ${(error as Error).stack ?? String(error)}`),
    });
    stoppers.push(() => api.stop());
    log(`HTTP API        ${api.url} (API Gateway stand-in, payload v2)`);
    for (const route of routes) log(`  ${route.method.padEnd(5)} ${api.url}${route.path}`);

    return {
      cloud,
      api,
      stop: async () => {
        for (const stop of stoppers.reverse()) await stop().catch(() => {});
        await cloud.stop();
      },
    };
  } catch (error) {
    for (const stop of stoppers.reverse()) await stop().catch(() => {});
    await cloud.stop();
    throw error;
  }
}
