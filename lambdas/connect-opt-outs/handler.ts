/**
 * The target of the EventBridge rule on Amazon Connect's `DISCONNECTED` contact events: reads the
 * contact's attributes and puts a recipient who asked to opt out on the suppression list. A
 * malformed event is logged once and acknowledged (a retry cannot fix it); a failure to read or to
 * write is thrown, so Lambda's asynchronous invocation retries it (the write is idempotent).
 */
import middy from '@middy/core';
import type { ContactOptOutOutcome } from '#shared/broker/contact-opt-outs.ts';
import type { Logger } from '#shared/log.ts';
import { recordContactEvent } from '#shared/telephony/connect-contact.ts';

export function makeConnectOptOutsHandler(deps: {
  record: (event: unknown) => Promise<ContactOptOutOutcome>;
  log: Logger;
}) {
  return middy(async (event: unknown): Promise<{ outcome: ContactOptOutOutcome | 'malformed' }> => {
    const outcome = await recordContactEvent(event, deps.record, deps.log);
    if (outcome === 'suppressed') deps.log.metrics({ CallOptOuts: 1 }, { provider: 'connect' });
    if (outcome === 'unknown-task') deps.log.info('opt-out on a contact that names no task of ours');
    return { outcome };
  });
}
