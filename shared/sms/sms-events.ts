/**
 * End User Messaging SMS's delivery events, as a configuration set's event destination publishes
 * them (to SNS, then an SQS queue with raw message delivery: the message body is the record), read
 * into what they mean for the task the text was sent for.
 *
 * The record: `eventType` (`TEXT_SUCCESSFUL`, `TEXT_DELIVERED`, `TEXT_BLOCKED`, …), `eventTimestamp`
 * (ms), `isFinal`, `messageId`, `messageStatus` and its description, `context` (the `Context` map of
 * the send: `sb-client`, `sb-job`, `sb-task`, `sb-attempt`, `SMS_CONTEXT`), `totalMessageParts`,
 * `totalMessagePrice`. Sources: "Example event data" and "Event types for SMS, MMS, and voice" in the
 * End User Messaging SMS user guide
 * (https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-format.html,
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-types.html).
 *
 * Events arrive more than once and in any order, so a task's recorded state only moves forward by
 * {@link SMS_DELIVERY_RANK}: every final state outranks every passing one. Any event at all proves
 * the send was accepted (`accepted`): a text whose answer was lost is then never sent again.
 *
 * Pure: no AWS SDK. {@link readSmsEvent} never throws; what it cannot use is `{ ignored }`.
 */

import { SMS_CONTEXT } from './settings.ts';
import { snsPayload } from './sns-body.ts';

/** A task's SMS state, from the events; higher ranks supersede lower ones within an attempt. */
export const SMS_DELIVERY_RANK = {
  /** SendTextMessage answered with a MessageId; no event yet. */
  accepted: 0,
  /** TEXT_QUEUED, TEXT_PENDING: the service holds it. */
  queued: 1,
  /** TEXT_SUCCESSFUL: the carrier took it (final where no delivery receipt comes). */
  sent: 2,
  /** TEXT_INVALID_MESSAGE: the body could not be sent. */
  'invalid-message': 3,
  /** TEXT_TTL_EXPIRED: not delivered within its time to live. */
  expired: 4,
  /** TEXT_UNKNOWN: no final event from the carrier within 72 hours, so the service says it cannot tell. */
  unknown: 5,
  /** TEXT_CARRIER_UNREACHABLE, TEXT_UNREACHABLE: the handset or its network was not reached. */
  unreachable: 6,
  /** TEXT_BLOCKED, TEXT_CARRIER_BLOCKED, TEXT_SPAM, TEXT_PROTECT_BLOCKED: refused on the way. */
  blocked: 7,
  /** TEXT_INVALID: the number is no phone number. */
  'invalid-number': 8,
  /** TEXT_DELIVERED: the handset has it. */
  delivered: 9,
} as const;

export type SmsDeliveryState = keyof typeof SMS_DELIVERY_RANK;

const STATE_OF_EVENT: Readonly<Record<string, SmsDeliveryState>> = {
  TEXT_QUEUED: 'queued',
  TEXT_PENDING: 'queued',
  TEXT_SUCCESSFUL: 'sent',
  TEXT_DELIVERED: 'delivered',
  TEXT_INVALID_MESSAGE: 'invalid-message',
  TEXT_TTL_EXPIRED: 'expired',
  TEXT_CARRIER_UNREACHABLE: 'unreachable',
  TEXT_UNREACHABLE: 'unreachable',
  TEXT_UNKNOWN: 'unknown',
  TEXT_BLOCKED: 'blocked',
  TEXT_CARRIER_BLOCKED: 'blocked',
  TEXT_SPAM: 'blocked',
  TEXT_PROTECT_BLOCKED: 'blocked',
  TEXT_INVALID: 'invalid-number',
};

/** The event types that move a task's state: what the configuration set's event destination publishes. */
export const SMS_TRACKED_EVENT_TYPES: readonly string[] = Object.keys(STATE_OF_EVENT);

/** The states that end a text badly: the event's description is kept as the reason. */
const FAILED: ReadonlySet<SmsDeliveryState> = new Set([
  'invalid-message',
  'expired',
  'unknown',
  'unreachable',
  'blocked',
  'invalid-number',
]);

/** Which attempt of which task a text was, and what its event records. */
export interface SmsStateChange {
  readonly clientId: string;
  readonly jobId: string;
  readonly taskId: string;
  /** 1 for a task's first attempt. */
  readonly attempt: number;
  readonly state: SmsDeliveryState;
  /** When the event happened (epoch ms). */
  readonly at: number;
  /** The event's type and description, for a text that ended badly. */
  readonly reason?: string;
  /** The service accepted the send (every event proves it). */
  readonly accepted: true;
  readonly messageId: string;
  /** Parts billed and their price (US dollars), as the event says. */
  readonly parts?: number;
  readonly price?: number;
}

const CONTEXT_VALUE = /^[A-Za-z0-9_-]{1,256}$/;
const ATTEMPT = /^[1-9][0-9]{0,5}$/;

/** `body` (an SQS message body: the event record's JSON, or an SNS envelope holding it) read. */
export function readSmsEvent(body: unknown): SmsStateChange | { readonly ignored: string } {
  const record = snsPayload(body);
  if (typeof record === 'string') return { ignored: record };
  const type = record.eventType;
  if (typeof type !== 'string' || !Object.hasOwn(STATE_OF_EVENT, type))
    return { ignored: `not a text event of Switchboard's (eventType ${JSON.stringify(type)?.slice(0, 40)})` };
  const state = STATE_OF_EVENT[type]!;
  if (typeof record.messageId !== 'string' || record.messageId === '') return { ignored: 'no messageId' };
  const at = typeof record.eventTimestamp === 'number' ? record.eventTimestamp : Number.NaN;
  if (!Number.isFinite(at)) return { ignored: 'no eventTimestamp' };
  const attempt = attemptOfContext(record.context);
  if (typeof attempt === 'string') return { ignored: attempt };
  const description =
    typeof record.messageStatusDescription === 'string' ? record.messageStatusDescription : '';
  return {
    ...attempt,
    state,
    at,
    ...(FAILED.has(state) ? { reason: `${type}${description ? `: ${description.slice(0, 200)}` : ''}` } : {}),
    accepted: true,
    messageId: record.messageId,
    ...(typeof record.totalMessageParts === 'number' ? { parts: record.totalMessageParts } : {}),
    ...(typeof record.totalMessagePrice === 'number' ? { price: record.totalMessagePrice } : {}),
  };
}

/** The task and attempt a text's `Context` names, or why it names none. */
export function attemptOfContext(
  context: unknown,
): Pick<SmsStateChange, 'clientId' | 'jobId' | 'taskId' | 'attempt'> | string {
  if (context === null || typeof context !== 'object') return 'not a text of Switchboard (no context)';
  const value = (name: string) => {
    const v = Object.hasOwn(context, name) ? (context as Record<string, unknown>)[name] : undefined;
    return typeof v === 'string' ? v : undefined;
  };
  const [clientId, jobId, taskId, attempt] = [
    value(SMS_CONTEXT.client),
    value(SMS_CONTEXT.job),
    value(SMS_CONTEXT.task),
    value(SMS_CONTEXT.attempt),
  ];
  if (clientId === undefined && jobId === undefined && taskId === undefined)
    return 'not a text of Switchboard (no sb- context)';
  for (const [name, v] of [
    [SMS_CONTEXT.client, clientId],
    [SMS_CONTEXT.job, jobId],
    [SMS_CONTEXT.task, taskId],
  ] as const) {
    if (v === undefined || !CONTEXT_VALUE.test(v)) return `context ${name} is missing or malformed`;
  }
  if (attempt === undefined || !ATTEMPT.test(attempt))
    return `context ${SMS_CONTEXT.attempt} is missing or not a whole number from 1`;
  return { clientId: clientId!, jobId: jobId!, taskId: taskId!, attempt: Number(attempt) };
}

/**
 * Whether `change` is to replace what the task records: always when nothing is; when it is about a
 * later attempt; within one attempt, when its state ranks higher. A duplicate or a late event does not.
 */
export function smsSupersedes(
  change: Pick<SmsStateChange, 'attempt' | 'state'>,
  recorded: Pick<SmsStateChange, 'attempt' | 'state'> | undefined,
): boolean {
  if (recorded === undefined) return true;
  if (change.attempt !== recorded.attempt) return change.attempt > recorded.attempt;
  return SMS_DELIVERY_RANK[change.state] > SMS_DELIVERY_RANK[recorded.state];
}
