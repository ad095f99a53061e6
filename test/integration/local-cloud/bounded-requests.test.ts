/**
 * The functions with a deadline (the webhook receiver inside LINE's 2 s, the call callbacks) and
 * the broker bound each AWS request. `@smithy/node-http-handler` 4 only warns when a
 * `requestTimeout` passes unless told to throw, so a request to an endpoint that accepts the
 * connection and never answers would wait for the Lambda's own timeout. Each `main.ts` is loaded
 * as deployed, with every AWS endpoint pointing at such a server: its handler must settle, having
 * tried as many times as its client allows.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { lambdaContext } from '#local/lambda.ts';
import {
  boundedRequests,
  makeDynamoClient,
  REQUEST_TIMEOUT_SCALE_ENV,
} from '#shared/adapters/aws-clients.ts';

/** Accepts every request and never answers it; counts them by the SDK's target or path. */
class SilentEndpoint {
  readonly requests: string[] = [];
  readonly #sockets = new Set<Socket>();
  readonly #server: Server = createServer((request: IncomingMessage) => {
    this.requests.push(String(request.headers['x-amz-target'] ?? request.url));
    request.resume();
  });

  async start(): Promise<string> {
    this.#server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

const silent = new SilentEndpoint();
const saved = { ...process.env };

beforeAll(async () => {
  const url = await silent.start();
  Object.assign(process.env, {
    AWS_REGION: 'ap-northeast-1',
    AWS_ACCESS_KEY_ID: 'AKIDBOUNDED',
    AWS_SECRET_ACCESS_KEY: 'bounded-requests-secret',
    AWS_ENDPOINT_URL_DYNAMODB: url,
    AWS_ENDPOINT_URL_SQS: url,
    CHANNELS_TABLE: 'channels',
    CONTROL_TABLE: 'control',
    TASKS_TABLE: 'tasks',
    WEBHOOK_EVENTS_QUEUE_URL: `${url}/000000000000/webhook-events.fifo`,
    TELEPHONY_PROVIDER: 'sandbox',
  });
  // The bounds as deployed (a local stack in this worker would have lengthened them).
  delete process.env[REQUEST_TIMEOUT_SCALE_ENV];
});

afterEach(() => {
  silent.requests.length = 0;
  vi.resetModules();
});

afterAll(async () => {
  process.env = saved;
  await silent.stop();
});

function fixture(path: string): unknown {
  return JSON.parse(readFileSync(new URL(`../../fixtures/${path}.json`, import.meta.url), 'utf8'));
}

async function invoke(module: string, functionName: string, event: unknown): Promise<unknown> {
  const { handler } = (await import(module)) as {
    handler: (event: unknown, context: unknown) => Promise<unknown>;
  };
  return handler(event, lambdaContext({ functionName, timeoutMs: 30_000 }));
}

describe('AWS requests with a deadline end at their request timeout', () => {
  it('boundedRequests: each attempt to a silent endpoint ends with a TimeoutError', async () => {
    const client = makeDynamoClient({
      endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB!,
      requestHandler: boundedRequests({ connectionTimeout: 200, requestTimeout: 300 }),
      maxAttempts: 2,
    });
    const get = client.send(new GetItemCommand({ TableName: 't', Key: { pk: { S: 'x' } } }));
    await expect(get).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(silent.requests).toEqual(['DynamoDB_20120810.GetItem', 'DynamoDB_20120810.GetItem']);
    client.destroy();
  });

  it('the webhook receiver answers LINE (a 5xx, so LINE redelivers) when DynamoDB never does', async () => {
    const result = (await invoke(
      '#lambdas/webhook-receiver/main.ts',
      'webhook-receiver',
      fixture('apigw/webhook-unknown-channel'),
    )) as APIGatewayProxyStructuredResultV2;
    expect(result.statusCode).toBeGreaterThanOrEqual(500);
    expect(silent.requests).toEqual(['DynamoDB_20120810.GetItem', 'DynamoDB_20120810.GetItem']);
  });

  it('the call-status route answers the provider when DynamoDB never does', async () => {
    const result = (await invoke(
      '#lambdas/call-status/main.ts',
      'call-status',
      fixture('broker/call-status-completed'),
    ).catch((error: unknown) => error)) as APIGatewayProxyStructuredResultV2 | Error;
    if (!(result instanceof Error)) expect(result.statusCode).toBeGreaterThanOrEqual(500);
    expect(silent.requests.length).toBe(3);
  });

  it('the Connect contact-event target fails (EventBridge retries it) when DynamoDB never answers', async () => {
    const event = {
      version: '0',
      id: '6e0a1b7c-0d2e-4f3a-9b4c-5d6e7f8a9b0c',
      source: 'aws.connect',
      'detail-type': 'Amazon Connect Contact Event',
      account: '123456789012',
      time: '2026-11-29T01:00:00Z',
      region: 'ap-northeast-1',
      resources: [],
      detail: {
        eventType: 'DISCONNECTED',
        contactId: '11111111-1111-4111-8111-111111111111',
        channel: 'VOICE',
        initiationMethod: 'API',
        instanceArn: 'arn:aws:connect:ap-northeast-1:123456789012:instance/abc',
        disconnectTimestamp: '2026-11-29T01:00:00.000Z',
      },
    };
    await expect(invoke('#lambdas/connect-events/main.ts', 'connect-events', event)).rejects.toMatchObject({
      name: 'TimeoutError',
    });
    expect(silent.requests.length).toBe(3);
  });
});
