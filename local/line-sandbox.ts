/**
 * A stand-in for the LINE Messaging API (reply, push, multicast) that keeps LINE's contracts, so the
 * local cloud, tests and benchmarks exercise the same paths as production:
 *
 * - the bearer token names the channel (401 otherwise);
 * - `X-Line-Retry-Key` must be a UUID, is refused on reply, and the same key within 24 hours is
 *   answered 409 with `x-line-accepted-request-id` and delivers nothing;
 * - reply tokens are single-use and expire about a minute after they were issued;
 * - each endpoint has its own per-channel rate limit, LINE's table (push and reply 2,000/s,
 *   multicast 200/s: `shared/line/rate-limits.ts`), 429 with LINE's body beyond it;
 * - the monthly message quota (`GET /v2/bot/message/quota`, `/quota/consumption`), counted from
 *   the messages it accepted (a multicast counts each recipient), 429 "You have reached your
 *   monthly limit." beyond it;
 * - request bodies are checked (at most 5 messages, 500 multicast recipients, each message object
 *   by its type's rules, a push's `to` a user, group or room id and a multicast's user ids), 400
 *   with LINE's `{ message, details }`; push and reply answer `sentMessages` (id, quote token);
 * - LINE's validation endpoints (`POST /v2/bot/message/validate/{push,multicast,reply,narrowcast,
 *   broadcast}`) answer 200 `{}` or the same 400, deliver nothing and count against no quota.
 *
 * Faults can be injected at run time (a queue of next faults, or probabilities): a 500 that
 * delivers nothing, a delay, a 429 burst, and a dropped connection after the delivery was recorded
 * (the caller never learns it went through). Every delivery is recorded, so a test or benchmark can
 * count what each recipient got, duplicates included.
 *
 * It also plays LINE towards the webhook: event builders whose reply tokens it registers, and a
 * sender that signs the exact bytes it posts. Time (token expiry, key memory, rate) comes from an
 * injectable clock; only injected delays use real timers.
 *
 * The parts live in line-sandbox/: LINE's contract (`LineContract`, contract.ts) knows nothing of
 * faults; the `FaultInjector` (fault-injector.ts) picks and applies them; the `LineFront`
 * (front.ts) is the HTTP side that puts the two together and logs every request.
 */
import { type EndpointRates, LINE_RATE_LIMITS } from '#shared/line/rate-limits.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { RETRY_KEY_LIFETIME_MS } from '#shared/retry-keys.ts';
import { LineContract, type SandboxChannel } from './line-sandbox/contract.ts';
import { type FaultControls, FaultInjector, type FaultProbabilities } from './line-sandbox/fault-injector.ts';
import { LineFront, type ServedFront, serveLineFront } from './line-sandbox/front.ts';
import {
  type Delivery,
  type DuplicateDelivery,
  type RequestLogEntry,
  type SandboxCounters,
  SandboxRecords,
} from './line-sandbox/records.ts';
import {
  type EventBuilders,
  makeEventBuilders,
  postWebhook,
  type SendWebhookOptions,
  type WebhookResponse,
} from './line-sandbox/webhook-events.ts';

export type { Clock } from '#shared/pacing/clock.ts';
export type { SandboxChannel } from './line-sandbox/contract.ts';
export type { Fault, FaultControls, FaultProbabilities, QueuedFault } from './line-sandbox/fault-injector.ts';
export type {
  Delivery,
  DuplicateDelivery,
  RequestLogEntry,
  SandboxCounters,
} from './line-sandbox/records.ts';
export { MAX_MESSAGES, MAX_MULTICAST_RECIPIENTS } from './line-sandbox/request-validation.ts';
export type {
  EventBase,
  EventBuilders,
  EventFrom,
  SendWebhookOptions,
  WebhookResponse,
} from './line-sandbox/webhook-events.ts';
export { SANDBOX_BOT_USER_ID } from './line-sandbox/webhook-events.ts';

export interface LineSandboxOptions {
  readonly channels?: readonly SandboxChannel[];
  /** Default the system clock. */
  readonly clock?: Clock;
  /**
   * Push (and reply) requests per second per channel: LINE's "other endpoints" row, 2,000 by
   * default. Multicast keeps its own row (200/s) unless `rateLimits` says otherwise.
   */
  readonly rateLimitPerSecond?: number;
  /** Per-endpoint requests per second per channel, over LINE's table. */
  readonly rateLimits?: Partial<EndpointRates>;
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
  /** One rate for every endpoint (a test's simplification of LINE's table); `Infinity` lifts them all. */
  setRateLimit(perSecond: number): void;
  /** Changes some endpoints' rates (`{ multicast: 200 }`); `Infinity` lifts one. */
  setRateLimits(rates: Partial<EndpointRates>): void;
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

/** The sandbox's parts: LINE's contract, the fault injector, and what both record. */
interface SandboxParts {
  readonly clock: Clock;
  readonly contract: LineContract;
  readonly faults: FaultInjector;
  readonly records: SandboxRecords;
  readonly events: EventBuilders;
}

/** Starts the sandbox on 127.0.0.1. */
export async function startLineSandbox(options: LineSandboxOptions = {}): Promise<LineSandbox> {
  const parts = sandboxParts(options);
  const served = await serveLineFront(new LineFront(parts), options.port ?? 0);
  return sandboxView(parts, served);
}

function sandboxParts(options: LineSandboxOptions): SandboxParts {
  const clock = options.clock ?? { now: () => Date.now() };
  const records = new SandboxRecords();
  const contract = new LineContract({
    clock,
    channels: options.channels ?? [],
    rateLimits: {
      ...LINE_RATE_LIMITS,
      ...(options.rateLimitPerSecond === undefined
        ? {}
        : { push: options.rateLimitPerSecond, reply: options.rateLimitPerSecond }),
      ...options.rateLimits,
    },
    replyTokenTtlMs: options.replyTokenTtlMs ?? 60_000,
    retryKeyTtlMs: options.retryKeyTtlMs ?? RETRY_KEY_LIFETIME_MS,
    monthlyQuota: options.monthlyQuota,
    records,
  });
  const faults = new FaultInjector(options.faults ?? {}, options.random ?? Math.random);
  const events = makeEventBuilders({ clock, tokens: contract.replyTokens });
  return { clock, contract, faults, records, events };
}

/** What callers hold: plain functions over the parts (they may be passed around unbound). */
function sandboxView(parts: SandboxParts, served: ServedFront): LineSandbox {
  const { clock, contract, faults, records, events } = parts;
  return {
    url: served.url,
    events,
    faults: faults.controls(),
    addChannel: (channel) => contract.addChannel(channel),
    setMonthlyQuota: (limit, used) => contract.setMonthlyQuota(limit, used),
    setRateLimit: (perSecond) =>
      contract.setRateLimits({ push: perSecond, multicast: perSecond, reply: perSecond }),
    setRateLimits: (rates) => contract.setRateLimits(rates),
    issueReplyToken: (channelId, to) =>
      contract.replyTokens.issue(channelId, to, { eventTimestamp: clock.now() }),
    sendWebhook: ({ redeliver, ...rest }) =>
      postWebhook(
        redeliver ? { ...rest, events: (rest.events ?? []).map((e) => events.redelivered(e)) } : rest,
      ),
    deliveries: () => records.deliveries,
    deliveriesTo: (recipient) => records.deliveriesTo(recipient),
    duplicates: () => records.duplicates(),
    log: () => records.log,
    counters: () => records.counters(),
    resetRecords: () => records.reset(),
    async stop() {
      faults.releaseDelays();
      await served.close();
    },
  };
}
