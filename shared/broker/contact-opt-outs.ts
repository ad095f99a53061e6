/**
 * An Amazon Connect call whose person asked not to be called again. Connect's contact events carry
 * no user-defined attributes, so the contact flow's answer (`switchboard_opt_out = "true"`, set by a
 * "Set contact attributes" block) is read with `GetContactAttributes` once the contact's
 * `DISCONNECTED` event arrives, and the recipient goes on the client's suppression list (source
 * `call-outcome`), as the HTTP provider's `optOut` and Twilio's `Digits=9` do.
 *
 * Input: one EventBridge contact event. Steps: ignore everything but a voice contact's
 * `DISCONNECTED`; read the contact's attributes; when they ask to opt out, find the task the
 * attributes name (the ids the broker set at the start, so no call link is needed and an event
 * that comes before the link is not lost) and add its recipient's entry. Output: what happened.
 * Idempotent (the entry is written again with the same content), so EventBridge's duplicates and
 * Lambda's retries change nothing more.
 */
import type { Clock } from '#shared/pacing/clock.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';
import {
  attemptOfContact,
  contactAsksToOptOut,
  readContactEvent,
} from '#shared/telephony/connect-contact.ts';
import type { BrokerTaskStore } from './ports.ts';
import { callOutcomeEntry } from './settle.ts';

/** Reads a contact's user-defined attributes (adapter: `shared/adapters/connect-contact-attributes.ts`). */
export interface ContactAttributesReader {
  /** The attributes of the contact chain `initialContactId` began in that instance; undefined when Connect does not know it. */
  read(instanceArn: string, initialContactId: string): Promise<Readonly<Record<string, string>> | undefined>;
}

/**
 * - `suppressed`: the person asked to opt out; their entry is on the list.
 * - `no-opt-out`: the call ended without that wish.
 * - `ignored`: not the end of a voice contact (or an event without its instance).
 * - `unknown-task`: the attributes name no task of Switchboard's (a contact it did not place).
 */
export type ContactOptOutOutcome = 'suppressed' | 'no-opt-out' | 'ignored' | 'unknown-task';

export interface RecordContactOptOutDeps {
  readonly attributes: ContactAttributesReader;
  readonly tasks: Pick<BrokerTaskStore, 'getTask'>;
  readonly suppressions: SuppressionWriter;
  readonly clock: Clock;
}

/** Throws `MalformedContactEventError` for an event that is not a Connect contact event. */
export function makeRecordContactOptOut(deps: RecordContactOptOutDeps) {
  return async (event: unknown): Promise<ContactOptOutOutcome> => {
    const reading = readContactEvent(event);
    if (reading.kind === 'ignored' || reading.contact.disconnectedAt === undefined) return 'ignored';
    if (reading.instanceArn === undefined) return 'ignored';
    const contactId = reading.initialContactId ?? reading.contact.contactId;
    const attributes = await deps.attributes.read(reading.instanceArn, contactId);
    if (!contactAsksToOptOut(attributes)) return 'no-opt-out';
    const ref = attemptOfContact(attributes);
    if (!ref) return 'unknown-task';
    const task = await deps.tasks.getTask(ref);
    // The attributes are the broker's own, but only a task of the client they name is touched.
    if (!task || task.clientId !== ref.clientId) return 'unknown-task';
    await deps.suppressions.add(task.clientId, [callOutcomeEntry(task.recipient, deps.clock.now())]);
    return 'suppressed';
  };
}
