/**
 * The outcome delivery queue on SQS: deliveries sent with SendMessageBatch (10 messages, and under
 * SQS's 256 KiB per batch), a failed entry sent again once, then an error (the stream batch is then
 * retried as a whole: the same event ids, so the receiver drops what arrived twice).
 */
import {
  ChangeMessageVisibilityCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { OutcomeDelivery, OutcomeDeliveryQueue } from '#shared/outcomes/ports.ts';
import { encodeOutcomeDelivery } from '#shared/outcomes/queue-message.ts';
import { SQS_MAX_BATCH_ENTRIES, splitSendBatches } from './sqs-batches.ts';

const MAX_BATCH_BYTES = 200 * 1024;

export class SqsOutcomeDeliveryQueue implements OutcomeDeliveryQueue {
  readonly #sqs: SQSClient;
  readonly #queueUrl: string;

  constructor(sqs: SQSClient, queueUrl: string) {
    this.#sqs = sqs;
    this.#queueUrl = queueUrl;
  }

  async send(deliveries: readonly OutcomeDelivery[]): Promise<void> {
    const batches = this.#batches(deliveries.map(encodeOutcomeDelivery));
    await Promise.all(batches.map((batch) => this.#sendBatch(batch)));
  }

  /** Hides a received delivery for `seconds` (its backoff). */
  async retryLater(receiptHandle: string, seconds: number): Promise<void> {
    await this.#sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.#queueUrl,
        ReceiptHandle: receiptHandle,
        VisibilityTimeout: seconds,
      }),
    );
  }

  #batches(bodies: readonly string[]): SendMessageBatchRequestEntry[][] {
    const limits = { maxEntries: SQS_MAX_BATCH_ENTRIES, maxBytes: MAX_BATCH_BYTES };
    return splitSendBatches(bodies, (body) => Buffer.byteLength(body), limits).map((batch) =>
      batch.map((body, i) => ({ Id: String(i), MessageBody: body })),
    );
  }

  async #sendBatch(entries: SendMessageBatchRequestEntry[], retried = false): Promise<void> {
    const out = await this.#sqs.send(
      new SendMessageBatchCommand({ QueueUrl: this.#queueUrl, Entries: entries }),
    );
    const failed = new Set((out.Failed ?? []).map((f) => f.Id));
    if (failed.size === 0) return;
    if (retried) throw new Error(`${failed.size} outcome deliveries could not be queued`);
    await this.#sendBatch(
      entries.filter((e) => failed.has(e.Id)),
      true,
    );
  }
}
