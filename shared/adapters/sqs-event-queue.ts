/**
 * The receiver's queue: SQS FIFO, filled with as few `SendMessageBatch` calls as possible (10
 * entries and 256 KiB a call), failed entries retried a few times within the webhook's budget.
 */
import {
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { EventQueue, QueueEntry } from '#shared/webhooks/queue-message.ts';
import { AdapterError } from './errors.ts';
import { SQS_MAX_BATCH_ENTRIES, splitSendBatches } from './sqs-batches.ts';

const MAX_BATCH_BYTES = 256 * 1024;

export class EnqueueError extends AdapterError {}

/** Splits entries into SendMessageBatch-sized chunks (count and total body size). */
export function batchEntries(entries: readonly QueueEntry[]): QueueEntry[][] {
  return splitSendBatches(entries, (entry) => Buffer.byteLength(entry.body), {
    maxEntries: SQS_MAX_BATCH_ENTRIES,
    maxBytes: MAX_BATCH_BYTES,
  });
}

/** The receiver's {@link EventQueue}: batches sent in order, failed entries retried `attempts` times. */
export class SqsEventQueue implements EventQueue {
  readonly #sqs: SQSClient;
  readonly #queueUrl: string;
  readonly #attempts: number;

  constructor(sqs: SQSClient, queueUrl: string, options: { attempts?: number } = {}) {
    this.#sqs = sqs;
    this.#queueUrl = queueUrl;
    this.#attempts = options.attempts ?? 3;
  }

  async enqueue(entries: readonly QueueEntry[]): Promise<void> {
    // In order, one batch after another: a conversation's events must enter its group in order.
    for (const batch of batchEntries(entries)) await this.#sendBatch(batch);
  }

  async #sendBatch(batch: readonly QueueEntry[]): Promise<void> {
    let pending: SendMessageBatchRequestEntry[] = batch.map((e, i) => ({
      Id: String(i),
      MessageBody: e.body,
      MessageGroupId: e.groupId,
      MessageDeduplicationId: e.dedupeId,
    }));
    let lastError = '';
    for (let attempt = 0; attempt < this.#attempts && pending.length > 0; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      const out = await this.#sqs.send(
        new SendMessageBatchCommand({ QueueUrl: this.#queueUrl, Entries: pending }),
      );
      const failed = new Set((out.Failed ?? []).map((f) => f.Id));
      lastError = (out.Failed ?? []).map((f) => `${f.Code}: ${f.Message}`).join('; ');
      // A sender fault (bad entry) will not get better by retrying.
      if ((out.Failed ?? []).some((f) => f.SenderFault))
        throw new EnqueueError(`SQS refused entries: ${lastError}`);
      pending = pending.filter((e) => failed.has(e.Id));
    }
    if (pending.length > 0)
      throw new EnqueueError(`SQS did not take ${pending.length} entries: ${lastError}`);
  }
}
