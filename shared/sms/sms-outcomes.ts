/**
 * What one of End User Messaging SMS's delivery events changes in Switchboard: the SMS state
 * recorded on the task the text was sent for, forward only.
 *
 * Input: an SQS message body (the event record with raw message delivery, or SNS's envelope holding
 * it); {@link makeRecordSmsEvent} never throws for what it cannot use. Steps: read it
 * (`readSmsEvent`: the task and attempt from the text's `Context`, the state the event type means);
 * record it on the task if it supersedes what is there (the channel-neutral delivery store given
 * {@link SMS_DELIVERY_RANK}: a later attempt, or a higher rank of the same attempt). Output: what
 * happened, for the handler's log.
 *
 * Every event proves the service accepted the text, so each records `sent` (the task's
 * `sentAttempt`, what the broker's in-doubt wait reads): a text whose answer was lost is then never
 * sent again.
 *
 * The suppression list: email puts an address on it for a permanent bounce or a complaint. SMS's
 * event types have no opt-out among them (TEXT_QUEUED … TEXT_PROTECT_BLOCKED, "Event types for SMS,
 * MMS, and voice", https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-types.html):
 * a number that texted STOP is refused by `SendTextMessage` itself (`ConflictException`
 * `DESTINATION_PHONE_NUMBER_OPTED_OUT`), and the STOP reaches Switchboard as a two-way text
 * (`./inbound-opt-outs.ts`). So this use case writes no suppression entry.
 *
 * Pure: no AWS SDK. The store's adapter is `shared/adapters/dynamo-delivery-outcomes.ts`.
 */
import type {
  DeliveryOutcomeStore,
  DeliveryRecordResult,
  DeliveryStateChange,
} from '#shared/jobs/delivery-state.ts';
import { readSmsEvent, SMS_DELIVERY_RANK, type SmsDeliveryState } from './sms-events.ts';

export { SMS_DELIVERY_RANK };

/** What an event records on its task. */
export type SmsDeliveryChange = DeliveryStateChange<SmsDeliveryState>;

/** Where a task's SMS state is kept: the delivery store with SMS's ranks. */
export type SmsOutcomeStore = DeliveryOutcomeStore<SmsDeliveryState>;

export type SmsEventResult =
  | { readonly outcome: 'ignored'; readonly reason: string }
  | {
      readonly outcome: DeliveryRecordResult;
      readonly change: SmsDeliveryChange;
      /** Parts billed, as the event says (logged as a metric). */
      readonly parts?: number;
    };

export interface RecordSmsEventDeps {
  readonly outcomes: SmsOutcomeStore;
}

/**
 * The use case of the sms-events function: one queue message in, what it changed out. Throws only
 * when the store does (to be retried: the write is idempotent); anything it cannot use is
 * `ignored`, with the reason.
 */
export function makeRecordSmsEvent(deps: RecordSmsEventDeps) {
  return async (body: unknown): Promise<SmsEventResult> => {
    const read = readSmsEvent(body);
    if ('ignored' in read) return { outcome: 'ignored', reason: read.ignored };
    const change: SmsDeliveryChange = {
      clientId: read.clientId,
      jobId: read.jobId,
      taskId: read.taskId,
      attempt: read.attempt,
      state: read.state,
      at: read.at,
      ...(read.reason === undefined ? {} : { reason: read.reason }),
      sent: read.accepted,
    };
    const outcome = await deps.outcomes.record(change);
    return { outcome, change, ...(read.parts === undefined ? {} : { parts: read.parts }) };
  };
}
