import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEcsAgentProtection, TaskProtectionError } from '#shared/adapters/ecs-agent.ts';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  body: unknown;
}

let server: http.Server | undefined;

async function agent(answer: (res: http.ServerResponse) => void): Promise<{ uri: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => {
      text += c.toString();
    });
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, body: JSON.parse(text) });
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { uri: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

describe('task protection through the ECS agent', () => {
  it('turns protection on for N minutes and off with the documented request', async () => {
    const { uri, seen } = await agent((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ protection: { ProtectionEnabled: true } }));
    });
    const port = makeEcsAgentProtection({ agentUri: uri });
    await port.set(true, 10);
    await port.set(false);
    expect(seen).toEqual([
      {
        method: 'PUT',
        url: '/task-protection/v1/state',
        body: { ProtectionEnabled: true, ExpiresInMinutes: 10 },
      },
      { method: 'PUT', url: '/task-protection/v1/state', body: { ProtectionEnabled: false } },
    ]);
  });

  it('reports a refusal in a 200 answer and an error status as failures', async () => {
    let status = 200;
    const { uri } = await agent((res) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(status === 200 ? { failure: { Reason: 'TASK_NOT_VALID' } } : { error: 'x' }));
    });
    const port = makeEcsAgentProtection({ agentUri: uri });
    await expect(port.set(true, 10)).rejects.toThrow(/TASK_NOT_VALID/);
    status = 500;
    await expect(port.set(true, 10)).rejects.toBeInstanceOf(TaskProtectionError);
  });

  it('gives up on an agent that does not answer within its timeout', async () => {
    const { uri } = await agent(() => {});
    const port = makeEcsAgentProtection({ agentUri: uri, timeoutMs: 100 });
    await expect(port.set(true, 10)).rejects.toThrow();
  });

  it('is a no-op, said once, without an agent', async () => {
    let told = 0;
    const port = makeEcsAgentProtection({ agentUri: undefined, onNoAgent: () => told++ });
    await port.set(true, 10);
    await port.set(false);
    expect(told).toBe(1);
  });
});
