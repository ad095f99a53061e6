/**
 * The Amazon Connect contact-event use case: an EventBridge event about an outbound contact is
 * read (`readContactEvent`), its call found through the call link the broker wrote when the
 * contact started, and recorded through the same path as a signed callback (settle once, nudge the
 * broker). An event that comes before the link is held for the broker's link; one for a contact
 * Switchboard never placed is acknowledged and changes nothing. EventBridge delivers at least once
 * and in no order: duplicates and stale events change nothing (`makeRecordCallEvent`).
 */
import { attemptKey } from '#shared/retry-keys.ts';
import { contactStatusEvent, readContactEvent } from '#shared/telephony/connect-contact.ts';
import type { CallLinkStore } from './ports.ts';
import type { CallStatusOutcome, RecordCallEventDeps } from './settle.ts';
import { makeRecordCallEvent } from './settle.ts';

/** What became of one contact event. */
export type ContactEventOutcome = CallStatusOutcome | 'ignored' | 'held';

export interface RecordContactEventDeps extends RecordCallEventDeps {
  readonly links: CallLinkStore;
}

/** Throws `MalformedContactEventError` for an event that is not a Connect contact event. */
export function makeRecordContactEvent(deps: RecordContactEventDeps) {
  const record = makeRecordCallEvent(deps);
  return async (event: unknown): Promise<ContactEventOutcome> => {
    const reading = readContactEvent(event);
    if (reading.kind === 'ignored') return 'ignored';
    const { contact } = reading;
    const unkeyed = contactStatusEvent(contact, '');
    const link = await deps.links.resolve(contact.contactId, unkeyed, deps.clock.now());
    if (!link) return 'held';
    return record(link, { ...unkeyed, idempotencyKey: attemptKey(link.jobId, link.taskId, link.attempt) });
  };
}
