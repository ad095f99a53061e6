/**
 * Outcome events: what a client's webhook receives. Built from changes of the stored task and job
 * records (DynamoDB Streams images, translated by `shared/adapters/dynamo-stream-changes.ts`), so no
 * write path of the broker, the settle, the sweeps or the API has to remember to tell anyone.
 *
 * - `task.ended`: a task reached `completed`, `failed`, `cancelled` or `expired` (with its last
 *   outcome and reason);
 * - `job.status_changed`: a job moved from one status to another.
 *
 * Each event carries an `id` (the same for every delivery of the same change: a receiver drops
 * duplicates by it) and a `sequence` per subject (task or job): a 40-digit decimal string that grows
 * with every change of that task or job (the stream record's sequence number, which DynamoDB Streams
 * keeps in the order of the item's modifications), so a receiver can ignore anything not newer than
 * what it already has, comparing the strings as they are.
 */
import { createHash } from 'node:crypto';
import type { JobStatus } from '#shared/jobs/job-lifecycle.ts';
import type { JobCounts, TaskState } from '#shared/jobs/model.ts';
import { isFinal } from '#shared/jobs/task-lifecycle.ts';

export const TASK_ENDED = 'task.ended';
export const JOB_STATUS_CHANGED = 'job.status_changed';

/** The part of a stored task an outcome event reads. */
export interface TaskImage {
  readonly clientId: string;
  readonly jobId: string;
  readonly taskId: string;
  readonly row?: number;
  readonly channel?: string;
  readonly state: TaskState;
  readonly attempts?: number;
  readonly lastResult?: string;
  readonly reason?: string;
  readonly updatedAt?: number;
}

/** The part of a stored job an outcome event reads. */
export interface JobImage {
  readonly clientId: string;
  readonly jobId: string;
  readonly name?: string;
  readonly channel?: string;
  readonly status: JobStatus;
  readonly failureReason?: string;
  readonly counts?: JobCounts;
  readonly updatedAt?: number;
}

/** One change of a stored task or job: its image before (none when created) and after. */
export type RecordChange =
  | {
      readonly kind: 'task';
      readonly sequence: string;
      readonly before?: TaskImage;
      readonly after: TaskImage;
    }
  | { readonly kind: 'job'; readonly sequence: string; readonly before?: JobImage; readonly after: JobImage };

export interface TaskEndedEvent {
  readonly id: string;
  readonly type: typeof TASK_ENDED;
  readonly clientId: string;
  /** ISO 8601: when the task ended (the record's `updatedAt`). */
  readonly occurredAt: string;
  readonly sequence: string;
  readonly data: {
    readonly jobId: string;
    readonly taskId: string;
    readonly row?: number;
    readonly channel?: string;
    readonly state: 'completed' | 'failed' | 'cancelled' | 'expired';
    /** The last attempt's result (answered, busy, delivered…), when there was one. */
    readonly outcome?: string;
    readonly reason?: string;
    readonly attempts: number;
  };
}

export interface JobStatusChangedEvent {
  readonly id: string;
  readonly type: typeof JOB_STATUS_CHANGED;
  readonly clientId: string;
  readonly occurredAt: string;
  readonly sequence: string;
  readonly data: {
    readonly jobId: string;
    readonly name?: string;
    readonly channel?: string;
    readonly status: JobStatus;
    readonly previousStatus?: JobStatus;
    readonly reason?: string;
    readonly counts?: JobCounts;
  };
}

export type OutcomeEvent = TaskEndedEvent | JobStatusChangedEvent;

/** The body of one POST: the events of one client, oldest first as they were read. */
export interface OutcomeDeliveryBody {
  readonly events: readonly OutcomeEvent[];
}

/** A stream sequence number as a fixed-width decimal string: string order is numeric order. */
export function paddedSequence(sequence: string): string {
  if (!/^\d{1,40}$/.test(sequence)) throw new RangeError(`not a sequence number: ${sequence}`);
  return sequence.padStart(40, '0');
}

/** The event id: the same for every delivery of the same change, whatever the retries. */
export function outcomeEventId(type: string, subject: string, sequence: string): string {
  return `evt_${createHash('sha256').update(`${type}\n${subject}\n${sequence}`).digest('hex').slice(0, 32)}`;
}

function isoAt(ms: number | undefined, fallbackMs: number): string {
  return new Date(ms ?? fallbackMs).toISOString();
}

/**
 * The event a change is, if any: a task's first arrival in a final state, or a job's move to
 * another status. Everything else (claims, counts, index entries) is none.
 */
export function eventOfChange(change: RecordChange, nowMs: number): OutcomeEvent | undefined {
  const sequence = paddedSequence(change.sequence);
  if (change.kind === 'task') {
    const { before, after } = change;
    if (!isFinal(after.state) || (before && isFinal(before.state))) return undefined;
    return {
      id: outcomeEventId(TASK_ENDED, `${after.jobId}/${after.taskId}`, sequence),
      type: TASK_ENDED,
      clientId: after.clientId,
      occurredAt: isoAt(after.updatedAt, nowMs),
      sequence,
      data: {
        jobId: after.jobId,
        taskId: after.taskId,
        ...(after.row === undefined ? {} : { row: after.row }),
        ...(after.channel === undefined ? {} : { channel: after.channel }),
        state: after.state as TaskEndedEvent['data']['state'],
        ...(after.lastResult === undefined ? {} : { outcome: after.lastResult }),
        ...(after.reason === undefined ? {} : { reason: after.reason }),
        attempts: after.attempts ?? 0,
      },
    };
  }
  const { before, after } = change;
  if (before && before.status === after.status) return undefined;
  return {
    id: outcomeEventId(JOB_STATUS_CHANGED, after.jobId, sequence),
    type: JOB_STATUS_CHANGED,
    clientId: after.clientId,
    occurredAt: isoAt(after.updatedAt, nowMs),
    sequence,
    data: {
      jobId: after.jobId,
      ...(after.name === undefined ? {} : { name: after.name }),
      ...(after.channel === undefined ? {} : { channel: after.channel }),
      status: after.status,
      ...(before ? { previousStatus: before.status } : {}),
      ...(after.failureReason === undefined ? {} : { reason: after.failureReason }),
      ...(after.counts === undefined ? {} : { counts: after.counts }),
    },
  };
}
