/**
 * SES's sending events of the stack's configuration set, from the EventBridge rule's SQS queue in
 * batches (partial batch failures): each record's body is one EventBridge event. An event it cannot
 * use (not JSON, malformed, of no Switchboard email, of a type it does not track) is logged once and
 * acknowledged: a retry cannot fix it. A failure to write is that record's failure, so SQS gives it
 * back after its visibility timeout (both writes are idempotent), and after the queue's last receive
 * moves it to the dead-letter queue; so is a hard bounce of a fallback job's task whose end is not
 * written or counted yet (`ReopenLater`: the move waits for it).
 */
import middy from '@middy/core';
import type { SQSRecord } from 'aws-lambda';
import { batchHandler } from '#shared/adapters/sqs-record-batch.ts';
import type { EmailEventResult } from '#shared/email/email-outcomes.ts';
import type { Logger } from '#shared/log.ts';

/** Events recorded at once: each is one or two UpdateItems. */
const AT_ONCE = 16;

export interface EmailEventsDeps {
  readonly record: (event: unknown) => Promise<EmailEventResult>;
  readonly log: Logger;
}

export function makeEmailEventsHandler(deps: EmailEventsDeps) {
  return middy(
    batchHandler({
      atOnce: AT_ONCE,
      what: 'email event',
      metric: 'EmailEvents',
      log: deps.log,
      recordOne: (record) => recordOne(deps, record),
    }),
  );
}

/** One record's event recorded and logged, its outcome returned; throws only when a write failed. */
async function recordOne(deps: EmailEventsDeps, record: SQSRecord): Promise<EmailEventResult['outcome']> {
  const event = parsed(record.body);
  const result: EmailEventResult =
    event === undefined
      ? { outcome: 'ignored', reason: 'the message is not JSON' }
      : await deps.record(event);
  if (result.outcome === 'ignored') {
    deps.log.warn('email event dropped', { reason: result.reason, messageId: record.messageId });
    return result.outcome;
  }
  const { clientId, jobId, taskId, attempt, state } = result.change;
  const log = deps.log.withKeys({ clientId, jobId, taskId, attempt });
  if (result.suppressed > 0) {
    deps.log.metrics({ EmailAddressesSuppressed: result.suppressed }, { state });
    log.info('address put on the suppression list', { state, entries: result.suppressed });
  }
  // Addresses are personal data: their count is logged, not the addresses.
  if (result.unreadable.length > 0)
    log.warn('event named addresses that are not addresses', { count: result.unreadable.length });
  if (result.outcome === 'unknown-task') log.info('email event for no task of the client', { state });
  if (result.reopened) log.info('bounced task moved on to its next channel', { channel: result.reopened });
  return result.outcome;
}

function parsed(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}
