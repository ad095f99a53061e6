/**
 * Amazon SES sending events as a configuration set's EventBridge destination publishes them to the
 * default bus, read into what Switchboard acts on; and the forward-only state of one email that
 * those events move, whatever order and however many times they arrive.
 *
 * Shapes, from the SES developer guide:
 * - the envelope: `source: "aws.ses"`, a `detail-type` per event type ("Email Sent", "Email
 *   Delivered", "Email Bounced", "Email Complaint Received", "Email Rejected", "Email Delivery
 *   Delayed", "Email Rendering Failed", "Email Opened", "Email Clicked", "Email Subscribed"),
 *   delivered "on a best-effort basis, and they might be delivered out of order"
 *   (https://docs.aws.amazon.com/ses/latest/dg/monitoring-eventbridge.html; envelope fields:
 *   https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html);
 * - the `detail`: the event record — `eventType`, `mail` (`messageId`, `destination`, `tags` as
 *   name → list of values; tags appear only through configuration-set event publishing) and one
 *   object per type: `bounce` (`bounceType` Permanent/Transient/Undetermined, `bounceSubType`,
 *   `bouncedRecipients[].emailAddress`), `complaint` (`complainedRecipients[].emailAddress`,
 *   `complaintFeedbackType`), `delivery` (`recipients`), `reject` (`reason`), `deliveryDelay`
 *   (`delayType`, `delayedRecipients[]`), `failure` (`errorMessage`, `templateName`)
 *   (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-firehose-contents.html,
 *   examples: https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-firehose-examples.html).
 *
 * Pure: no AWS SDK. {@link parseSesEvent} never throws; anything it cannot use is `{ ignored }`
 * with the reason, for the handler to log and drop.
 */
import * as z from 'zod/mini';
import '#shared/zod-mini.ts';

export type SesEventKind =
  | 'send'
  | 'delivery'
  | 'bounce'
  | 'complaint'
  | 'reject'
  | 'delivery-delay'
  | 'rendering-failure';

/** One SES event, as Switchboard uses it. */
export interface SesEvent {
  readonly kind: SesEventKind;
  /** The id SES returned for the message (`mail.messageId`). */
  readonly messageId: string;
  /** `mail.tags`, each name with its first value (Switchboard sets one value per tag). */
  readonly tags: Readonly<Record<string, string>>;
  /** The addresses the event is about: the bounced, complained, delayed or delivered ones. */
  readonly recipients: readonly string[];
  /** Bounces only: true for a `Permanent` bounce, false for `Transient` and `Undetermined`. */
  readonly permanent?: boolean;
  /** What SES or the receiving server said, when it said anything (at most 500 characters). */
  readonly reason?: string;
  /** When it happened (epoch ms): the event object's timestamp, else the envelope's, else the mail's. */
  readonly at: number;
}

export type ParsedSesEvent = SesEvent | { readonly ignored: string };

const MAX_REASON_CHARS = 500;

/** Each detail-type Switchboard acts on, with the `eventType` its detail carries. */
const KINDS: Readonly<Record<string, { readonly kind: SesEventKind; readonly eventType: string }>> = {
  'Email Sent': { kind: 'send', eventType: 'Send' },
  'Email Delivered': { kind: 'delivery', eventType: 'Delivery' },
  'Email Bounced': { kind: 'bounce', eventType: 'Bounce' },
  'Email Complaint Received': { kind: 'complaint', eventType: 'Complaint' },
  'Email Rejected': { kind: 'reject', eventType: 'Reject' },
  'Email Delivery Delayed': { kind: 'delivery-delay', eventType: 'DeliveryDelay' },
  'Email Rendering Failed': { kind: 'rendering-failure', eventType: 'Rendering Failure' },
};

/** Engagement and list-management events: published by SES, of no use to a task's state. */
const IGNORED_DETAIL_TYPES = new Set(['Email Opened', 'Email Clicked', 'Email Subscribed']);

const envelopeSchema = z.looseObject({
  source: z.string(),
  'detail-type': z.string(),
  time: z.optional(z.string()),
  detail: z.looseObject({ eventType: z.optional(z.string()) }),
});

const mailSchema = z.looseObject({
  messageId: z.string().check(z.minLength(1)),
  timestamp: z.optional(z.string()),
  destination: z.optional(z.array(z.string())),
  tags: z.optional(z.record(z.string(), z.array(z.string()))),
});
const addressed = z.array(
  z.looseObject({ emailAddress: z.string(), diagnosticCode: z.optional(z.string()) }),
);

const detailSchemas = {
  send: z.looseObject({ mail: mailSchema }),
  delivery: z.looseObject({
    mail: mailSchema,
    delivery: z.looseObject({ timestamp: z.optional(z.string()), recipients: z.array(z.string()) }),
  }),
  bounce: z.looseObject({
    mail: mailSchema,
    bounce: z.looseObject({
      bounceType: z.string(),
      bounceSubType: z.optional(z.string()),
      bouncedRecipients: addressed,
      timestamp: z.optional(z.string()),
    }),
  }),
  complaint: z.looseObject({
    mail: mailSchema,
    complaint: z.looseObject({
      complainedRecipients: addressed,
      complaintFeedbackType: z.optional(z.string()),
      timestamp: z.optional(z.string()),
    }),
  }),
  reject: z.looseObject({ mail: mailSchema, reject: z.looseObject({ reason: z.optional(z.string()) }) }),
  'delivery-delay': z.looseObject({
    mail: mailSchema,
    deliveryDelay: z.looseObject({
      delayType: z.optional(z.string()),
      delayedRecipients: addressed,
      timestamp: z.optional(z.string()),
    }),
  }),
  'rendering-failure': z.looseObject({
    mail: mailSchema,
    failure: z.looseObject({ errorMessage: z.optional(z.string()), templateName: z.optional(z.string()) }),
  }),
} as const satisfies Record<SesEventKind, z.ZodMiniType>;

/** The parts of an event each kind reads: recipients, reason, the event object's own time. */
type Reading = { recipients: string[]; reason?: string; permanent?: boolean; timestamp?: string } | string;

const readers: { [K in SesEventKind]: (detail: z.infer<(typeof detailSchemas)[K]>) => Reading } = {
  send: ({ mail }) => ({ recipients: mail.destination ?? [] }),
  delivery: ({ delivery }) => ({ recipients: delivery.recipients, timestamp: delivery.timestamp }),
  bounce: ({ bounce }) => ({
    recipients: bounce.bouncedRecipients.map((r) => r.emailAddress),
    permanent: bounce.bounceType === 'Permanent',
    reason: joinReason(
      [bounce.bounceType, bounce.bounceSubType].filter(Boolean).join('/'),
      bounce.bouncedRecipients[0]?.diagnosticCode,
    ),
    timestamp: bounce.timestamp,
  }),
  complaint: ({ complaint }) =>
    // RFC 5965's `not-spam` is a report that the message is *not* spam: no complaint at all.
    complaint.complaintFeedbackType?.toLowerCase() === 'not-spam'
      ? 'a not-spam feedback report is not a complaint'
      : {
          recipients: complaint.complainedRecipients.map((r) => r.emailAddress),
          reason: complaint.complaintFeedbackType,
          timestamp: complaint.timestamp,
        },
  reject: ({ mail, reject }) => ({ recipients: mail.destination ?? [], reason: reject.reason }),
  'delivery-delay': ({ deliveryDelay }) => ({
    recipients: deliveryDelay.delayedRecipients.map((r) => r.emailAddress),
    reason: joinReason(deliveryDelay.delayType, deliveryDelay.delayedRecipients[0]?.diagnosticCode),
    timestamp: deliveryDelay.timestamp,
  }),
  'rendering-failure': ({ mail, failure }) => ({
    recipients: mail.destination ?? [],
    reason: failure.errorMessage,
  }),
};

/**
 * An EventBridge event from SES, as Switchboard uses it, or `{ ignored }` with why: another
 * source, an engagement event, an unknown detail-type, or a malformed one. Never throws.
 */
export function parseSesEvent(event: unknown): ParsedSesEvent {
  const envelope = envelopeSchema.safeParse(event);
  if (!envelope.success) return { ignored: `not an EventBridge event: ${firstIssue(envelope.error)}` };
  const { source, 'detail-type': detailType, time, detail } = envelope.data;
  if (source !== 'aws.ses') return { ignored: `not an SES event (source ${quote(source)})` };
  if (IGNORED_DETAIL_TYPES.has(detailType)) return { ignored: `${quote(detailType)} events are not tracked` };
  const known = Object.hasOwn(KINDS, detailType) ? KINDS[detailType] : undefined;
  if (!known) return { ignored: `unknown SES detail-type ${quote(detailType)}` };
  if (detail.eventType !== undefined && squash(detail.eventType) !== squash(known.eventType)) {
    return { ignored: `${quote(detailType)} carries eventType ${quote(detail.eventType)}` };
  }
  const parsed = detailSchemas[known.kind].safeParse(detail);
  if (!parsed.success)
    return { ignored: `malformed ${quote(detailType)} event: ${firstIssue(parsed.error)}` };
  const reading = (readers[known.kind] as (d: unknown) => Reading)(parsed.data);
  if (typeof reading === 'string') return { ignored: reading };
  const { mail } = parsed.data;
  const at = [reading.timestamp, time, mail.timestamp].map(parseTime).find((t) => t !== undefined);
  if (at === undefined) return { ignored: `${quote(detailType)} event has no valid timestamp` };
  const reason = reading.reason ? reading.reason.slice(0, MAX_REASON_CHARS) : undefined;
  return {
    kind: known.kind,
    messageId: mail.messageId,
    tags: firstValues(mail.tags ?? {}),
    recipients: reading.recipients,
    ...(reading.permanent === undefined ? {} : { permanent: reading.permanent }),
    ...(reason ? { reason } : {}),
    at,
  };
}

/**
 * The delivery state of one email (one recipient per message, as Switchboard sends), in a single
 * forward-only order: the table below, lowest first. {@link advance} moves a state only to a
 * higher rank, so the state after any set of events is the highest one they lead to — the order
 * they arrive in, and repeats, cannot change it (SES events come best-effort, out of order).
 *
 * `soft-bounced` is a ninth state beside the eight the issue names: a transient bounce is neither
 * a delivery nor a dead address, and folding it into either would lose that.
 */
export const EMAIL_DELIVERY_RANK = {
  /** SendEmail answered with a MessageId; no event yet, so every event moves it. */
  accepted: 0,
  /** Send: SES took it on. SES emits Send even for an address it then suppresses, so this proves
   * nothing about delivery; a Send arriving late never undoes anything. */
  sent: 1,
  /** DeliveryDelay: SES is still retrying. Any outcome supersedes it; a repeat or a late Send does not. */
  'delivery-delayed': 2,
  /** Rendering Failure: never sent. With `rejected`, an outcome that never shares a message with a
   * delivery; both rank below it only so that every order of events gives one answer. */
  'rendering-failed': 3,
  /** Reject: SES found a virus and never sent it. */
  rejected: 4,
  /** Delivery: the receiving server took it. Not the end: a bounce it reports afterwards (an
   * asynchronous DSN) or a complaint supersedes it. */
  delivered: 5,
  /** Bounce, Transient or Undetermined: SES gave up on this message (after a delivery or without
   * one), but the address is not dead. Not final: a permanent bounce or a complaint still moves it,
   * nothing is suppressed, and the job's retry policy may send again. A Delivery seen after it is
   * an earlier event arriving late. */
  'soft-bounced': 6,
  /** Bounce, Permanent: the address takes no mail. A Delivery seen after it does not undo it. */
  bounced: 7,
  /** Complaint: the recipient marked it as spam, which implies it was delivered. The strongest
   * signal; nothing moves it on. */
  complained: 8,
} as const;

export type EmailDeliveryState = keyof typeof EMAIL_DELIVERY_RANK;

/** The state an event alone leads to. */
export function stateOfEvent(event: Pick<SesEvent, 'kind' | 'permanent'>): EmailDeliveryState {
  switch (event.kind) {
    case 'send':
      return 'sent';
    case 'delivery-delay':
      return 'delivery-delayed';
    case 'rendering-failure':
      return 'rendering-failed';
    case 'reject':
      return 'rejected';
    case 'delivery':
      return 'delivered';
    case 'bounce':
      return event.permanent ? 'bounced' : 'soft-bounced';
    case 'complaint':
      return 'complained';
  }
}

/**
 * The email's new state after `event`, or undefined when the event must not move it (it ranks no
 * higher than the current state: a duplicate, or an earlier event arriving late). No current state
 * (the event arrived before the send was recorded) is moved by any event.
 */
export function advance(
  current: EmailDeliveryState | undefined,
  event: Pick<SesEvent, 'kind' | 'permanent'>,
): EmailDeliveryState | undefined {
  const next = stateOfEvent(event);
  if (current === undefined) return next;
  return EMAIL_DELIVERY_RANK[next] > EMAIL_DELIVERY_RANK[current] ? next : undefined;
}

/**
 * Whether the event puts its recipients on the client's suppression list, and as what: a permanent
 * bounce (the address takes no mail) or a complaint. Transient and undetermined bounces do not,
 * matching what SES's own account-level list adds ("BOUNCE ... results in a hard bounce",
 * https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_PutAccountSuppressionAttributes.html).
 */
export function suppressesAddress(
  event: Pick<SesEvent, 'kind' | 'permanent'>,
): 'bounce' | 'complaint' | undefined {
  if (event.kind === 'bounce' && event.permanent) return 'bounce';
  if (event.kind === 'complaint') return 'complaint';
  return undefined;
}

/** `Rendering Failure` (event records) and `RenderingFailure` (the guide's prose) are one type. */
function squash(eventType: string): string {
  return eventType.replace(/\s+/g, '').toLowerCase();
}

function parseTime(value: string | undefined): number | undefined {
  if (value === undefined || value.length > 64) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

function firstValues(tags: Readonly<Record<string, readonly string[]>>): Record<string, string> {
  // fromEntries defines properties, so a tag named like an Object.prototype member stays a tag.
  return Object.fromEntries(
    Object.entries(tags)
      .filter(([, values]) => values.length > 0)
      .map(([name, values]) => [name, values[0]!]),
  );
}

function joinReason(head: string | undefined, detail: string | undefined): string | undefined {
  return [head, detail].filter(Boolean).join(': ') || undefined;
}

function firstIssue(error: z.core.$ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid';
  const path = issue.path.map(String).join('.');
  return `${path === '' ? '' : `${path}: `}${issue.message}`.slice(0, 200);
}

function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}
