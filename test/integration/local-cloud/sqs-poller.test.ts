import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { createQueueWithDlq } from '#local/cloud.ts';
import { type SqsPoller, startSqsPoller } from '#local/sqs-poller.ts';
import { queueSpec } from '#shared/resources.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { eventually } from '../../support/wait.ts';

const cloud = testCloud();
let poller: SqsPoller | undefined;
afterEach(async () => {
  await poller?.stop();
  poller = undefined;
});

const until = <T>(check: () => Promise<T | undefined> | T | undefined) =>
  eventually(check, 'the condition', { timeoutMs: 60_000, everyMs: 50 });

/**
 * The test cloud's SQS client as a poller sees it, counting the poller's receives and the records
 * they brought; `beforeReceive` holds each receive before it reaches the queue.
 */
function watchedSqs(beforeReceive?: () => Promise<void>): {
  sqs: SQSClient;
  seen: { receives: number; received: number };
} {
  const seen = { receives: 0, received: 0 };
  const sqs = Object.create(cloud.sqs) as SQSClient;
  sqs.send = (async (command: unknown) => {
    if (!(command instanceof ReceiveMessageCommand)) return cloud.sqs.send(command as never);
    seen.receives++;
    await beforeReceive?.();
    const out = await cloud.sqs.send(command);
    seen.received += out.Messages?.length ?? 0;
    return out;
  }) as SQSClient['send'];
  return { sqs, seen };
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
    // Seen three, and the queue is empty: every message it kept was handled and deleted, so a
    // duplicate it had kept would be in `seen` by now.
    await until(async () => (seen.length >= 3 && (await depth(q.url)) === 0 ? true : undefined));
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
    const start = (batchSize: number, maxBatchingWindowMs: number, sqs = cloud.sqs) =>
      startSqsPoller({
        sqs,
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

    // A 4 s window: three records, each sent once the poller has received the one before (so
    // they arrive one by one, inside the window the first opened), make one invocation, not
    // three. The window's length is the subject here: the slack is for a loaded machine, where
    // the three sends and receives must still fit in it.
    batches.length = 0;
    const watched = watchedSqs();
    poller = start(10, 4_000, watched.sqs);
    for (let i = 0; i < 3; i++) {
      await send(100 + i, 1);
      await until(() => (watched.seen.received > i ? true : undefined));
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
    let letReceive: () => void = () => {};
    const mayReceive = new Promise<void>((resolve) => {
      letReceive = resolve;
    });
    const { sqs, seen } = watchedSqs(() => mayReceive);
    const first = startSqsPoller({
      sqs,
      queueUrl: q.url,
      queueArn: q.arn,
      functionName: 'stopping-test',
      functionTimeoutMs: 5_000,
      handler: async (event: SQSEvent) => {
        for (const r of event.Records) handled.push(r.body);
      },
    });
    // Its receive has begun (held before it reaches the queue): stop it, send, and only then let
    // that receive through, so it brings the message to a poller that is stopping.
    await until(() => (seen.receives > 0 ? true : undefined));
    const stopped = first.stop();
    await cloud.sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: 'late' }));
    letReceive();
    await stopped;
    expect(seen.received).toBe(1);
    expect(handled).toEqual([]);
    const out = await cloud.sqs.send(new ReceiveMessageCommand({ QueueUrl: q.url, WaitTimeSeconds: 2 }));
    expect(out.Messages?.map((m) => m.Body)).toEqual(['late']);
  });
});
