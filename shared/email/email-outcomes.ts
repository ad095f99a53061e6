/**
 * What one of SES's sending events changes in Switchboard: the email state recorded on the task the
 * email was sent for, and, for a permanent bounce or a complaint, the client's suppression list.
 *
 * Input: an EventBridge event (anything: {@link makeRecordEmailEvent} never throws for what it cannot
 * use). Steps: read it (`parseSesEvent`); find the task and attempt in the email's tags
 * ({@link EMAIL_TAGS}, set by the broker's SES transport); put the addresses it names on the list
 * when it asks for that; record the state on the task if it {@link supersedes} what is there.
 * Output: what happened, for the handler's log.
 *
 * Events arrive best-effort, more than once and in any order, so every step is idempotent and the
 * recorded state only moves forward: within one attempt by `EMAIL_DELIVERY_RANK` (as `advance`
 * decides), and a later attempt's email supersedes an earlier one's whatever their states (a task
 * sent again after a soft bounce shows the new email's fate, not the old one's). Whatever the order,
 * the recorded state ends as the highest event of the highest attempt; `sentAttempt`, the highest
 * attempt an event proved to have left SES, is what the broker waits for after an unanswered send.
 *
 * Pure: no AWS SDK. The store's adapter is `shared/adapters/dynamo-delivery-outcomes.ts`.
 */
import type {
  DeliveryAttempt,
  DeliveryOutcomeStore,
  DeliveryRecordResult,
  DeliveryStateChange,
} from '#shared/jobs/delivery-state.ts';
import type { MessageChannel } from '#shared/jobs/model.ts';
import type { ReopenResult, UnreachedAttempt } from '#shared/jobs/reopen.ts';
import { entryReason, type SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';
import { emailSuppressionKey, normalizeEmailAddress } from './address.ts';
import {
  EMAIL_DELIVERY_RANK,
  type EmailDeliveryState,
  parseSesEvent,
  type SesEvent,
  type SesEventKind,
  stateOfEvent,
  suppressesAddress,
} from './ses-events.ts';

/**
 * The SES message tags every email of Switchboard carries (`EmailTags` / `ReplacementTags`): its
 * client, job, task and attempt (a decimal number, 1 for the first). SES tag values allow letters,
 * digits, `_` and `-` (at most 256 characters).
 */
export const EMAIL_TAGS = {
  client: 'sb-client',
  job: 'sb-job',
  task: 'sb-task',
  attempt: 'sb-attempt',
} as const;

/** Which attempt of which task an email was. */
export type EmailAttempt = DeliveryAttempt;

/**
 * What an event records on its task. Its reason is what SES or the receiving server said (bounces,
 * complaints, rejections, rendering failures); `sent`: the event proves the email left SES (Send,
 * Delivery, DeliveryDelay, Bounce, Complaint). A Reject or a Rendering Failure proves the opposite.
 */
export type EmailStateChange = DeliveryStateChange<EmailDeliveryState>;

/** The email state a task records: its attempt and state. */
export interface RecordedEmail {
  readonly attempt: number;
  readonly state: EmailDeliveryState;
}

/**
 * Whether `change` is to replace what the task records: always when nothing is recorded; when it is
 * about a later attempt; within the same attempt, when its state ranks higher (`advance`'s rule). A
 * duplicate, or an earlier event arriving late, does not.
 */
export function supersedes(change: RecordedEmail, recorded: RecordedEmail | undefined): boolean {
  if (recorded === undefined) return true;
  if (change.attempt !== recorded.attempt) return change.attempt > recorded.attempt;
  return EMAIL_DELIVERY_RANK[change.state] > EMAIL_DELIVERY_RANK[recorded.state];
}

/** The events that prove an email left SES. */
const SENDING_PROOF: ReadonlySet<SesEventKind> = new Set([
  'send',
  'delivery',
  'delivery-delay',
  'bounce',
  'complaint',
]);
/** The events whose reason is kept on the task. */
const REASONED: ReadonlySet<SesEventKind> = new Set(['bounce', 'complaint', 'reject', 'rendering-failure']);

/** Tag values as the broker writes them; an attempt is a whole number from 1. */
const TAG_VALUE = /^[A-Za-z0-9_-]{1,256}$/;
const ATTEMPT = /^[1-9][0-9]{0,5}$/;
/** Switchboard sends one recipient an email; a bounce or complaint naming more is cut to this many. */
const MAX_SUPPRESSED_PER_EVENT = 50;

/** An event read: the change it records and the entries it adds, or why it is of no use. */
export type EmailEventReading =
  | {
      readonly change: EmailStateChange;
      readonly suppress: readonly SuppressionEntry[];
      /** Addresses the event named for the list that are not addresses (kept off it). */
      readonly unreadable: readonly string[];
    }
  | { readonly ignored: string };

/** The task and attempt an email's tags name, or why they name none. */
export function attemptOfTags(tags: Readonly<Record<string, string>>): EmailAttempt | string {
  const tag = (name: string) => (Object.hasOwn(tags, name) ? tags[name] : undefined);
  const [clientId, jobId, taskId, attempt] = [
    tag(EMAIL_TAGS.client),
    tag(EMAIL_TAGS.job),
    tag(EMAIL_TAGS.task),
    tag(EMAIL_TAGS.attempt),
  ];
  if (clientId === undefined && jobId === undefined && taskId === undefined)
    return 'not an email of Switchboard (no sb- tags)';
  for (const [name, value] of [
    [EMAIL_TAGS.client, clientId],
    [EMAIL_TAGS.job, jobId],
    [EMAIL_TAGS.task, taskId],
  ] as const) {
    if (value === undefined || !TAG_VALUE.test(value)) return `tag ${name} is missing or malformed`;
  }
  if (attempt === undefined || !ATTEMPT.test(attempt))
    return `tag ${EMAIL_TAGS.attempt} is missing or not a whole number from 1`;
  return { clientId: clientId!, jobId: jobId!, taskId: taskId!, attempt: Number(attempt) };
}

/** What `event` (already parsed) records, and which addresses it puts on the client's list. */
export function readEmailEvent(event: SesEvent): EmailEventReading {
  const attempt = attemptOfTags(event.tags);
  if (typeof attempt === 'string') return { ignored: attempt };
  const change: EmailStateChange = {
    ...attempt,
    state: stateOfEvent(event),
    at: event.at,
    ...(REASONED.has(event.kind) && event.reason ? { reason: event.reason } : {}),
    sent: SENDING_PROOF.has(event.kind),
  };
  const source = suppressesAddress(event);
  if (source === undefined) return { change, suppress: [], unreadable: [] };
  const suppress = new Map<string, SuppressionEntry>();
  const unreadable: string[] = [];
  for (const raw of event.recipients.slice(0, MAX_SUPPRESSED_PER_EVENT)) {
    const address = normalizeEmailAddress(raw);
    if (!address.ok) {
      unreadable.push(raw.slice(0, 100));
      continue;
    }
    const recipient = emailSuppressionKey(address.address);
    suppress.set(recipient, {
      recipient,
      kind: 'email',
      source,
      reason: entryReason(event.reason, source),
      // The event's time, not the clock's: a duplicate writes the very same entry.
      addedAt: event.at,
    });
  }
  return { change, suppress: [...suppress.values()], unreadable };
}

/**
 * - `recorded`: the task's email state moved to the event's.
 * - `stale`: the task records this state or a later one (a duplicate, or an event arriving late).
 * - `unknown-task`: no task of that client has that id (never one, or deleted after its retention).
 */
export type EmailRecordResult = DeliveryRecordResult;

/**
 * Where a task's email state is kept: the channel-neutral delivery store with email's ranks
 * (adapter: `shared/adapters/dynamo-delivery-outcomes.ts`, given `EMAIL_DELIVERY_RANK`); it records
 * what {@link supersedes} says.
 */
export type EmailOutcomeStore = DeliveryOutcomeStore<EmailDeliveryState>;

export type EmailEventResult =
  | { readonly outcome: 'ignored'; readonly reason: string }
  | {
      readonly outcome: EmailRecordResult;
      readonly change: EmailStateChange;
      /** Entries written to the client's suppression list. */
      readonly suppressed: number;
      readonly unreadable: readonly string[];
      /** The channel a fallback job's task bounced on was left for, when it was. */
      readonly reopened?: MessageChannel;
    };

export interface RecordEmailEventDeps {
  readonly outcomes: EmailOutcomeStore;
  readonly suppressions: SuppressionWriter;
  /**
   * Moves a fallback job's task whose email bounced for good to its next channel
   * (`shared/jobs/reopen.ts`); throws `ReopenLater` while the task's end is not written or counted.
   */
  readonly reopen: (unreached: UnreachedAttempt) => Promise<ReopenResult>;
}

/**
 * The use case of the email-events function: one EventBridge event in, what it changed out. Throws
 * only when a store does (to be retried: both writes are idempotent); anything it cannot use is
 * `ignored`, with the reason.
 *
 * The suppression entry is written first and whatever the task's record says: a complaint can come
 * weeks later, after the task itself was deleted, and the address must still go on the list; and a
 * retry after a failed task write finds the entry already there, unchanged.
 */
export function makeRecordEmailEvent(deps: RecordEmailEventDeps) {
  return async (event: unknown): Promise<EmailEventResult> => {
    const parsed = parseSesEvent(event);
    if ('ignored' in parsed) return { outcome: 'ignored', reason: parsed.ignored };
    const reading = readEmailEvent(parsed);
    if ('ignored' in reading) return { outcome: 'ignored', reason: reading.ignored };
    const { change, suppress, unreadable } = reading;
    if (suppress.length > 0) await deps.suppressions.add(change.clientId, suppress);
    const outcome = await deps.outcomes.record(change);
    const result = { outcome, change, suppressed: suppress.length, unreadable };
    // After the record (a retry finds it stale) and only for a task there is: the address is no way
    // to the person, and a fallback job tries the next channel.
    if (!isHardBounce(parsed) || outcome === 'unknown-task') return result;
    const moved = await deps.reopen({
      ...attemptOf(change),
      channel: 'email',
      result: 'bounced',
      entrySource: 'bounce',
      ...reasonOf(change),
    });
    return moved.outcome === 'reopened' ? { ...result, reopened: moved.to } : result;
  };
}

/** A permanent bounce: the address cannot be reached (a complaint reached it). */
function isHardBounce(event: SesEvent): boolean {
  return suppressesAddress(event) === 'bounce';
}

function attemptOf({ clientId, jobId, taskId, attempt }: EmailStateChange): EmailAttempt {
  return { clientId, jobId, taskId, attempt };
}

function reasonOf(change: EmailStateChange): { reason?: string } {
  return change.reason === undefined ? {} : { reason: change.reason };
}
