/**
 * The outcome webhook worker (SQS → Lambda, partial batch failures): each record is one delivery
 * (one POST of up to 50 events of a client), all of a batch sent at once. A failed delivery is hidden
 * for its backoff delay (its visibility timeout) and reported failed, so SQS gives it back then; the
 * receive count is the attempt, and after the last one SQS moves it to the dead-letter queue.
 */
import middy from '@middy/core';
import type { SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { Logger } from '#shared/log.ts';
import type { OutcomeDeliverer } from '#shared/outcomes/deliver.ts';
import { parseOutcomeDelivery } from '#shared/outcomes/queue-message.ts';

export interface OutcomeWebhooksDeps {
  readonly deliverer: Pick<OutcomeDeliverer, 'deliver'>;
  /** Hands a record back to the queue after `seconds` (ChangeMessageVisibility). */
  readonly retryLater: (receiptHandle: string, seconds: number) => Promise<void>;
  readonly log: Logger;
}

export function makeOutcomeWebhooksHandler(deps: OutcomeWebhooksDeps) {
  const deliverOne = async (record: SQSRecord): Promise<boolean> => {
    const delivery = parseOutcomeDelivery(record.body);
    if (!delivery) {
      deps.log.error('outcome delivery is not a delivery: dropped', { messageId: record.messageId });
      return true;
    }
    const attempt = Number(record.attributes.ApproximateReceiveCount ?? 1);
    const result = await deps.deliverer.deliver(delivery, attempt);
    const fields = { clientId: delivery.clientId, events: delivery.events.length, attempt };
    if (result.kind === 'delivered') return true;
    if (result.kind === 'dropped') {
      deps.log.info('outcome delivery dropped', { ...fields, reason: result.reason });
      return true;
    }
    deps.log.warn('outcome delivery failed', {
      ...fields,
      reason: result.reason,
      retryIn: result.delaySeconds,
    });
    await deps.retryLater(record.receiptHandle, result.delaySeconds).catch(() => undefined);
    return false;
  };
  return middy(async (event: SQSEvent): Promise<SQSBatchResponse> => {
    const results = await Promise.allSettled(event.Records.map(deliverOne));
    const failures: SQSBatchItemFailure[] = [];
    results.forEach((result, i) => {
      if (result.status === 'fulfilled' && result.value) return;
      if (result.status === 'rejected') {
        deps.log.warn('outcome delivery failed', { error: String((result.reason as Error)?.message) });
      }
      failures.push({ itemIdentifier: event.Records[i]!.messageId });
    });
    return { batchItemFailures: failures };
  });
}
