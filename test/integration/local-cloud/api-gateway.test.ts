import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { SignatureV4 } from '@smithy/signature-v4';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2 } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_GATEWAY_MAX_BODY_BYTES,
  type ApiGatewayServer,
  ResponsePayloadTooLargeError,
  startApiGateway,
} from '#local/api-gateway.ts';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '#local/cloud.ts';
import { makeOperatorClient, Sha256 } from '#local/operator-client.ts';
import { LAMBDA_PAYLOAD_MAX_BYTES } from '#shared/functions.ts';
import type { RouteSpec } from '#shared/routes.ts';

const routes: RouteSpec[] = [
  { method: 'POST', path: '/webhooks/line/{channelId}', functionId: 'webhook-receiver', auth: 'none' },
];
let seen: APIGatewayProxyEventV2 | undefined;
let gateway: ApiGatewayServer;
const failures: unknown[] = [];

/** A result whose JSON is `bytes` long: a base64 body of filler around fixed fields. */
function resultOfSize(bytes: number): APIGatewayProxyResultV2 {
  const shell = { statusCode: 200, isBase64Encoded: true, body: '' };
  return { ...shell, body: 'A'.repeat(bytes - Buffer.byteLength(JSON.stringify(shell))) };
}

beforeAll(async () => {
  gateway = await startApiGateway({
    routes,
    functions: {
      'webhook-receiver': {
        timeoutMs: 5_000,
        handler: async (event): Promise<APIGatewayProxyResultV2> => {
          seen = event;
          if (event.rawQueryString === 'fail=1') throw new Error('secret internals');
          const respond = /^respond=(\d+)$/.exec(event.rawQueryString);
          // A base64 body that makes the result, as JSON, exactly this many bytes.
          if (respond) return resultOfSize(Number(respond[1]));
          return { statusCode: 202, headers: { 'X-Echo': 'yes' }, body: JSON.stringify({ ok: true }) };
        },
      },
    },
    onError: (error) => void failures.push(error),
  });
});
afterAll(() => gateway.stop());

describe('the API Gateway stand-in (HTTP API, payload v2)', () => {
  it('passes a binary body base64-encoded and byte-exact, with v2 fields', async () => {
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37 + 11) % 256));
    const res = await fetch(`${gateway.url}/webhooks/line/ch%201?a=1&a=2&b=x`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/octet-stream',
        'X-Line-Signature': 'abc',
        Cookie: 'c1=v1; c2=v2',
      },
      body: bytes,
    });
    expect(res.status).toBe(202);
    expect(res.headers.get('x-echo')).toBe('yes');
    const event = seen!;
    expect(event.version).toBe('2.0');
    expect(event.routeKey).toBe('POST /webhooks/line/{channelId}');
    expect(event.rawPath).toBe('/webhooks/line/ch%201');
    expect(event.rawQueryString).toBe('a=1&a=2&b=x');
    expect(event.queryStringParameters).toEqual({ a: '1,2', b: 'x' });
    expect(event.pathParameters).toEqual({ channelId: 'ch 1' });
    expect(event.headers['x-line-signature']).toBe('abc');
    expect(event.cookies).toEqual(['c1=v1', 'c2=v2']);
    expect(event.requestContext.http.method).toBe('POST');
    expect(event.isBase64Encoded).toBe(true);
    const decoded = Buffer.from(event.body!, 'base64');
    expect(createHash('sha256').update(decoded).digest('hex')).toBe(
      createHash('sha256').update(bytes).digest('hex'),
    );
  });

  it('passes JSON with emoji as text, unchanged', async () => {
    const body = '{"destination":"U1","events":[],"note":"こんにちは 👋"}';
    await fetch(`${gateway.url}/webhooks/line/c1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(seen!.isBase64Encoded).toBe(false);
    expect(seen!.body).toBe(body);
  });

  it('answers 404 for an unknown route and a bare 500 when the handler throws', async () => {
    expect((await fetch(`${gateway.url}/nope`, { method: 'POST' })).status).toBe(404);
    const res = await fetch(`${gateway.url}/webhooks/line/c1?fail=1`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('{"message":"Internal Server Error"}');
  });

  it('refuses bodies over the API Gateway and Lambda limits as AWS does', async () => {
    const tooBig = Buffer.alloc(API_GATEWAY_MAX_BODY_BYTES + 1, 97);
    const res = await fetch(`${gateway.url}/webhooks/line/c1`, { method: 'POST', body: tooBig });
    expect(res.status).toBe(413);
    // 5 MB of binary becomes ~6.7 MB of base64: over Lambda's 6 MB event limit.
    const big = Buffer.alloc(5 * 1024 * 1024, 1);
    const res2 = await fetch(`${gateway.url}/webhooks/line/c1`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: big,
    });
    expect(res2.status).toBe(413);
    expect(await res2.json()).toEqual({ message: 'Request Too Long' });
  });
});

describe("Lambda's response limit (issue 35 #2)", () => {
  it('passes a result of exactly 6 MB; one byte more fails the invocation, and the caller gets 500 as from AWS', async () => {
    const fits = await fetch(`${gateway.url}/webhooks/line/c1?respond=${LAMBDA_PAYLOAD_MAX_BYTES}`, {
      method: 'POST',
      body: '{}',
    });
    expect(fits.status).toBe(200);
    expect((await fits.arrayBuffer()).byteLength).toBeGreaterThan(4 * 1024 * 1024);

    failures.length = 0;
    const over = await fetch(`${gateway.url}/webhooks/line/c1?respond=${LAMBDA_PAYLOAD_MAX_BYTES + 1}`, {
      method: 'POST',
      body: '{}',
    });
    expect(over.status).toBe(500);
    expect(await over.text()).toBe('{"message":"Internal Server Error"}');
    expect(failures).toEqual([expect.any(ResponsePayloadTooLargeError)]);
  });
});

describe('a caller that closes its connection mid-request', () => {
  it('is one line, not an error with a stack, and invokes nothing (issue 13 #9)', async () => {
    const gone: string[] = [];
    const errors: unknown[] = [];
    let invoked = 0;
    const gw = await startApiGateway({
      routes,
      functions: {
        'webhook-receiver': {
          timeoutMs: 5_000,
          handler: async () => {
            invoked += 1;
            return { statusCode: 200, body: '' };
          },
        },
      },
      onError: (error) => errors.push(error),
      onClientGone: (request) => gone.push(request),
    });
    try {
      const socket = connect(gw.port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(
        'POST /webhooks/line/c1?x=1 HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{"events":',
      );
      await new Promise((r) => setImmediate(r));
      socket.destroy();
      const deadline = Date.now() + 10_000;
      while (gone.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(gone).toEqual(['POST /webhooks/line/c1']);
      expect(errors).toEqual([]);
      expect(invoked).toBe(0);
    } finally {
      await gw.stop();
    }
  });
});

describe('the IAM authorizer of the local API Gateway', () => {
  const iamRoute = {
    method: 'GET',
    path: '/clients/{clientId}',
    functionId: 'jobs-api',
    auth: 'iam',
  } as const;
  let gateway: Awaited<ReturnType<typeof startApiGateway>>;
  const calls: string[] = [];
  beforeAll(async () => {
    gateway = await startApiGateway({
      routes: [iamRoute],
      functions: {
        'jobs-api': {
          handler: async (event: APIGatewayProxyEventV2) => {
            calls.push(event.rawPath);
            return { statusCode: 200, body: 'ok' };
          },
          timeoutMs: 1000,
        },
      },
    });
  });
  afterAll(() => gateway.stop());

  const client = (credentials: { accessKeyId: string; secretAccessKey: string }, region = LOCAL_REGION) =>
    makeOperatorClient({ baseUrl: gateway.url, region, credentials });

  it('lets a request signed with the local credentials through', async () => {
    const response = await client(LOCAL_CREDENTIALS)('GET', '/clients/acme%20co');
    expect(response.status).toBe(200);
  });

  it('answers 403 and invokes nothing for a wrong secret, an unknown key, another region, garbage or no signature', async () => {
    const before = calls.length;
    const refusals = [
      await client({ accessKeyId: LOCAL_CREDENTIALS.accessKeyId, secretAccessKey: 'wrong' })(
        'GET',
        '/clients/acme',
      ),
      await client({ accessKeyId: 'AKIDSTRANGER', secretAccessKey: 'x' })('GET', '/clients/acme'),
      await client(LOCAL_CREDENTIALS, 'eu-west-1')('GET', '/clients/acme'),
    ];
    const garbage = await fetch(`${gateway.url}/clients/acme`, {
      headers: {
        authorization:
          'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host, Signature=00',
      },
    });
    const unsigned = await fetch(`${gateway.url}/clients/acme`);
    expect(refusals.map((r) => r.status)).toEqual([403, 403, 403]);
    expect(garbage.status).toBe(403);
    expect(unsigned.status).toBe(403);
    expect(await unsigned.json()).toEqual({ message: 'Forbidden' });
    expect(calls.length).toBe(before);
  });

  it('refuses a signed request replayed after 15 minutes, or with its body changed', async () => {
    const signer = new SignatureV4({
      service: 'execute-api',
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
      sha256: Sha256 as never,
    });
    const url = new URL(`${gateway.url}/clients/acme`);
    const old = await signer.sign(
      {
        method: 'GET',
        protocol: 'http:',
        hostname: url.hostname,
        port: Number(url.port),
        path: url.pathname,
        query: {},
        headers: { host: url.host },
      },
      { signingDate: new Date(Date.now() - 16 * 60_000) },
    );
    const late = await fetch(url, { headers: old.headers as Record<string, string> });
    expect(late.status).toBe(403);
    const signedBody = await signer.sign({
      method: 'GET',
      protocol: 'http:',
      hostname: url.hostname,
      port: Number(url.port),
      path: url.pathname,
      query: {},
      headers: { host: url.host, 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    const tampered = await fetch(url, {
      method: 'GET',
      headers: signedBody.headers as Record<string, string>,
    });
    expect(tampered.status).toBe(403);
  });
});
