/**
 * In-memory stand-ins for the webhook ports, with the semantics of the real adapters (DynamoDB
 * conditions, FIFO queue, Messaging API outcomes), so the use cases are tested without emulators.
 */
import { makeEventBuilders } from '#local/line-sandbox/webhook-events.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { type ChannelInput, channelFromInput } from '#shared/channels/channel-input.ts';
import type {
  BodyOptions,
  MessagingClient,
  OutgoingMessage,
  PreparedSend,
  SendOptions,
  SendOutcome,
} from '#shared/line/messaging-client.ts';
import type { ProcessedEventRecord, ProcessedEventStore } from '#shared/webhooks/ports.ts';
import type { EventQueue, QueueEntry } from '#shared/webhooks/queue-message.ts';

export const T0 = Date.UTC(2025, 5, 2, 9, 0, 0);
export const USER = 'U3d3edab4f36c6292e6d8a8131f141b8b';
export const SECRET = 'c0ffee00c0ffee00c0ffee00c0ffee00';

/** A clock that moves only when the test says so. */
export class ManualClock {
  t: number;
  constructor(t = T0) {
    this.t = t;
  }
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** A valid channel, with `overrides` applied to the operator input. */
export function channel(overrides: Partial<ChannelInput> = {}, now = T0): Channel {
  return channelFromInput(
    {
      channelId: '1656000001',
      clientId: 'client-a',
      channelSecret: SECRET,
      accessToken: 'channel-access-token-1',
      autoAnswer: 'push',
      greeting: 'Welcome!',
      rules: [{ match: 'exact', pattern: 'hours', answer: 'Open 9-18', ignoreCase: true }],
      fallback: 'Sorry?',
      ...overrides,
    },
    now,
  );
}

/** LINE-shaped events (the sandbox's builders), with reply tokens that are simply counted. */
export function eventBuilders(clock: { now(): number } = new ManualClock()) {
  let n = 0;
  return makeEventBuilders({
    clock,
    tokens: { issue: () => `replytoken${++n}`, channelOf: () => '1656000001' },
  });
}

/** The queue the receiver stashes events in; records every enqueue call. */
export class MemoryQueue implements EventQueue {
  readonly calls: QueueEntry[][] = [];
  failWith: Error | undefined;
  async enqueue(entries: readonly QueueEntry[]): Promise<void> {
    if (this.failWith) throw this.failWith;
    this.calls.push([...entries]);
  }
  get entries(): QueueEntry[] {
    return this.calls.flat();
  }
}

/** Idempotency records with the DynamoDB adapter's conditions. */
export class MemoryEventStore implements ProcessedEventStore {
  readonly records = new Map<string, ProcessedEventRecord>();
  async claim(eventId: string, now: number): Promise<ProcessedEventRecord> {
    const existing = this.records.get(eventId);
    if (existing) return existing;
    const record: ProcessedEventRecord = {
      eventId,
      state: 'processing',
      firstAttemptAt: now,
      replyAttempted: false,
    };
    this.records.set(eventId, record);
    return record;
  }
  async markReplyAttempted(eventId: string): Promise<boolean> {
    const existing = this.records.get(eventId);
    if (!existing || existing.replyAttempted) return false;
    this.records.set(eventId, { ...existing, replyAttempted: true });
    return true;
  }
  async finish(eventId: string, state: 'done' | 'failed', outcome: string, reason?: string): Promise<void> {
    const existing = this.records.get(eventId)!;
    this.records.set(eventId, { ...existing, state, outcome, ...(reason === undefined ? {} : { reason }) });
  }
}

/** Opt-outs keeping the latest event per recipient, as the DynamoDB adapter does. */
export class MemoryOptOuts {
  readonly latest = new Map<string, { optedOut: boolean; at: number }>();
  async record(clientId: string, recipient: string, optedOut: boolean, eventTimestamp: number) {
    const key = `${clientId}/${recipient}`;
    const current = this.latest.get(key);
    if (current && current.at > eventTimestamp) return false;
    this.latest.set(key, { optedOut, at: eventTimestamp });
    return true;
  }
  async optedOut(clientId: string, recipients: readonly string[]) {
    return new Set(recipients.filter((r) => this.latest.get(`${clientId}/${r}`)?.optedOut === true));
  }
}

export interface SentRequest {
  readonly endpoint: 'reply' | 'push';
  readonly to: string;
  readonly messages: readonly OutgoingMessage[];
  readonly retryKey?: string;
}

export const delivered: SendOutcome = { kind: 'delivered', status: 200, requestId: 'r1', sentMessages: [] };

/** A Messaging API client that records each request and answers from a script (default 200). */
export class FakeMessaging implements MessagingClient {
  readonly sent: SentRequest[] = [];
  readonly outcomes: SendOutcome[] = [];
  #next(): SendOutcome {
    return this.outcomes.shift() ?? delivered;
  }
  async reply(replyToken: string, messages: readonly OutgoingMessage[], _o?: BodyOptions & SendOptions) {
    this.sent.push({ endpoint: 'reply', to: replyToken, messages });
    return this.#next();
  }
  async push(
    to: string,
    messages: readonly OutgoingMessage[],
    retryKey: string,
    _o?: BodyOptions & SendOptions,
  ) {
    this.sent.push({ endpoint: 'push', to, messages, retryKey });
    return this.#next();
  }
  async multicast(): Promise<SendOutcome> {
    throw new Error('the webhook processor never multicasts');
  }
  async quota() {
    return { used: 0 };
  }
  async send(_prepared: PreparedSend): Promise<SendOutcome> {
    throw new Error('the webhook processor sends through reply/push');
  }
}
