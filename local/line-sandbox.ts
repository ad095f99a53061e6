/**
 * A stand-in for the LINE Messaging API (reply, push, multicast) that keeps LINE's contracts, so the
 * local cloud, tests and benchmarks exercise the same paths as production:
 *
 * - the bearer token names the channel (401 otherwise);
 * - `X-Line-Retry-Key` must be a UUID, is refused on reply, and the same key within 24 hours is
 *   answered 409 with `x-line-accepted-request-id` and delivers nothing;
 * - reply tokens are single-use and expire about a minute after they were issued;
 * - push and multicast share a per-channel rate limit (token bucket), 429 beyond it;
 * - request bodies are checked (at most 5 messages, 500 multicast recipients), 400 with LINE's
 *   `{ message, details }`.
 *
 * Faults can be injected at run time (a queue of next faults, or probabilities): a 500 that
 * delivers nothing, a delay, a 429 burst, and a dropped connection after the delivery was recorded
 * (the caller never learns it went through). Every delivery is recorded, so a test or benchmark can
 * count what each recipient got, duplicates included.
 *
 * It also plays LINE towards the webhook: event builders whose reply tokens it registers, and a
 * sender that signs the exact bytes it posts. Time (token expiry, key memory, rate) comes from an
 * injectable clock; only injected delays use real timers.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ENDPOINT_PATHS,
  MONTHLY_LIMIT_MESSAGE,
  QUOTA_CONSUMPTION_PATH,
  QUOTA_PATH,
  type SendEndpoint,
} from '#shared/line/messaging-client.ts';
import { isRetryKey, RETRY_KEY_LIFETIME_MS } from '#shared/line/retry-key.ts';
import {
  checkSendBody,
  type LineErrorBody,
  type MulticastBody,
  type PushBody,
  type ReplyBody,
} from './line-sandbox/request-validation.ts';
import {
  type EventBuilders,
  makeEventBuilders,
  postWebhook,
  type ReplyTokenIssuer,
  type SendWebhookOptions,
  type WebhookResponse,
} from './line-sandbox/webhook-events.ts';

export { MAX_MESSAGES, MAX_MULTICAST_RECIPIENTS } from './line-sandbox/request-validation.ts';
export type {
  EventBase,
  EventBuilders,
  EventFrom,
  SendWebhookOptions,
  WebhookResponse,
} from './line-sandbox/webhook-events.ts';
export { SANDBOX_BOT_USER_ID } from './line-sandbox/webhook-events.ts';

export interface Clock {
  now(): number;
}

export interface SandboxChannel {
  readonly channelId: string;
  /** The channel access token callers send as `Authorization: Bearer …`. */
  readonly accessToken: string;
}

/** One fault, applied to one request. */
export type Fault =
  /** Answer 500 without delivering. */
  | { readonly kind: 'status500' }
  /** Wait this long (real time), then handle the request normally, even if the caller gave up. */
  | { readonly kind: 'delay'; readonly ms: number }
  /** Handle the request (recording any delivery), then destroy the socket without answering. */
  | { readonly kind: 'dropAfterDeliver' }
  /** Answer 429 without delivering: the rate limit, or (`monthly`) the monthly quota used up. */
  | { readonly kind: 'status429'; readonly monthly?: boolean };

/** A queued fault, optionally only for one endpoint. */
export type QueuedFault = Fault & { readonly endpoint?: SendEndpoint };

/** Chance, per request, of each fault (checked in this order; at most one applies). */
export interface FaultProbabilities {
  readonly status500?: number;
  readonly status429?: number;
  readonly dropAfterDeliver?: number;
  readonly delay?: { readonly probability: number; readonly ms: number };
}

export interface FaultControls {
  /** Queues faults for the next requests, in order (each is used once). */
  enqueue(...faults: QueuedFault[]): void;
  /** Queues `count` 429 answers. */
  burst429(count: number, endpoint?: SendEndpoint): void;
  /** Random faults from now on (replaces the previous probabilities). */
  setProbabilities(probabilities: FaultProbabilities): void;
  /** Drops queued faults and probabilities. */
  clear(): void;
  /** Queued faults not used yet. */
  pending(): number;
}

export interface Delivery {
  readonly channelId: string;
  readonly endpoint: SendEndpoint;
  /** Recipients: the push target, the multicast list, or the conversation a reply token answers. */
  readonly to: readonly string[];
  readonly messages: readonly unknown[];
  readonly retryKey?: string;
  readonly replyToken?: string;
  readonly requestId: string;
  readonly at: number;
}

export interface RequestLogEntry {
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly channelId: string | undefined;
  /** The HTTP status answered, or `dropped` when the connection was cut instead. */
  readonly status: number | 'dropped';
  readonly requestId: string;
  readonly retryKey: string | undefined;
  readonly fault: Fault['kind'] | undefined;
}

export interface SandboxCounters {
  readonly requests: number;
  /** Requests by answer: `'200'`, `'409'`, `'429'`…, and `'dropped'`. */
  readonly byStatus: Readonly<Record<string, number>>;
  readonly deliveries: number;
  /** Deliveries per recipient (a multicast counts once for each of its recipients). */
  readonly perRecipient: ReadonlyMap<string, number>;
}

/** A recipient that got the same messages more than once. */
export interface DuplicateDelivery {
  readonly recipient: string;
  readonly messages: readonly unknown[];
  readonly count: number;
}

export interface LineSandboxOptions {
  readonly channels?: readonly SandboxChannel[];
  /** Default the system clock. */
  readonly clock?: Clock;
  /** Push + multicast requests per second per channel (and, separately, replies). Default 2,000. */
  readonly rateLimitPerSecond?: number;
  /** How long a reply token stays valid. Default 60 s. */
  readonly replyTokenTtlMs?: number;
  /** How long a retry key is remembered. Default 24 h. */
  readonly retryKeyTtlMs?: number;
  readonly faults?: FaultProbabilities;
  /** For fault probabilities. Default Math.random. */
  readonly random?: () => number;
  /** Default 0 (a free port). The host is always 127.0.0.1. */
  readonly port?: number;
  /** Messages a channel may send this month (push and multicast, one per recipient). Default none. */
  readonly monthlyQuota?: number;
}

export interface LineSandbox {
  /** Base URL to give the Messaging API client, e.g. `http://127.0.0.1:43123`. */
  readonly url: string;
  readonly faults: FaultControls;
  readonly events: EventBuilders;
  addChannel(channel: SandboxChannel): void;
  /** Changes the rate limit; `Infinity` lifts it. */
  setRateLimit(perSecond: number): void;
  /** Sets every channel's monthly message quota (`undefined`: none) and, optionally, what was used. */
  setMonthlyQuota(limit: number | undefined, used?: Readonly<Record<string, number>>): void;
  /** Registers a reply token for a conversation (the event builders do this themselves). */
  issueReplyToken(channelId: string, to: string): string;
  /** Posts a signed webhook (see {@link SendWebhookOptions}); `redeliver` sends redelivered copies. */
  sendWebhook(options: SendWebhookOptions & { readonly redeliver?: boolean }): Promise<WebhookResponse>;
  deliveries(): readonly Delivery[];
  deliveriesTo(recipient: string): readonly Delivery[];
  duplicates(): readonly DuplicateDelivery[];
  log(): readonly RequestLogEntry[];
  counters(): SandboxCounters;
  /** Forgets deliveries, log and counters (channels, tokens, keys and faults stay). */
  resetRecords(): void;
  stop(): Promise<void>;
}

const RATE_LIMIT_MESSAGE = 'The API rate limit has been exceeded. Try again later.';
const REDELIVERED_TOKEN_MAX_EVENT_AGE_MS = 20 * 60 * 1000;

interface ReplyTokenState {
  readonly channelId: string;
  readonly to: string;
  readonly expiresAt: number;
  readonly eventTimestamp: number;
  readonly linkedTo: string | undefined;
  /** Shared by a token and its redelivered copies: one reply in all. */
  readonly use: { used: boolean };
}

/**
 * LINE's monthly message quota: push and multicast count one message per recipient (replies are
 * free); a send over the limit is refused with a 429 naming the monthly limit.
 */
class MonthlyQuota {
  limit: number | undefined;
  readonly #used = new Map<string, number>();

  constructor(limit: number | undefined) {
    this.limit = limit;
  }

  /** True (and counted) when `recipients` more messages fit in the channel's quota. */
  take(channelId: string, recipients: number): boolean {
    const used = this.#used.get(channelId) ?? 0;
    if (this.limit !== undefined && used + recipients > this.limit) return false;
    this.#used.set(channelId, used + recipients);
    return true;
  }

  setUsed(used: Readonly<Record<string, number>>): void {
    for (const [channelId, count] of Object.entries(used)) this.#used.set(channelId, count);
  }

  /** The answer to `GET /v2/bot/message/quota` or `/quota/consumption`. */
  answer(path: string, channelId: string): Answer {
    if (path === QUOTA_CONSUMPTION_PATH)
      return { status: 200, body: { totalUsage: this.#used.get(channelId) ?? 0 } };
    return {
      status: 200,
      body: this.limit === undefined ? { type: 'none' } : { type: 'limited', value: this.limit },
    };
  }
}

interface AcceptedKey {
  readonly acceptedRequestId: string;
  readonly at: number;
  readonly sentMessages: readonly { id: string }[] | undefined;
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

/** Starts the sandbox on 127.0.0.1. */
export async function startLineSandbox(options: LineSandboxOptions = {}): Promise<LineSandbox> {
  const clock = options.clock ?? { now: () => Date.now() };
  const random = options.random ?? Math.random;
  const replyTokenTtlMs = options.replyTokenTtlMs ?? 60_000;
  const retryKeyTtlMs = options.retryKeyTtlMs ?? RETRY_KEY_LIFETIME_MS;
  let ratePerSecond = options.rateLimitPerSecond ?? 2000;

  const channelsByToken = new Map<string, string>();
  for (const channel of options.channels ?? []) channelsByToken.set(channel.accessToken, channel.channelId);
  const replyTokens = new Map<string, ReplyTokenState>();
  const acceptedKeys = new Map<string, AcceptedKey>();
  const buckets = new Map<string, { tokens: number; at: number }>();
  let faultQueue: QueuedFault[] = [];
  let probabilities: FaultProbabilities = options.faults ?? {};
  let deliveries: Delivery[] = [];
  let requestLog: RequestLogEntry[] = [];
  const timers = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  let nextSentMessageId = 461230966842064897n;
  const quota = new MonthlyQuota(options.monthlyQuota);

  const tokens: ReplyTokenIssuer = {
    issue(channelId, to, { eventTimestamp, linkedTo }) {
      const token = randomBytes(16).toString('hex');
      const use = (linkedTo !== undefined ? replyTokens.get(linkedTo)?.use : undefined) ?? { used: false };
      replyTokens.set(token, {
        channelId,
        to,
        expiresAt: clock.now() + replyTokenTtlMs,
        eventTimestamp,
        linkedTo,
        use,
      });
      return token;
    },
    channelOf: (token) => replyTokens.get(token)?.channelId,
  };
  const events = makeEventBuilders({ clock, tokens });

  /** Takes one request from the channel's bucket; false when it is empty. */
  function takeRate(channelId: string, bucket: 'send' | 'reply'): boolean {
    if (!Number.isFinite(ratePerSecond)) return true;
    const key = `${channelId}:${bucket}`;
    const now = clock.now();
    const state = buckets.get(key) ?? { tokens: ratePerSecond, at: now };
    const refilled = Math.min(ratePerSecond, state.tokens + ((now - state.at) * ratePerSecond) / 1000);
    const allowed = refilled >= 1;
    buckets.set(key, { tokens: allowed ? refilled - 1 : refilled, at: now });
    return allowed;
  }

  function pickFault(endpoint: SendEndpoint): Fault | undefined {
    const index = faultQueue.findIndex((f) => f.endpoint === undefined || f.endpoint === endpoint);
    if (index >= 0) return faultQueue.splice(index, 1)[0];
    if (chance(probabilities.status500)) return { kind: 'status500' };
    if (chance(probabilities.status429)) return { kind: 'status429' };
    if (chance(probabilities.dropAfterDeliver)) return { kind: 'dropAfterDeliver' };
    if (probabilities.delay && chance(probabilities.delay.probability)) {
      return { kind: 'delay', ms: probabilities.delay.ms };
    }
    return undefined;
  }

  function chance(p: number | undefined): boolean {
    return p !== undefined && p > 0 && random() < p;
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          timers.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      timers.add(entry);
    });
  }

  function sentMessages(count: number): { id: string }[] {
    return Array.from({ length: count }, () => ({ id: String(nextSentMessageId++) }));
  }

  /** The answer to a send request from an authenticated channel; records the delivery, if any. */
  function handleSend(
    channelId: string,
    endpoint: SendEndpoint,
    retryKey: string | undefined,
    text: string,
    requestId: string,
  ): Answer {
    if (retryKey !== undefined && endpoint === 'reply') {
      return {
        status: 400,
        body: { message: "The 'X-Line-Retry-Key' header can't be used with this endpoint" },
      };
    }
    if (retryKey !== undefined && !isRetryKey(retryKey)) {
      return { status: 400, body: { message: "The value of the 'X-Line-Retry-Key' header must be a UUID" } };
    }
    if (!takeRate(channelId, endpoint === 'reply' ? 'reply' : 'send')) {
      return { status: 429, body: { message: RATE_LIMIT_MESSAGE } };
    }
    const checked = checkSendBody(endpoint, text);
    if (!checked.ok) return { status: 400, body: checked.error satisfies LineErrorBody };
    const request = checked.body;
    const now = clock.now();

    if (endpoint === 'reply') {
      const body = request as ReplyBody;
      const token = replyTokens.get(body.replyToken);
      const usable =
        token !== undefined &&
        token.channelId === channelId &&
        !token.use.used &&
        now < token.expiresAt &&
        (token.linkedTo === undefined || now - token.eventTimestamp < REDELIVERED_TOKEN_MAX_EVENT_AGE_MS);
      if (!usable) return { status: 400, body: { message: 'Invalid reply token' } };
      token.use.used = true;
      const sent = sentMessages(body.messages.length);
      record({ endpoint, to: [token.to], messages: body.messages, replyToken: body.replyToken });
      return { status: 200, body: { sentMessages: sent } };
    }

    if (retryKey !== undefined) {
      const keyId = `${channelId}:${retryKey.toLowerCase()}`;
      const accepted = acceptedKeys.get(keyId);
      if (accepted !== undefined && now - accepted.at < retryKeyTtlMs) {
        return {
          status: 409,
          headers: { 'x-line-accepted-request-id': accepted.acceptedRequestId },
          body: {
            message: 'The retry key is already accepted',
            ...(accepted.sentMessages ? { sentMessages: accepted.sentMessages } : {}),
          },
        };
      }
      if (!quota.take(channelId, recipients().length)) return monthlyLimit();
      const sent = endpoint === 'push' ? sentMessages(request.messages.length) : undefined;
      acceptedKeys.set(keyId, { acceptedRequestId: requestId, at: now, sentMessages: sent });
      return deliver(sent);
    }
    if (!quota.take(channelId, recipients().length)) return monthlyLimit();
    return deliver(endpoint === 'push' ? sentMessages(request.messages.length) : undefined);

    function recipients(): readonly string[] {
      return endpoint === 'push' ? [(request as PushBody).to] : (request as MulticastBody).to;
    }

    function monthlyLimit(): Answer {
      return { status: 429, body: { message: MONTHLY_LIMIT_MESSAGE } };
    }

    function deliver(sent: { id: string }[] | undefined): Answer {
      const to = recipients();
      record({ endpoint, to, messages: request.messages, ...(retryKey ? { retryKey } : {}) });
      return { status: 200, body: sent ? { sentMessages: sent } : {} };
    }

    function record(d: Pick<Delivery, 'endpoint' | 'to' | 'messages' | 'retryKey' | 'replyToken'>): void {
      deliveries.push({ channelId, ...d, requestId, at: now });
    }
  }

  async function onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const path = (req.url ?? '/').split('?')[0]!;
    const method = req.method ?? 'GET';
    const retryKeyHeader = req.headers['x-line-retry-key'];
    const retryKey = Array.isArray(retryKeyHeader) ? retryKeyHeader.join(',') : retryKeyHeader;
    let channelId: string | undefined;
    let fault: Fault | undefined;

    const answer = (a: Answer): void => {
      requestLog.push({
        at: clock.now(),
        method,
        path,
        channelId,
        status: a.status,
        requestId,
        retryKey,
        fault: fault?.kind,
      });
      if (res.destroyed) return;
      res.writeHead(a.status, {
        'content-type': 'application/json',
        'x-line-request-id': requestId,
        ...a.headers,
      });
      res.end(JSON.stringify(a.body));
    };

    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');

    const endpoint = (Object.keys(ENDPOINT_PATHS) as SendEndpoint[]).find((e) => ENDPOINT_PATHS[e] === path);
    const isQuota = path === QUOTA_PATH || path === QUOTA_CONSUMPTION_PATH;
    if (endpoint === undefined && !isQuota) return answer({ status: 404, body: { message: 'Not found' } });
    if (method !== (isQuota ? 'GET' : 'POST'))
      return answer({ status: 405, body: { message: 'Method not allowed' } });

    const auth = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    channelId = auth ? channelsByToken.get(auth[1]!.trim()) : undefined;
    if (channelId === undefined) {
      return answer({
        status: 401,
        body: {
          message:
            'Authentication failed due to the following reason: invalid token. Confirm that the access token in the authorization header is valid.',
        },
      });
    }

    if (endpoint === undefined) return answer(quota.answer(path, channelId));
    fault = pickFault(endpoint);
    if (fault?.kind === 'delay') await sleep(fault.ms);
    if (fault?.kind === 'status500')
      return answer({ status: 500, body: { message: 'Internal server error' } });
    if (fault?.kind === 'status429') {
      return answer({
        status: 429,
        body: { message: fault.monthly ? MONTHLY_LIMIT_MESSAGE : RATE_LIMIT_MESSAGE },
      });
    }

    const result = handleSend(channelId, endpoint, retryKey, text, requestId);
    if (fault?.kind === 'dropAfterDeliver') {
      requestLog.push({
        at: clock.now(),
        method,
        path,
        channelId,
        status: 'dropped',
        requestId,
        retryKey,
        fault: fault.kind,
      });
      req.socket.destroy();
      return;
    }
    answer(result);
  }

  const server = http.createServer((req, res) => {
    onRequest(req, res).catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: `sandbox error: ${(error as Error).message}` }));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    events,
    faults: {
      enqueue: (...faults) => {
        faultQueue.push(...faults);
      },
      burst429: (count, endpoint) => {
        for (let i = 0; i < count; i++)
          faultQueue.push({ kind: 'status429', ...(endpoint ? { endpoint } : {}) });
      },
      setProbabilities: (p) => {
        probabilities = p;
      },
      clear: () => {
        faultQueue = [];
        probabilities = {};
      },
      pending: () => faultQueue.length,
    },
    addChannel: (channel) => {
      channelsByToken.set(channel.accessToken, channel.channelId);
    },
    setMonthlyQuota: (limit, used) => {
      quota.limit = limit;
      if (used) quota.setUsed(used);
    },
    setRateLimit: (perSecond) => {
      ratePerSecond = perSecond;
      buckets.clear();
    },
    issueReplyToken: (channelId, to) => tokens.issue(channelId, to, { eventTimestamp: clock.now() }),
    sendWebhook: ({ redeliver, ...rest }) =>
      postWebhook(
        redeliver ? { ...rest, events: (rest.events ?? []).map((e) => events.redelivered(e)) } : rest,
      ),
    deliveries: () => deliveries,
    deliveriesTo: (recipient) => deliveries.filter((d) => d.to.includes(recipient)),
    duplicates: () => findDuplicates(deliveries),
    log: () => requestLog,
    counters: () => countersOf(requestLog, deliveries),
    resetRecords: () => {
      deliveries = [];
      requestLog = [];
    },
    async stop() {
      for (const entry of timers) {
        clearTimeout(entry.timer);
        entry.resolve();
      }
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function countersOf(log: readonly RequestLogEntry[], deliveries: readonly Delivery[]): SandboxCounters {
  const byStatus: Record<string, number> = {};
  for (const entry of log) byStatus[String(entry.status)] = (byStatus[String(entry.status)] ?? 0) + 1;
  const perRecipient = new Map<string, number>();
  for (const d of deliveries) for (const to of d.to) perRecipient.set(to, (perRecipient.get(to) ?? 0) + 1);
  return { requests: log.length, byStatus, deliveries: deliveries.length, perRecipient };
}

function findDuplicates(deliveries: readonly Delivery[]): DuplicateDelivery[] {
  const seen = new Map<string, DuplicateDelivery>();
  for (const d of deliveries) {
    const content = JSON.stringify(d.messages);
    for (const recipient of d.to) {
      const key = `${d.channelId}\n${recipient}\n${content}`;
      const previous = seen.get(key);
      seen.set(key, { recipient, messages: d.messages, count: (previous?.count ?? 0) + 1 });
    }
  }
  return [...seen.values()].filter((d) => d.count > 1);
}
