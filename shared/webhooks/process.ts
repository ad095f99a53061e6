/**
 * Acting on one webhook event, exactly once.
 *
 * Input: a queued event and how many times the queue has delivered it.
 * Output: what the queue should do with it — forget it (`done`, `skipped`, `failed`, all
 * recorded) or hand it back later (`retry` after a backoff).
 * Steps: claim the event's idempotency record (a redelivery or duplicate is recognised and
 * skipped) → in standby mode, nothing → follow: opt back in + greeting; unfollow: opt out;
 * text message: first matching keyword rule, else the fallback → send: `push` with the event's
 * ULID as retry key (a retry can never deliver twice; 409 = delivered), or `reply` with the reply
 * token at most once → record the outcome.
 */

import type { ChannelLookup } from '#shared/channels/cache.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { answerFor } from '#shared/channels/keyword-rules.ts';
import { backoffDelay, type OutgoingMessage, type SendOutcome } from '#shared/line/messaging-client.ts';
import {
  eventSource,
  type KnownWebhookEvent,
  readKnownEvent,
  sourceKey,
  type WebhookEvent,
} from '#shared/line/webhook.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { retryKeyStillSafe, webhookRetryKey } from '#shared/retry-keys.ts';
import { entryReason, type SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionStore } from '#shared/suppressions/ports.ts';
import {
  type MessagingFor,
  type OptOutStore,
  PROCESSED_EVENT_TTL_MS,
  type ProcessedEventRecord,
  type ProcessedEventStore,
} from './ports.ts';
import type { QueuedWebhookEvent } from './queue-message.ts';

export type ProcessResult =
  | { readonly kind: 'done'; readonly outcome: string }
  | { readonly kind: 'skipped'; readonly reason: string }
  /** `expected`: a deliberate refusal (an event too old to answer safely), not a fault. */
  | { readonly kind: 'failed'; readonly reason: string; readonly expected?: boolean }
  | {
      readonly kind: 'retry';
      readonly delayMs: number;
      readonly reason: string;
      readonly rateLimited: boolean;
    };

/** Wait between tries while the channel's monthly message quota is used up. */
export const MONTHLY_QUOTA_RETRY_MS = 3600_000;

export interface ProcessDeps {
  readonly channels: ChannelLookup;
  readonly events: ProcessedEventStore;
  readonly optOuts: OptOutStore;
  /**
   * The client's suppression list: an unfollow (once recorded as the latest) puts the user on it
   * with source `line-unfollow`, a later follow takes that entry back (never an operator's).
   */
  readonly suppressions?: Pick<SuppressionStore, 'add' | 'removeIfFrom'>;
  readonly messagingFor: MessagingFor;
  readonly clock: Clock;
  /** Where a follow or unfollow dropped as stale is said (it changes nothing, and is no error). */
  readonly log?: { warn(message: string, fields?: Record<string, unknown>): void };
  /** Backoff of a retried send (full jitter); the queue's visibility timeout carries it out. */
  readonly backoff?: { baseMs: number; capMs: number; random?: () => number };
}

/** What to send for an event, if anything, and who it concerns. */
interface Action {
  readonly messages: readonly OutgoingMessage[];
  readonly outcome: string;
}

/** An event whose idempotency record this run has claimed. */
interface ClaimedEvent {
  readonly eventId: string;
  readonly event: WebhookEvent;
  readonly record: ProcessedEventRecord;
}

/** Acts on webhook events, each exactly once, around their ports. */
export class WebhookEventProcessor {
  readonly #deps: ProcessDeps;
  readonly #backoff: NonNullable<ProcessDeps['backoff']>;

  constructor(deps: ProcessDeps) {
    this.#deps = deps;
    this.#backoff = deps.backoff ?? { baseMs: 2_000, capMs: 15 * 60_000 };
  }

  /** Acts on one queued event (delivered `receiveCount` times) and says what the queue should do. */
  async process(queued: QueuedWebhookEvent, receiveCount: number): Promise<ProcessResult> {
    const { event } = queued;
    const eventId = event.webhookEventId;
    const record = await this.#deps.events.claim(eventId, this.#deps.clock.now());
    if (record.state !== 'processing') {
      return {
        kind: 'skipped',
        reason: `already ${record.state}${record.outcome ? ` (${record.outcome})` : ''}`,
      };
    }
    const claimed: ClaimedEvent = { eventId, event, record };

    const channel = await this.#deps.channels.get(queued.channelId);
    if (!channel)
      return this.#finish(
        eventId,
        'failed',
        'unknown-channel',
        `channel ${queued.channelId} no longer exists`,
      );
    // Standby forbids sending, not knowing: follows and unfollows are still recorded.
    const reading = readKnownEvent(event);
    // Acting on a guess could opt the wrong person in or out: say what was not understood.
    if (reading.kind === 'unreadable')
      return this.#finish(eventId, 'failed', 'event-not-understood', reading.problem);
    const action = reading.kind === 'known' ? await decide(channel, reading.event, this.#deps) : undefined;
    // Only an active channel may answer; standby (another module holds the chat), or a mode this
    // code does not know, records what it must and sends nothing.
    if (event.mode !== 'active')
      return this.#finish(eventId, 'done', `${event.mode.slice(0, 40)}: nothing sent`);
    if (!action) return this.#finish(eventId, 'done', 'no answer');

    // A push answer goes to the group or room the event came from, else the user.
    const recipient = eventSource(event) ? sourceKey(event) : undefined;
    if (channel.autoAnswer === 'push') return this.#push(claimed, channel, recipient, action, receiveCount);
    return this.#reply(claimed, channel, action);
  }

  /** Records the event's final state and says so to the queue. */
  async #finish(
    eventId: string,
    state: 'done' | 'failed',
    outcome: string,
    reason?: string,
    expected = false,
  ): Promise<ProcessResult> {
    await this.#deps.events.finish(eventId, state, outcome, reason);
    if (state === 'done') return { kind: 'done', outcome };
    return { kind: 'failed', reason: reason ?? outcome, ...(expected ? { expected } : {}) };
  }

  /** Push mode: sent with the event's retry key, so a retry can never deliver twice. */
  async #push(
    { eventId, event, record }: ClaimedEvent,
    channel: Channel,
    recipient: string | undefined,
    action: Action,
    receiveCount: number,
  ): Promise<ProcessResult> {
    if (!recipient) return this.#finish(eventId, 'failed', 'no-recipient', 'event has no source to push to');
    const refusal = oldEventRefusal(record.firstAttemptAt, event.timestamp, this.#deps.clock.now());
    if (refusal) return this.#finish(eventId, 'failed', refusal.outcome, refusal.reason, true);
    const outcome = await this.#deps
      .messagingFor(channel)
      .push(recipient, action.messages, webhookRetryKey(eventId));
    return this.#settlePush(eventId, outcome, action, receiveCount);
  }

  async #settlePush(
    eventId: string,
    outcome: SendOutcome,
    act: Action,
    attempt: number,
  ): Promise<ProcessResult> {
    switch (outcome.kind) {
      case 'delivered':
        return this.#finish(eventId, 'done', act.outcome);
      case 'already-delivered':
        return this.#finish(eventId, 'done', `${act.outcome} (already delivered)`);
      case 'rejected':
        return this.#finish(
          eventId,
          'failed',
          'push-rejected',
          `push rejected ${outcome.status}: ${outcome.message}`,
        );
      case 'rate-limited':
      case 'retryable':
        return this.#retryPush(outcome, attempt);
    }
  }

  /** A push to try again later: after a backoff, at least what LINE asked, at least a second. */
  #retryPush(
    outcome: Extract<SendOutcome, { kind: 'rate-limited' | 'retryable' }>,
    attempt: number,
  ): ProcessResult {
    // A used-up monthly quota is not lifted in seconds: wait an hour between tries (the
    // queue's 12 receives stay within the retry key's 24 h), and say so in the reason.
    const monthly = outcome.kind === 'rate-limited' && outcome.reason === 'monthly-quota';
    const base = monthly ? MONTHLY_QUOTA_RETRY_MS : backoffDelay(Math.max(0, attempt - 1), this.#backoff);
    const floor = outcome.kind === 'rate-limited' ? (outcome.retryAfterMs ?? 0) : 0;
    return {
      kind: 'retry',
      delayMs: Math.max(base, floor, 1_000),
      reason: outcome.kind === 'rate-limited' ? `rate limited (${outcome.reason})` : `push ${outcome.reason}`,
      rateLimited: outcome.kind === 'rate-limited',
    };
  }

  /** Reply mode: a reply token works once and a reply is never retried after an ambiguous failure. */
  async #reply(
    { eventId, event, record }: ClaimedEvent,
    channel: Channel,
    action: Action,
  ): Promise<ProcessResult> {
    if (!event.replyToken)
      return this.#finish(
        eventId,
        'failed',
        'no-reply-token',
        `a ${event.type} event carries no reply token`,
      );
    if (record.replyAttempted || !(await this.#deps.events.markReplyAttempted(eventId))) {
      return this.#finish(
        eventId,
        'failed',
        'reply-not-retried',
        'a reply was already attempted for this event (at most once)',
      );
    }
    const outcome = await this.#deps.messagingFor(channel).reply(event.replyToken, action.messages);
    switch (outcome.kind) {
      case 'delivered':
      case 'already-delivered':
        return this.#finish(eventId, 'done', action.outcome);
      case 'retryable':
        return this.#finish(
          eventId,
          'failed',
          'reply-ambiguous',
          `reply ${outcome.reason}: not retried, it may have been delivered`,
        );
      case 'rate-limited':
        return this.#finish(
          eventId,
          'failed',
          'reply-rate-limited',
          `reply refused (${outcome.reason}): ${outcome.message}`,
        );
      case 'rejected':
        return this.#finish(
          eventId,
          'failed',
          'reply-rejected',
          `reply rejected ${outcome.status}: ${outcome.message}`,
        );
    }
  }
}

/** Builds the processor's use case: each call acts on one queued event. */
export function makeProcessWebhookEvent(deps: ProcessDeps) {
  const processor = new WebhookEventProcessor(deps);
  return function processWebhookEvent(
    queued: QueuedWebhookEvent,
    receiveCount: number,
  ): Promise<ProcessResult> {
    return processor.process(queued, receiveCount);
  };
}

/**
 * Whether a push for this event could deliver twice. LINE keeps a retry key 24 hours from the first
 * request that used it, and the first push for an event comes after its idempotency record was
 * first claimed (`firstAttemptAt`), so the key is safe until 23 h after that claim (an hour's
 * margin). That record lives 7 days from its claim, which comes after the event: while the event is
 * younger than that, a record of any earlier attempt would still be there, so `firstAttemptAt` is
 * the truth. An older event (a late DLQ redrive) may have been answered by a record since expired:
 * it is not pushed.
 */
export function oldEventRefusal(
  firstAttemptAt: number,
  eventTimestamp: number,
  now: number,
): { outcome: string; reason: string } | undefined {
  const hours = (ms: number) => Math.floor(ms / 3_600_000);
  if (now - eventTimestamp >= PROCESSED_EVENT_TTL_MS) {
    return {
      outcome: 'too-old-to-know',
      reason: `event is ${hours(now - eventTimestamp)} h old, older than the 7 days its handling is remembered: it may have been answered already, so it is not pushed`,
    };
  }
  if (!retryKeyStillSafe(firstAttemptAt, now)) {
    return {
      outcome: 'retry-window-expired',
      reason: `first attempt ${hours(now - firstAttemptAt)} h ago: LINE keeps a retry key 24 h from its first use, so a push now could deliver twice`,
    };
  }
  return undefined;
}

/** Decides what an event calls for; records follows and unfollows on the way. */
async function decide(
  channel: Channel,
  known: KnownWebhookEvent,
  deps: Pick<ProcessDeps, 'optOuts' | 'log' | 'suppressions'>,
): Promise<Action | undefined> {
  const userId = known.source?.type === 'user' ? known.source.userId : undefined;
  /** Records the follow or unfollow; false when a newer one of the user was recorded already. */
  const record = async (optedOut: boolean): Promise<boolean> => {
    if (!userId) return true;
    const applied = await deps.optOuts.record(channel.clientId, userId, optedOut, known.timestamp);
    if (applied) await mirrorOnSuppressionList(deps, channel.clientId, userId, optedOut, known.timestamp);
    if (!applied) {
      deps.log?.warn('follow/unfollow older than the one recorded: not applied', {
        clientId: channel.clientId,
        webhookEventId: known.webhookEventId,
        type: known.type,
        eventTimestamp: known.timestamp,
      });
    }
    return applied;
  };
  switch (known.type) {
    case 'follow':
      // A follow older than the user's last recorded unfollow (a late redelivery) greets nobody:
      // the user has left since. One older than a later follow still greets: that may be a follow
      // of another channel of the client (the record is per client and user), and each follow
      // event is greeted once, under its own retry key.
      if (
        !(await record(false)) &&
        userId &&
        (await deps.optOuts.optedOut(channel.clientId, [userId])).has(userId)
      )
        return undefined;
      return channel.greeting
        ? { messages: [{ type: 'text', text: channel.greeting }], outcome: 'greeted' }
        : undefined;
    case 'unfollow':
      await record(true);
      return undefined;
    case 'message': {
      if (known.message.type !== 'text' || known.message.text === undefined) return undefined;
      const answer = answerFor(channel, known.message.text);
      return answer ? { messages: [{ type: 'text', text: answer }], outcome: 'answered' } : undefined;
    }
    default:
      return undefined;
  }
}

/** An applied unfollow puts the user on the client's suppression list; an applied follow takes its own entry back. */
async function mirrorOnSuppressionList(
  deps: Pick<ProcessDeps, 'suppressions'>,
  clientId: string,
  userId: string,
  optedOut: boolean,
  at: number,
): Promise<void> {
  if (!deps.suppressions) return;
  if (!optedOut) {
    await deps.suppressions.removeIfFrom(clientId, userId, 'line-unfollow', at);
    return;
  }
  const entry: SuppressionEntry = {
    recipient: userId,
    kind: 'line',
    source: 'line-unfollow',
    reason: entryReason(undefined, 'line-unfollow'),
    addedAt: at,
  };
  await deps.suppressions.add(clientId, [entry]);
}
