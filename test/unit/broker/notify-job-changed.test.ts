/**
 * The operator API's nudge to a broker (`POST {endpoint}/jobs/changed`), against the broker's own
 * HTTP server (worker/http.ts) on 127.0.0.1, port 0: it waits for the broker's answer, and every
 * failure becomes an answer with a reason, never a throw.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import type { JobChanged } from '#shared/jobs/ports.ts';
import { type BrokerHttpServer, startBrokerHttpServer } from '#worker/http.ts';

const CHANGED: JobChanged = { clientId: 'acme', jobId: '01JD0000000000000000000001' };

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

/** A broker server whose job-changed handling finishes when the test says so. */
async function brokerServer(
  handle: (changed: JobChanged) => Promise<void> = async () => {},
): Promise<BrokerHttpServer> {
  const server = await startBrokerHttpServer(
    { callEnded: async () => {}, jobChanged: handle, health: () => ({}) },
    { host: '127.0.0.1', port: 0 },
  );
  stops.push(() => server.stop());
  return server;
}

async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  // Long enough for a loopback request to be written, read and answered if nothing held it.
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('telling a broker that a job changed', () => {
  it('posts {clientId, jobId} to /jobs/changed and resolves only once the broker has acted', async () => {
    const seen: JobChanged[] = [];
    let finish!: () => void;
    const acted = new Promise<void>((resolve) => (finish = resolve));
    const server = await brokerServer(async (changed) => {
      seen.push(changed);
      await acted;
    });
    const notifier = makeHttpBrokerNotifier();

    const nudge = notifier.jobChanged(server.url, CHANGED);
    await expect.poll(() => seen.length).toBe(1);
    expect(seen).toEqual([CHANGED]);
    expect(await settled(nudge)).toBe(false);

    finish();
    expect(await nudge).toEqual({ ok: true });
  });

  it('accepts an endpoint written with a trailing slash', async () => {
    const server = await brokerServer();
    expect(await makeHttpBrokerNotifier().jobChanged(`${server.url}/`, CHANGED)).toEqual({ ok: true });
  });

  it('answers not ok, with the status, when the broker failed to act', async () => {
    const server = await brokerServer(async () => {
      throw new Error('store unavailable');
    });
    expect(await makeHttpBrokerNotifier().jobChanged(server.url, CHANGED)).toEqual({
      ok: false,
      reason: 'the broker answered 500',
    });
  });

  it('answers not ok when the broker does not answer in time', async () => {
    const server = await brokerServer(() => new Promise<void>(() => {}));
    const answer = await makeHttpBrokerNotifier({ jobChangedTimeoutMs: 50 }).jobChanged(server.url, CHANGED);
    expect(answer).toEqual({ ok: false, reason: 'no answer within 50 ms' });
  });

  it('answers not ok when nothing listens at the endpoint (a broker gone since it took the lease)', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const answer = await makeHttpBrokerNotifier().jobChanged(`http://127.0.0.1:${port}`, CHANGED);
    expect(answer.ok).toBe(false);
    expect(answer.ok ? '' : answer.reason).toMatch(/^unreachable: /);
  });

  it('leaves the call-ended nudge as it was: posted to /calls/ended, not waited on past the answer', async () => {
    const ended: unknown[] = [];
    const server = await startBrokerHttpServer(
      { callEnded: async (e) => void ended.push(e), health: () => ({}) },
      { host: '127.0.0.1', port: 0 },
    );
    stops.push(() => server.stop());
    await makeHttpBrokerNotifier().callEnded(server.url, { jobId: 'j', taskId: 't', callId: 'c' });
    await expect.poll(() => ended).toEqual([{ jobId: 'j', taskId: 't', callId: 'c' }]);
  });
});
