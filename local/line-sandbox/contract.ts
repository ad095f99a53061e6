/**
 * LINE's Messaging API contract as the sandbox keeps it, with no fault injection: the routes, the
 * bearer token naming the channel, request validation (message objects by type, `to` as LINE ids),
 * the validation endpoints (`/v2/bot/message/validate/*`: 200 `{}` or the 400, nothing delivered,
 * no quota), response shapes (`sentMessages` with a `quoteToken` for a quotable message), `X-Line-Retry-Key`
 * (a UUID, refused on reply, a repeat within its lifetime answered 409 with
 * `x-line-accepted-request-id`), single-use reply tokens, the per-endpoint rate limits and the
 * monthly quota.
 */
import { randomBytes } from 'node:crypto';
import {
  ENDPOINT_PATHS,
  QUOTA_CONSUMPTION_PATH,
  QUOTA_PATH,
  type SendEndpoint,
  VALIDATION_PATHS,
  type ValidationEndpoint,
} from '#shared/line/messaging-client.ts';
import type { EndpointRates } from '#shared/line/rate-limits.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { isRetryKey } from '#shared/retry-keys.ts';
import { type Answer, badRequest, monthlyLimitReached, rateLimited } from './answers.ts';
import { MonthlyQuota, RateLimiter } from './limits.ts';
import type { SandboxRecords } from './records.ts';
import { ReplyTokens } from './reply-tokens.ts';
import {
  checkSendBody,
  type LineErrorBody,
  type MulticastBody,
  type PushBody,
  type ReplyBody,
} from './request-validation.ts';

export interface SandboxChannel {
  readonly channelId: string;
  /** The channel access token callers send as `Authorization: Bearer …`. */
  readonly accessToken: string;
}

export interface ContractSettings {
  readonly clock: Clock;
  readonly channels: readonly SandboxChannel[];
  /** Requests per second per channel, each endpoint its own bucket (LINE's table by default). */
  readonly rateLimits: EndpointRates;
  readonly replyTokenTtlMs: number;
  readonly retryKeyTtlMs: number;
  readonly monthlyQuota: number | undefined;
  /** Where deliveries are recorded. */
  readonly records: SandboxRecords;
}

/** What a request's route and bearer token allow: a final answer, or a send from a channel. */
export type Admission =
  | { readonly kind: 'answered'; readonly answer: Answer; readonly channelId: string | undefined }
  | { readonly kind: 'send'; readonly channelId: string; readonly endpoint: SendEndpoint }
  | { readonly kind: 'validate'; readonly channelId: string; readonly endpoint: ValidationEndpoint };

/** A send request from an authenticated channel. */
export interface SendRequest {
  readonly channelId: string;
  readonly endpoint: SendEndpoint;
  readonly retryKey: string | undefined;
  /** The request body as sent. */
  readonly text: string;
  /** The `x-line-request-id` this request is answered with. */
  readonly requestId: string;
}

/** A send whose headers, rate and body passed: what is left is LINE's delivery rules. */
interface CheckedSend extends SendRequest {
  readonly now: number;
}

interface AcceptedKey {
  readonly acceptedRequestId: string;
  readonly at: number;
  readonly sentMessages: readonly SentMessage[] | undefined;
}

interface SentMessage {
  readonly id: string;
  readonly quoteToken?: string;
}

/** Messages another can quote, whose `sentMessages` entry carries a `quoteToken` (LINE's "Get quote tokens"). */
const QUOTABLE_TYPES = new Set(['text', 'textV2', 'sticker', 'image', 'video']);

const INVALID_TOKEN_MESSAGE =
  'Authentication failed due to the following reason: invalid token. Confirm that the access token in the authorization header is valid.';

/** Answers requests as LINE would, recording every delivery. */
export class LineContract {
  readonly replyTokens: ReplyTokens;
  readonly #clock: Clock;
  readonly #records: SandboxRecords;
  readonly #retryKeyTtlMs: number;
  readonly #channelsByToken = new Map<string, string>();
  readonly #acceptedKeys = new Map<string, AcceptedKey>();
  readonly #rate: RateLimiter;
  readonly #quota: MonthlyQuota;
  #nextSentMessageId = 461230966842064897n;

  constructor(settings: ContractSettings) {
    this.#clock = settings.clock;
    this.#records = settings.records;
    this.#retryKeyTtlMs = settings.retryKeyTtlMs;
    for (const channel of settings.channels) this.addChannel(channel);
    this.#rate = new RateLimiter(settings.rateLimits, settings.clock);
    this.#quota = new MonthlyQuota(settings.monthlyQuota);
    this.replyTokens = new ReplyTokens(settings.clock, settings.replyTokenTtlMs);
  }

  addChannel(channel: SandboxChannel): void {
    this.#channelsByToken.set(channel.accessToken, channel.channelId);
  }

  /** Changes some endpoints' rate limits; `Infinity` lifts one. */
  setRateLimits(rates: Partial<EndpointRates>): void {
    this.#rate.set(rates);
  }

  /** Sets every channel's monthly message quota (`undefined`: none) and, optionally, what was used. */
  setMonthlyQuota(limit: number | undefined, used?: Readonly<Record<string, number>>): void {
    this.#quota.limit = limit;
    if (used) this.#quota.setUsed(used);
  }

  /** Routes a request and checks its bearer token; quota reads are answered here. */
  admit(method: string, path: string, authorization: string | undefined): Admission {
    const endpoint = (Object.keys(ENDPOINT_PATHS) as SendEndpoint[]).find((e) => ENDPOINT_PATHS[e] === path);
    const validation = (Object.keys(VALIDATION_PATHS) as ValidationEndpoint[]).find(
      (e) => VALIDATION_PATHS[e] === path,
    );
    const isQuota = path === QUOTA_PATH || path === QUOTA_CONSUMPTION_PATH;
    if (endpoint === undefined && validation === undefined && !isQuota) return refused(404, 'Not found');
    if (method !== (isQuota ? 'GET' : 'POST')) return refused(405, 'Method not allowed');
    const auth = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
    const channelId = auth ? this.#channelsByToken.get(auth[1]!.trim()) : undefined;
    if (channelId === undefined) return refused(401, INVALID_TOKEN_MESSAGE);
    if (validation !== undefined) return { kind: 'validate', channelId, endpoint: validation };
    if (endpoint === undefined)
      return { kind: 'answered', answer: this.#quota.answer(path, channelId), channelId };
    return { kind: 'send', channelId, endpoint };
  }

  /** The answer to a send request from an authenticated channel; records the delivery, if any. */
  send(request: SendRequest): Answer {
    const { channelId, endpoint, retryKey } = request;
    if (retryKey !== undefined && endpoint === 'reply') {
      return badRequest("The 'X-Line-Retry-Key' header can't be used with this endpoint");
    }
    if (retryKey !== undefined && !isRetryKey(retryKey)) {
      return badRequest("The value of the 'X-Line-Retry-Key' header must be a UUID");
    }
    if (!this.#rate.take(channelId, endpoint)) return rateLimited();
    const checked = checkSendBody(endpoint, request.text);
    if (!checked.ok) return { status: 400, body: checked.error satisfies LineErrorBody };
    const send = { ...request, now: this.#clock.now() };
    if (endpoint === 'reply') return this.#reply(send, checked.body as ReplyBody);
    return this.#pushOrMulticast(send, checked.body as PushBody | MulticastBody);
  }

  /** The answer of a validation endpoint: the send's own checks of its messages, nothing delivered. */
  validate(text: string): Answer {
    const checked = checkSendBody('validate', text);
    if (!checked.ok) return { status: 400, body: checked.error satisfies LineErrorBody };
    return { status: 200, body: {} };
  }

  /** A reply answers the conversation of a usable reply token, and uses it up. */
  #reply(send: CheckedSend, body: ReplyBody): Answer {
    const to = this.replyTokens.redeem(send.channelId, body.replyToken, send.now);
    if (to === undefined) return badRequest('Invalid reply token');
    const sent = this.#sentMessages(body.messages);
    this.#record(send, { to: [to], messages: body.messages, replyToken: body.replyToken });
    return { status: 200, body: { sentMessages: sent } };
  }

  /** Push and multicast: a retry key already accepted is a 409; each recipient counts in the quota. */
  #pushOrMulticast(send: CheckedSend, body: PushBody | MulticastBody): Answer {
    const { channelId, endpoint, retryKey } = send;
    const keyId = retryKey === undefined ? undefined : `${channelId}:${retryKey.toLowerCase()}`;
    const accepted = keyId === undefined ? undefined : this.#alreadyAccepted(keyId, send.now);
    if (accepted !== undefined) return accepted;
    const to = endpoint === 'push' ? [(body as PushBody).to] : (body as MulticastBody).to;
    if (!this.#quota.take(channelId, to.length)) return monthlyLimitReached();
    // A multicast is answered `{}`: LINE returns message ids (and quote tokens) for push and reply only.
    const sent = endpoint === 'push' ? this.#sentMessages(body.messages) : undefined;
    if (keyId !== undefined) {
      this.#acceptedKeys.set(keyId, { acceptedRequestId: send.requestId, at: send.now, sentMessages: sent });
    }
    this.#record(send, { to, messages: body.messages, ...(retryKey ? { retryKey } : {}) });
    return { status: 200, body: sent ? { sentMessages: sent } : {} };
  }

  /** The 409 for a retry key accepted within its lifetime, if it was. */
  #alreadyAccepted(keyId: string, now: number): Answer | undefined {
    const accepted = this.#acceptedKeys.get(keyId);
    if (accepted !== undefined && now - accepted.at < this.#retryKeyTtlMs) {
      return {
        status: 409,
        headers: { 'x-line-accepted-request-id': accepted.acceptedRequestId },
        body: {
          message: 'The retry key is already accepted',
          ...(accepted.sentMessages ? { sentMessages: accepted.sentMessages } : {}),
        },
      };
    }
    return undefined;
  }

  /**
   * What LINE answers for the messages sent: an id each (a decimal string of about 18 digits) and,
   * for a message that can be quoted, a quote token.
   */
  #sentMessages(messages: readonly unknown[]): SentMessage[] {
    return messages.map((message) => {
      const id = String(this.#nextSentMessageId++);
      const type = (message as { type?: unknown }).type;
      return QUOTABLE_TYPES.has(type as string)
        ? { id, quoteToken: randomBytes(72).toString('base64url') }
        : { id };
    });
  }

  #record(
    send: CheckedSend,
    d: { to: readonly string[]; messages: readonly unknown[]; retryKey?: string; replyToken?: string },
  ): void {
    const { channelId, endpoint, requestId, now } = send;
    this.#records.addDelivery({ channelId, endpoint, ...d, requestId, at: now });
  }
}

function refused(status: number, message: string): Admission {
  return { kind: 'answered', answer: { status, body: { message } }, channelId: undefined };
}
