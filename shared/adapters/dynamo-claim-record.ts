/**
 * A message task's (or chunk's) item as a claim reads it ({@link ClaimRecord}), what choosing one
 * reads of its index entry, and the small readings the claim makes of it.
 */
import { type Chunk, isChunk, membersInState } from '#shared/jobs/chunks.ts';
import type { TaskState } from '#shared/jobs/model.ts';
import { claimKey } from './dynamo-claim-pages.ts';
import type { Item } from './dynamo-message-table.ts';

/** What choosing a task reads of its index entry (`#claimable`, `mayClaimMessage`, `#withBatchMembers`). */
export const CLAIM_INDEX_VIEW = [
  'jobId',
  'taskId',
  'channel',
  'state',
  'claimToken',
  'readyAt',
  'batchKey',
  'openPk',
  'openSk',
  'memberCount',
  'via',
];

/**
 * A message task's (or chunk's) item as a claim reads it: the attributes it decides by, typed once
 * where the item leaves the store ({@link claimRecordOf}). `item` is the item itself, for what
 * carries it on unread (a contact-limit hold, a page's ends, a task's variables).
 */
export interface ClaimRecord {
  readonly item: Item;
  readonly jobId: string;
  readonly taskId: string;
  /** `claimKey(jobId, taskId)`. */
  readonly key: string;
  readonly channel: unknown;
  readonly state: TaskState | undefined;
  readonly claimToken: unknown;
  /** NaN when the item has none (then every comparison with it is false, as before the record). */
  readonly readyAt: number;
  readonly attempts: number;
  readonly startedAt: number | undefined;
  readonly batchKey: string | undefined;
  readonly openPk: string | undefined;
  readonly openSk: string | undefined;
  readonly maybeSent: unknown;
  readonly lastResult: unknown;
  /** The attempt the channel's own event said went out (SES's SEND), 0 when none. */
  readonly sentAttempt: number;
  /** The task's recipient (a chunk has none: its members'). */
  readonly recipient: string;
  /** The item as a chunk, when it is one (an index entry's carries only what the index view read). */
  readonly chunk: Chunk | undefined;
  /** Recipients it stands for: a chunk's `memberCount`, else one. */
  readonly memberCount: number;
}

/** The one reading of a task item into a {@link ClaimRecord}. */
export function claimRecordOf(item: Item): ClaimRecord {
  const jobId = String(item.jobId);
  const taskId = String(item.taskId);
  return {
    item,
    jobId,
    taskId,
    key: claimKey(jobId, taskId),
    channel: item.channel,
    state: item.state as TaskState | undefined,
    claimToken: item.claimToken,
    readyAt: Number(item.readyAt),
    attempts: Number(item.attempts),
    startedAt: item.startedAt === undefined ? undefined : Number(item.startedAt),
    batchKey: item.batchKey as string | undefined,
    openPk: typeof item.openPk === 'string' ? item.openPk : undefined,
    openSk: typeof item.openSk === 'string' ? item.openSk : undefined,
    maybeSent: item.maybeSent,
    lastResult: item.lastResult,
    sentAttempt: Number(item.sentAttempt ?? 0),
    recipient: String(item.recipient),
    chunk: isChunk(item) ? (item as unknown as Chunk) : undefined,
    memberCount: Number(item.memberCount ?? 1),
  };
}

/** `fresh`: the task was read strongly consistent just now (a multicast's member). */
export type Chosen = { task: ClaimRecord; batchKey?: string; fresh?: boolean };
export type Claimed = Chosen & { startedAt: number; attempt: number };

/** The recipients a task stands for: a chunk's members in its state, a task's own. */
export function recipientsOf(task: ClaimRecord): string[] {
  return task.chunk ? membersInState(task.chunk).map((m) => m.recipient) : [task.recipient];
}

/** Candidates, in order, whose recipients (a chunk's `memberCount`, else one) fit in `limit`; at least one. */
export function withinMembers(tasks: readonly ClaimRecord[], limit: number): ClaimRecord[] {
  const out: ClaimRecord[] = [];
  let members = 0;
  for (const task of tasks) {
    if (out.length > 0 && members + task.memberCount > limit) continue;
    out.push(task);
    members += task.memberCount;
  }
  return out;
}

/** A task's template variables: its own columns, and `name` for the list's name column (氏名, お名前…). */
export function variablesOf(item: Item): Record<string, string> {
  const variables = (item.variables as Record<string, string> | undefined) ?? {};
  return typeof item.name === 'string' && !Object.hasOwn(variables, 'name')
    ? { name: item.name, ...variables }
    : variables;
}
