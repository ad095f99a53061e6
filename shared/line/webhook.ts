/**
 * LINE webhook bodies: `{ destination, events[] }`. Parsing checks what Switchboard relies on (the
 * common properties of every event, and the few fields of the event types it acts on) and keeps
 * everything else as it came: unknown fields and unknown event types pass through untouched, since
 * LINE adds both without notice and the processor decides what to ignore.
 *
 * Parse only after the signature was verified on the raw bytes (see `signature.ts`).
 */
import * as z from 'zod/mini';
import '#shared/zod-mini.ts';
import { isUlid } from '#shared/ids.ts';
import { LineError } from './errors.ts';

export class InvalidWebhookBodyError extends LineError {
  /** Where the first problem is, e.g. `events[0].webhookEventId`; empty for the body itself. */
  readonly path: string;

  constructor(path: string, problem: string, options?: ErrorOptions & { subject?: 'body' | 'event' }) {
    super(
      `invalid webhook ${options?.subject ?? 'body'}: ${path === '' ? '' : `${path} `}${problem}`,
      options,
    );
    this.path = path;
  }
}

const userSourceSchema = z.looseObject({ type: z.literal('user'), userId: z.string().check(z.minLength(1)) });
const groupSourceSchema = z.looseObject({
  type: z.literal('group'),
  groupId: z.string().check(z.minLength(1)),
  userId: z.optional(z.string()),
});
const roomSourceSchema = z.looseObject({
  type: z.literal('room'),
  roomId: z.string().check(z.minLength(1)),
  userId: z.optional(z.string()),
});
const sourceSchema = z.discriminatedUnion('type', [userSourceSchema, groupSourceSchema, roomSourceSchema], {
  error: 'must be "user", "group" or "room"',
});

const webhookEventSchema = z.looseObject({
  type: z.string().check(z.minLength(1)),
  timestamp: z.number(),
  // "active" or "standby" today. Another value LINE may add is kept and read as "do not send"
  // (the processor sends only in active mode) rather than a 400 for LINE's whole delivery.
  mode: z.string().check(z.minLength(1)),
  webhookEventId: z.string().check(z.refine(isUlid, 'must be a ULID')),
  deliveryContext: z.looseObject({ isRedelivery: z.boolean() }),
  // LINE leaves `source` out of a failed account-link event, so it cannot be required of all. Its
  // shape is checked where it is used (`eventSource`): a source type LINE adds later must not make
  // LINE's whole delivery a 400.
  source: z.optional(z.unknown()),
  // Absent in standby mode and on events that cannot be replied to.
  replyToken: z.optional(z.string().check(z.minLength(1))),
});

const bodySchema = z.looseObject({
  destination: z.string(),
  events: z.array(z.unknown()),
});

export type EventSource = z.infer<typeof sourceSchema>;

/** One webhook event: the common properties, checked, plus whatever else LINE sent, kept. */
export type WebhookEvent = z.infer<typeof webhookEventSchema>;

export interface WebhookBody {
  /** The user ID of the bot the events are for. */
  readonly destination: string;
  /** Empty for the console's "Verify" request, which must still be answered 200. */
  readonly events: readonly WebhookEvent[];
}

// The event types Switchboard acts on, with the fields it reads. The receiver checks only the
// common properties of every event (LINE's signed delivery is accepted whole); an event of one of
// these types whose fields have drifted is recognised by the processor, which records it as not
// understood instead of acting on a guess.
const knownEventBase = z.extend(webhookEventSchema, { source: z.optional(sourceSchema) });

const knownEventSchemas = {
  follow: z.extend(knownEventBase, {
    type: z.literal('follow'),
    follow: z.optional(z.looseObject({ isUnblocked: z.boolean() })),
  }),
  unfollow: z.extend(knownEventBase, { type: z.literal('unfollow') }),
  message: z.extend(knownEventBase, {
    type: z.literal('message'),
    message: z
      .looseObject({
        id: z.string().check(z.minLength(1)),
        type: z.string().check(z.minLength(1)),
        text: z.optional(z.string()),
      })
      .check(z.refine((m) => m.type !== 'text' || m.text !== undefined, 'is a text message without text')),
  }),
  postback: z.extend(knownEventBase, {
    type: z.literal('postback'),
    postback: z.looseObject({ data: z.string(), params: z.optional(z.record(z.string(), z.unknown())) }),
  }),
  join: z.extend(knownEventBase, { type: z.literal('join') }),
  leave: z.extend(knownEventBase, { type: z.literal('leave') }),
  memberJoined: z.extend(knownEventBase, {
    type: z.literal('memberJoined'),
    joined: z.looseObject({ members: z.array(userSourceSchema) }),
  }),
  memberLeft: z.extend(knownEventBase, {
    type: z.literal('memberLeft'),
    left: z.looseObject({ members: z.array(userSourceSchema) }),
  }),
  unsend: z.extend(knownEventBase, {
    type: z.literal('unsend'),
    unsend: z.looseObject({ messageId: z.string().check(z.minLength(1)) }),
  }),
} as const;

type KnownEventSchemas = typeof knownEventSchemas;
export type KnownEventType = keyof KnownEventSchemas;
export type FollowEvent = z.infer<KnownEventSchemas['follow']>;
export type UnfollowEvent = z.infer<KnownEventSchemas['unfollow']>;
export type MessageEvent = z.infer<KnownEventSchemas['message']>;
export type PostbackEvent = z.infer<KnownEventSchemas['postback']>;
export type JoinEvent = z.infer<KnownEventSchemas['join']>;
export type LeaveEvent = z.infer<KnownEventSchemas['leave']>;
export type MemberJoinedEvent = z.infer<KnownEventSchemas['memberJoined']>;
export type MemberLeftEvent = z.infer<KnownEventSchemas['memberLeft']>;
export type UnsendEvent = z.infer<KnownEventSchemas['unsend']>;

/** The event types Switchboard understands, as a union a processor can `switch (event.type)` on. */
export type KnownWebhookEvent =
  | FollowEvent
  | UnfollowEvent
  | MessageEvent
  | PostbackEvent
  | JoinEvent
  | LeaveEvent
  | MemberJoinedEvent
  | MemberLeftEvent
  | UnsendEvent;

function isKnownType(type: string): type is KnownEventType {
  return Object.hasOwn(knownEventSchemas, type);
}

/**
 * Parses and checks a webhook request body (the raw bytes, after the signature check): the body
 * and the properties common to every event, which Switchboard needs to queue and deduplicate it.
 * Throws {@link InvalidWebhookBodyError} naming the path of the first problem. Everything else —
 * event types, fields, and sources Switchboard does not know — is kept as it came.
 */
export function parseWebhookBody(rawBody: Uint8Array | string): WebhookBody {
  let text: string;
  try {
    text = typeof rawBody === 'string' ? rawBody : new TextDecoder('utf-8', { fatal: true }).decode(rawBody);
  } catch (cause) {
    throw new InvalidWebhookBodyError('', 'is not UTF-8', { cause });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new InvalidWebhookBodyError('', `is not JSON (${(cause as Error).message})`, { cause });
  }
  const body = check(bodySchema, json, []);
  return {
    destination: body.destination,
    events: body.events.map((event, i) => checkEvent(event, ['events', i])),
  };
}

/**
 * Checks one event on its own, e.g. when it comes back from a queue. Throws
 * {@link InvalidWebhookBodyError} with a path relative to the event.
 */
export function parseWebhookEvent(value: unknown): WebhookEvent {
  return checkEvent(value, [], 'event');
}

/** What {@link readKnownEvent} makes of an event. */
export type KnownEventReading =
  | { readonly kind: 'known'; readonly event: KnownWebhookEvent }
  /** A type LINE added since: nothing to do. */
  | { readonly kind: 'other' }
  /** A type Switchboard acts on, without the fields it needs (LINE changed it, or a forgery). */
  | { readonly kind: 'unreadable'; readonly problem: string };

/** The event typed by its `type` when it is one Switchboard acts on, checked against that type. */
export function readKnownEvent(event: WebhookEvent): KnownEventReading {
  if (!isKnownType(event.type)) return { kind: 'other' };
  const result = knownEventSchemas[event.type].safeParse(event, { reportInput: true });
  if (result.success) return { kind: 'known', event: result.data };
  const issue = result.error.issues[0]!;
  const path = formatPath(issue.path);
  return {
    kind: 'unreadable',
    problem: `${article(event.type)} event ${path === '' ? '' : `whose ${path} `}${describe(issue)}`,
  };
}

/** The event's source when it is a user, group or room with its ID; otherwise undefined. */
export function eventSource(event: WebhookEvent): EventSource | undefined {
  const result = sourceSchema.safeParse(event.source);
  return result.success ? result.data : undefined;
}

/**
 * The conversation an event belongs to: the user, group or room ID. Events of one conversation
 * share it (the FIFO group), so they are handled in order. An event without a source (or with one
 * Switchboard does not know) belongs to no conversation and gets its own key, its webhook event ID.
 */
export function sourceKey(event: WebhookEvent): string {
  const source = eventSource(event);
  if (source === undefined) return event.webhookEventId;
  switch (source.type) {
    case 'user':
      return source.userId;
    case 'group':
      return source.groupId;
    case 'room':
      return source.roomId;
  }
}

function checkEvent(
  value: unknown,
  at: readonly PropertyKey[],
  subject: 'body' | 'event' = 'body',
): WebhookEvent {
  return check(webhookEventSchema, value, at, subject);
}

function check<T extends z.ZodMiniType>(
  schema: T,
  value: unknown,
  at: readonly PropertyKey[],
  subject: 'body' | 'event' = 'body',
): z.output<T> {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new InvalidWebhookBodyError(formatPath([...at, ...issue.path]), describe(issue), { subject });
}

function describe(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined
        ? 'is missing'
        : `must be ${article(issue.expected)}, got ${typeName(issue.input)}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${JSON.stringify(issue.input)}`;
    case 'too_small':
      return issue.origin === 'string' ? 'must not be empty' : issue.message;
    case 'custom':
    case 'invalid_union':
      return isPrimitive(issue.input)
        ? `${issue.message}, got ${JSON.stringify(issue.input)}`
        : issue.message;
    default:
      return issue.message;
  }
}

function isPrimitive(value: unknown): value is string | number | boolean | null {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

function article(expected: string): string {
  return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return article(typeof value);
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}
