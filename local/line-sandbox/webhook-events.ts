/**
 * The sandbox playing LINE's side of webhooks: realistic events (shaped like the reference's
 * examples) and a sender that signs the exact bytes it posts.
 */
import { newUlid } from '#shared/ids.ts';
import { SIGNATURE_HEADER, signBody } from '#shared/line/signature.ts';
import { type EventSource, sourceKey, type WebhookEvent } from '#shared/line/webhook.ts';

/** Who an event comes from: a user ID, or a full source (group or room). */
export type EventFrom = string | EventSource;

export interface EventBase {
  /** The channel whose reply tokens the event's token belongs to. */
  readonly channelId: string;
  readonly from: EventFrom;
  /** `standby` events carry no reply token, as LINE sends them. Default `active`. */
  readonly mode?: 'active' | 'standby';
  /** Default: the sandbox clock's now. */
  readonly timestamp?: number;
}

export interface EventBuilders {
  follow(options: EventBase & { readonly isUnblocked?: boolean }): WebhookEvent;
  unfollow(options: EventBase): WebhookEvent;
  text(options: EventBase & { readonly text: string }): WebhookEvent;
  postback(
    options: EventBase & { readonly data: string; readonly params?: Record<string, string> },
  ): WebhookEvent;
  /**
   * A redelivered copy: `deliveryContext.isRedelivery: true`, the same `webhookEventId`, and a
   * fresh reply token that shares single use with the original one (LINE: a redelivered token
   * cannot be used once the original was, nor 20 minutes after the event).
   */
  redelivered(event: WebhookEvent): WebhookEvent;
}

export interface ReplyTokenIssuer {
  /** Registers a new reply token for a conversation; `linkedTo` shares single use with that token. */
  issue(channelId: string, to: string, options: { eventTimestamp: number; linkedTo?: string }): string;
  /** The channel of a token this sandbox issued. */
  channelOf(replyToken: string): string | undefined;
}

export function makeEventBuilders(deps: {
  clock: { now(): number };
  tokens: ReplyTokenIssuer;
}): EventBuilders {
  const { clock, tokens } = deps;
  // LINE message IDs are decimal strings of about 18 digits.
  let nextMessageId = 444573844083572737n;

  function base(type: string, options: EventBase, replyable: boolean): WebhookEvent {
    const timestamp = options.timestamp ?? clock.now();
    const source = toSource(options.from);
    const mode = options.mode ?? 'active';
    const event: WebhookEvent = {
      type,
      mode,
      timestamp,
      source,
      webhookEventId: newUlid(timestamp),
      deliveryContext: { isRedelivery: false },
    };
    if (replyable && mode === 'active') {
      event.replyToken = tokens.issue(options.channelId, sourceKey(event), { eventTimestamp: timestamp });
    }
    return event;
  }

  return {
    follow: (o) => ({ ...base('follow', o, true), follow: { isUnblocked: o.isUnblocked ?? false } }),
    unfollow: (o) => base('unfollow', o, false),
    text: (o) => ({
      ...base('message', o, true),
      message: {
        id: String(nextMessageId++),
        type: 'text',
        quoteToken: `q${newUlid(clock.now()).toLowerCase()}`,
        text: o.text,
      },
    }),
    postback: (o) => ({
      ...base('postback', o, true),
      postback: { data: o.data, ...(o.params ? { params: o.params } : {}) },
    }),
    redelivered(event) {
      const copy: WebhookEvent = { ...structuredClone(event), deliveryContext: { isRedelivery: true } };
      const original = event.replyToken;
      const channelId = original === undefined ? undefined : tokens.channelOf(original);
      if (original !== undefined && channelId !== undefined && event.source !== undefined) {
        copy.replyToken = tokens.issue(channelId, sourceKey(event), {
          eventTimestamp: event.timestamp,
          linkedTo: original,
        });
      }
      return copy;
    },
  };
}

export interface SendWebhookOptions {
  /** The webhook URL, e.g. the API Gateway stand-in's `/webhooks/line/{channelId}`. */
  readonly url: string;
  readonly channelSecret: string;
  readonly events?: readonly WebhookEvent[];
  /** The bot's user ID. Default a fixed sandbox ID. */
  readonly destination?: string;
  /** Exact bytes to send instead of `{ destination, events }` (e.g. a fixture file). */
  readonly rawBody?: string | Uint8Array;
  /** Replaces the computed signature (to test rejection). */
  readonly signature?: string;
}

export interface WebhookResponse {
  readonly status: number;
  readonly body: string;
  /** The exact bytes that were posted and signed. */
  readonly sentBody: Uint8Array;
}

export const SANDBOX_BOT_USER_ID = 'U0000000000000000000000000000000b';

/** Posts a webhook as LINE does: the body serialised once, its very bytes signed. */
export async function postWebhook(options: SendWebhookOptions): Promise<WebhookResponse> {
  const raw =
    options.rawBody ??
    JSON.stringify({ destination: options.destination ?? SANDBOX_BOT_USER_ID, events: options.events ?? [] });
  const bytes = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw;
  const response = await fetch(options.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'user-agent': 'LineBotWebhook/2.0',
      [SIGNATURE_HEADER]: options.signature ?? signBody(bytes, options.channelSecret),
    },
    body: bytes,
  });
  return { status: response.status, body: await response.text(), sentBody: bytes };
}

function toSource(from: EventFrom): EventSource {
  return typeof from === 'string' ? { type: 'user', userId: from } : from;
}
