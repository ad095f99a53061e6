/**
 * The target of the EventBridge rule on the stack's SES configuration set (`source: aws.ses`, its
 * sending events): one event per invocation. An event it cannot use (malformed, of no Switchboard
 * email, of a type it does not track) is logged once and acknowledged: a retry cannot fix it. A
 * failure to write is thrown, so Lambda's asynchronous invocation retries it (both writes are
 * idempotent) and then hands it to the dead-letter queue.
 */
import middy from '@middy/core';
import type { EmailEventResult } from '#shared/email/email-outcomes.ts';
import type { Logger } from '#shared/log.ts';

export function makeEmailEventsHandler(deps: {
  record: (event: unknown) => Promise<EmailEventResult>;
  log: Logger;
}) {
  return middy(async (event: unknown): Promise<{ outcome: EmailEventResult['outcome'] }> => {
    const result = await deps.record(event);
    deps.log.metrics({ EmailEvents: 1 }, { outcome: result.outcome });
    if (result.outcome === 'ignored') {
      deps.log.warn('email event dropped', { reason: result.reason });
      return { outcome: 'ignored' };
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
    return { outcome: result.outcome };
  });
}
