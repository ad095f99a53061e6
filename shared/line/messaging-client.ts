/**
 * The LINE Messaging API client for sending: reply, push and multicast. It makes one request and
 * says what became of it; it never retries by itself, because a reply must not be retried and the
 * webhook processor retries by handing records back to SQS. The caller switches on
 * {@link SendOutcome}`.kind`, and uses {@link backoffDelay} and `retryKeyStillSafe` (shared/retry-keys.ts)
 * to decide when, and whether, to try again.
 *
 * A send is prepared first (`prepareReply` / `preparePush` / `prepareMulticast`): the body is
 * serialised once, so a retry of the same {@link PreparedSend} is byte-identical, as LINE requires
 * of a request that reuses a retry key. A prepared send is a plain object and can be stored.
 */
import type { RejectedRequest, RequestErrorDetail, RetryableFailure } from '#shared/request-failures.ts';
import { isRetryKey } from '#shared/retry-keys.ts';
import { LineError } from './errors.ts';

export const DEFAULT_LINE_API_URL = 'https://api.line.me';
export const DEFAULT_TIMEOUT_MS = 10_000;

/** What LINE answers a 429 with when the channel's monthly message quota is used up. */
export const MONTHLY_LIMIT_MESSAGE = 'You have reached your monthly limit.';

export type SendEndpoint = 'reply' | 'push' | 'multicast';

export const ENDPOINT_PATHS: Readonly<Record<SendEndpoint, string>> = {
  reply: '/v2/bot/message/reply',
  push: '/v2/bot/message/push',
  multicast: '/v2/bot/message/multicast',
};

/** The kinds of send LINE can check message objects for, without sending anything. */
export type ValidationEndpoint = 'push' | 'multicast' | 'reply' | 'narrowcast' | 'broadcast';

/** LINE's validation endpoints: `{ messages }` in, 200 `{}` or a 400 with the problems out. */
export const VALIDATION_PATHS: Readonly<Record<ValidationEndpoint, string>> = {
  push: '/v2/bot/message/validate/push',
  multicast: '/v2/bot/message/validate/multicast',
  reply: '/v2/bot/message/validate/reply',
  narrowcast: '/v2/bot/message/validate/narrowcast',
  broadcast: '/v2/bot/message/validate/broadcast',
};

/**
 * LINE's verdict on message objects, from a validation endpoint's answer: `valid` (200), `refused`
 * (400, with LINE's problems, e.g. "messages[0].stickerId: must be specified"), or `unknown` (any
 * other answer, a timeout, a network error: LINE did not say).
 */
export type MessageVerdict =
  | { readonly kind: 'valid' }
  | { readonly kind: 'refused'; readonly reason: string }
  | { readonly kind: 'unknown'; readonly message: string };

/** The verdict a validation endpoint's answer gives (see {@link MessageVerdict}). */
export function validationVerdict(status: number, bodyText: string): MessageVerdict {
  if (status === 200) return { kind: 'valid' };
  const body = parseJsonObject(bodyText);
  const message = typeof body?.['message'] === 'string' ? body['message'] : `HTTP ${status}`;
  if (status !== 400) return { kind: 'unknown', message: `${message} (HTTP ${status})` };
  const details = Array.isArray(body?.['details']) ? (body['details'] as RequestErrorDetail[]) : [];
  const problems = details.map((d) => [d.property, d.message].filter(Boolean).join(': ')).filter(Boolean);
  return { kind: 'refused', reason: problems.length > 0 ? problems.join('; ') : message };
}

/** A LINE message object (`{ type: 'text', text: '…' }`, a sticker, a flex message…). */
export interface OutgoingMessage {
  readonly type: string;
  readonly [field: string]: unknown;
}

/** A request ready to send, and to resend unchanged. */
export interface PreparedSend {
  readonly endpoint: SendEndpoint;
  /** The JSON request body, serialised once. */
  readonly body: string;
  /** Set for push and multicast, never for reply. */
  readonly retryKey?: string;
}

export interface BodyOptions {
  /** Deliver without a notification sound on the user's device. */
  readonly notificationDisabled?: boolean;
}

export class InvalidSendRequestError extends LineError {}

export interface SentMessage {
  readonly id: string;
  readonly quoteToken?: string;
}

/** What became of one request. */
export type SendOutcome =
  /** 2xx: LINE accepted the request. */
  | {
      readonly kind: 'delivered';
      readonly status: number;
      readonly requestId: string | undefined;
      readonly sentMessages: readonly SentMessage[];
    }
  /** 409 with `x-line-accepted-request-id`: an earlier request with this retry key was accepted. */
  | {
      readonly kind: 'already-delivered';
      readonly acceptedRequestId: string;
      readonly requestId: string | undefined;
    }
  /**
   * 429: too many requests (`reason: 'rate'`), or the monthly quota is used up (`'monthly-quota'`,
   * which waiting a few seconds will not fix: make it visible to an operator). Nothing was sent.
   */
  | {
      readonly kind: 'rate-limited';
      readonly reason: 'rate' | 'monthly-quota';
      readonly retryAfterMs: number | undefined;
      readonly message: string;
      readonly requestId: string | undefined;
    }
  /**
   * 5xx, a timeout or a network failure: the request may or may not have been delivered. Retrying
   * a push or multicast with the same retry key is safe; retrying a reply is not, unless
   * `maybeDelivered` is false (the connection was never made, so the request never left).
   */
  | RetryableFailure
  /** Any other status (4xx, or an unexpected 3xx/409): final, retrying will not change it. */
  | RejectedRequest;

export interface MessagingClientOptions {
  /** The channel access token, sent as the bearer token. */
  readonly channelAccessToken: string;
  /** Default {@link DEFAULT_LINE_API_URL}; the local sandbox's URL in the local cloud. */
  readonly baseUrl?: string;
  /** Time allowed for a request, response body included. Default {@link DEFAULT_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  /**
   * The fetch to use. Node's global fetch keeps connections alive through its global dispatcher;
   * pass another (e.g. bound to an undici Agent with other pool settings) to change that.
   */
  readonly fetch?: typeof fetch;
  /** Reads an HTTP-date `Retry-After`. Default the system clock. */
  readonly clock?: { now(): number };
}

export interface SendOptions {
  /** Overrides the client's timeout for this request (e.g. what is left of a Lambda's time). */
  readonly timeoutMs?: number;
}

export interface MessagingClient {
  /** Sends a reply with a webhook event's reply token. Never carries a retry key. */
  reply(
    replyToken: string,
    messages: readonly OutgoingMessage[],
    options?: BodyOptions & SendOptions,
  ): Promise<SendOutcome>;
  /** Pushes messages to a user, group or room, at most once per retry key. */
  push(
    to: string,
    messages: readonly OutgoingMessage[],
    retryKey: string,
    options?: BodyOptions & SendOptions,
  ): Promise<SendOutcome>;
  /** Sends the same messages to up to 500 users, at most once per retry key. */
  multicast(
    to: readonly string[],
    messages: readonly OutgoingMessage[],
    retryKey: string,
    options?: BodyOptions & SendOptions,
  ): Promise<SendOutcome>;
  /** Sends (or resends) a prepared request, byte for byte. */
  send(prepared: PreparedSend, options?: SendOptions): Promise<SendOutcome>;
  /**
   * This month's message quota and what was sent against it (`GET /v2/bot/message/quota` and
   * `/quota/consumption`). Throws {@link QuotaUnreadableError} when LINE does not answer with them.
   */
  quota(): Promise<MessageQuota>;
}

/** `limit` is absent when the channel's plan sets none (`type: none`). */
export interface MessageQuota {
  readonly limit?: number;
  readonly used: number;
}

export class QuotaUnreadableError extends LineError {}

export const QUOTA_PATH = '/v2/bot/message/quota';
export const QUOTA_CONSUMPTION_PATH = '/v2/bot/message/quota/consumption';

/** LINE's two quota answers as one {@link MessageQuota}; throws on any other shape. */
export function parseMessageQuota(quota: unknown, consumption: unknown): MessageQuota {
  const q = quota as { type?: unknown; value?: unknown } | null;
  const c = consumption as { totalUsage?: unknown } | null;
  if (typeof c?.totalUsage !== 'number' || !Number.isFinite(c.totalUsage))
    throw new QuotaUnreadableError('quota consumption has no totalUsage');
  if (q?.type === 'none') return { used: c.totalUsage };
  if (q?.type === 'limited' && typeof q.value === 'number' && Number.isFinite(q.value))
    return { limit: q.value, used: c.totalUsage };
  throw new QuotaUnreadableError('quota is neither none nor limited with a value');
}

/** A reply request. Reply tokens are single-use: see {@link SendOutcome} before retrying one. */
export function prepareReply(
  replyToken: string,
  messages: readonly OutgoingMessage[],
  options: BodyOptions = {},
): PreparedSend {
  return { endpoint: 'reply', body: JSON.stringify({ replyToken, messages, ...bodyOptions(options) }) };
}

/** A push request with its retry key (a UUID; see shared/retry-keys.ts for how keys are made). */
export function preparePush(
  to: string,
  messages: readonly OutgoingMessage[],
  retryKey: string,
  options: BodyOptions = {},
): PreparedSend {
  assertRetryKey(retryKey);
  return { endpoint: 'push', body: JSON.stringify({ to, messages, ...bodyOptions(options) }), retryKey };
}

/** A multicast request with its retry key. */
export function prepareMulticast(
  to: readonly string[],
  messages: readonly OutgoingMessage[],
  retryKey: string,
  options: BodyOptions = {},
): PreparedSend {
  assertRetryKey(retryKey);
  return { endpoint: 'multicast', body: JSON.stringify({ to, messages, ...bodyOptions(options) }), retryKey };
}

/**
 * A Messaging API client for one channel over fetch.
 *
 * @example
 * const client = new MessagingApiClient({ channelAccessToken });
 * const outcome = await client.push(userId, messages, retryKey);
 */
export class MessagingApiClient implements MessagingClient {
  readonly #baseUrl: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #authorization: string;
  readonly #clock: { now(): number };

  constructor(options: MessagingClientOptions) {
    this.#baseUrl = (options.baseUrl ?? DEFAULT_LINE_API_URL).replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#authorization = `Bearer ${options.channelAccessToken}`;
    this.#clock = options.clock ?? { now: () => Date.now() };
  }

  // async, so that a bad argument rejects the promise like every other failure.
  async reply(
    replyToken: string,
    messages: readonly OutgoingMessage[],
    options: BodyOptions & SendOptions = {},
  ): Promise<SendOutcome> {
    return this.send(prepareReply(replyToken, messages, options), options);
  }

  async push(
    to: string,
    messages: readonly OutgoingMessage[],
    retryKey: string,
    options: BodyOptions & SendOptions = {},
  ): Promise<SendOutcome> {
    return this.send(preparePush(to, messages, retryKey, options), options);
  }

  async multicast(
    to: readonly string[],
    messages: readonly OutgoingMessage[],
    retryKey: string,
    options: BodyOptions & SendOptions = {},
  ): Promise<SendOutcome> {
    return this.send(prepareMulticast(to, messages, retryKey, options), options);
  }

  /** Bound: it is handed out on its own, as a pipeline's send port. */
  readonly send = async (prepared: PreparedSend, options: SendOptions = {}): Promise<SendOutcome> => {
    if (prepared.endpoint === 'reply' && prepared.retryKey !== undefined) {
      throw new InvalidSendRequestError('a reply takes no retry key (LINE answers 400)');
    }
    if (prepared.endpoint !== 'reply') assertRetryKey(prepared.retryKey);
    const headers: Record<string, string> = {
      authorization: this.#authorization,
      'content-type': 'application/json',
    };
    if (prepared.retryKey !== undefined) headers['x-line-retry-key'] = prepared.retryKey;
    const signal = AbortSignal.timeout(options.timeoutMs ?? this.#timeoutMs);
    let response: Response;
    try {
      response = await this.#fetch(`${this.#baseUrl}${ENDPOINT_PATHS[prepared.endpoint]}`, {
        method: 'POST',
        headers,
        body: prepared.body,
        signal,
        redirect: 'manual',
      });
    } catch (error) {
      return classifyFailure(error);
    }
    return classifyResponse(response.status, response.headers, await bodyText(response), this.#clock.now());
  };

  async quota(): Promise<MessageQuota> {
    const [quota, consumption] = await Promise.all([
      this.#getJson(QUOTA_PATH),
      this.#getJson(QUOTA_CONSUMPTION_PATH),
    ]);
    return parseMessageQuota(quota, consumption);
  }

  async #getJson(path: string): Promise<unknown> {
    const response = await this.#fetch(`${this.#baseUrl}${path}`, {
      headers: { authorization: this.#authorization },
      signal: AbortSignal.timeout(this.#timeoutMs),
      redirect: 'manual',
    });
    const text = await response.text();
    if (response.status !== 200) throw new QuotaUnreadableError(`${path} answered ${response.status}`);
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new QuotaUnreadableError(`${path} answered a body that is not JSON`, { cause: error });
    }
  }
}

/** An answer's body, empty when it was cut short: the status is known, a timeout or reset changes nothing about it. */
async function bodyText(response: Response): Promise<string> {
  try {
    return await response.text();
  } catch {
    return '';
  }
}

/** What the classifier reads of an answer's headers (a `Headers`, or a lighter view of them). */
export interface AnswerHeaders {
  get(name: string): string | null;
}

/** Classifies an HTTP answer from the Messaging API. */
export function classifyResponse(
  status: number,
  headers: AnswerHeaders,
  bodyText: string,
  now: number,
): SendOutcome {
  const requestId = headers.get('x-line-request-id') ?? undefined;
  const body = parseJsonObject(bodyText);
  const message = typeof body?.['message'] === 'string' ? body['message'] : '';
  if (status >= 200 && status < 300) {
    return { kind: 'delivered', status, requestId, sentMessages: sentMessagesOf(body) };
  }
  if (status === 409) {
    const acceptedRequestId = headers.get('x-line-accepted-request-id');
    if (acceptedRequestId) return { kind: 'already-delivered', acceptedRequestId, requestId };
  }
  if (status === 429) {
    return {
      kind: 'rate-limited',
      reason: message === MONTHLY_LIMIT_MESSAGE ? 'monthly-quota' : 'rate',
      retryAfterMs: parseRetryAfter(headers.get('retry-after'), now),
      message,
      requestId,
    };
  }
  if (status >= 500) {
    return {
      kind: 'retryable',
      reason: 'server-error',
      maybeDelivered: true,
      status,
      message: message || `HTTP ${status}`,
      requestId,
    };
  }
  const details = Array.isArray(body?.['details']) ? (body['details'] as RequestErrorDetail[]) : [];
  return { kind: 'rejected', status, message: message || `HTTP ${status}`, details, requestId };
}

/** Classifies a request that got no HTTP answer (timeout, refused or reset connection). */
export function classifyFailure(error: unknown): SendOutcome {
  const err = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError') {
    return {
      kind: 'retryable',
      reason: 'timeout',
      maybeDelivered: true,
      status: undefined,
      message: 'the request timed out',
      requestId: undefined,
    };
  }
  const code = err?.cause?.code;
  return {
    kind: 'retryable',
    reason: 'network',
    // Only a connection that was never made proves the request never reached LINE.
    maybeDelivered: !NEVER_CONNECTED.has(code ?? ''),
    status: undefined,
    message: [err?.message, code ?? err?.cause?.message].filter(Boolean).join(': ') || String(error),
    requestId: undefined,
  };
}

const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

export interface BackoffOptions {
  /** Ceiling of the first wait. Default 200 ms. */
  readonly baseMs?: number;
  /** Largest wait. Default 30 s. */
  readonly capMs?: number;
  /** A number in [0, 1). Default Math.random; tests pass their own. */
  readonly random?: () => number;
}

/**
 * How long to wait before retry number `attempt + 1` (`attempt` = retries already made, 0 before
 * the first one): "full jitter", a random wait between 0 and min(cap, base * 2^attempt), which
 * spreads the retries of many senders instead of having them collide again.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  if (!Number.isInteger(attempt) || attempt < 0) {
    throw new RangeError(`attempt must be an integer ≥ 0, got ${attempt}`);
  }
  const { baseMs = 200, capMs = 30_000, random = Math.random } = options;
  const ceiling = Math.min(capMs, baseMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}

function assertRetryKey(retryKey: string | undefined): asserts retryKey is string {
  if (retryKey === undefined || !isRetryKey(retryKey)) {
    throw new InvalidSendRequestError(
      `a push or multicast needs a UUID retry key, got ${JSON.stringify(retryKey)}`,
    );
  }
}

function bodyOptions(options: BodyOptions): BodyOptions {
  return options.notificationDisabled === undefined
    ? {}
    : { notificationDisabled: options.notificationDisabled };
}

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  if (text === '') return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function sentMessagesOf(body: Record<string, unknown> | undefined): SentMessage[] {
  const sent = body?.['sentMessages'];
  if (!Array.isArray(sent)) return [];
  return sent.flatMap((m: { id?: unknown; quoteToken?: unknown }) =>
    m && (typeof m.id === 'string' || typeof m.id === 'number')
      ? [{ id: String(m.id), ...(typeof m.quoteToken === 'string' ? { quoteToken: m.quoteToken } : {}) }]
      : [],
  );
}

/** `Retry-After` as seconds or an HTTP date, in ms from now (LINE does not document sending it). */
function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
