/**
 * The ingest queue ({@link IngestQueue}) on SQS (a standard queue): one `SendMessage` per
 * continuation, with `DelaySeconds` when the sender asks to be run later (a cancel sweep's
 * re-check of messages still held by their broker).
 */
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { IngestQueue, IngestQueueMessage, QueueSendOptions } from '#shared/jobs/ports.ts';
import { encodeIngestQueueMessage } from '#shared/jobs/queue-message.ts';

/** The most SQS delays a message: 15 minutes. */
const MAX_DELAY_SECONDS = 900;

/** An {@link IngestQueue} sending to `queueUrl`. */
export class SqsIngestQueue implements IngestQueue {
  readonly #sqs: SQSClient;
  readonly #queueUrl: string;

  constructor(sqs: SQSClient, queueUrl: string) {
    this.#sqs = sqs;
    this.#queueUrl = queueUrl;
  }

  async send(message: IngestQueueMessage, options: QueueSendOptions = {}): Promise<void> {
    const delay = options.delaySeconds;
    await this.#sqs.send(
      new SendMessageCommand({
        QueueUrl: this.#queueUrl,
        MessageBody: encodeIngestQueueMessage(message),
        ...(delay === undefined || delay <= 0
          ? {}
          : { DelaySeconds: Math.min(MAX_DELAY_SECONDS, Math.ceil(delay)) }),
      }),
    );
  }
}
