/**
 * A person's history: every task of theirs in the client's jobs, newest job first, on whichever
 * channel each reached or tried them (`GET /clients/{clientId}/people/{identifier}/history`).
 *
 * A task is filed under its recipient as the ingest wrote it (`keys.recipientIndex`), and a person's
 * history reads each identifier the person has now: linking, joining and unlinking identifiers move
 * their tasks' history with them. A task lives for
 * `ENDED_TASK_RETENTION_DAYS` after it ends; a LINE campaign sent in chunks (no contact limit, no
 * fallback) keeps no task a recipient and is not in it (`docs/people.md`, "A person's history").
 */

import type { Job, JobChannel, Task, TaskState, TriedChannel } from '#shared/jobs/model.ts';
import { taskChannelOf } from '#shared/jobs/model.ts';
import { identifierKind } from './model.ts';

/** Entries a history answers at most (the newest). */
export const HISTORY_LIMIT = 100;

/** A task of the person, with the job it belongs to. */
export interface PersonTask {
  readonly task: Task;
  readonly job: Pick<Job, 'jobId' | 'name' | 'channel'> | undefined;
}

/** What the history needs of a store (adapter: `shared/adapters/dynamo-person-history.ts`). */
export interface PersonTaskReader {
  /**
   * The newest `limit` tasks filed under any of `identifiers` (newest job first), with their jobs;
   * `more` when there are older ones.
   */
  latest(
    clientId: string,
    identifiers: readonly string[],
    limit: number,
  ): Promise<{ readonly tasks: readonly PersonTask[]; readonly more: boolean }>;
}

/** One contact of the person: a task of one job, as it stands. */
export interface HistoryEntry {
  readonly jobId: string;
  readonly jobName?: string;
  /** The channel the task is on: the job's, or the one a fallback moved it to. */
  readonly channel: JobChannel;
  /** The identifier it reached, or tried to reach, the person on. */
  readonly recipient: string;
  readonly state: TaskState;
  readonly attempts: number;
  /** The last attempt's result (a call's `completed` (answered), `busy`, `no-answer`, `voicemail`; a message's `sent`, …). */
  readonly result?: string;
  /** A message's delivery state as its channel's events last said (delivered, bounced, …). */
  readonly delivery?: string;
  readonly reason?: string;
  /** Channels the task left before this one, and why. */
  readonly tried?: readonly TriedChannel[];
  /** When the last attempt started (ISO 8601). */
  readonly startedAt?: string;
  /** When the task last changed: its end, once it ended (ISO 8601). */
  readonly updatedAt: string;
  /** The last call's length, its start to its end, in whole seconds (once it ended). */
  readonly durationSeconds?: number;
}

/** The history entry of a task. */
export function historyEntry({ task, job }: PersonTask): HistoryEntry {
  const channel = job === undefined ? (task.via ?? fallbackChannel(task)) : taskChannelOf(task, job);
  const delivery = task.deliveryState ?? task.emailState;
  // The last call's own end (its settle), not the task's: a sweep that ends a task waiting to retry
  // changes `updatedAt` hours after the call. A call started since has no end yet (end before start).
  const { startedAt, callEndedAt } = task;
  const duration =
    channel === 'call' && startedAt !== undefined && callEndedAt !== undefined && callEndedAt >= startedAt
      ? Math.round((callEndedAt - startedAt) / 1000)
      : undefined;
  return {
    jobId: task.jobId,
    ...(job?.name ? { jobName: job.name } : {}),
    channel,
    recipient: task.recipient,
    state: task.state,
    attempts: task.attempts,
    ...(task.lastResult !== undefined ? { result: task.lastResult } : {}),
    ...(delivery !== undefined ? { delivery } : {}),
    ...(task.reason !== undefined ? { reason: task.reason } : {}),
    ...(task.tried !== undefined && task.tried.length > 0 ? { tried: task.tried } : {}),
    ...(task.startedAt !== undefined ? { startedAt: new Date(task.startedAt).toISOString() } : {}),
    updatedAt: new Date(task.updatedAt).toISOString(),
    ...(duration !== undefined ? { durationSeconds: duration } : {}),
  };
}

/** A task whose job is not found: the channel its recipient's kind and its side say. */
function fallbackChannel(task: Task): JobChannel {
  if (task.channel === 'call') return 'call';
  return CHANNEL_OF_KIND[identifierKind(task.recipient)];
}

const CHANNEL_OF_KIND = { phone: 'sms', email: 'email', line: 'line' } as const;
