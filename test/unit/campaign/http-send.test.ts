/**
 * The pipeline's send port on the wire: what each way a request can go wrong means for the
 * message (may it have reached LINE?), against real sockets on 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type HttpSend, PooledHttpSend } from '#shared/campaign/http-send.ts';
import type { PreparedSend } from '#shared/line/messaging-client.ts';

const PUSH: PreparedSend = {
  endpoint: 'push',
  body: JSON.stringify({ to: `U${'0'.repeat(32)}`, messages: [{ type: 'text', text: 'お知らせ' }] }),
  retryKey: '123e4567-e89b-42d3-a456-426614174000',
} as PreparedSend;

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

async function server(handler: http.RequestListener): Promise<string> {
  const s = http.createServer(handler);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  open.push({ close: () => s.close() });
  open.push({ close: () => s.closeAllConnections() });
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

function sender(baseUrl: string, timeoutMs = 2_000): HttpSend {
  const send = new PooledHttpSend({
    channelAccessToken: 'token',
    baseUrl,
    timeoutMs,
    clock: { now: () => 0 },
  });
  open.push({ close: () => send.close() });
  return send;
}

describe('the send port over HTTP', () => {
  it('posts the body with the token and retry key, and reads the request id of an answer', async () => {
    let seen: { path?: string; headers?: http.IncomingHttpHeaders; body?: string } = {};
    const url = await server((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen = { path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
        res.writeHead(200, { 'content-type': 'application/json', 'x-line-request-id': 'req-1' });
        res.end('{"sentMessages":[{"id":"1"}]}');
      });
    });
    const outcome = await sender(url).send(PUSH);
    expect(outcome).toMatchObject({ kind: 'delivered', requestId: 'req-1' });
    expect(seen.path).toBe('/v2/bot/message/push');
    expect(seen.body).toBe(PUSH.body);
    expect(seen.headers).toMatchObject({
      authorization: 'Bearer token',
      'x-line-retry-key': PUSH.retryKey,
      'content-type': 'application/json',
    });
  });

  it('says a refused connection never reached LINE', async () => {
    const url = await server(() => {});
    for (const o of open.splice(0)) o.close(); // nothing listens there any more
    const outcome = await sender(url).send(PUSH);
    expect(outcome).toMatchObject({ kind: 'retryable', reason: 'network', maybeDelivered: false });
  });

  it('says a connection cut after the request was sent may have delivered it', async () => {
    const url = await server((req) => req.on('data', () => req.socket.destroy()));
    const outcome = await sender(url).send(PUSH);
    expect(outcome).toMatchObject({ kind: 'retryable', reason: 'network', maybeDelivered: true });
  });

  it('says a request with no answer in time may have delivered it', async () => {
    const url = await server(() => {}); // reads, never answers
    const outcome = await sender(url, 200).send(PUSH);
    expect(outcome).toMatchObject({ kind: 'retryable', reason: 'timeout', maybeDelivered: true });
  });

  it("reads a 429's Retry-After, and a 500 as a retryable answer", async () => {
    let n = 0;
    const url = await server((req, res) => {
      req.resume();
      req.on('end', () => {
        if (n++ === 0) res.writeHead(429, { 'retry-after': '3', 'content-type': 'application/json' });
        else res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"message":"nope"}');
      });
    });
    const send = sender(url);
    expect(await send.send(PUSH)).toMatchObject({
      kind: 'rate-limited',
      reason: 'rate',
      retryAfterMs: 3_000,
    });
    expect(await send.send(PUSH)).toMatchObject({ kind: 'retryable', status: 500 });
  });

  it('lets a request in flight finish on close, and a send after close open new connections', async () => {
    let release: (() => void) | undefined;
    let arrived: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const url = await server((req, res) => {
      req.resume();
      req.on('end', () => {
        const answer = () => {
          res.writeHead(200, { 'content-type': 'application/json', 'x-line-request-id': 'late' });
          res.end('{}');
        };
        if (release === undefined) {
          release = answer;
          arrived();
        } else answer();
      });
    });
    const send = sender(url);
    const inFlight = send.send(PUSH);
    await first;
    send.close();
    release!();
    expect(await inFlight).toMatchObject({ kind: 'delivered', requestId: 'late' });
    expect(await send.send(PUSH)).toMatchObject({ kind: 'delivered' });
  });
});
