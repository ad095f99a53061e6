import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type EcsAgentEndpoint, startEcsAgent } from '#local/ecs-agent.ts';
import {
  type BrokerInfo,
  type LocalFleet,
  type LocalFleetOptions,
  startLocalFleet,
} from '#local/ecs-service.ts';

const FAKE_BROKER = 'test/fixtures/fleet/fake-broker.ts';

let dir: string;
let agent: EcsAgentEndpoint;
let fleet: LocalFleet | undefined;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchboard-fleet-'));
  agent = await startEcsAgent();
});

afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
  await agent.stop();
  rmSync(dir, { recursive: true, force: true });
});

function start(options: Partial<LocalFleetOptions> = {}): LocalFleet {
  const fleetFile = join(dir, 'fleet.json');
  writeFileSync(fleetFile, JSON.stringify({ desiredVersion: options.version ?? 'v1' }));
  fleet = startLocalFleet({
    agent,
    env: { FAKE_FLEET_FILE: fleetFile },
    version: 'v1',
    script: FAKE_BROKER,
    stopTimeoutMs: 10_000,
    reconcileIntervalMs: 50,
    onDeploy: async (version) => writeFileSync(fleetFile, JSON.stringify({ desiredVersion: version })),
    ...options,
  });
  return fleet;
}

const ready = (f: LocalFleet) => f.running().filter((b) => b.state === 'ready');

async function call(broker: BrokerInfo, action: 'start' | 'end'): Promise<number> {
  const res = await fetch(`${broker.httpUrl}/calls/${action}`, { method: 'POST' });
  return res.status;
}

describe('the local broker service', () => {
  it('starts brokers up to the desired count, each with its own task-protection URI', async () => {
    const f = start();

    await f.setDesiredCount(3);
    await f.waitUntil((x) => ready(x).length === 3);

    const brokers = ready(f);
    expect(new Set(brokers.map((b) => b.agentUri)).size).toBe(3);
    const states = await Promise.all(brokers.map(async (b) => (await fetch(`${b.httpUrl}/state`)).json()));
    expect(states.map((s) => (s as { agentUri: string }).agentUri).sort()).toEqual(
      brokers.map((b) => b.agentUri).sort(),
    );
    expect(states.every((s) => (s as { version: string }).version === 'v1')).toBe(true);
  });

  it('on scale-in stops only unprotected brokers, and a busy one once its calls have ended', async () => {
    const f = start();
    await f.setDesiredCount(3);
    await f.waitUntil((x) => ready(x).length === 3);
    const [busy1, busy2, idle] = ready(f) as [BrokerInfo, BrokerInfo, BrokerInfo];
    expect(await call(busy1, 'start')).toBe(200);
    expect(await call(busy2, 'start')).toBe(200);

    await f.setDesiredCount(0);
    await f.waitUntil(() => f.exits.some((e) => e.brokerId === idle.brokerId));
    f.reconcile();
    f.reconcile();

    expect(f.stops.map((s) => s.brokerId)).toEqual([idle.brokerId]);
    expect(
      f
        .running()
        .map((b) => b.brokerId)
        .sort(),
    ).toEqual([busy1.brokerId, busy2.brokerId].sort());

    await call(busy1, 'end');
    await f.waitUntil(() => f.exits.some((e) => e.brokerId === busy1.brokerId));
    await call(busy2, 'end');
    await f.waitUntil((x) => x.running().length === 0);

    expect(f.stops.every((s) => !s.protected)).toBe(true);
    expect(f.exits.every((e) => e.code === 0 && !e.forced)).toBe(true);
  });

  it('waits when every surplus broker is protected, as ECS does', async () => {
    const f = start();
    await f.setDesiredCount(1);
    await f.waitUntil((x) => ready(x).length === 1);
    const [broker] = ready(f) as [BrokerInfo];
    await call(broker, 'start');

    await f.setDesiredCount(0);
    for (let i = 0; i < 5; i++) f.reconcile();

    expect(f.stops).toEqual([]);
    expect(f.running().map((b) => b.state)).toEqual(['ready']);

    await call(broker, 'end');
    await f.waitUntil((x) => x.running().length === 0);
    expect(f.stops).toEqual([expect.objectContaining({ reason: 'scale-in', protected: false })]);
  });

  it('rolls to a new version: new brokers start, old ones drain, none is stopped while protected', async () => {
    const f = start();
    await f.setDesiredCount(2);
    await f.waitUntil((x) => ready(x).length === 2);
    const [busy, idle] = ready(f) as [BrokerInfo, BrokerInfo];
    await call(busy, 'start');

    await f.deploy('v2');
    await f.waitUntil((x) => ready(x).filter((b) => b.version === 'v2').length === 2);
    await f.waitUntil(() => f.exits.some((e) => e.brokerId === idle.brokerId));

    // The busy old broker drains: it takes no new call and keeps the one in flight.
    expect(f.running().some((b) => b.brokerId === busy.brokerId)).toBe(true);
    expect(await call(busy, 'start')).toBe(409);

    await call(busy, 'end');
    await f.waitUntil((x) => x.running().every((b) => b.version === 'v2'));

    expect(f.stops.every((s) => !s.protected)).toBe(true);
    expect(f.exits.filter((e) => e.version === 'v1')).toEqual([
      expect.objectContaining({ brokerId: idle.brokerId, code: 0, forced: false }),
      expect.objectContaining({ brokerId: busy.brokerId, code: 0, forced: false }),
    ]);
    expect(ready(f).map((b) => b.version)).toEqual(['v2', 'v2']);
  });

  it('sends SIGKILL when a broker outlives the stop timeout, and records it', async () => {
    const f = start({ stopTimeoutMs: 300, envFor: () => ({ FAKE_IGNORE_SIGTERM: '1' }) });
    await f.setDesiredCount(1);
    await f.waitUntil((x) => ready(x).length === 1);
    const [broker] = ready(f) as [BrokerInfo];

    await f.setDesiredCount(0);
    await f.waitUntil((x) => x.running().length === 0);

    expect(f.stops).toEqual([
      expect.objectContaining({
        brokerId: broker.brokerId,
        signal: 'SIGTERM',
        reason: 'scale-in',
        protected: false,
      }),
    ]);
    expect(f.exits).toEqual([
      expect.objectContaining({ brokerId: broker.brokerId, signal: 'SIGKILL', forced: true }),
    ]);
  });

  it('a drill kill is recorded with the protection it cut, and the service replaces the broker', async () => {
    const f = start();
    await f.setDesiredCount(1);
    await f.waitUntil((x) => ready(x).length === 1);
    const [broker] = ready(f) as [BrokerInfo];
    await call(broker, 'start');

    f.kill(broker.brokerId, 'SIGKILL');
    await f.waitUntil((x) => ready(x).length === 1 && ready(x)[0]!.brokerId !== broker.brokerId);

    expect(f.stops).toEqual([
      expect.objectContaining({
        brokerId: broker.brokerId,
        reason: 'kill',
        signal: 'SIGKILL',
        protected: true,
      }),
    ]);
    expect(f.exits).toEqual([expect.objectContaining({ brokerId: broker.brokerId, signal: 'SIGKILL' })]);
  });

  it('refuses a desired count that is not a whole number', async () => {
    await expect(start().setDesiredCount(-1)).rejects.toThrow(/whole number/);
  });
});
