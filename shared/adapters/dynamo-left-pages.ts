/**
 * The claim pages other sessions of a client left behind (a holder that lost the lease, crashed
 * or stopped), settled by the next session's first page: `docs/claim-pages.md`, "Why nothing is
 * sent twice".
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { forEachLimited } from '#shared/fleet/run-budget.ts';
import { type Job, keys, resendsAreSafe, type TaskState, taskChannelOf } from '#shared/jobs/model.ts';
import { WAITING_STATES } from '#shared/jobs/task-lifecycle.ts';
import { type ClaimPage, type ClaimPages, endsOnPage, tasksOnPage } from './dynamo-claim-pages.ts';
import { type ClaimRecord, claimRecordOf } from './dynamo-claim-record.ts';
import { STATEMENTS_PER_BATCH } from './dynamo-message-outcomes.ts';
import type { Item, MessageTaskTable } from './dynamo-message-table.ts';
import type { MulticastRecords } from './dynamo-multicast-records.ts';
import { executeStatements, type PageStatement } from './dynamo-page-outcomes.ts';
import { STATE_NAME, stateIn } from './task-state-conditions.ts';

/** Requests of left tasks' marks ({@link STATEMENTS_PER_BATCH} each) at once. */
const MARK_BATCHES_AT_ONCE = 4;

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
    // A task that moved to its next channel from one of the pages (fallback) is not left in flight:
    // it waits on that channel, with the attempts (and so the contact-limit slot) its move kept.
    const open = tasks.filter(
      (task) =>
        task.state !== undefined &&
        WAITING_STATES.includes(task.state) &&
        !claimedAt.get(task.key)!.pages.includes(String(task.item.movedOn)),
    );
    const byTask = await this.#deps.batches.load(new Set(open.map((task) => task.jobId)));
    for (const [taskId, retryKey] of byTask) into.batchByTask.set(taskId, retryKey);
    const jobs = new Map<string, Job | undefined>();
    for (const jobId of new Set(open.map((task) => task.jobId)))
      jobs.set(jobId, await this.#deps.table.jobs.cached(this.#deps.clientId, jobId));
    // Whether the channel the task is on (its job's, or the one it fell back to) takes a retry key.
    const resendable = (task: ClaimRecord) => {
      const job = jobs.get(task.jobId);
      return job === undefined || resendsAreSafe(taskChannelOf(task.item, job));
    };
    const marks = open.map((task): LeftTask => {
      const batchKey = byTask.get(task.taskId);
      // Email records each request just before it goes: a task in none was never sent.
      const maybeSent = batchKey !== undefined || resendable(task);
      return { task, left: claimedAt.get(task.key)!, batchKey, maybeSent };
    });
    // A dead holder leaves up to its queue's worth (a thousand emails): marked one request each, the
    // next holder sent nothing for seconds. Marked 25 to a request, a few requests at once.
    const batches = Array.from({ length: Math.ceil(marks.length / STATEMENTS_PER_BATCH) }, (_, b) =>
      marks.slice(b * STATEMENTS_PER_BATCH, (b + 1) * STATEMENTS_PER_BATCH),
    );
    await forEachLimited(batches, MARK_BATCHES_AT_ONCE, async (batch) => {
      for (const [key, movedOn] of await this.#markAll(batch)) stored.set(key, movedOn);
    });
    // From now on no outcome of the left pages' holders can end a task they list (the mark names
    // the pages): what each page ended is final, and moves the job's counts with the page's close.
    for (const page of pages) {
      const listed = [...tasksOnPage(page)].flatMap(({ key }) => (stored.has(key) ? [stored.get(key)!] : []));
      await this.#deps.pages.close(page, endsOnPage(page.sk, listed));
    }
  }

  /**
   * Marks left tasks (at most {@link STATEMENTS_PER_BATCH}) in one `BatchExecuteStatement`, each
   * applied only while its task is as read (PartiQL has no `if_not_exists` and no `ADD`), so each
   * sets what {@link LeftClaimPages.#markMaybeSent} would. One refused though its task still waits
   * (its holder released it since the read) is marked on its own. Returns the tasks that moved on,
   * as stored.
   */
  async #markAll(batch: readonly LeftTask[]): Promise<Map<string, Item>> {
    const movedOn = new Map<string, Item>();
    const fitting = batch.filter((mark) => mark.task.item.leftOn === undefined);
    const results =
      fitting.length === 0
        ? []
        : await executeStatements(
            this.#deps.table.doc,
            fitting.map((mark) => markStatement(this.#deps.table.tasksTable, mark)),
          );
    const alone = batch.filter((mark) => mark.task.item.leftOn !== undefined);
    results.forEach((result, i) => {
      if (result.applied) return;
      const current = result.item;
      const stillLeft =
        current !== undefined &&
        WAITING_STATES.includes(current.state as TaskState) &&
        typeof current.attempts === 'number' &&
        current.attempts <= 1;
      if (stillLeft) alone.push(fitting[i]!);
      else if (current) movedOn.set(fitting[i]!.task.key, current);
    });
    for (const mark of alone) {
      const item = await this.#markMaybeSent(mark.task, mark.left, mark.batchKey, mark.maybeSent);
      if (item) movedOn.set(mark.task.key, item);
    }
    return movedOn;
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

/** A task a left page lists, still waiting, and how to mark it. */
interface LeftTask {
  readonly task: ClaimRecord;
  readonly left: { readonly at: number; readonly pages: readonly string[] };
  readonly batchKey: string | undefined;
  readonly maybeSent: boolean;
}

const q = (name: string) => `"${name}"`;

/**
 * The PartiQL `UPDATE` of {@link LeftClaimPages}'s mark, for a task read with no `leftOn`: what
 * `if_not_exists` and `ADD` would do, written as the values themselves, each guarded by the
 * attribute still missing (a task changed since the read is refused, and marked on its own).
 */
function markStatement(table: string, { task, left, batchKey, maybeSent }: LeftTask): PageStatement {
  const set: [string, unknown][] = [
    ['attempts', 1],
    ['leftOn', new Set(left.pages)],
  ];
  const missing = ['leftOn'];
  if (maybeSent) set.push(['maybeSent', true]);
  if (task.item.startedAt === undefined) {
    set.push(['startedAt', left.at]);
    missing.push('startedAt');
  }
  if (batchKey && task.item.batchKey === undefined) {
    set.push(['batchKey', batchKey]);
    missing.push('batchKey');
  }
  const key = keys.task(task.jobId, task.taskId);
  return {
    Statement:
      `UPDATE ${q(table)} ${set.map(([name]) => `SET ${q(name)} = ?`).join(' ')} ` +
      `WHERE ${q('pk')} = ? AND ${q('sk')} = ? AND ${q('state')} IN [${WAITING_STATES.map(() => '?').join(', ')}] ` +
      `AND ${q('attempts')} <= ? ${missing.map((name) => `AND ${q(name)} IS MISSING`).join(' ')}`,
    Parameters: [...set.map(([, value]) => value), key.pk, key.sk, ...WAITING_STATES, 1],
  };
}
