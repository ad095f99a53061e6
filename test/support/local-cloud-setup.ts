/**
 * Vitest global setup: starts the local clouds (DynamoDB Local + fauxqs) for the integration and
 * e2e projects and hands their endpoints to the tests through `inject('clouds')`.
 *
 * The integration project gets one local cloud per worker, and a test file uses its worker's
 * (`testCloud()`): DynamoDB Local puts every write of the process behind one lock, and a long
 * campaign in one file made the writes of another wait past DynamoDB Local's lock timeout (a 500
 * that AWS never gives: two fresh-clone CI runs lost tests to it). The e2e files mostly start
 * stacks of their own, so that project shares one.
 *
 * The integration project's tables have no DynamoDB stream (its files read none but one, which
 * makes its own table with one; `LOCAL_STREAMS_ENV` in `local/cloud.ts` says why, and
 * `vitest.config.ts` sets it for the project's own tables).
 */
import type { TestProject } from 'vitest/node';
import { type LocalCloud, type LocalCloudInfo, startLocalCloud } from '#local/cloud.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    clouds: LocalCloudInfo[];
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const workers = Math.max(1, Number(project.globalConfig.maxWorkers) || 1);
  const count = project.name === 'integration' ? workers : 1;
  const started = await Promise.allSettled(
    Array.from({ length: count }, (_, i) =>
      startLocalCloud({ stage: `test${i || ''}`, streams: project.name !== 'integration' }),
    ),
  );
  const clouds = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stopAll = () => Promise.all(clouds.map((c) => c.stop())).then(() => undefined);
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await stopAll();
    throw failed.reason;
  }
  project.provide('clouds', clouds.map(infoOf));
  return stopAll;
}

function infoOf(cloud: LocalCloud): LocalCloudInfo {
  const { fauxqs: _server, env: _env, stop: _stop, ...info } = cloud;
  return info;
}
