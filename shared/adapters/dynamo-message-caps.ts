/**
 * Contact limits at a message's claim: a message task's first claim (attempt 0 → 1, the moment it
 * becomes a contact; a reclaim of the same attempt is not a new one) takes a slot of each of the
 * client's limits over `line` in the claim's own transaction (`capCounterUpdates`), so concurrent
 * claims and call starts share one count per recipient. A refused task is not claimed: it waits for
 * the window's end or ends `capped` (`overCapMove`), as a call does.
 */

import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import {
  type CapSlot,
  type ContactLimit,
  cappedReason,
  cappedWaitingReason,
  capSlots,
  contactChannelOf,
  overCapMove,
} from '#shared/contact-limits/model.ts';
import { isChunk } from '#shared/jobs/chunks.ts';
import { type ClientSettings, channelsOf, type Job, keys, type Task } from '#shared/jobs/model.ts';
import {
  isPersonWide,
  SUPPRESSION_SOURCES,
  type SuppressionScope,
  type SuppressionSource,
} from '#shared/suppressions/model.ts';
import { endCappedTask, personCapItems } from './dynamo-contact-caps.ts';
import type { Item } from './dynamo-message-table.ts';
import { readPersonOf } from './dynamo-people.ts';
import { deferTask } from './dynamo-task-deferral.ts';

/** How long a client's limits are trusted, ms (a change applies to claims within it). */
const LIMITS_CACHE_MS = 5_000;

/**
 * The items a claim group's first contacts add (each task's link check, then its counters), and
 * which task each belongs to: with its limit, or none for the link check.
 */
export interface ClaimCounters {
  readonly items: ReturnType<typeof personCapItems>;
  readonly owners: readonly { readonly task: number; readonly slot: CapSlot | undefined }[];
}

/** What the claims read of the client: its limits and zone, and its suppression scopes. */
interface CachedClient {
  readonly at: number;
  readonly limits?: readonly ContactLimit[];
  readonly timeZone: string;
  readonly scopes?: Partial<Record<SuppressionSource, SuppressionScope>>;
}

export class MessageCaps {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tables: { readonly controlTable: string; readonly tasksTable: string };
  readonly #clientId: string;
  #cached: CachedClient | undefined;

  constructor(
    doc: DynamoDBDocumentClient,
    tables: { readonly controlTable: string; readonly tasksTable: string },
    clientId: string,
  ) {
    this.#doc = doc;
    this.#tables = tables;
    this.#clientId = clientId;
  }

  /**
   * The limits a first contact of `job` at `now` must pass (none when the job ignores them): those
   * over its channel, and over any channel it falls back to.
   */
  async slotsFor(job: Job, now: number): Promise<CapSlot[]> {
    if (job.ignoreContactLimits) return [];
    const cached = await this.#client(now);
    // A job that falls back takes its one slot under every limit any of its channels is under:
    // whichever channel reaches the person, the contact was counted where it counts.
    const slots = new Map<string, CapSlot>();
    for (const channel of channelsOf(job))
      for (const slot of capSlots(cached.limits, contactChannelOf(channel), now, cached.timeZone))
        slots.set(slot.counter, slot);
    return [...slots.values()];
  }

  /** Whether an entry of `source` on a recipient reaches that channel alone (the client's scopes at `now`). */
  async channelOnly(source: string, now: number): Promise<boolean> {
    if (!(SUPPRESSION_SOURCES as readonly string[]).includes(source)) return false;
    return !isPersonWide(source as SuppressionSource, (await this.#client(now)).scopes);
  }

  /** The client's limits, zone and suppression scopes, read again once {@link LIMITS_CACHE_MS} old. */
  async #client(now: number): Promise<CachedClient> {
    if (!this.#cached || now - this.#cached.at >= LIMITS_CACHE_MS) {
      const out = await this.#doc.send(
        new GetCommand({ TableName: this.#tables.controlTable, Key: keys.client(this.#clientId) }),
      );
      const item = out.Item as
        | Pick<ClientSettings, 'contactLimits' | 'timeZone' | 'suppressionScope'>
        | undefined;
      this.#cached = {
        at: now,
        ...(item?.contactLimits ? { limits: item.contactLimits } : {}),
        timeZone: item?.timeZone ?? 'UTC',
        ...(item?.suppressionScope ? { scopes: item.suppressionScope } : {}),
      };
    }
    return this.#cached;
  }

  /**
   * The items of the group's first contacts (attempts 0): per task its link check and one counter
   * per limit; none for a task whose recipient is `uncounted` (it ends without a contact).
   */
  counters(
    group: readonly { readonly item: Item }[],
    slots: readonly CapSlot[],
    uncounted: ReadonlySet<string> = new Set(),
  ): ClaimCounters {
    const owners: { task: number; slot: CapSlot | undefined }[] = [];
    const items: ClaimCounters['items'] = [];
    if (slots.length === 0) return { items, owners };
    group.forEach(({ item }, task) => {
      // A chunk takes none: one claimed at attempt 0 under limits is spilled into tasks first.
      if (Number(item.attempts ?? 0) !== 0 || isChunk(item)) return;
      // One that will end opted out or suppressed is no contact: it takes no slot.
      if (uncounted.has(String(item.recipient))) return;
      items.push(...personCapItems(this.#tables, taskOf(item), slots));
      owners.push({ task, slot: undefined });
      for (const slot of slots) owners.push({ task, slot });
    });
    return { items, owners };
  }

  /**
   * A task whose recipient was linked (or unlinked) since its person was read: its item takes the
   * person as it is now, and the next claim counts it there.
   */
  async relink(item: Item): Promise<void> {
    const task = taskOf(item);
    const person = await readPersonOf(this.#doc, this.#tables.controlTable, task.clientId, task.recipient);
    const linked = person !== task.recipient;
    await this.#doc
      .send(
        new UpdateCommand({
          TableName: this.#tables.tasksTable,
          Key: keys.task(task.jobId, task.taskId),
          UpdateExpression: linked ? 'SET person = :person' : 'REMOVE person',
          ConditionExpression: 'attribute_exists(pk)',
          ...(linked ? { ExpressionAttributeValues: { ':person': person } } : {}),
        }),
      )
      .catch((error: unknown) => {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      });
  }

  /** A task refused by `slot`: it waits for the window's end inside its job's life, else ends capped. */
  async hold(job: Job, item: Item, slot: CapSlot, now: number): Promise<void> {
    const task = taskOf(item);
    const until = slot.window.end;
    if (overCapMove(until, job.endAt) === 'wait')
      await deferTask(this.#doc, this.#tables.tasksTable, task, until, now, {
        reason: cappedWaitingReason(slot.limit, until),
      });
    else await endCappedTask(this.#doc, this.#tables, task, cappedReason(slot.limit, until), now);
  }
}

/** The fields of a task item the counters and moves read. */
function taskOf(item: Item): Task {
  return {
    clientId: String(item.clientId),
    jobId: String(item.jobId),
    taskId: String(item.taskId),
    row: Number(item.row ?? 0),
    channel: 'message',
    recipient: String(item.recipient),
    ...(typeof item.person === 'string' ? { person: item.person } : {}),
    variables: {},
    state: item.state as Task['state'],
    attempts: Number(item.attempts ?? 0),
    readyAt: Number(item.readyAt ?? 0),
    updatedAt: Number(item.updatedAt ?? 0),
  };
}
