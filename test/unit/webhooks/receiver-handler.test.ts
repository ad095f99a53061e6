import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeReceiverHandler, toHttpError } from '#lambdas/webhook-receiver/handler.ts';
import { lambdaContext } from '#local/lambda.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { InvalidWebhookBodyError } from '#shared/line/webhook.ts';
import type { QueuedWebhookEvent } from '#shared/webhooks/queue-message.ts';
import {
  MAX_WEBHOOK_BODY_BYTES,
  makeReceiveWebhook,
  PayloadTooLargeError,
  SignatureError,
  UnknownChannelError,
} from '#shared/webhooks/receive.ts';
import { channel, ManualClock, MemoryQueue, SECRET } from './fakes.ts';

const DIR = path.join(import.meta.dirname, '../../fixtures/apigw');

function apiEvent(name: string): APIGatewayProxyEventV2 {
  return JSON.parse(readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as APIGatewayProxyEventV2;
}

function setup() {
  const queue = new MemoryQueue();
  const logs: string[] = [];
  const known = channel();
  const handler = makeReceiverHandler({
    receive: makeReceiveWebhook({
      channels: { get: async (id) => (id === known.channelId ? known : undefined) },
      queue,
      clock: new ManualClock(),
    }),
    log: new PowertoolsLog('webhook-receiver', { write: (line) => logs.push(line) }),
  });
  const invoke = async (event: APIGatewayProxyEventV2) =>
    (await handler(
      event,
      lambdaContext({ functionName: 'webhook-receiver', timeoutMs: 5_000 }),
    )) as APIGatewayProxyStructuredResultV2;
  return { queue, logs, invoke };
}

const bodyOf = (result: APIGatewayProxyStructuredResultV2) => JSON.parse(result.body ?? '') as unknown;

describe('the webhook receiver handler, on API Gateway v2 events', () => {
  it('answers 200 with the number of events stashed', async () => {
    const { invoke, queue } = setup();
    const result = await invoke(apiEvent('webhook-several-events'));
    expect(result.statusCode).toBe(200);
    expect(result.headers).toEqual({ 'content-type': 'application/json' });
    expect(bodyOf(result)).toEqual({ accepted: 3 });
    expect(queue.entries).toHaveLength(3);
  });

  it('decodes a base64 body before checking its signature (emoji and non-ASCII intact)', async () => {
    const { invoke, queue } = setup();
    const event = apiEvent('webhook-non-ascii-base64');
    expect(event.isBase64Encoded).toBe(true);
    const result = await invoke(event);
    expect(result.statusCode).toBe(200);
    const queued = JSON.parse(queue.entries[0]!.body) as QueuedWebhookEvent;
    expect((queued.event as unknown as { message: { text: string } }).message.text).toBe(
      'こんにちは 👋🏽 こんにちは "ok" é',
    );
  });

  it('answers the console’s Verify request 200 with nothing stashed', async () => {
    const { invoke, queue } = setup();
    const result = await invoke(apiEvent('webhook-verify'));
    expect([result.statusCode, bodyOf(result)]).toEqual([200, { accepted: 0 }]);
    expect(queue.calls).toEqual([]);
  });

  it.each([
    ['webhook-wrong-signature', 401, 'x-line-signature does not match the body'],
    ['webhook-no-signature', 401, 'missing x-line-signature header'],
    ['webhook-unknown-channel', 404, 'unknown channel'],
  ])('answers %s with %i and a clear message', async (name, status, message) => {
    const { invoke, queue, logs } = setup();
    const result = await invoke(apiEvent(name));
    expect(result.statusCode).toBe(status);
    expect(bodyOf(result)).toEqual({ message });
    expect(queue.entries).toEqual([]);
    expect(logs.some((l) => l.includes('"webhook refused"') && l.includes(`"status":${status}`))).toBe(true);
  });

  it('answers a malformed body 400, saying what is wrong', async () => {
    const { invoke } = setup();
    const result = await invoke(apiEvent('webhook-malformed'));
    expect(result.statusCode).toBe(400);
    expect((bodyOf(result) as { message: string }).message).toMatch(/^invalid webhook body: is not JSON/);
  });

  it('answers a body over 1 MiB 413', async () => {
    const { invoke } = setup();
    const event = apiEvent('webhook-several-events');
    const big = Buffer.alloc(MAX_WEBHOOK_BODY_BYTES + 1, 0x20);
    const result = await invoke({ ...event, body: big.toString('base64'), isBase64Encoded: true });
    expect(result.statusCode).toBe(413);
    expect((bodyOf(result) as { message: string }).message).toContain(`${MAX_WEBHOOK_BODY_BYTES}`);
  });

  it('answers 500 without leaking internals when the events cannot be stashed', async () => {
    const { invoke, queue, logs } = setup();
    queue.failWith = new Error(
      'AccessDenied: arn:aws:sqs:ap-northeast-1:123456789012:switchboard-prod-webhook-events.fifo',
    );
    const result = await invoke(apiEvent('webhook-several-events'));
    expect(result.statusCode).toBe(500);
    expect(bodyOf(result)).toEqual({ message: 'internal error' });
    expect(result.body).not.toMatch(/arn:|AccessDenied|stack/);
    // The operator still sees why, in the logs.
    expect(logs.some((l) => l.includes('webhook not stashed') && l.includes('AccessDenied'))).toBe(true);
  });

  it('never writes the channel secret to its logs', async () => {
    const { invoke, logs } = setup();
    for (const name of ['webhook-several-events', 'webhook-wrong-signature', 'webhook-malformed']) {
      await invoke(apiEvent(name));
    }
    expect(logs.join('\n')).not.toContain(SECRET);
  });
});

describe('toHttpError', () => {
  it('maps each typed error of the receive use case to its status', () => {
    const cases: [Error, number][] = [
      [new UnknownChannelError('no channel 1'), 404],
      [new SignatureError('bad'), 401],
      [new InvalidWebhookBodyError('events[0].mode', 'is missing'), 400],
      [new PayloadTooLargeError('too big'), 413],
    ];
    for (const [error, status] of cases) {
      const mapped = toHttpError(error);
      expect(mapped?.statusCode).toBe(status);
      expect(mapped?.headers).toEqual({ 'content-type': 'application/json' });
    }
  });

  it('does not echo an unknown channel’s id', () => {
    expect(JSON.parse(toHttpError(new UnknownChannelError('no channel 1656000001'))!.body!)).toEqual({
      message: 'unknown channel',
    });
  });

  it('leaves anything else to the handler’s 500', () => {
    expect(toHttpError(new Error('boom'))).toBeUndefined();
    expect(toHttpError(new RangeError('expected 1 to 2 channel secrets, got 0'))).toBeUndefined();
    expect(toHttpError('a string')).toBeUndefined();
  });
});
