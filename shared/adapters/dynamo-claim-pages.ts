/**
 * Claim pages: a message session records what it claims one page at a time — one item listing the
 * page's tasks (`{clientId}#claims` / token#session#seq in the tasks table), written in the claim's
 * lease-fenced transaction — instead of an update of every task (two write units a task for the
 * transaction and two more for its index entry re-sorted). A claimed task's item is not touched
 * until its outcome: it stays waiting in the `outstanding` index, and what says it is in flight
 * is the page. The argument that nothing is sent twice: `docs/claim-pages.md`.
 *
 * - The session skips what it holds (its own `held` set); no other broker claims while it holds
 *   the lease (the fence), and a broker that takes the lease over first settles every page it
 *   did not write ({@link ClaimPages.leftBehind}): each task still open on such a page is marked
 *   `maybeSent` with its first claim's time, so it is claimed again under the same retry key.
 * - A page is deleted once every task on it has an outcome written (or moved on), in one
 *   transaction with the job's counts of the tasks it ended: a final outcome of a task on a page is
 *   a plain conditional update that names the page (`endedOn`), and the page's counts move with
 *   its deletion, so exactly once ({@link closePage}; the argument: `docs/claim-pages.md`,
 *   "Outcomes"). Whoever deletes the page — its session, a broker taking the client over, the job
 *   manager completing the job, a sweep — counts the same tasks: those whose `endedOn` is the page.
 * - The sweeps read a client's open pages ({@link readOpenClaims}): a task on a page is in flight
 *   until the page's hold has passed.
 */
import { randomUUID } from 'node:crypto';
import { DeleteCommand, type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { type Chunk, isChunk, memberTasks } from '#shared/jobs/chunks.ts';
import { keys } from '#shared/jobs/model.ts';
import { isFinal } from '#shared/jobs/task-lifecycle.ts';
import { isSuppressedReason } from '#shared/suppressions/model.ts';
import { getItemsConsistent, type Item, transactWrite } from './dynamo-message-table.ts';

export const claimPagePk = (clientId: string) => `${clientId}#claims`;

/** A task's key on a page (jobs' ids and tasks' ids hold no space). */
export const claimKey = (jobId: string, taskId: string) => `${jobId} ${taskId}`;

/** An open page as read back: who wrote it, when its hold ends, its tasks by job. */
export interface ClaimPage {
  readonly sk: string;
  readonly token: number;
  readonly session: string;
  readonly claimedAt: number;
  readonly holdUntil: number;
  readonly tasks: Readonly<Record<string, readonly string[]>>;
}

function pageOf(item: Record<string, unknown>): ClaimPage {
  return {
    sk: String(item.sk),
    token: Number(item.token),
    session: String(item.session),
    claimedAt: Number(item.claimedAt),
    holdUntil: Number(item.holdUntil),
    tasks: (item.tasks ?? {}) as Record<string, string[]>,
  };
}

/** The tasks a page lists, with their `claimKey`. */
export function* tasksOnPage(page: ClaimPage): Generator<{ jobId: string; taskId: string; key: string }> {
  for (const [jobId, taskIds] of Object.entries(page.tasks)) {
    for (const taskId of taskIds) yield { jobId, taskId, key: claimKey(jobId, taskId) };
  }
}

/** Every open claim page of a client (strongly consistent: a takeover must see all of them). */
export async function readOpenClaims(
  doc: DynamoDBDocumentClient,
  tasksTable: string,
  clientId: string,
): Promise<ClaimPage[]> {
  const pages: ClaimPage[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const out = await doc.send(
      new QueryCommand({
        TableName: tasksTable,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': claimPagePk(clientId) },
        ConsistentRead: true,
        ...(startKey ? { ExclusiveStartKey: startKey } : {}),
      }),
    );
    for (const item of out.Items ?? []) pages.push(pageOf(item));
    startKey = out.LastEvaluatedKey;
  } while (startKey);
  return pages;
}

/** Task key → the end of its page's hold, for every task on an open page of the client. */
export async function claimHolds(
  doc: DynamoDBDocumentClient,
  tasksTable: string,
  clientId: string,
): Promise<Map<string, number>> {
  const holds = new Map<string, number>();
  for (const page of await readOpenClaims(doc, tasksTable, clientId)) {
    for (const { key } of tasksOnPage(page)) holds.set(key, Math.max(holds.get(key) ?? 0, page.holdUntil));
  }
  return holds;
}

/** The tables a page's close writes: the page in the tasks table, the job's counts in the control table. */
export interface PageTables {
  readonly doc: DynamoDBDocumentClient;
  readonly tasksTable: string;
  readonly controlTable: string;
}

/** What a page's tasks ended as (the job's counts it moves), `suppressed` among the cancelled. */
export interface EndCounts {
  completed: number;
  failed: number;
  cancelled: number;
  expired: number;
  suppressed: number;
}

export type EndState = Exclude<keyof EndCounts, 'suppressed'>;

export const noEnds = (): EndCounts => ({ completed: 0, failed: 0, cancelled: 0, expired: 0, suppressed: 0 });

const endedAny = (c: EndCounts) => c.completed + c.failed + c.cancelled + c.expired > 0;

/** Adds `n` ends (one task's, or a chunk's members in one state) to `counts`. */
export function countEnd(counts: EndCounts, state: EndState, reason: string | undefined, n = 1): void {
  counts[state] += n;
  if (state === 'cancelled' && isSuppressedReason(reason)) counts.suppressed += n;
}

/** Adds `more` to `counts`. */
export function addEnds(counts: EndCounts, more: EndCounts): void {
  for (const state of Object.keys(counts) as (keyof EndCounts)[]) counts[state] += more[state];
}

/** The ends of the tasks a page ended: those (of `items`, as stored) final with `endedOn` = the page. */
export function endsOnPage(sk: string, items: Iterable<Item>): EndCounts {
  const counts = noEnds();
  for (const item of items) {
    if (item.endedOn !== sk || !isFinal(item.state as never)) continue;
    // A chunk's members are counted all at once, when the chunk ends: those that ended apart too.
    const ended = isChunk(item) ? memberTasks(item as unknown as Chunk) : [item];
    for (const task of ended) countEnd(counts, task.state as EndState, task.reason as string | undefined);
  }
  return counts;
}

/**
 * The job's counts moved by `counts` (ADD), on a job that has counts; with `notCancelled`, only
 * while the job is not cancelled; with `now`, its `updatedAt` set.
 */
export function jobCountsUpdate(
  controlTable: string,
  clientId: string,
  jobId: string,
  counts: EndCounts,
  notCancelled = false,
  now?: number,
) {
  const suppressed = counts.suppressed > 0;
  return {
    Update: {
      TableName: controlTable,
      Key: keys.job(clientId, jobId),
      UpdateExpression:
        'ADD #counts.#completed :completed, #counts.#failed :failed, #counts.#cancelled :cancelled, #counts.#expired :expired' +
        (suppressed ? ', #counts.#suppressed :suppressed' : '') +
        (now === undefined ? '' : ' SET updatedAt = :now'),
      ConditionExpression: notCancelled
        ? 'attribute_exists(#counts) AND #status <> :cancelledStatus'
        : 'attribute_exists(#counts)',
      ExpressionAttributeNames: {
        '#counts': 'counts',
        '#completed': 'completed',
        '#failed': 'failed',
        '#cancelled': 'cancelled',
        '#expired': 'expired',
        ...(suppressed ? { '#suppressed': 'suppressed' } : {}),
        ...(notCancelled ? { '#status': 'status' } : {}),
      },
      ExpressionAttributeValues: {
        ':completed': counts.completed,
        ':failed': counts.failed,
        ':cancelled': counts.cancelled,
        ':expired': counts.expired,
        ...(suppressed ? { ':suppressed': counts.suppressed } : {}),
        ...(notCancelled ? { ':cancelledStatus': 'cancelled' } : {}),
        ...(now === undefined ? {} : { ':now': now }),
      },
    },
  };
}

/**
 * Deletes a page and moves the job's counts by what its tasks ended as, in one transaction that
 * only applies while the page exists: false when another closed it first (it counted the same
 * tasks). A page that ended nothing is simply deleted.
 */
export async function closePage(
  tables: PageTables,
  clientId: string,
  page: { readonly sk: string; readonly jobId: string },
  counts: EndCounts,
): Promise<boolean> {
  const key = { pk: claimPagePk(clientId), sk: page.sk };
  if (!endedAny(counts)) {
    await tables.doc.send(new DeleteCommand({ TableName: tables.tasksTable, Key: key }));
    return true;
  }
  const codes = await transactWrite(tables.doc, [
    { Delete: { TableName: tables.tasksTable, Key: key, ConditionExpression: 'attribute_exists(pk)' } },
    jobCountsUpdate(tables.controlTable, clientId, page.jobId, counts),
  ]);
  if (codes === undefined) return true;
  if (codes[0] === 'ConditionalCheckFailed') return false;
  if (codes[1] === 'ConditionalCheckFailed') {
    // The job is gone (or never had counts): nothing to count on.
    await tables.doc.send(new DeleteCommand({ TableName: tables.tasksTable, Key: key }));
    return true;
  }
  throw new Error(`claim page ${page.sk} of ${clientId} not closed: ${codes.join(', ')}`);
}

/** The job a page lists (a page is written by one claim transaction, of one job). */
export const jobOfPage = (page: ClaimPage): string | undefined => Object.keys(page.tasks)[0];

/**
 * Closes the client's open pages of `jobId` on which every task has ended (a broker that wrote
 * their outcomes and stopped before deleting the page), counting what they ended: run before a
 * job is completed and when a sweep is done, so the job's counts are whole. A page with a task
 * still open is left to its broker (or the broker taking the client over). Returns how many it closed.
 */
export async function settleDonePages(tables: PageTables, clientId: string, jobId: string): Promise<number> {
  const pages = (await readOpenClaims(tables.doc, tables.tasksTable, clientId)).filter(
    (p) => p.tasks[jobId] !== undefined,
  );
  let closed = 0;
  for (const page of pages) {
    const listed = [...tasksOnPage(page)];
    const items = await getItemsConsistent(
      tables.doc,
      tables.tasksTable,
      listed.map((t) => keys.task(t.jobId, t.taskId)),
    );
    // A task no longer stored (expired by its TTL) has ended.
    if (items.some((item) => !isFinal(item.state as never))) continue;
    const job = jobOfPage(page)!;
    if (await closePage(tables, clientId, { sk: page.sk, jobId: job }, endsOnPage(page.sk, items))) closed++;
  }
  return closed;
}

/**
 * One session's pages: the Put its claim transaction writes; which page a claimed task is on; what
 * the tasks it ended on each page count; the page's close once every task on it is settled.
 */
export class ClaimPages {
  readonly #tables: PageTables;
  readonly #clientId: string;
  readonly #session = randomUUID();
  #seq = 0;
  /** Open pages of this session: their job, task keys not yet settled, what the settled ones ended as. */
  readonly #open = new Map<string, { jobId: string; left: Set<string>; ends: EndCounts }>();
  readonly #pageOfTask = new Map<string, string>();

  constructor(tables: PageTables, clientId: string) {
    this.#tables = tables;
    this.#clientId = clientId;
  }

  /**
   * The page item for one claim transaction of `jobId`'s `taskIds`, and `commit`, to call once
   * the transaction was applied. The sort key orders pages by token, then session.
   */
  page(jobId: string, taskIds: readonly string[], token: number, now: number, holdMs: number) {
    const sk = `${String(token).padStart(15, '0')}#${this.#session}#${String(++this.#seq).padStart(9, '0')}`;
    const item = {
      Put: {
        TableName: this.#tables.tasksTable,
        Item: {
          pk: claimPagePk(this.#clientId),
          sk,
          token,
          session: this.#session,
          claimedAt: now,
          holdUntil: now + holdMs,
          tasks: { [jobId]: [...taskIds] },
        },
      },
    };
    const commit = () => {
      const left = new Set(taskIds.map((taskId) => claimKey(jobId, taskId)));
      this.#open.set(sk, { jobId, left, ends: noEnds() });
      for (const key of left) this.#pageOfTask.set(key, sk);
    };
    return { item, commit };
  }

  /** The open page of this session the task is on, if any. */
  pageOf(jobId: string, taskId: string): string | undefined {
    return this.#pageOfTask.get(claimKey(jobId, taskId));
  }

  /** Open pages other sessions left (older holders, or an earlier session that stopped). */
  async leftBehind(): Promise<ClaimPage[]> {
    const pages = await readOpenClaims(this.#tables.doc, this.#tables.tasksTable, this.#clientId);
    return pages.filter((p) => p.session !== this.#session);
  }

  /** Closes a page another session left, with what its tasks ended as (read from the tasks). */
  async close(page: ClaimPage, ends: EndCounts): Promise<void> {
    await closePage(this.#tables, this.#clientId, { sk: page.sk, jobId: jobOfPage(page) ?? '' }, ends);
  }

  /** A task of this session's page was ended by its outcome written on the page (`endedOn`). */
  ended(jobId: string, taskId: string, ends: EndCounts): void {
    const sk = this.#pageOfTask.get(claimKey(jobId, taskId));
    const open = sk === undefined ? undefined : this.#open.get(sk);
    if (open) addEnds(open.ends, ends);
  }

  /** The task's outcome was written (or it moved on): a page with nothing left is closed. */
  async settled(jobId: string, taskId: string): Promise<void> {
    const key = claimKey(jobId, taskId);
    const sk = this.#pageOfTask.get(key);
    if (sk === undefined) return;
    this.#pageOfTask.delete(key);
    const open = this.#open.get(sk);
    open?.left.delete(key);
    if (open && open.left.size === 0) {
      this.#open.delete(sk);
      // Not closed (a lost answer, a crash): whoever closes it later counts the same tasks, from
      // their `endedOn` (the next holder, or the job manager before it completes the job).
      await closePage(this.#tables, this.#clientId, { sk, jobId: open.jobId }, open.ends).catch(
        () => undefined,
      );
    }
  }
}
