/**
 * The producer of outcome deliveries: reads a batch of stored-record changes (a DynamoDB Streams
 * batch), keeps the ones that are outcome events, drops the events of clients without a webhook, and
 * queues the rest as deliveries of up to {@link MAX_EVENTS_PER_DELIVERY} events per client.
 *
 * Input: changes in stream order. Output: the deliveries queued (and counts for the logs). A
 * failure to queue throws, so the stream batch is retried as a whole: the same changes give the same
 * event ids, and the receiver drops what it already has.
 */
import { eventOfChange, type OutcomeEvent, type RecordChange } from './events.ts';
import {
  MAX_EVENTS_PER_DELIVERY,
  type OutcomeDelivery,
  type OutcomeDeliveryQueue,
  type OutcomeWebhookDirectory,
} from './ports.ts';

export interface RouteSummary {
  readonly changes: number;
  readonly events: number;
  /** Events of clients without a webhook: not queued. */
  readonly skipped: number;
  readonly deliveries: number;
}

export interface OutcomeRouterDeps {
  readonly directory: OutcomeWebhookDirectory;
  readonly queue: OutcomeDeliveryQueue;
  readonly clock: { now(): number };
}

export class OutcomeRouter {
  readonly #deps: OutcomeRouterDeps;

  constructor(deps: OutcomeRouterDeps) {
    this.#deps = deps;
  }

  async route(changes: readonly RecordChange[]): Promise<RouteSummary> {
    const byClient = this.#eventsByClient(changes);
    const deliveries: OutcomeDelivery[] = [];
    let skipped = 0;
    let events = 0;
    for (const [clientId, clientEvents] of byClient) {
      events += clientEvents.length;
      if (!(await this.#deps.directory.hasWebhook(clientId))) {
        skipped += clientEvents.length;
        continue;
      }
      deliveries.push(...chunk(clientId, clientEvents));
    }
    if (deliveries.length > 0) await this.#deps.queue.send(deliveries);
    return { changes: changes.length, events, skipped, deliveries: deliveries.length };
  }

  #eventsByClient(changes: readonly RecordChange[]): Map<string, OutcomeEvent[]> {
    const now = this.#deps.clock.now();
    const byClient = new Map<string, OutcomeEvent[]>();
    for (const change of changes) {
      const event = eventOfChange(change, now);
      if (!event) continue;
      const list = byClient.get(event.clientId);
      if (list) list.push(event);
      else byClient.set(event.clientId, [event]);
    }
    return byClient;
  }
}

function chunk(clientId: string, events: readonly OutcomeEvent[]): OutcomeDelivery[] {
  const out: OutcomeDelivery[] = [];
  for (let i = 0; i < events.length; i += MAX_EVENTS_PER_DELIVERY) {
    out.push({ clientId, events: events.slice(i, i + MAX_EVENTS_PER_DELIVERY) });
  }
  return out;
}

/**
 * A directory that remembers each client's answer for `ttlMs` (default a minute), so a campaign's
 * million task ends read the client's settings about once a minute, not once per end.
 */
export class CachedWebhookDirectory implements OutcomeWebhookDirectory {
  readonly #read: (clientId: string) => Promise<boolean>;
  readonly #clock: { now(): number };
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { value: boolean; until: number }>();

  constructor(options: {
    read: (clientId: string) => Promise<boolean>;
    clock: { now(): number };
    ttlMs?: number;
  }) {
    this.#read = options.read;
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs ?? 60_000;
  }

  async hasWebhook(clientId: string): Promise<boolean> {
    const now = this.#clock.now();
    const hit = this.#cache.get(clientId);
    if (hit && hit.until > now) return hit.value;
    const value = await this.#read(clientId);
    this.#cache.set(clientId, { value, until: now + this.#ttlMs });
    return value;
  }
}
