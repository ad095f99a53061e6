/**
 * Vitest global setup: starts one local cloud (DynamoDB Local + fauxqs) for the integration and
 * e2e projects and hands its endpoints to the tests through `inject('cloud')`.
 */
import type { TestProject } from 'vitest/node';
import { type LocalCloudInfo, startLocalCloud } from '#local/cloud.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    cloud: LocalCloudInfo;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cloud = await startLocalCloud({ stage: 'test' });
  const { fauxqs: _server, env: _env, stop: _stop, ...info } = cloud;
  project.provide('cloud', info);
  return () => cloud.stop();
}
