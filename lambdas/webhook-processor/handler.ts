/**
 * The webhook event processor (SQS FIFO → Lambda, partial batch failures): each record is one
 * LINE event, handled in its conversation's order. A record that must be retried is handed back
 * with a backoff (its visibility timeout), and the later records of its conversation in this
 * batch are handed back untouched, so a conversation is never answered out of order.
 */
import middy from '@middy/core';
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { InvalidWebhookBodyError } from '#shared/line/webhook.ts';
import type { Logger } from '#shared/log.ts';
import type { ProcessResult } from '#shared/webhooks/process.ts';
import {
  MalformedQueueMessageError,
  parseQueuedEvent,
  type QueuedWebhookEvent,
} from '#shared/webhooks/queue-message.ts';

/** Longest backoff the queue can carry out (SQS caps visibility at 12 h). */
const MAX_VISIBILITY_SECONDS = 12 * 3600;

export interface ProcessorDeps {
  readonly process: (event: QueuedWebhookEvent, receiveCount: number) => Promise<ProcessResult>;
  /** Hands a record back to the queue after `seconds` (ChangeMessageVisibility). */
  readonly retryLater: (receiptHandle: string, seconds: number) => Promise<void>;
  readonly log: Logger;
  /**
   * The longest one record can take (the Messaging API timeout and the store writes around it).
   * A record is not started with less time left than this: it and the rest of the batch go back
   * to the queue at once, instead of the whole batch timing out and coming back only after the
   * queue's visibility timeout.
   */
  readonly recordBudgetMs: number;
}

export function makeProcessorHandler(deps: ProcessorDeps) {
  return middy(async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    const failures: SQSBatchItemFailure[] = [];
    const blockedGroups = new Set<string>();
    const counts: Record<string, number> = {
      Done: 0,
      Skipped: 0,
      Failed: 0,
      Retried: 0,
      RateLimited: 0,
      Deferred: 0,
    };
    let outOfTime = false;
    for (const record of event.Records) {
      const group = record.attributes.MessageGroupId ?? record.messageId;
      if (blockedGroups.has(group)) {
        failures.push({ itemIdentifier: record.messageId });
        continue;
      }
      outOfTime ||= context.getRemainingTimeInMillis() < deps.recordBudgetMs;
      if (outOfTime) {
        // Not started: visible again at once, in order (the FIFO group stays locked until then).
        counts.Deferred!++;
        await deps.retryLater(record.receiptHandle, 0).catch(() => undefined);
        failures.push({ itemIdentifier: record.messageId });
        continue;
      }
      try {
        const queued = parseQueuedEvent(record.body);
        const result = await deps.process(queued, Number(record.attributes.ApproximateReceiveCount ?? 1));
        const fields = {
          eventId: queued.event.webhookEventId,
          channelId: queued.channelId,
          type: queued.event.type,
        };
        switch (result.kind) {
          case 'done':
            counts.Done!++;
            deps.log.info('event handled', { ...fields, outcome: result.outcome });
            break;
          case 'skipped':
            counts.Skipped!++;
            deps.log.info('event skipped', { ...fields, reason: result.reason });
            break;
          case 'failed':
            counts.Failed!++;
            // A deliberate refusal (too old to answer safely) is a warning, not an error.
            if (result.expected) deps.log.warn('event not acted on', { ...fields, reason: result.reason });
            else deps.log.error('event failed permanently', { ...fields, reason: result.reason });
            break;
          case 'retry': {
            counts.Retried!++;
            if (result.rateLimited) counts.RateLimited!++;
            const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(result.delayMs / 1000));
            deps.log.warn('event retried later', { ...fields, reason: result.reason, inSeconds: seconds });
            await deps.retryLater(record.receiptHandle, seconds).catch((error: unknown) => {
              deps.log.warn('could not set the retry delay; the queue visibility timeout applies', { error });
            });
            blockedGroups.add(group);
            failures.push({ itemIdentifier: record.messageId });
            break;
          }
        }
      } catch (error) {
        deps.log.error('event processing error', { messageId: record.messageId, error });
        // A message that cannot be parsed never will: it goes its way to the DLQ alone, without
        // holding back the rest of its conversation. Anything else may pass on a retry, in order.
        if (!(error instanceof MalformedQueueMessageError || error instanceof InvalidWebhookBodyError)) {
          blockedGroups.add(group);
        }
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    if (counts.Deferred)
      deps.log.warn('records handed back unstarted: too little time left', { count: counts.Deferred });
    deps.log.metrics(counts);
    return { batchItemFailures: failures };
  });
}
