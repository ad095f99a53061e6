/**
 * What the LINE sandbox saw: every delivery (duplicates included) and every request with its
 * answer, so a test or benchmark can count what each recipient got.
 */
import type { SendEndpoint } from '#shared/line/messaging-client.ts';
import type { Fault } from './fault-injector.ts';

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

/** The sandbox's deliveries and request log, until {@link reset}. */
export class SandboxRecords {
  #deliveries: Delivery[] = [];
  #log: RequestLogEntry[] = [];

  get deliveries(): readonly Delivery[] {
    return this.#deliveries;
  }

  get log(): readonly RequestLogEntry[] {
    return this.#log;
  }

  addDelivery(delivery: Delivery): void {
    this.#deliveries.push(delivery);
  }

  addRequest(entry: RequestLogEntry): void {
    this.#log.push(entry);
  }

  deliveriesTo(recipient: string): readonly Delivery[] {
    return this.#deliveries.filter((d) => d.to.includes(recipient));
  }

  duplicates(): DuplicateDelivery[] {
    return findDuplicates(this.#deliveries);
  }

  counters(): SandboxCounters {
    return countersOf(this.#log, this.#deliveries);
  }

  /** Starts new lists (lists handed out before stay as they were). */
  reset(): void {
    this.#deliveries = [];
    this.#log = [];
  }
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
