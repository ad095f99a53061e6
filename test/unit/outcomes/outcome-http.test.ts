/**
 * The outcome webhook's POST (`shared/outcomes/http.ts`) against a receiver on 127.0.0.1, with the
 * name resolved by a resolver of the test's own: a public name that resolves to an inside address
 * (DNS rebinding) is refused where the connection is made, before a byte is sent; loopback only
 * where the deployment allows it (the local cloud); redirects are answers, not followed.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeOutcomeHttp, type ResolveAll } from '#shared/outcomes/http.ts';

let server: Server;
let port: number;
const received: string[] = [];
/** Answers held back (a receiver that never answers), ended after the suite. */
const silent: { end(): void }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${body}`);
      if (req.url === '/moved') res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end();
      else if (req.url === '/silent') silent.push(res);
      else res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const res of silent) res.end();
  await new Promise((resolve) => server.close(resolve));
});

/** A resolver that answers these addresses for every name. */
const resolvesTo =
  (...addresses: string[]): ResolveAll =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

const post = (http: ReturnType<typeof makeOutcomeHttp>, url: string) =>
  http.post(url, '{"events":[]}', { 'content-type': 'application/json' });

describe('the outcome webhook POST', () => {
  it.each([
    ['a private address', ['10.0.0.5']],
    ['the metadata address', ['169.254.169.254']],
    ['loopback, where it is not allowed', ['127.0.0.1']],
    ['a public address and an inside one', ['93.184.216.34', '127.0.0.1']],
    ['an IPv4-mapped IPv6 loopback', ['::ffff:127.0.0.1']],
  ])('refuses a name that resolves to %s, sending nothing', async (_, addresses) => {
    const before = received.length;
    const http = makeOutcomeHttp({ timeoutMs: 2_000, resolve: resolvesTo(...addresses) });
    expect(await post(http, `http://hooks.example.test:${port}/in`)).toEqual({ error: 'EINSIDEADDRESS' });
    expect(received.length).toBe(before);
  });

  it('POSTs to a name that resolves to loopback where the deployment allows it (the local cloud)', async () => {
    const http = makeOutcomeHttp({ timeoutMs: 2_000, allowLoopback: true, resolve: resolvesTo('127.0.0.1') });
    expect(await post(http, `http://hooks.example.test:${port}/ok`)).toEqual({ status: 204 });
    expect(received.at(-1)).toBe('POST /ok {"events":[]}');
  });

  it('answers a redirect with its status, without following it', async () => {
    const http = makeOutcomeHttp({ timeoutMs: 2_000, allowLoopback: true, resolve: resolvesTo('127.0.0.1') });
    expect(await post(http, `http://hooks.example.test:${port}/moved`)).toEqual({ status: 302 });
  });

  it('gives up on a receiver that does not answer in time, naming the timeout', async () => {
    const http = makeOutcomeHttp({ timeoutMs: 300, allowLoopback: true, resolve: resolvesTo('127.0.0.1') });
    expect(await post(http, `http://hooks.example.test:${port}/silent`)).toEqual({ error: 'TimeoutError' });
  });

  it('gives up on a name whose connection is never made (the resolver hangs), naming the timeout', async () => {
    const http = makeOutcomeHttp({ timeoutMs: 300, resolve: () => new Promise(() => {}) });
    expect(await post(http, `http://hooks.example.test:${port}/never`)).toEqual({
      error: 'UND_ERR_CONNECT_TIMEOUT',
    });
  });

  it('says a name that resolves to no address was not found', async () => {
    const http = makeOutcomeHttp({ timeoutMs: 2_000, resolve: resolvesTo() });
    expect(await post(http, `http://hooks.example.test:${port}/none`)).toEqual({ error: 'ENOTFOUND' });
  });

  it('names why a name that does not resolve was not reached', async () => {
    const http = makeOutcomeHttp({
      timeoutMs: 2_000,
      resolve: async () => {
        throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
      },
    });
    expect(await post(http, 'https://nowhere.example.test/')).toEqual({ error: 'ENOTFOUND' });
  });
});
