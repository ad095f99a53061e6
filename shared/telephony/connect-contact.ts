/**
 * Amazon Connect's view of an outbound contact, mapped onto Switchboard's call statuses. The same
 * rule reads a `DescribeContact` answer (reconciliation) and a contact event from EventBridge (the
 * fast path), so a call ends the same way whichever saw it first. Pure: no AWS SDK.
 *
 * Sources: the contact record data model (`DisconnectReason`, `AnsweringMachineDetectionStatus`)
 * and the contact events data model, cited in `docs/telephony-provider.md` (the mapping) and
 * `docs/provider-facts.md` (what each field is, with the pages read).
 */
import { z } from 'zod';
import type { Logger } from '#shared/log.ts';
import { TelephonyError } from './errors.ts';
import type { CallSnapshot, CallStatus, CallStatusEvent } from './port.ts';

/** What is known of a contact, from either source (times as epoch ms). */
export interface ConnectContactState {
  readonly contactId: string;
  readonly initiatedAt?: number;
  /** Media established: answered by a person or a machine. */
  readonly connectedAt?: number;
  readonly disconnectedAt?: number;
  readonly disconnectReason?: string;
  readonly amdStatus?: string;
}

const BUSY = new Set(['TELECOM_BUSY', 'SIT_TONE_BUSY']);
const NO_ANSWER = new Set([
  'TELECOM_TIMEOUT',
  'TELECOM_UNANSWERED',
  'TELECOM_ORIGINATOR_CANCEL',
  'AMD_UNANSWERED',
  'CUSTOMER_NEVER_ARRIVED',
]);
const MACHINE = new Set(['VOICEMAIL_BEEP', 'VOICEMAIL_NO_BEEP']);
const NOT_A_PERSON = new Set(['FAX_MACHINE_DETECTED', 'SIT_TONE_INVALID_NUMBER', 'SIT_TONE_DETECTED']);

/**
 * What each EventBridge rule routes of a configured instance's contact events (its `detail`
 * pattern beside the instance ARNs; the local cloud matches events against the same):
 * connect-events takes the call events of contacts Switchboard started — `StartOutboundVoiceContact`
 * makes a contact of initiation method `API`
 * (https://docs.aws.amazon.com/connect/latest/adminguide/contact-initiation-methods.html) — so an
 * instance's inbound, transferred or callback contacts never invoke it; connect-opt-outs takes every
 * contact's end, a transferred one's too (its chain's attributes may carry the opt-out).
 */
export const CONNECT_EVENT_RULES = {
  'connect-events': {
    eventType: ['INITIATED', 'CONNECTED_TO_SYSTEM', 'DISCONNECTED'],
    initiationMethod: ['API'],
  },
  'connect-opt-outs': { eventType: ['DISCONNECTED'] },
} as const satisfies Record<string, Record<string, readonly string[]>>;

/** True when an event's `detail` matches a rule's pattern of {@link CONNECT_EVENT_RULES} (every field one of its values). */
export function matchesContactRule(
  detail: Readonly<Record<string, unknown>>,
  rule: Readonly<Record<string, readonly string[]>>,
): boolean {
  return Object.entries(rule).every(([field, values]) => values.includes(detail[field] as string));
}

/** The attempt key Switchboard stores in the contact's attributes (`DescribeContact` returns them). */
export const CONNECT_KEY_ATTRIBUTE = 'switchboard_attempt_key';

/** Contact attributes Switchboard sets on every call (the contact flow may read them too). */
export const CONNECT_ATTRIBUTES = {
  client: 'switchboard_client',
  job: 'switchboard_job',
  task: 'switchboard_task',
  attempt: 'switchboard_attempt',
  key: CONNECT_KEY_ATTRIBUTE,
} as const;

/**
 * The contact attribute a contact flow sets (a "Set contact attributes" block, user-defined) when
 * the person asks not to be called again: `"true"` (any letter case) puts the recipient on the
 * client's suppression list, source `call-outcome`.
 */
export const CONNECT_OPT_OUT_ATTRIBUTE = 'switchboard_opt_out';

/** True when a contact's attributes say the person asked to opt out ({@link CONNECT_OPT_OUT_ATTRIBUTE}). */
export function contactAsksToOptOut(attributes: Readonly<Record<string, string>> | undefined): boolean {
  return attributes?.[CONNECT_OPT_OUT_ATTRIBUTE]?.trim().toLowerCase() === 'true';
}

/** The attempt a contact's attributes name (the ones the broker set at the start), if they name one. */
export function attemptOfContact(
  attributes: Readonly<Record<string, string>> | undefined,
): { readonly clientId: string; readonly jobId: string; readonly taskId: string } | undefined {
  const clientId = attributes?.[CONNECT_ATTRIBUTES.client];
  const jobId = attributes?.[CONNECT_ATTRIBUTES.job];
  const taskId = attributes?.[CONNECT_ATTRIBUTES.task];
  if (!clientId || !jobId || !taskId) return undefined;
  return { clientId, jobId, taskId };
}

/** The region and id of an Amazon Connect instance ARN (`arn:aws:connect:{region}:{account}:instance/{id}`). */
export function connectInstanceOf(
  instanceArn: string,
): { readonly region: string; readonly instanceId: string } | undefined {
  const match = /^arn:[\w-]+:connect:([\w-]+):\d{12}:instance\/([\w-]+)$/.exec(instanceArn);
  return match ? { region: match[1]!, instanceId: match[2]! } : undefined;
}

/**
 * The contact's status now. Sequence follows the status's rank (initiated 1, connected 2,
 * disconnected 3), so events merged with `mergeStatus` never go backwards whatever order
 * EventBridge delivers them in.
 */
export function connectCallSnapshot(contact: ConnectContactState, idempotencyKey: string): CallSnapshot {
  const { disconnectedAt, connectedAt, initiatedAt } = contact;
  const base = { callId: contact.contactId, idempotencyKey };
  if (disconnectedAt !== undefined) {
    return { ...base, ...finalOf(contact), at: new Date(disconnectedAt).toISOString(), sequence: 3 };
  }
  if (connectedAt !== undefined) {
    return { ...base, status: 'answered', at: new Date(connectedAt).toISOString(), sequence: 2 };
  }
  const at = new Date(initiatedAt ?? 0).toISOString();
  return { ...base, status: initiatedAt === undefined ? 'queued' : 'ringing', at, sequence: 1 };
}

function finalOf(contact: ConnectContactState): {
  status: CallStatus;
  durationSeconds?: number;
  reason?: string;
} {
  const amd = contact.amdStatus ?? '';
  const reason = contact.disconnectReason ?? '';
  if (MACHINE.has(amd)) return { status: 'voicemail', ...talk(contact) };
  if (BUSY.has(amd) || BUSY.has(reason)) return { status: 'busy' };
  if (NO_ANSWER.has(amd) || NO_ANSWER.has(reason)) return { status: 'no-answer' };
  if (NOT_A_PERSON.has(amd)) return { status: 'failed', reason: amd.toLowerCase() };
  if (contact.connectedAt !== undefined) return { status: 'completed', ...talk(contact) };
  // Never connected, and nothing says why: AWS documents the reason in contact events only for
  // outbound campaigns, so a plain StartOutboundVoiceContact call that rang out may end with none.
  // Read as unanswered (the retry policy decides), not as a failure that is never tried again.
  if (reason === '') return { status: 'no-answer', reason: 'not connected (no disconnect reason given)' };
  return { status: 'failed', reason: reason.toLowerCase() };
}

function talk(contact: ConnectContactState): { durationSeconds?: number } {
  if (contact.connectedAt === undefined || contact.disconnectedAt === undefined) return {};
  return { durationSeconds: Math.max(0, Math.round((contact.disconnectedAt - contact.connectedAt) / 1000)) };
}

/** A contact event that is not a valid Amazon Connect Contact Event envelope. */
export class MalformedContactEventError extends TelephonyError {}

/**
 * One contact event as an EventBridge rule's target records it: a malformed event is logged once and
 * answered `malformed` (a retry cannot fix it); any other failure is thrown, so that Lambda's
 * asynchronous invocation retries it.
 */
export async function recordContactEvent<O>(
  event: unknown,
  record: (event: unknown) => Promise<O>,
  log: Pick<Logger, 'warn'>,
): Promise<O | 'malformed'> {
  try {
    return await record(event);
  } catch (error) {
    if (!(error instanceof MalformedContactEventError)) throw error;
    log.warn('contact event refused', { reason: error.message });
    return 'malformed';
  }
}

const isoTime = z.iso.datetime({ offset: true }).transform((value) => Date.parse(value));

/** The part of EventBridge's envelope and of Connect's `detail` Switchboard reads; the rest is ignored. */
const contactEventSchema = z.object({
  source: z.literal('aws.connect'),
  'detail-type': z.literal('Amazon Connect Contact Event'),
  detail: z.object({
    eventType: z.string().min(1),
    contactId: z.string().min(1),
    initialContactId: z.string().min(1).optional(),
    channel: z.string().optional(),
    instanceArn: z.string().optional(),
    initiationTimestamp: isoTime.optional(),
    connectedToSystemTimestamp: isoTime.optional(),
    disconnectTimestamp: isoTime.optional(),
    disconnectReason: z.string().optional(),
    DisconnectReason: z.string().optional(),
    answeringMachineDetectionStatus: z.string().optional(),
    AnsweringMachineDetectionStatus: z.string().optional(),
  }),
});

/** The event types that move a call; the others (queued, agent, data updated…) change nothing. */
const CALL_EVENTS = new Set(['INITIATED', 'CONNECTED_TO_SYSTEM', 'DISCONNECTED']);

/** A contact event read: the contact and its status, or `ignored` for events that do not move a call. */
export type ContactEventReading =
  | {
      readonly kind: 'status';
      readonly instanceArn?: string;
      /** The first contact of a chain of transfers (an outbound call's own id when never transferred). */
      readonly initialContactId?: string;
      readonly contact: ConnectContactState;
    }
  | { readonly kind: 'ignored'; readonly why: string };

/** Reads one EventBridge event; throws {@link MalformedContactEventError} for a bad envelope. */
export function readContactEvent(event: unknown): ContactEventReading {
  const parsed = contactEventSchema.safeParse(event);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join('.') || '(event)'}: ${i.message}`).join('; ');
    throw new MalformedContactEventError(`not an Amazon Connect Contact Event: ${where}`);
  }
  const d = parsed.data.detail;
  if (d.channel !== undefined && d.channel.toUpperCase() !== 'VOICE') {
    return { kind: 'ignored', why: `channel ${d.channel}` };
  }
  if (!CALL_EVENTS.has(d.eventType)) return { kind: 'ignored', why: `event ${d.eventType}` };
  const reason = d.disconnectReason ?? d.DisconnectReason;
  const amd = d.answeringMachineDetectionStatus ?? d.AnsweringMachineDetectionStatus;
  const disconnected =
    d.eventType === 'DISCONNECTED'
      ? (d.disconnectTimestamp ?? d.connectedToSystemTimestamp ?? d.initiationTimestamp ?? 0)
      : undefined;
  const contact: ConnectContactState = {
    contactId: d.contactId,
    ...(d.initiationTimestamp === undefined ? {} : { initiatedAt: d.initiationTimestamp }),
    ...(d.connectedToSystemTimestamp === undefined ? {} : { connectedAt: d.connectedToSystemTimestamp }),
    ...(disconnected === undefined ? {} : { disconnectedAt: disconnected }),
    ...(reason === undefined ? {} : { disconnectReason: reason }),
    ...(amd === undefined ? {} : { amdStatus: amd }),
  };
  return {
    kind: 'status',
    ...(d.instanceArn ? { instanceArn: d.instanceArn } : {}),
    ...(d.initialContactId ? { initialContactId: d.initialContactId } : {}),
    contact,
  };
}

/** The status event a contact reading stands for, for the attempt whose key is `idempotencyKey`. */
export function contactStatusEvent(contact: ConnectContactState, idempotencyKey: string): CallStatusEvent {
  const snapshot = connectCallSnapshot(contact, idempotencyKey);
  if (snapshot.status === 'queued') return { ...snapshot, status: 'ringing' };
  return snapshot as CallStatusEvent;
}
