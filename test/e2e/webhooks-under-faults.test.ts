/**
 * The inbound-webhook drill: 2,000 signed events through the real receiver, queue and processor on
 * the local cloud, while LINE redelivers, the Messaging API drops responses after delivering,
 * answers 500 and 429, and the processor dies mid-batch once. Every event that calls for an
 * answer must be answered exactly once, by the LINE sandbox's own delivery log.
 */

import { GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import type { Handler } from '#local/lambda.ts';
import { DEMO_CHANNEL, type LocalStack, startLocalStack } from '#local/stack.ts';
import type { WebhookEvent } from '#shared/line/webhook.ts';
import { webhookRetryKey } from '#shared/retry-keys.ts';

const EVENTS = 2_000;
const USERS = 400;

let stack: LocalStack;
let sqs: SQSClient;
let crashes = 0;
let invocations = 0;

/** The processor, dying once mid-batch: half the records handled, then the Lambda is gone. */
function crashOnce(handler: Handler<SQSEvent, unknown>): Handler<SQSEvent, unknown> {
  return async (event, context) => {
    invocations++;
    if (crashes === 0 && invocations >= 20 && event.Records.length >= 4) {
      crashes++;
      await handler({ Records: event.Records.slice(0, Math.floor(event.Records.length / 2)) }, context);
      throw new Error('simulated crash: the Lambda died mid-batch');
    }
    return handler(event, context);
  };
}

beforeAll(async () => {
  // The handlers log every retry; the assertions below are the report.
  process.env.LOG_LEVEL = 'error';
  stack = await startLocalStack({
    stage: 'e2ewh',
    port: 0,
    processorConcurrency: 4,
    // A crashed batch comes back after its visibility timeout: keep the drill short.
    visibilityTimeoutSeconds: { 'webhook-events': 5 },
    wrapProcessor: crashOnce,
  });
  sqs = new SQSClient({
    region: stack.cloud.region,
    endpoint: stack.cloud.sqsEndpoint,
    credentials: LOCAL_CREDENTIALS,
  });
}, 120_000);

afterAll(async () => {
  sqs?.destroy();
  await stack?.stop();
});

async function queueDepth(url: string): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(out.Attributes?.ApproximateNumberOfMessages) +
    Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible)
  );
}

/** Runs `tasks` with at most `limit` in flight. */
async function pool<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}

describe('webhooks under faults', () => {
  it('answers every event that calls for it exactly once, with zero 5xx from the receiver', async () => {
    const { line } = stack;
    const users = Array.from({ length: USERS }, (_, i) => `U${i.toString(16).padStart(32, '0')}`);
    const events: WebhookEvent[] = [];
    const answerable = new Set<string>();
    for (let i = 0; i < EVENTS; i++) {
      const from = users[i % USERS]!;
      const base = { channelId: DEMO_CHANNEL.channelId, from };
      const kind = i % 10;
      let event: WebhookEvent;
      if (kind < 6)
        event = line.events.text({ ...base, text: i % 3 === 0 ? 'hours' : `question ${i} 👋 ｶﾅ \uFFFE` });
      else if (kind < 8) event = line.events.follow(base);
      else if (kind === 8) event = line.events.postback({ ...base, data: `action=${i}` });
      else event = line.events.text({ ...base, text: 'help', mode: 'standby' });
      events.push(event);
      // Texts get a rule or the fallback; follows get the greeting; postbacks and standby get nothing.
      if (kind < 8) answerable.add(event.webhookEventId);
    }

    // 10% of events are redelivered twice, later and out of order.
    const redeliveries = events
      .filter((_, i) => i % 10 === 3)
      .flatMap((e) => [line.events.redelivered(e), line.events.redelivered(e)]);
    redeliveries.reverse();

    line.faults.setProbabilities({ dropAfterDeliver: 0.1, status500: 0.05 });
    line.faults.burst429(60);

    // LINE batches events of one webhook: 1-5 per request.
    const requests: WebhookEvent[][] = [];
    for (let i = 0; i < events.length; ) {
      const size = 1 + (i % 5);
      requests.push(events.slice(i, i + size));
      i += size;
    }
    for (let i = 0; i < redeliveries.length; i += 3) requests.push(redeliveries.slice(i, i + 3));

    const statuses = new Map<number, number>();
    await pool(requests, 16, async (batch) => {
      const res = await line.sendWebhook({
        url: stack.webhookUrl(DEMO_CHANNEL.channelId),
        channelSecret: DEMO_CHANNEL.channelSecret,
        events: batch,
      });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    });
    expect([...statuses.keys()]).toEqual([200]);

    const queue = stack.cloud.queues['webhook-events']!;
    const deadline = Date.now() + 180_000;
    for (;;) {
      const delivered = new Set(line.deliveries().map((d) => d.retryKey));
      const done = [...answerable].every((id) => delivered.has(webhookRetryKey(id)));
      if (done && (await queueDepth(queue.url)) === 0) break;
      if (Date.now() > deadline)
        throw new Error(`not settled: ${delivered.size} of ${answerable.size} answered`);
      await new Promise((r) => setTimeout(r, 250));
    }

    // Exactly once, counted by the far side.
    const byKey = new Map<string, number>();
    for (const d of line.deliveries()) byKey.set(d.retryKey ?? '-', (byKey.get(d.retryKey ?? '-') ?? 0) + 1);
    const expectedKeys = new Set([...answerable].map(webhookRetryKey));
    expect([...byKey.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(new Set(byKey.keys())).toEqual(expectedKeys);
    // (Users do get the same text more than once here — one answer per question they sent — so
    // the count per event's retry key above is the measure, not identical-content deliveries.)

    // The faults really happened, and the crash too.
    const counters = line.counters();
    expect(counters.byStatus['409'] ?? 0).toBeGreaterThan(0);
    expect(counters.byStatus['429'] ?? 0).toBeGreaterThan(0);
    expect(counters.byStatus['500'] ?? 0).toBeGreaterThan(0);
    expect(counters.byStatus.dropped ?? 0).toBeGreaterThan(0);
    expect(crashes).toBe(1);

    // Nothing that should have been answered ended in the DLQ.
    const dlq = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queue.dlqUrl, MaxNumberOfMessages: 10 }),
    );
    expect(dlq.Messages ?? []).toEqual([]);
  });
});
