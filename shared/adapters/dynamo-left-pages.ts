/**
 * The claim pages other sessions of a client left behind (a holder that lost the lease, crashed
 * or stopped), settled by the next session's first page: `docs/claim-pages.md`, "Why nothing is
 * sent twice".
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { keys, resendsAreSafe } from '#shared/jobs/model.ts';
import { WAITING_STATES } from '#shared/jobs/task-lifecycle.ts';
import { type ClaimPage, type ClaimPages, endsOnPage, tasksOnPage } from './dynamo-claim-pages.ts';
import { type ClaimRecord, claimRecordOf } from './dynamo-claim-record.ts';
import type { Item, MessageTaskTable } from './dynamo-message-table.ts';
import type { MulticastRecords } from './dynamo-multicast-records.ts';
import { STATE_NAME, stateIn } from './task-state-conditions.ts';

export interface LeftPagesDeps {
  readonly table: MessageTaskTable;
  readonly pages: ClaimPages;
  readonly batches: MulticastRecords;
  readonly clientId: string;
}

/** What settling tells the session: tasks it must leave alone, and the multicast each left task was part of. */
export interface SettledInto {
  /** Tasks on a live claim page of an earlier round of this holder (same token, hold not ended). */
  readonly heldElsewhere: Set<string>;
  /** Task id → the retry key of the recorded multicast it was a member of. */
  readonly batchByTask: Map<string, string>;
}

export class LeftClaimPages {
  readonly #deps: LeftPagesDeps;

  constructor(deps: LeftPagesDeps) {
    this.#deps = deps;
  }

  /**
   * Settles the claim pages other sessions left (a holder that lost the lease, crashed or stopped):
   * each task still waiting on such a page may have been sent, so it is marked `maybeSent` with its
   * first claim's time (the retry key's 24-hour window) and, if it was a multicast's member, that
   * multicast's key; it is then claimed again like any waiting task, under the same retry key. The
   * pages are deleted once their tasks are marked. A page of this same lease token whose hold has
   * not ended is an earlier round's of this holder that may still be sending: its tasks are left
   * alone for this session (as a task claim's hold did before claim pages).
   */
  async settle(token: number, now: number, into: SettledInto): Promise<void> {
    const pages: ClaimPage[] = [];
    for (const page of await this.#deps.pages.leftBehind()) {
      // A newer holder's page is its own to settle (this session has lost the lease: its claims fail).
      if (page.token > token) continue;
      if (page.token < token || page.holdUntil <= now) pages.push(page);
      else for (const { key } of tasksOnPage(page)) into.heldElsewhere.add(key);
    }
    if (pages.length === 0) return;
    const claimedAt = new Map<string, { jobId: string; taskId: string; at: number; pages: string[] }>();
    for (const page of pages) {
      for (const { jobId, taskId, key } of tasksOnPage(page)) {
        const seen = claimedAt.get(key);
        const at = Math.min(seen?.at ?? page.claimedAt, page.claimedAt);
        claimedAt.set(key, { jobId, taskId, at, pages: [...(seen?.pages ?? []), page.sk] });
      }
    }
    const tasks = (
      await this.#deps.table.getItems([...claimedAt.values()].map((t) => keys.task(t.jobId, t.taskId)))
    ).map(claimRecordOf);
    const stored = new Map(tasks.map((task) => [task.key, task.item]));
    const open = tasks.filter((task) => task.state !== undefined && WAITING_STATES.includes(task.state));
    const byTask = await this.#deps.batches.load(new Set(open.map((task) => task.jobId)));
    for (const [taskId, retryKey] of byTask) into.batchByTask.set(taskId, retryKey);
    for (const task of open) {
      const left = claimedAt.get(task.key)!;
      const batchKey = byTask.get(task.taskId);
      // Email records each request just before it goes: a task in none was never sent.
      const job = await this.#deps.table.jobs.cached(this.#deps.clientId, task.jobId);
      const maybeSent = batchKey !== undefined || job === undefined || resendsAreSafe(job.channel);
      const movedOn = await this.#markMaybeSent(task, left, batchKey, maybeSent);
      // Its holder's outcome landed between the read and the mark: counted with its page below.
      if (movedOn) stored.set(task.key, movedOn);
    }
    // From now on no outcome of the left pages' holders can end a task they list (the mark names
    // the pages): what each page ended is final, and moves the job's counts with the page's close.
    for (const page of pages) {
      const listed = [...tasksOnPage(page)].flatMap(({ key }) => (stored.has(key) ? [stored.get(key)!] : []));
      await this.#deps.pages.close(page, endsOnPage(page.sk, listed));
    }
  }

  /**
   * A left task marked as possibly sent, and as left by `pages` (`leftOn`: an outcome its holder
   * writes on one of them from now on is refused). Not a move: it stays waiting. A task that moved
   * on is left as it is and returned as stored.
   */
  async #markMaybeSent(
    task: ClaimRecord,
    left: { readonly at: number; readonly pages: readonly string[] },
    batchKey: string | undefined,
    maybeSent: boolean,
  ): Promise<Item | undefined> {
    const { at: claimedAt, pages } = left;
    const waiting = stateIn(WAITING_STATES);
    try {
      await this.#deps.table.doc.send(
        new UpdateCommand({
          TableName: this.#deps.table.tasksTable,
          Key: keys.task(task.jobId, task.taskId),
          UpdateExpression:
            `SET ${maybeSent ? 'maybeSent = :true, ' : ''}attempts = :one, startedAt = if_not_exists(startedAt, :claimedAt)` +
            (batchKey ? ', batchKey = if_not_exists(batchKey, :batchKey)' : '') +
            ' ADD leftOn :pages',
          ConditionExpression: `${waiting.condition} AND attempts <= :one`,
          ExpressionAttributeNames: STATE_NAME,
          ExpressionAttributeValues: {
            ...waiting.values,
            ...(maybeSent ? { ':true': true } : {}),
            ':one': 1,
            ':claimedAt': claimedAt,
            ':pages': new Set(pages),
            ...(batchKey ? { ':batchKey': batchKey } : {}),
          },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return undefined;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      return error.Item ? unmarshall(error.Item) : undefined;
    }
  }
}
