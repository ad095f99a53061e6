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
  const mapping = new EventSourceMapping(options);
  const loops = Array.from({ length: options.concurrency ?? 1 }, () => mapping.poll());
  return {
    stats: () => mapping.stats(),
    stop: async () => {
      mapping.stop();
      await Promise.allSettled(loops);
    },
  };
}

/** One queue's event source mapping; each {@link poll} is one poller, run until stopped. */
class EventSourceMapping {
  /** No new receive starts, and what is received meanwhile is released. */
  #stopping = false;
  readonly #options: SqsPollerOptions;
  readonly #batchSize: number;
  readonly #windowMs: number;
  readonly #region: string;
  readonly #reportFailures: boolean;
  readonly #counters = { invocations: 0, failedInvocations: 0, records: 0, deleted: 0 };

  constructor(options: SqsPollerOptions) {
    this.#options = options;
    this.#batchSize = options.batchSize ?? 10;
    this.#windowMs = options.maxBatchingWindowMs ?? 0;
    this.#region = options.region ?? 'us-east-1';
    this.#reportFailures = options.reportBatchItemFailures ?? true;
  }

  /** Stops every poller after its current receive or invocation. */
  stop(): void {
    this.#stopping = true;
  }

  stats(): ReturnType<SqsPoller['stats']> {
    return { ...this.#counters };
  }

  /** Gathers batches and invokes the handler with them until stopped. */
  async poll(): Promise<void> {
    while (!this.#stopping) {
      let messages: Message[];
      try {
        messages = await this.#gather();
      } catch (error) {
        if (this.#stopping) return;
        this.#options.onError?.(error);
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      if (messages.length === 0) continue;
      if (this.#stopping) {
        await this.#release(messages).catch((error) => this.#options.onError?.(error));
        return;
      }
      await this.#invoke(messages);
    }
  }

  /**
   * One batch, as Lambda's event source mapping gathers it: with a window, keep gathering until it
   * closes or the batch is full; without one, invoke with whatever the first receive brought.
   */
  async #gather(): Promise<Message[]> {
    const batch: Message[] = [];
    let deadline = Number.POSITIVE_INFINITY;
    while (!this.#stopping && batch.length < this.#batchSize) {
      const remaining = deadline - Date.now();
      if (batch.length > 0 && remaining <= 0) break;
      const waitSeconds = batch.length === 0 || remaining >= 1_000 ? 1 : 0;
      const received = await this.#receive(Math.min(10, this.#batchSize - batch.length), waitSeconds);
      // The window opens with the first record.
      if (batch.length === 0 && received.length > 0) deadline = Date.now() + this.#windowMs;
      batch.push(...received);
      if (waitSeconds === 0 && received.length === 0 && batch.length > 0) {
        await new Promise((r) => setTimeout(r, Math.max(0, Math.min(50, deadline - Date.now()))));
      }
    }
    return batch;
  }

  async #receive(maxMessages: number, waitSeconds: number): Promise<Message[]> {
    const out = await this.#options.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.#options.queueUrl,
        MaxNumberOfMessages: maxMessages,
        WaitTimeSeconds: waitSeconds,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    return out.Messages ?? [];
  }

  /**
   * Invokes the handler with one batch and deletes the records it did not report failed; when the
   * invocation fails, the whole batch returns to the queue when its visibility timeout ends.
   */
  async #invoke(messages: readonly Message[]): Promise<void> {
    const options = this.#options;
    const records = messages.map((m) => toSqsRecord(m, options.queueArn, this.#region));
    this.#counters.invocations++;
    this.#counters.records += records.length;
    let response: unknown;
    try {
      response = await invokeHandler(
        options.handler,
        { Records: records },
        { functionName: options.functionName, timeoutMs: options.functionTimeoutMs },
      );
    } catch (error) {
      this.#counters.failedInvocations++;
      options.onError?.(error);
      return;
    }
    const failed = failedRecordIds(records, response, this.#reportFailures);
    try {
      await this.#deleteRecords(records.filter((r) => !failed.has(r.messageId)));
    } catch (error) {
      options.onError?.(error);
    }
  }

  async #deleteRecords(records: readonly SQSRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += 10) {
      const chunk = records.slice(i, i + 10);
      await this.#options.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.#options.queueUrl,
          Entries: chunk.map((r, j) => ({ Id: String(j), ReceiptHandle: r.receiptHandle })),
        }),
      );
      this.#counters.deleted += chunk.length;
    }
  }

  /**
   * Messages received after `stop()`: made visible again at once, so another poller (or the next
   * run) takes them now rather than after the queue's visibility timeout. A receive is never
   * aborted mid-flight for the same reason: the queue may already have handed its messages out.
   */
  async #release(messages: readonly Message[]): Promise<void> {
    for (let i = 0; i < messages.length; i += 10) {
      const chunk = messages.slice(i, i + 10);
      await this.#options.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: this.#options.queueUrl,
          Entries: chunk.map((m, j) => ({
            Id: String(j),
            ReceiptHandle: m.ReceiptHandle!,
            VisibilityTimeout: 0,
          })),
        }),
      );
    }
  }
}
