import { afterEach, describe, expect, it } from 'vitest';

interface AgentAnswer {
  protection: { ExpirationDate: string | null; ProtectionEnabled: boolean; TaskArn: string };
  error: { Arn?: string; Code: string; Message: string };
}

import { type EcsAgentEndpoint, startEcsAgent } from '#local/ecs-agent.ts';

let agent: EcsAgentEndpoint | undefined;
afterEach(async () => {
  await agent?.stop();
  agent = undefined;
});

const T0 = Date.parse('2026-01-05T03:00:00Z');

async function put(uri: string, body: unknown) {
  const res = await fetch(`${uri}/task-protection/v1/state`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    body: (await res.json()) as AgentAnswer,
  };
}

async function get(uri: string) {
  const res = await fetch(`${uri}/task-protection/v1/state`);
  return { status: res.status, body: (await res.json()) as AgentAnswer };
}

describe('the local ECS agent task-protection endpoint', () => {
  it('protects a task for the minutes asked and answers as the agent does', async () => {
    let now = T0;
    agent = await startEcsAgent({ clock: { now: () => now } });
    const uri = agent.register('b1');

    const res = await put(uri, { ProtectionEnabled: true, ExpiresInMinutes: 5 });

    expect(res.status).toBe(200);
    expect(res.type).toBe('application/json');
    expect(res.body).toEqual({
      protection: {
        ExpirationDate: '2026-01-05T03:05:00.000Z',
        ProtectionEnabled: true,
        TaskArn: agent.taskArn('b1'),
      },
    });
    expect(agent.isProtected('b1')).toBe(true);
    expect((await get(uri)).body.protection.ProtectionEnabled).toBe(true);

    now = T0 + 5 * 60_000;
    expect(agent.isProtected('b1')).toBe(false);
    expect((await get(uri)).body).toEqual({
      protection: { ExpirationDate: null, ProtectionEnabled: false, TaskArn: agent.taskArn('b1') },
    });
  });

  it('protects for 120 minutes when no expiry is given, and releases on request', async () => {
    agent = await startEcsAgent({ clock: { now: () => T0 } });
    const uri = agent.register('b1');

    await put(uri, { ProtectionEnabled: true });
    expect(agent.protection('b1').expiresAt).toBe(T0 + 120 * 60_000);

    const off = await put(uri, { ProtectionEnabled: false });
    expect(off.body.protection).toMatchObject({ ProtectionEnabled: false, ExpirationDate: null });
    expect(agent.isProtected('b1')).toBe(false);
    expect(agent.updates.map((u) => u.enabled)).toEqual([true, false]);
  });

  it('keeps each broker apart', async () => {
    agent = await startEcsAgent();
    const a = agent.register('a');
    agent.register('b');

    await put(a, { ProtectionEnabled: true, ExpiresInMinutes: 1 });

    expect([agent.isProtected('a'), agent.isProtected('b')]).toEqual([true, false]);
  });

  it.each([0, 2881])('refuses ExpiresInMinutes %i (1 to 2,880 only) and changes nothing', async (minutes) => {
    agent = await startEcsAgent();
    const uri = agent.register('b1');

    const res = await put(uri, { ProtectionEnabled: true, ExpiresInMinutes: minutes });

    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ Arn: agent.taskArn('b1'), Code: 'InvalidParameterException' });
    expect(agent.isProtected('b1')).toBe(false);
  });

  it.each([
    ['a body that is not JSON', '{'],
    ['a wrong type', { ProtectionEnabled: true, ExpiresInMinutes: 'five' }],
    ['an unknown field', { ProtectionEnabled: true, Minutes: 5 }],
  ])('refuses %s as undecodable', async (_, body) => {
    agent = await startEcsAgent();
    const uri = agent.register('b1');

    const res = await put(uri, body);

    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      Code: 'InvalidParameterException',
      Message: 'UpdateTaskProtection: failed to decode request',
    });
  });

  it('refuses a request without ProtectionEnabled', async () => {
    agent = await startEcsAgent();
    const uri = agent.register('b1');

    const res = await put(uri, { ExpiresInMinutes: 5 });

    expect(res.status).toBe(400);
    expect(res.body.error.Message).toBe("Invalid request: does not contain 'ProtectionEnabled' field");
  });

  it('answers 404 for a task it does not know, as for a broker that has exited', async () => {
    agent = await startEcsAgent();
    const uri = agent.register('gone');
    agent.forget('gone');

    const res = await put(uri, { ProtectionEnabled: true });

    expect(res.status).toBe(404);
    expect(res.body.error).toEqual({
      Code: 'ResourceNotFoundException',
      Message: 'Invalid request: no task was found',
    });
  });

  it('injects server errors for drills, then recovers', async () => {
    agent = await startEcsAgent();
    const uri = agent.register('b1');
    agent.failNext(1, 503);

    expect((await put(uri, { ProtectionEnabled: true })).status).toBe(503);
    expect((await put(uri, { ProtectionEnabled: true })).status).toBe(200);
  });
});
