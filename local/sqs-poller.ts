/**
 * The SQS event source mapping, locally: polls a queue and invokes an SQS-triggered handler with
 * batches the way Lambda does — batch size and batching window, the queue's visibility timeout,
 * FIFO group order (the queue keeps a group locked while a message of it is in flight),
 * `batchItemFailures` honoured (only failed records return to the queue; a malformed response
 * fails the whole batch), and maxReceiveCount → DLQ through the queue's redrive policy.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type Handler, invokeHandler } from './lambda.ts';

export interface SqsPollerOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly functionName: string;
  readonly handler: Handler<SQSEvent, unknown>;
  readonly functionTimeoutMs: number;
  /** Records per invocation (Lambda: 1-10 for FIFO, up to 10,000 for standard queues). */
  readonly batchSize?: number;
  /** How long to gather records before invoking with a partial batch. */
  readonly maxBatchingWindowMs?: number;
  /** Parallel pollers (Lambda scales these with the queue; FIFO order is kept per group). */
  readonly concurrency?: number;
  /** Whether the function's response is read for `batchItemFailures` (ReportBatchItemFailures). */
  readonly reportBatchItemFailures?: boolean;
  readonly region?: string;
  readonly onError?: (error: unknown) => void;
}

export interface SqsPoller {
  /** Invocations so far, and how many failed as a whole. */
  stats(): { invocations: number; failedInvocations: number; records: number; deleted: number };
  /** Stops polling (within a receive's 1 s wait), waits for in-flight invocations, and releases messages received meanwhile. */
  stop(): Promise<void>;
}

/** The Lambda SQS event record for a received message. */
export function toSqsRecord(message: Message, queueArn: string, region: string): SQSRecord {
  const attrs = message.Attributes ?? {};
  const messageAttributes: SQSRecord['messageAttributes'] = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined
        ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') }
        : {}),
      stringListValues: [],
      binaryListValues: [],
    };
  }
  return {
    messageId: message.MessageId!,
    receiptHandle: message.ReceiptHandle!,
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attrs.ApproximateReceiveCount ?? '1',
      SentTimestamp: attrs.SentTimestamp ?? String(Date.now()),
      SenderId: attrs.SenderId ?? '000000000000',
      ApproximateFirstReceiveTimestamp: attrs.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      ...(attrs.MessageGroupId ? { MessageGroupId: attrs.MessageGroupId } : {}),
      ...(attrs.MessageDeduplicationId ? { MessageDeduplicationId: attrs.MessageDeduplicationId } : {}),
      ...(attrs.SequenceNumber ? { SequenceNumber: attrs.SequenceNumber } : {}),
    },
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

/**
 * Which records of a batch go back to the queue, from the handler's response: Lambda treats a
 * missing, empty or unknown `itemIdentifier` as a failure of the whole batch.
 */
export function failedRecordIds(
  records: readonly SQSRecord[],
  response: unknown,
  reportBatchItemFailures: boolean,
): Set<string> {
  if (!reportBatchItemFailures || response === undefined || response === null) return new Set();
  const all = new Set(records.map((r) => r.messageId));
  const failures = (response as SQSBatchResponse).batchItemFailures;
  if (failures === undefined || failures === null) return new Set();
  if (!Array.isArray(failures)) return all;
  const failed = new Set<string>();
  for (const f of failures) {
    const id = (f as { itemIdentifier?: unknown })?.itemIdentifier;
    if (typeof id !== 'string' || id === '' || !all.has(id)) return all;
    failed.add(id);
  }
  return failed;
}

/** Starts polling; call `stop()` to end it. */
export function startSqsPoller(options: SqsPollerOptions): SqsPoller {
  const batchSize = options.batchSize ?? 10;
  const windowMs = options.maxBatchingWindowMs ?? 0;
  const region = options.region ?? 'us-east-1';
  const reportFailures = options.reportBatchItemFailures ?? true;
  const counters = { invocations: 0, failedInvocations: 0, records: 0, deleted: 0 };
  let stopping = false;

  async function gather(): Promise<Message[]> {
    const batch: Message[] = [];
    let deadline = Number.POSITIVE_INFINITY;
    while (!stopping && batch.length < batchSize) {
      const remaining = deadline - Date.now();
      // As Lambda's event source mapping: with a window, keep gathering until it closes or the
      // batch is full; without one, invoke with whatever the first receive brought.
      if (batch.length > 0 && remaining <= 0) break;
      const waitSeconds = batch.length === 0 || remaining >= 1_000 ? 1 : 0;
      const out = await options.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: options.queueUrl,
          MaxNumberOfMessages: Math.min(10, batchSize - batch.length),
          WaitTimeSeconds: waitSeconds,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      const received = out.Messages ?? [];
      // The window opens with the first record.
      if (batch.length === 0 && received.length > 0) deadline = Date.now() + windowMs;
      batch.push(...received);
      if (waitSeconds === 0 && received.length === 0 && batch.length > 0) {
        await new Promise((r) => setTimeout(r, Math.max(0, Math.min(50, deadline - Date.now()))));
      }
    }
    return batch;
  }

  async function deleteRecords(records: readonly SQSRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += 10) {
      const chunk = records.slice(i, i + 10);
      await options.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: options.queueUrl,
          Entries: chunk.map((r, j) => ({ Id: String(j), ReceiptHandle: r.receiptHandle })),
        }),
      );
      counters.deleted += chunk.length;
    }
  }

  /**
   * Messages received after `stop()`: made visible again at once, so another poller (or the next
   * run) takes them now rather than after the queue's visibility timeout. A receive is never
   * aborted mid-flight for the same reason: the queue may already have handed its messages out.
   */
  async function release(messages: readonly Message[]): Promise<void> {
    for (let i = 0; i < messages.length; i += 10) {
      const chunk = messages.slice(i, i + 10);
      await options.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: options.queueUrl,
          Entries: chunk.map((m, j) => ({
            Id: String(j),
            ReceiptHandle: m.ReceiptHandle!,
            VisibilityTimeout: 0,
          })),
        }),
      );
    }
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      let messages: Message[];
      try {
        messages = await gather();
      } catch (error) {
        if (stopping) return;
        options.onError?.(error);
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      if (messages.length === 0) continue;
      if (stopping) {
        await release(messages).catch((error) => options.onError?.(error));
        return;
      }
      const records = messages.map((m) => toSqsRecord(m, options.queueArn, region));
      counters.invocations++;
      counters.records += records.length;
      let response: unknown;
      try {
        response = await invokeHandler(
          options.handler,
          { Records: records },
          {
            functionName: options.functionName,
            timeoutMs: options.functionTimeoutMs,
          },
        );
      } catch (error) {
        // The whole batch returns to the queue when its visibility timeout ends.
        counters.failedInvocations++;
        options.onError?.(error);
        continue;
      }
      const failed = failedRecordIds(records, response, reportFailures);
      try {
        await deleteRecords(records.filter((r) => !failed.has(r.messageId)));
      } catch (error) {
        options.onError?.(error);
      }
    }
  }

  const loops = Array.from({ length: options.concurrency ?? 1 }, () => loop());
  return {
    stats: () => ({ ...counters }),
    stop: async () => {
      stopping = true;
      await Promise.allSettled(loops);
    },
  };
}
