/**
 * The webhook-events queue's message: one LINE event, written by the receiver and read by the
 * processor. Both sides use this module, so the contract has one home: the entry's FIFO group (one
 * conversation of one channel, handled in order), its deduplication id (the `webhookEventId`), and
 * the versioned body, ASCII-only JSON.
 */
import { parseWebhookEvent, sourceKey, type WebhookEvent } from '#shared/line/webhook.ts';
import { WebhookError } from './errors.ts';

export interface QueuedWebhookEvent {
  readonly v: 1;
  readonly channelId: string;
  readonly destination: string;
  readonly receivedAt: number;
  readonly event: WebhookEvent;
}

export interface QueueEntry {
  /** FIFO group: one conversation of one channel, handled in order. */
  readonly groupId: string;
  /** FIFO deduplication id: the webhookEventId. */
  readonly dedupeId: string;
  readonly body: string;
}

/** The queue the receiver stashes events in; resolves once every entry is accepted. */
export interface EventQueue {
  enqueue(entries: readonly QueueEntry[]): Promise<void>;
}

export class MalformedQueueMessageError extends WebhookError {}

/** The queue entry of one event of a verified delivery. */
export function queueEntryFor(input: Omit<QueuedWebhookEvent, 'v'>): QueueEntry {
  return {
    groupId: `${input.channelId}:${sourceKey(input.event)}`,
    dedupeId: input.event.webhookEventId,
    body: asciiJson({ v: 1, ...input } satisfies QueuedWebhookEvent),
  };
}

/**
 * A queue message's body as a queued event; throws {@link MalformedQueueMessageError} for what the
 * receiver never writes, and `InvalidWebhookBodyError` for an event that is not one.
 */
export function parseQueuedEvent(body: string): QueuedWebhookEvent {
  let parsed: Partial<QueuedWebhookEvent>;
  try {
    parsed = JSON.parse(body) as Partial<QueuedWebhookEvent>;
  } catch {
    throw new MalformedQueueMessageError('queue message is not JSON');
  }
  if (parsed?.v !== 1 || typeof parsed.channelId !== 'string') {
    throw new MalformedQueueMessageError('queue message is not a webhook event (v1)');
  }
  return { ...(parsed as QueuedWebhookEvent), event: parseWebhookEvent(parsed.event) };
}

/**
 * JSON with every non-ASCII character escaped (`\uXXXX`). SQS refuses message bodies holding
 * characters outside its allowed set (U+FFFE, U+FFFF, lone surrogates, and — in some emulators —
 * emoji); user text from LINE can hold any of them. Escaped, the body is plain ASCII and parses
 * back to the very same strings.
 */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
