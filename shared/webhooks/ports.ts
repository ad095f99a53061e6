/**
 * The ports of the webhook use cases. Adapters (DynamoDB, the Messaging API client) implement
 * them; tests and the local cloud hand in their own.
 */
import type { Channel } from '#shared/channels/channel.ts';
import type { MessagingClient } from '#shared/line/messaging-client.ts';

export interface ChannelStore {
  get(channelId: string): Promise<Channel | undefined>;
  put(channel: Channel): Promise<void>;
}

/** What Switchboard remembers about one webhook event, to act on it once. */
export interface ProcessedEventRecord {
  readonly eventId: string;
  readonly state: 'processing' | 'done' | 'failed';
  /** When the first attempt began: a retry key must not be reused 24 h after it. */
  readonly firstAttemptAt: number;
  /** A reply was sent (or may have been): it is never sent again. */
  readonly replyAttempted: boolean;
  readonly outcome?: string;
  readonly reason?: string;
}

export interface ProcessedEventStore {
  /** The event's record, created in state `processing` if this is the first time it is seen. */
  claim(eventId: string, now: number): Promise<ProcessedEventRecord>;
  /** Marks that a reply is about to be sent; false when one was already attempted. */
  markReplyAttempted(eventId: string): Promise<boolean>;
  /** Records the final state of an event. */
  finish(eventId: string, state: 'done' | 'failed', outcome: string, reason?: string): Promise<void>;
}

/** How long the handling of a webhook event is remembered (its idempotency record's TTL). */
export const PROCESSED_EVENT_TTL_MS = 7 * 24 * 3600 * 1000;

/** Recipients who unfollowed: every later job skips them. */
export interface OptOutStore {
  /**
   * Records a follow (`optedOut: false`) or unfollow (`true`), unless a later event for the same
   * recipient was already recorded (redeliveries arrive late and out of order). Of two events with
   * the same timestamp the one recorded last wins: a conversation's events are processed in FIFO
   * order, the best evidence of their order there is. Resolves false when dropped as stale.
   */
  record(clientId: string, recipient: string, optedOut: boolean, eventTimestamp: number): Promise<boolean>;
  /** Which of `recipients` are opted out now. */
  optedOut(clientId: string, recipients: readonly string[]): Promise<Set<string>>;
}

/** A Messaging API client for a channel (built once per channel and kept). */
export type MessagingFor = (channel: Channel) => MessagingClient;
