/**
 * The local fleet with the real broker (`node worker/main.ts`) on tables of its own: brokers
 * start and report ready, a deploy makes the old version drain through the work list, and a
 * scale-in ends them cleanly. No work is loaded, so no call is placed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { type EcsAgentEndpoint, startEcsAgent } from '#local/ecs-agent.ts';
import { type LocalFleet, startLocalFleet } from '#local/ecs-service.ts';
import { publishDesiredVersion } from '#shared/adapters/dynamo-fleet.ts';
import { tableSpec } from '#shared/resources.ts';
import { type TestCloud, testCloud } from '../../support/cloud.ts';

let cloud: TestCloud;
let agent: EcsAgentEndpoint;
let fleet: LocalFleet;
const output: string[] = [];

beforeAll(async () => {
  cloud = testCloud();
  const stage = `rb${process.pid % 100000}${Math.random().toString(36).slice(2, 6)}`;
  const controlTable = await createTable(cloud.ddb, stage, tableSpec('control'));
  const tasksTable = await createTable(cloud.ddb, stage, tableSpec('tasks'));
  agent = await startEcsAgent();
  fleet = startLocalFleet({
    agent,
    version: 'v1',
    env: {
      ...cloud.env,
      CONTROL_TABLE: controlTable,
      TASKS_TABLE: tasksTable,
      TELEPHONY_API_URL: 'http://127.0.0.1:9',
      TELEPHONY_API_TOKEN: 'unused',
      CALL_STATUS_CALLBACK_URL: 'http://127.0.0.1:9/providers/sandbox/calls/status',
      LEASE_MS: '3000',
      BROKER_IDLE_WAIT_MS: '100',
      LOG_LEVEL: 'warn',
    },
    stopTimeoutMs: 15_000,
    reconcileIntervalMs: 100,
    onDeploy: publishDesiredVersion(cloud.doc, controlTable),
    onOutput: (id, line) => output.push(`${id} ${line}`),
  });
  await publishDesiredVersion(cloud.doc, controlTable)('v1');
});

afterAll(async () => {
  await fleet?.stop();
  await agent?.stop();
  cloud?.ddb.destroy();
});

const readyOf = (f: LocalFleet, version: string) =>
  f.running().filter((b) => b.state === 'ready' && b.version === version);

describe('the local fleet running the real broker', () => {
  it('starts, rolls to a new version and scales in without a forced stop', async () => {
    await fleet.setDesiredCount(2);
    await fleet
      .waitUntil((f) => readyOf(f, 'v1').length === 2, 60_000)
      .catch((error: unknown) => {
        throw new Error(`${String(error)}\n${output.slice(-20).join('\n')}`);
      });
    expect(readyOf(fleet, 'v1').every((b) => b.httpUrl?.startsWith('http://'))).toBe(true);

    await fleet.deploy('v2');
    await fleet.waitUntil(
      (f) => f.running().every((b) => b.version === 'v2') && readyOf(f, 'v2').length === 2,
      60_000,
    );

    await fleet.setDesiredCount(0);
    await fleet.waitUntil((f) => f.running().length === 0, 60_000);

    expect(fleet.stops.every((s) => !s.protected)).toBe(true);
    expect(fleet.exits).toHaveLength(4);
    expect(fleet.exits.every((e) => e.code === 0 && !e.forced)).toBe(true);
  });
});
