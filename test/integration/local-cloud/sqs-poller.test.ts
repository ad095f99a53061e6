import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { createQueueWithDlq } from '#local/cloud.ts';
import { type SqsPoller, startSqsPoller } from '#local/sqs-poller.ts';
import { queueSpec } from '#shared/resources.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
let poller: SqsPoller | undefined;
afterEach(async () => {
  await poller?.stop();
  poller = undefined;
});

async function until<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function depth(url: string): Promise<number> {
  const out = await cloud.sqs.send(
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

describe('the SQS event-source poller', () => {
  it('drops a FIFO duplicate (same dedupe id) and keeps order within a group', async () => {
    const q = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('webhook-events'), {
      name: `${uniqueName('fifo')}.fifo`,
      visibilityTimeoutSeconds: 5,
    });
    const entries = ['e1', 'e2', 'e1', 'e3'].map((id, i) => ({
      Id: String(i),
      MessageBody: id,
      MessageGroupId: 'user-1',
      MessageDeduplicationId: id,
    }));
    await cloud.sqs.send(new SendMessageBatchCommand({ QueueUrl: q.url, Entries: entries }));
    const seen: string[] = [];
    poller = startSqsPoller({
      sqs: cloud.sqs,
      queueUrl: q.url,
      queueArn: q.arn,
      functionName: 'fifo-test',
      functionTimeoutMs: 5_000,
      batchSize: 10,
      handler: async (event: SQSEvent) => {
        for (const r of event.Records) seen.push(r.body);
        expect(event.Records[0]?.attributes.MessageGroupId).toBe('user-1');
        return { batchItemFailures: [] };
      },
    });
    await until(() => (seen.length >= 3 ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toEqual(['e1', 'e2', 'e3']);
  });

  it('invokes with at most batchSize records, and with a batching window gathers records that arrive within it', async () => {
    const q = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('ingest'), {
      name: uniqueName('window'),
      visibilityTimeoutSeconds: 30,
    });
    const send = (from: number, n: number) =>
      cloud.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: q.url,
          Entries: Array.from({ length: n }, (_, i) => ({ Id: String(i), MessageBody: `m${from + i}` })),
        }),
      );
    const batches: string[][] = [];
    const start = (batchSize: number, maxBatchingWindowMs: number) =>
      startSqsPoller({
        sqs: cloud.sqs,
        queueUrl: q.url,
        queueArn: q.arn,
        functionName: 'window-test',
        functionTimeoutMs: 5_000,
        batchSize,
        maxBatchingWindowMs,
        handler: async (event: SQSEvent) => {
          batches.push(event.Records.map((r) => r.body));
          return { batchItemFailures: [] };
        },
      });

    // 25 records, batches of at most 7 (a batch may be short: SQS returns what it has).
    await Promise.all([send(0, 10), send(10, 10), send(20, 5)]);
    poller = start(7, 0);
    await until(() => (batches.flat().length >= 25 ? true : undefined));
    expect(batches.every((b) => b.length >= 1 && b.length <= 7)).toBe(true);
    expect(new Set(batches.flat()).size).toBe(25);
    await poller.stop();

    // A 4 s window: three records sent 150 ms apart make one invocation, not three (the slack
    // is for a loaded machine: all three must be sent before the window closes).
    batches.length = 0;
    poller = start(10, 4_000);
    for (let i = 0; i < 3; i++) {
      await send(100 + i, 1);
      await new Promise((r) => setTimeout(r, 150));
    }
    await until(() => (batches.flat().length >= 3 ? true : undefined));
    expect(batches).toEqual([['m100', 'm101', 'm102']]);
  });

  it('returns only the failed records of a batch, which come back after the visibility timeout', async () => {
    const q = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('ingest'), {
      name: uniqueName('partial'),
      visibilityTimeoutSeconds: 1,
      maxReceiveCount: 5,
    });
    await cloud.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: q.url,
        Entries: ['ok-1', 'fail-once', 'ok-2'].map((b, i) => ({ Id: String(i), MessageBody: b })),
      }),
    );
    const deliveries: { body: string; receiveCount: string; at: number }[] = [];
    let failedOnce = false;
    poller = startSqsPoller({
      sqs: cloud.sqs,
      queueUrl: q.url,
      queueArn: q.arn,
      functionName: 'partial-test',
      functionTimeoutMs: 5_000,
      batchSize: 10,
      // No window: the time between the two deliveries is then the visibility timeout plus
      // receive jitter only, not plus a window that a loaded machine can overrun.
      maxBatchingWindowMs: 0,
      handler: async (event: SQSEvent): Promise<SQSBatchResponse> => {
        const failures: { itemIdentifier: string }[] = [];
        for (const r of event.Records) {
          deliveries.push({
            body: r.body,
            receiveCount: r.attributes.ApproximateReceiveCount,
            at: Date.now(),
          });
          if (r.body === 'fail-once' && !failedOnce) {
            failedOnce = true;
            failures.push({ itemIdentifier: r.messageId });
          }
        }
        return { batchItemFailures: failures };
      },
    });
    await until(() => (deliveries.filter((d) => d.body === 'fail-once').length === 2 ? true : undefined));
    const again = deliveries.filter((d) => d.body === 'fail-once');
    expect(again[1]!.receiveCount).toBe('2');
    // Not back at once: it waited out (most of) the 1 s visibility timeout.
    expect(again[1]!.at - again[0]!.at).toBeGreaterThanOrEqual(600);
    expect(
      deliveries
        .filter((d) => d.body.startsWith('ok'))
        .map((d) => d.body)
        .sort(),
    ).toEqual(['ok-1', 'ok-2']);
    await until(async () => ((await depth(q.url)) === 0 ? true : undefined));
  });

  it('treats an unknown itemIdentifier as a failure of the whole batch', async () => {
    const { failedRecordIds } = await import('#local/sqs-poller.ts');
    const records = [{ messageId: 'a' }, { messageId: 'b' }] as never;
    expect(failedRecordIds(records, { batchItemFailures: [{ itemIdentifier: 'zzz' }] }, true)).toEqual(
      new Set(['a', 'b']),
    );
    expect(failedRecordIds(records, { batchItemFailures: [{ itemIdentifier: '' }] }, true)).toEqual(
      new Set(['a', 'b']),
    );
    expect(failedRecordIds(records, { batchItemFailures: [{ itemIdentifier: 'b' }] }, true)).toEqual(
      new Set(['b']),
    );
    expect(failedRecordIds(records, { batchItemFailures: [] }, true)).toEqual(new Set());
  });

  it('moves a message that keeps failing to the DLQ after maxReceiveCount receives', async () => {
    const q = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('ingest'), {
      name: uniqueName('poison'),
      visibilityTimeoutSeconds: 1,
      maxReceiveCount: 2,
    });
    await cloud.sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: 'poison' }));
    let attempts = 0;
    poller = startSqsPoller({
      sqs: cloud.sqs,
      queueUrl: q.url,
      queueArn: q.arn,
      functionName: 'dlq-test',
      functionTimeoutMs: 5_000,
      batchSize: 1,
      handler: async () => {
        attempts++;
        throw new Error('cannot process');
      },
    });
    const moved = await until(async () => {
      const out = await cloud.sqs.send(new ReceiveMessageCommand({ QueueUrl: q.dlqUrl, WaitTimeSeconds: 0 }));
      return out.Messages?.[0];
    });
    expect(moved.Body).toBe('poison');
    expect(attempts).toBe(2);
  });
  it('hands a message received while stopping back to the queue at once, not after its visibility timeout', async () => {
    const q = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('ingest'), {
      name: uniqueName('stopping'),
      visibilityTimeoutSeconds: 3_600,
    });
    const handled: string[] = [];
    const first = startSqsPoller({
      sqs: cloud.sqs,
      queueUrl: q.url,
      queueArn: q.arn,
      functionName: 'stopping-test',
      functionTimeoutMs: 5_000,
      handler: async (event: SQSEvent) => {
        for (const r of event.Records) handled.push(r.body);
      },
    });
    // Let its long poll begin, then stop it and send while that receive is still waiting.
    await new Promise((r) => setTimeout(r, 200));
    const stopped = first.stop();
    await cloud.sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: 'late' }));
    await stopped;
    expect(handled).toEqual([]);
    const out = await cloud.sqs.send(new ReceiveMessageCommand({ QueueUrl: q.url, WaitTimeSeconds: 2 }));
    expect(out.Messages?.map((m) => m.Body)).toEqual(['late']);
  });
});
