/**
 * The webhook event processor (SQS FIFO → Lambda, partial batch failures): each record is one
 * LINE event, handled in its conversation's order, the batch's conversations side by side. A
 * record that must be retried is handed back with a backoff (its visibility timeout), and the
 * later records of its conversation in this batch are handed back untouched, so a conversation is
 * never answered out of order.
 */
import middy from '@middy/core';
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
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
    const counts: Record<string, number> = {
      Done: 0,
      Skipped: 0,
      Failed: 0,
      Retried: 0,
      RateLimited: 0,
      Deferred: 0,
    };
    // Conversations side by side, each in its order: a slow answer from LINE (up to its timeout)
    // holds back its own conversation only. One after another, a batch of ten took ten timeouts,
    // so most records were handed back unstarted, and each hand-back counts as a receive towards
    // the dead-letter queue's limit without the record ever being tried.
    const groups = new Map<string, SQSRecord[]>();
    for (const record of event.Records) {
      const group = record.attributes.MessageGroupId ?? record.messageId;
      groups.set(group, [...(groups.get(group) ?? []), record]);
    }
    await Promise.all(
      [...groups.values()].map(async (records) => {
        let blocked = false;
        let outOfTime = false;
        for (const record of records) {
          outOfTime ||= !blocked && context.getRemainingTimeInMillis() < deps.recordBudgetMs;
          if (outOfTime) {
            // Not started: visible again at once, in order (the FIFO group stays locked until then).
            counts.Deferred!++;
            await deps.retryLater(record.receiptHandle, 0).catch(() => undefined);
            failures.push({ itemIdentifier: record.messageId });
            continue;
          }
          if (blocked) {
            failures.push({ itemIdentifier: record.messageId });
            continue;
          }
          const handled = await handleRecord(deps, record, counts);
          if (handled !== 'ok') failures.push({ itemIdentifier: record.messageId });
          // The rest of its conversation waits for it (a record that can never be read does not hold it back).
          if (handled === 'retry') blocked = true;
        }
      }),
    );
    if (counts.Deferred)
      deps.log.warn('records handed back unstarted: too little time left', { count: counts.Deferred });
    deps.log.metrics(counts);
    return { batchItemFailures: failures };
  });
}

/** One record: handled (`ok`), to be retried in its conversation's order (`retry`), or failed alone (`dropped`). */
async function handleRecord(
  deps: ProcessorDeps,
  record: SQSRecord,
  counts: Record<string, number>,
): Promise<'ok' | 'retry' | 'dropped'> {
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
        return 'ok';
      case 'skipped':
        counts.Skipped!++;
        deps.log.info('event skipped', { ...fields, reason: result.reason });
        return 'ok';
      case 'failed':
        counts.Failed!++;
        // A deliberate refusal (too old to answer safely) is a warning, not an error.
        if (result.expected) deps.log.warn('event not acted on', { ...fields, reason: result.reason });
        else deps.log.error('event failed permanently', { ...fields, reason: result.reason });
        return 'ok';
      case 'retry': {
        counts.Retried!++;
        if (result.rateLimited) counts.RateLimited!++;
        const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(result.delayMs / 1000));
        deps.log.warn('event retried later', { ...fields, reason: result.reason, inSeconds: seconds });
        await deps.retryLater(record.receiptHandle, seconds).catch((error: unknown) => {
          deps.log.warn('could not set the retry delay; the queue visibility timeout applies', { error });
        });
        return 'retry';
      }
    }
  } catch (error) {
    deps.log.error('event processing error', { messageId: record.messageId, error });
    // A message that cannot be parsed never will: it goes its way to the DLQ alone, without
    // holding back the rest of its conversation. Anything else may pass on a retry, in order.
    if (error instanceof MalformedQueueMessageError || error instanceof InvalidWebhookBodyError)
      return 'dropped';
    return 'retry';
  }
}
