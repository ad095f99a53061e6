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
 * - A page is deleted once every task on it has an outcome written (or moved on).
 * - The sweeps read a client's open pages ({@link readOpenClaims}): a task on a page is in flight
 *   until the page's hold has passed.
 */
import { randomUUID } from 'node:crypto';
import { DeleteCommand, type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';

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

/** One session's pages: the Put its claim transaction writes, and the delete once a page is done. */
export class ClaimPages {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tasksTable: string;
  readonly #clientId: string;
  readonly #session = randomUUID();
  #seq = 0;
  /** Open pages of this session: task keys not yet settled. */
  readonly #open = new Map<string, Set<string>>();
  readonly #pageOfTask = new Map<string, string>();

  constructor(doc: DynamoDBDocumentClient, tasksTable: string, clientId: string) {
    this.#doc = doc;
    this.#tasksTable = tasksTable;
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
        TableName: this.#tasksTable,
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
      const keys = new Set(taskIds.map((taskId) => claimKey(jobId, taskId)));
      this.#open.set(sk, keys);
      for (const key of keys) this.#pageOfTask.set(key, sk);
    };
    return { item, commit };
  }

  /** Open pages other sessions left (older holders, or an earlier session that stopped). */
  async leftBehind(): Promise<ClaimPage[]> {
    const pages = await readOpenClaims(this.#doc, this.#tasksTable, this.#clientId);
    return pages.filter((p) => p.session !== this.#session);
  }

  /** Deletes a page (one another session left, once its tasks are settled). */
  async remove(sk: string): Promise<void> {
    await this.#doc.send(
      new DeleteCommand({ TableName: this.#tasksTable, Key: { pk: claimPagePk(this.#clientId), sk } }),
    );
  }

  /** The task's outcome was written (or it moved on): a page with nothing left is deleted. */
  async settled(jobId: string, taskId: string): Promise<void> {
    const key = claimKey(jobId, taskId);
    const sk = this.#pageOfTask.get(key);
    if (sk === undefined) return;
    this.#pageOfTask.delete(key);
    const left = this.#open.get(sk);
    left?.delete(key);
    if (left && left.size === 0) {
      this.#open.delete(sk);
      // Not deleted (a lost answer, a crash): the next holder settles it as left behind.
      await this.remove(sk).catch(() => undefined);
    }
  }
}
