import { readFileSync } from 'node:fs';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeCallStatusHandler } from '#lambdas/call-status/handler.ts';
import { lambdaContext } from '#local/lambda.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { silentLogger } from '#shared/log.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { clientSettings, job, MemoryTaskStore, tasksFor } from './fakes.ts';

const SIGNED_AT = Date.parse('2026-03-02T01:01:00Z');

function fixture(name: string): APIGatewayProxyEventV2 {
  return JSON.parse(
    readFileSync(new URL(`../../fixtures/broker/${name}.json`, import.meta.url), 'utf8'),
  ) as APIGatewayProxyEventV2;
}

function setup() {
  const clock = { now: () => SIGNED_AT + 2_000 };
  const store = new MemoryTaskStore(new MemoryLeaseStore(), clock);
  const j = job();
  const [task] = tasksFor(j, 1);
  store.add(clientSettings(), j, [
    { ...task!, state: 'in-flight', attempts: 1, startedAt: SIGNED_AT - 60_000 },
  ]);
  const nudged: string[] = [];
  const handler = makeCallStatusHandler({
    provider: 'sandbox',
    record: makeRecordCallStatus({
      tasks: store,
      leases: { endpointOf: async () => 'http://10.0.0.7:8080' },
      notifier: { callEnded: async (endpoint, ended) => void nudged.push(`${endpoint} ${ended.taskId}`) },
      clock,
      secrets: 'fixture-callback-secret',
    }),
    log: silentLogger,
  });
  const invoke = async (name: string) =>
    (await handler(
      fixture(name),
      lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
    )) as APIGatewayProxyStructuredResultV2;
  return { store, invoke: Object.assign(invoke, { raw: handler }), nudged };
}

describe('the call-status handler', () => {
  it('settles the task on a signed final status, nudges the broker, and answers a redelivery the same way', async () => {
    const s = setup();
    const first = await s.invoke('call-status-completed');
    expect(first.statusCode).toBe(200);
    expect(JSON.parse(first.body!)).toEqual({ outcome: 'settled' });
    expect(s.store.all()[0]).toMatchObject({ state: 'completed', callId: 'call-1' });
    expect(s.nudged).toEqual(['http://10.0.0.7:8080 task-0000']);
    const again = await s.invoke('call-status-completed');
    expect(again.statusCode).toBe(200);
    expect(JSON.parse(again.body!)).toEqual({ outcome: 'already-settled' });
  });

  it('records progress from a base64 body', async () => {
    const s = setup();
    const out = await s.invoke('call-status-ringing-base64');
    expect(JSON.parse(out.body!)).toEqual({ outcome: 'progress' });
    expect(s.store.all()[0]).toMatchObject({ state: 'in-flight', callId: 'call-1' });
  });

  it('checks the signature before the query string: a forged callback with no query is a 401, a signed one a 400 (issue 13 #9)', async () => {
    const s = setup();
    const strip = (event: APIGatewayProxyEventV2) => {
      const { queryStringParameters: _q, ...rest } = event;
      return { ...rest, rawQueryString: '' } as APIGatewayProxyEventV2;
    };
    const context = lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 });
    const forged = (await s.invoke.raw(
      strip(fixture('call-status-wrong-signature')),
      context,
    )) as APIGatewayProxyStructuredResultV2;
    expect(forged.statusCode).toBe(401);
    const signed = (await s.invoke.raw(
      strip(fixture('call-status-completed')),
      context,
    )) as APIGatewayProxyStructuredResultV2;
    expect(signed.statusCode).toBe(400);
    expect(s.store.all()[0]!.state).toBe('in-flight');
  });

  it.each([
    ['call-status-wrong-signature', 401],
    ['call-status-no-signature', 401],
    ['call-status-other-attempt', 400],
    ['call-status-unknown-provider', 404],
  ])('answers %s with %i and changes nothing', async (name, status) => {
    const s = setup();
    const out = await s.invoke(name);
    expect(out.statusCode).toBe(status);
    expect(s.store.all()[0]!.state).toBe('in-flight');
    expect(s.nudged).toEqual([]);
  });
});
