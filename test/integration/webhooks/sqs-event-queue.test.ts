import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { createQueueWithDlq } from '#local/cloud.ts';
import { SqsEventQueue } from '#shared/adapters/sqs-event-queue.ts';
import { queueSpec } from '#shared/resources.ts';
import type { QueueEntry } from '#shared/webhooks/queue-message.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();

async function fifoQueue(): Promise<string> {
  const q = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('webhook-events'), {
    name: `${uniqueName('events')}.fifo`,
    visibilityTimeoutSeconds: 30,
  });
  return q.url;
}

interface Received {
  readonly group: string;
  readonly body: string;
}

/** Receives and deletes until `count` messages came, or the queue stays empty for a while. */
async function drain(url: string, count: number): Promise<Received[]> {
  const out: Received[] = [];
  let emptyPolls = 0;
  while (out.length < count || emptyPolls < 2) {
    const got = await cloud.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['MessageGroupId'],
      }),
    );
    const messages = got.Messages ?? [];
    if (messages.length === 0) {
      emptyPolls++;
      if (emptyPolls > 10) break;
      continue;
    }
    emptyPolls = out.length >= count ? emptyPolls : 0;
    for (const m of messages) out.push({ group: m.Attributes?.MessageGroupId ?? '', body: m.Body ?? '' });
    await cloud.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
  return out;
}

function entry(group: string, id: string, size = 0): QueueEntry {
  return {
    groupId: `1656000001:${group}`,
    dedupeId: id,
    body: JSON.stringify({ id, pad: 'p'.repeat(size) }),
  };
}

const idOf = (r: Received) => (JSON.parse(r.body) as { id: string }).id;
const idsIn = (received: Received[], group: string) =>
  received.filter((r) => r.group === `1656000001:${group}`).map(idOf);

describe('the SQS event queue, on a FIFO queue', () => {
  it('keeps each conversation in order across several batches', async () => {
    const url = await fifoQueue();
    const queue = new SqsEventQueue(cloud.sqs, url);
    const entries = Array.from({ length: 25 }, (_, i) =>
      entry(i % 3 === 0 ? 'Ua' : 'Ub', `e${String(i).padStart(2, '0')}`),
    );
    await queue.enqueue(entries);
    const received = await drain(url, 25);
    expect(received).toHaveLength(25);
    expect(idsIn(received, 'Ua')).toEqual(
      entries.filter((e) => e.groupId.endsWith('Ua')).map((e) => e.dedupeId),
    );
    expect(idsIn(received, 'Ub')).toEqual(
      entries.filter((e) => e.groupId.endsWith('Ub')).map((e) => e.dedupeId),
    );
  });

  it('stores an event once when LINE redelivers it (same webhookEventId)', async () => {
    const url = await fifoQueue();
    const queue = new SqsEventQueue(cloud.sqs, url);
    await queue.enqueue([entry('Ua', 'e1'), entry('Ua', 'e2')]);
    // The redelivery comes in a body of its own, mixed with a new event.
    await queue.enqueue([entry('Ua', 'e2'), entry('Ua', 'e3')]);
    // And a duplicate inside one body.
    await queue.enqueue([entry('Ub', 'e4'), entry('Ub', 'e4')]);
    const received = await drain(url, 4);
    expect(received.map(idOf)).toHaveLength(4);
    expect(idsIn(received, 'Ua')).toEqual(['e1', 'e2', 'e3']);
    expect(idsIn(received, 'Ub')).toEqual(['e4']);
  });

  it('takes a body too large for one SendMessageBatch, in order', async () => {
    const url = await fifoQueue();
    const queue = new SqsEventQueue(cloud.sqs, url);
    const entries = Array.from({ length: 6 }, (_, i) => entry('Ua', `big${i}`, 100 * 1024));
    await queue.enqueue(entries);
    const received = await drain(url, 6);
    expect(received.map(idOf)).toEqual(entries.map((e) => e.dedupeId));
  });
});
