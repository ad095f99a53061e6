/**
 * End User Messaging SMS's delivery events of the stack's configuration set, from the SNS topic's
 * SQS queue (raw message delivery: each body is one event record) in batches with partial batch
 * failures. An event it cannot use (not JSON, of no Switchboard text, of a type it does not track) is
 * logged once and acknowledged: a retry cannot fix it. A failure to write is that record's failure,
 * so SQS gives it back after its visibility timeout (the write is idempotent), and after the queue's
 * last receive moves it to the dead-letter queue.
 */
import middy from '@middy/core';
import type { SQSRecord } from 'aws-lambda';
import { batchHandler } from '#shared/adapters/sqs-record-batch.ts';
import type { Logger } from '#shared/log.ts';
import type { SmsEventResult } from '#shared/sms/sms-outcomes.ts';

/** Events recorded at once: each is one UpdateItem (two when a stale event proves a later send). */
const AT_ONCE = 16;

export interface SmsEventsDeps {
  readonly record: (body: unknown) => Promise<SmsEventResult>;
  readonly log: Logger;
}

export function makeSmsEventsHandler(deps: SmsEventsDeps) {
  return middy(
    batchHandler({
      atOnce: AT_ONCE,
      what: 'SMS event',
      metric: 'SmsEvents',
      log: deps.log,
      recordOne: (record) => recordOne(deps, record),
    }),
  );
}

/** One record's event recorded and logged, its outcome returned; throws only when the write failed. */
async function recordOne(deps: SmsEventsDeps, record: SQSRecord): Promise<SmsEventResult['outcome']> {
  const result = await deps.record(record.body);
  if (result.outcome === 'ignored') {
    deps.log.warn('SMS event dropped', { reason: result.reason, messageId: record.messageId });
    return result.outcome;
  }
  if (result.outcome === 'unknown-task') {
    const { clientId, jobId, taskId, attempt, state } = result.change;
    deps.log
      .withKeys({ clientId, jobId, taskId, attempt })
      .info('SMS event for no task of the client', { state });
  }
  return result.outcome;
}
