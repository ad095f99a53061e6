/**
 * Receiving a webhook: verify, stash, acknowledge.
 *
 * Input: the channel id from the path, the request headers and the raw body bytes.
 * Output: 200 once every event is in the queue (or none came), else a typed error.
 * Steps: size check → channel lookup (cached) → signature on the raw bytes (either live secret)
 * → parse → enqueue each event in its conversation's FIFO group, deduplicated by webhookEventId.
 */

import type { ChannelLookup } from '#shared/channels/cache.ts';
import { ID_PATTERN, liveSecrets } from '#shared/channels/channel.ts';
import { getHeader, type HttpHeaders } from '#shared/http/api-gateway.ts';
import { SIGNATURE_HEADER, verifySignature } from '#shared/line/signature.ts';
import { parseWebhookBody } from '#shared/line/webhook.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { WebhookError } from './errors.ts';
import { type EventQueue, type QueueEntry, queueEntryFor } from './queue-message.ts';

/** Largest webhook body accepted. LINE's bodies are a few KB; anything this big is not LINE. */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;

/** A cached channel older than this is read again before a signature is refused. */
export const SECRET_RECHECK_AFTER_MS = 5_000;

export class UnknownChannelError extends WebhookError {}
export class SignatureError extends WebhookError {}
export class PayloadTooLargeError extends WebhookError {}

/** A webhook event as it travels through the queue to the processor. */
export interface ReceiveRequest {
  readonly channelId: string;
  readonly headers: HttpHeaders;
  readonly rawBody: Uint8Array;
}

/**
 * Nesting deeper than this in one event is no LINE event (theirs are a few levels deep) and would
 * overflow the stack when re-serialised: such an event is set aside, the others are queued.
 */
export const MAX_EVENT_DEPTH = 64;

/** An event of a signed delivery that was not queued, and why. */
export interface SetAsideEvent {
  readonly index: number;
  readonly webhookEventId: string;
  readonly reason: string;
}

/** Whether `value` nests deeper than `max` (an iterative walk: no recursion to overflow). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (current === null || typeof current !== 'object') continue;
    if (depth >= max) return true;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

export interface ReceiveResult {
  readonly accepted: number;
  /** The `webhookEventId`s queued: what the processor's and the send's log lines carry too. */
  readonly eventIds: readonly string[];
  readonly setAside: readonly SetAsideEvent[];
}

export function makeReceiveWebhook(deps: { channels: ChannelLookup; queue: EventQueue; clock: Clock }) {
  return async function receiveWebhook(request: ReceiveRequest): Promise<ReceiveResult> {
    if (request.rawBody.length > MAX_WEBHOOK_BODY_BYTES) {
      throw new PayloadTooLargeError(
        `webhook body of ${request.rawBody.length} bytes is over ${MAX_WEBHOOK_BODY_BYTES}`,
      );
    }
    // An id no channel can have never reaches the table (DynamoDB would refuse an oversized key).
    const channel = ID_PATTERN.test(request.channelId)
      ? await deps.channels.get(request.channelId)
      : undefined;
    if (!channel) throw new UnknownChannelError(`no channel ${request.channelId}`);
    const signature = getHeader(request.headers, SIGNATURE_HEADER);
    if (signature === undefined || signature === '')
      throw new SignatureError('missing x-line-signature header');
    if (!verifySignature(request.rawBody, signature, liveSecrets(channel, deps.clock.now()))) {
      // The secret may have been rotated since the channel was cached: look once more, fresh.
      const reloaded = await deps.channels.get(channel.channelId, { maxAgeMs: SECRET_RECHECK_AFTER_MS });
      if (
        !reloaded ||
        reloaded === channel ||
        !verifySignature(request.rawBody, signature, liveSecrets(reloaded, deps.clock.now()))
      ) {
        throw new SignatureError('x-line-signature does not match the body');
      }
    }
    const body = parseWebhookBody(request.rawBody);
    if (body.events.length === 0) return { accepted: 0, eventIds: [], setAside: [] };
    const receivedAt = deps.clock.now();
    // One event that cannot be queued must not keep the others of the delivery from being queued
    // (LINE would redeliver the whole delivery, failing the same way, for ever).
    const setAside: SetAsideEvent[] = [];
    const messages: QueueEntry[] = [];
    body.events.forEach((event, index) => {
      if (nestsDeeperThan(event, MAX_EVENT_DEPTH)) {
        setAside.push({
          index,
          webhookEventId: event.webhookEventId,
          reason: `nested deeper than ${MAX_EVENT_DEPTH} levels`,
        });
        return;
      }
      messages.push(
        queueEntryFor({ channelId: channel.channelId, destination: body.destination, receivedAt, event }),
      );
    });
    if (messages.length > 0) await deps.queue.enqueue(messages);
    return { accepted: messages.length, eventIds: messages.map((m) => m.dedupeId), setAside };
  };
}
