/**
 * The target of the EventBridge rule on Amazon Connect's contact events (`source: aws.connect`,
 * `detail-type: Amazon Connect Contact Event`): one event per invocation. A malformed event is
 * logged once and acknowledged (a retry cannot fix it); a failure to record is thrown, so Lambda's
 * asynchronous invocation retries it (recording is idempotent), and reconciliation covers an event
 * that is never delivered.
 */
import middy from '@middy/core';
import type { ContactEventOutcome } from '#shared/broker/contact-events.ts';
import type { Logger } from '#shared/log.ts';
import { recordContactEvent } from '#shared/telephony/connect-contact.ts';

export function makeConnectEventsHandler(deps: {
  record: (event: unknown) => Promise<ContactEventOutcome>;
  log: Logger;
}) {
  return middy(async (event: unknown): Promise<{ outcome: ContactEventOutcome | 'malformed' }> => {
    const outcome = await recordContactEvent(event, deps.record, deps.log);
    if (outcome === 'malformed') return { outcome };
    deps.log.metrics({ ConnectContactEvents: 1 }, { outcome });
    // Said once per event (EventBridge does not redeliver an acknowledged one): for no call of ours,
    // or held until the broker links its contact.
    if (outcome === 'unknown-task' || outcome === 'held')
      deps.log.info('contact event for no linked call', { outcome });
    return { outcome };
  });
}
