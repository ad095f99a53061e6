import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeProcessorHandler } from '#lambdas/webhook-processor/handler.ts';
import { lambdaContext } from '#local/lambda.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import type { WebhookEvent } from '#shared/line/webhook.ts';
import type { ProcessResult } from '#shared/webhooks/process.ts';
import type { QueuedWebhookEvent } from '#shared/webhooks/queue-message.ts';
import { eventBuilders, T0 } from './fakes.ts';

const CHANNEL_ID = '1656000001';
const builders = eventBuilders();

/** A text event whose text names it, so the scripted processor can tell events apart. */
function textEvent(from: string, name: string): WebhookEvent {
  return builders.text({ channelId: CHANNEL_ID, from, text: name });
}

let sequence = 0;
/** An SQS FIFO record as the Lambda event source mapping delivers it. */
function record(body: string, group: string, receiveCount = 1): SQSRecord {
  sequence++;
  return {
    messageId: `0b5d0f3e-0000-4000-8000-${String(sequence).padStart(12, '0')}`,
    receiptHandle: `AQEB-receipt-${sequence}`,
    body,
    attributes: {
      ApproximateReceiveCount: String(receiveCount),
      SentTimestamp: String(T0),
      SequenceNumber: `1863000000000000${String(sequence).padStart(4, '0')}`,
      MessageGroupId: group,
      SenderId: 'AROAEXAMPLE:webhook-receiver',
      MessageDeduplicationId: `dedupe-${sequence}`,
      ApproximateFirstReceiveTimestamp: String(T0 + 5),
    },
    messageAttributes: {},
    md5OfBody: 'd41d8cd98f00b204e9800998ecf8427e',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:ap-northeast-1:123456789012:switchboard-prod-webhook-events.fifo',
    awsRegion: 'ap-northeast-1',
  };
}

function eventRecord(event: WebhookEvent, receiveCount = 1): SQSRecord {
  const body: QueuedWebhookEvent = {
    v: 1,
    channelId: CHANNEL_ID,
    destination: 'Ubot',
    receivedAt: T0,
    event,
  };
  const group = `${CHANNEL_ID}:${(event.source as { userId: string }).userId}`;
  return record(JSON.stringify(body), group, receiveCount);
}

const nameOf = (event: QueuedWebhookEvent) =>
  (event.event as unknown as { message: { text: string } }).message.text;

function setup(
  script: Record<string, ProcessResult> = {},
  options: { retryLaterFails?: boolean; slowMs?: number; timeoutMs?: number } = {},
) {
  // The invocation's time left, on a clock the test moves: a slow record uses up `slowMs` of it.
  let remainingMs = options.timeoutMs ?? 30_000;
  const processed: { name: string; receiveCount: number }[] = [];
  const retries: { receiptHandle: string; seconds: number }[] = [];
  const logs: string[] = [];
  const handler = makeProcessorHandler({
    process: async (event, receiveCount) => {
      const name = nameOf(event);
      processed.push({ name, receiveCount });
      if (name === 'throws') throw new Error('DynamoDB: ProvisionedThroughputExceededException');
      if (name.startsWith('slow')) remainingMs -= options.slowMs ?? 0;
      return script[name] ?? { kind: 'done', outcome: 'answered' };
    },
    retryLater: async (receiptHandle, seconds) => {
      if (options.retryLaterFails) throw new Error('ReceiptHandleIsInvalid');
      retries.push({ receiptHandle, seconds });
    },
    log: new PowertoolsLog('webhook-processor', { write: (line) => logs.push(line) }),
    recordBudgetMs: 1_000,
  });
  const invoke = async (...records: SQSRecord[]) => {
    const event: SQSEvent = { Records: records };
    const out = (await handler(event, {
      ...lambdaContext({ functionName: 'webhook-processor', timeoutMs: 30_000 }),
      getRemainingTimeInMillis: () => remainingMs,
    })) as SQSBatchResponse;
    return out.batchItemFailures.map((f) => f.itemIdentifier);
  };
  return { invoke, processed, retries, logs };
}

const retry = (delayMs: number): ProcessResult => ({
  kind: 'retry',
  delayMs,
  reason: 'push server-error',
  rateLimited: false,
});

describe('the webhook processor handler', () => {
  it('acknowledges every record that is done, skipped or failed for good', async () => {
    const { invoke, processed } = setup({
      skipped: { kind: 'skipped', reason: 'already done' },
      failed: { kind: 'failed', reason: 'push rejected 400' },
    });
    const failures = await invoke(
      eventRecord(textEvent('Ua', 'done')),
      eventRecord(textEvent('Ua', 'skipped')),
      eventRecord(textEvent('Ua', 'failed')),
    );
    expect(failures).toEqual([]);
    expect(processed.map((p) => p.name)).toEqual(['done', 'skipped', 'failed']);
  });

  it('does not start a record it may not finish in time: the rest of its conversation goes back at once, unstarted', async () => {
    // 2.5 s to live, a record may take 1 s: the slow one (1.7 s) leaves too little for the records after it.
    const { invoke, processed, retries, logs } = setup({}, { slowMs: 1_700, timeoutMs: 2_500 });
    const records = [
      eventRecord(textEvent('Ua', 'slow-1')),
      eventRecord(textEvent('Ua', 'after-1')),
      eventRecord(textEvent('Ua', 'after-2')),
    ];
    const failures = await invoke(...records);
    expect(processed.map((p) => p.name)).toEqual(['slow-1']);
    expect(failures).toEqual([records[1]!.messageId, records[2]!.messageId]);
    // Every record handed back unstarted is visible again at once, not after the queue's timeout.
    expect(retries).toEqual([
      { receiptHandle: records[1]!.receiptHandle, seconds: 0 },
      { receiptHandle: records[2]!.receiptHandle, seconds: 0 },
    ]);
    expect(logs.some((l) => l.includes('handed back unstarted'))).toBe(true);
  });

  it('starts nothing with too little time left, in any conversation', async () => {
    const { invoke, processed, retries } = setup({}, { timeoutMs: 500 });
    const records = [eventRecord(textEvent('Ua', 'a')), eventRecord(textEvent('Ub', 'b'))];
    expect(await invoke(...records)).toEqual(records.map((r) => r.messageId));
    expect(processed).toEqual([]);
    expect(retries.map((r) => r.seconds)).toEqual([0, 0]);
  });

  it('handles conversations side by side: a slow answer holds back its own conversation only', async () => {
    // The first conversation's record waits on LINE until the second's is done: one after the
    // other, the second would never start (and a whole batch would wait out ten timeouts).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const order: string[] = [];
    const handler = makeProcessorHandler({
      process: async (event) => {
        const name = nameOf(event);
        order.push(`start ${name}`);
        if (name === 'slow') await gate;
        else release();
        order.push(`end ${name}`);
        return { kind: 'done', outcome: 'answered' };
      },
      retryLater: async () => {},
      log: new PowertoolsLog('webhook-processor', { write: () => {} }),
      recordBudgetMs: 1_000,
    });
    const out = (await handler(
      { Records: [eventRecord(textEvent('Ua', 'slow')), eventRecord(textEvent('Ub', 'quick'))] },
      lambdaContext({ functionName: 'webhook-processor', timeoutMs: 30_000 }),
    )) as SQSBatchResponse;
    expect(out.batchItemFailures).toEqual([]);
    expect(order).toEqual(['start slow', 'start quick', 'end quick', 'end slow']);
  });

  it('hands a retried record back, with the later records of its conversation, but not other conversations', async () => {
    const { invoke, processed } = setup({ 'a-1': retry(4_000) });
    const records = [
      eventRecord(textEvent('Ua', 'a-1')),
      eventRecord(textEvent('Ub', 'b-1')),
      eventRecord(textEvent('Ua', 'a-2')),
      eventRecord(textEvent('Ub', 'b-2')),
      eventRecord(textEvent('Ua', 'a-3')),
    ];
    const failures = await invoke(...records);
    expect(failures).toEqual([records[0]!.messageId, records[2]!.messageId, records[4]!.messageId]);
    // a-2 and a-3 were not even looked at: answering them before a-1 would break the order.
    expect(processed.map((p) => p.name)).toEqual(['a-1', 'b-1', 'b-2']);
  });

  it('asks the queue to redeliver a retried record after its delay, in whole seconds', async () => {
    const { invoke, retries } = setup({ short: retry(1_500), long: retry(20 * 3600_000) });
    const short = eventRecord(textEvent('Ua', 'short'));
    const long = eventRecord(textEvent('Ub', 'long'));
    await invoke(short, long);
    expect(retries).toEqual([
      { receiptHandle: short.receiptHandle, seconds: 2 },
      // SQS caps a visibility timeout at 12 hours.
      { receiptHandle: long.receiptHandle, seconds: 12 * 3600 },
    ]);
  });

  it('still hands the record back when the delay cannot be set', async () => {
    const { invoke, logs } = setup({ 'a-1': retry(4_000) }, { retryLaterFails: true });
    const record1 = eventRecord(textEvent('Ua', 'a-1'));
    expect(await invoke(record1)).toEqual([record1.messageId]);
    expect(logs.some((l) => l.includes('could not set the retry delay'))).toBe(true);
  });

  it('passes the queue’s receive count to the use case', async () => {
    const { invoke, processed } = setup();
    await invoke(eventRecord(textEvent('Ua', 'third-time'), 3));
    expect(processed).toEqual([{ name: 'third-time', receiveCount: 3 }]);
  });

  it.each([
    ['not JSON', '{"v":1,'],
    ['of another version', JSON.stringify({ v: 2, channelId: CHANNEL_ID })],
    ['without a valid event', JSON.stringify({ v: 1, channelId: CHANNEL_ID, event: { type: 'message' } })],
  ])('fails a queue message that is %s, and still handles the other conversations', async (_what, body) => {
    const { invoke, processed, logs } = setup();
    const bad = record(body, `${CHANNEL_ID}:Ubad`);
    const other = eventRecord(textEvent('Ua', 'a-1'));
    expect(await invoke(bad, other)).toEqual([bad.messageId]);
    expect(processed.map((p) => p.name)).toEqual(['a-1']);
    expect(logs.some((l) => l.includes('event processing error') && l.includes(bad.messageId))).toBe(true);
  });

  it('fails only the malformed message, not the later events of its conversation', async () => {
    const { invoke, processed } = setup();
    const bad = record('{"v":1,', `${CHANNEL_ID}:Ua`);
    const later = eventRecord(textEvent('Ua', 'a-2'));
    expect(await invoke(bad, later)).toEqual([bad.messageId]);
    expect(processed.map((p) => p.name)).toEqual(['a-2']);
  });

  it('hands back a record whose processing threw, with the rest of its conversation', async () => {
    const { invoke, processed } = setup();
    const records = [
      eventRecord(textEvent('Ua', 'throws')),
      eventRecord(textEvent('Ua', 'a-2')),
      eventRecord(textEvent('Ub', 'b-1')),
    ];
    expect(await invoke(...records)).toEqual([records[0]!.messageId, records[1]!.messageId]);
    expect(processed.map((p) => p.name)).toEqual(['throws', 'b-1']);
  });
});
