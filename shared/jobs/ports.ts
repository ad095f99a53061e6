/**
 * The ports of the jobs use cases (client settings, job API, ingest). The DynamoDB and S3
 * adapters implement them (`shared/adapters/dynamo-clients.ts`, `dynamo-jobs.ts`,
 * `dynamo-job-tasks.ts`, `dynamo-cancel.ts`, `s3-uploads.ts`); tests hand in their own.
 */

import type { IngestCounts, IngestCursor } from '#shared/csv/read-list.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import type { Chunk } from './chunks.ts';
import type { JobStatus } from './job-lifecycle.ts';
import type { ClientSettings, Job, JobCounts, Task } from './model.ts';
import type { ArchiveReportMessage } from './report-archive.ts';
import type { RetimeSweepMessage } from './retime.ts';
import type { SweepEnd } from './task-lifecycle.ts';

export interface ClientStore {
  get(clientId: string): Promise<ClientSettings | undefined>;
  /** Creates or replaces the settings, answering them as stored: a stored `paused` is kept unless `settings.paused` says. */
  put(settings: ClientSettings): Promise<ClientSettings>;
  /** Pauses or resumes the client; undefined when there is no such client. */
  setPaused(clientId: string, paused: boolean, now: number): Promise<ClientSettings | undefined>;
  /** Every client, by id, a page at a time (`next`: the token of the page after). */
  list(page: { readonly limit: number; readonly next?: string }): Promise<{
    clients: ClientSettings[];
    next?: string;
  }>;
}

/** A recipient's latest follow or unfollow, as recorded for a client (see `opt-outs.ts`). */
export interface OptOutRecord {
  readonly recipient: string;
  readonly optedOut: boolean;
  /** Epoch ms of the event that decided it. */
  readonly eventAt: number;
}

/** A client's opt-outs as the operator reads them (the webhooks' `OptOutStore` writes them). */
export interface OptOutReader {
  /** The records of those of `recipients` (at most 100) that have one. */
  records(clientId: string, recipients: readonly string[]): Promise<readonly OptOutRecord[]>;
  /**
   * A page of the client's opted-out recipients, in recipient order. `next` is opaque; a token
   * this store did not return is a {@link import('./errors.ts').ValidationError}.
   */
  page(
    clientId: string,
    page: { readonly limit: number; readonly next?: string },
  ): Promise<{ readonly records: readonly OptOutRecord[]; readonly next?: string }>;
}

export interface JobPage {
  readonly jobs: readonly Job[];
  /** Opaque: hand it back to get the next page; absent on the last page. */
  readonly next?: string;
}

/** Where a paused ingest stands, kept on the job's item. */
export interface IngestState {
  /** Runs completed so far: a continuation message names the step it runs. */
  readonly step: number;
  readonly cursor?: IngestCursor;
  /** Where the duplicate filter's snapshot taken with `cursor` is stored. */
  readonly filterKey?: string;
  /** The uploaded object's ETag, so a file replaced mid-ingest is noticed. */
  readonly eTag?: string;
  readonly size?: number;
  /**
   * Whether the job's LINE recipients are held in chunks (docs/multicast-chunks.md), decided once
   * when validation begins so that every step, and a step repeated after a crash, holds them the
   * same way whatever is deployed meanwhile. Absent on a job begun before it was recorded.
   */
  readonly chunked?: boolean;
}

export type IngestClaim =
  | { readonly kind: 'claimed'; readonly job: Job; readonly state: IngestState }
  /** Another run holds this step (a duplicate message): leave it to that run. */
  | { readonly kind: 'busy' }
  /** The ingest is already past this step. */
  | { readonly kind: 'stale'; readonly state: IngestState; readonly leased: boolean }
  /** The job is not being validated (any more): nothing to do. */
  | { readonly kind: 'not-validating'; readonly status?: JobStatus };

export interface JobStore {
  /** Stores a new job unless one with its id exists; returns the stored job either way. */
  create(job: Job): Promise<{ readonly job: Job; readonly created: boolean }>;
  get(clientId: string, jobId: string): Promise<Job | undefined>;
  /** A client's jobs, newest first. Throws {@link import('./errors.ts').ValidationError} for a bad `next`. */
  list(clientId: string, page: { readonly limit: number; readonly next?: string }): Promise<JobPage>;
  /**
   * Moves the job to `to` if its status is still `from` (conditional write). Returns the new job,
   * or the status it has now when that changed meanwhile (undefined when it does not exist). A move
   * to `paused` may say why (`Job.pausedReason`); every other move clears the reason.
   */
  transition(
    job: Job,
    to: JobStatus,
    now: number,
    reason?: string,
  ): Promise<{ readonly ok: true; readonly job: Job } | { readonly ok: false; readonly current?: JobStatus }>;
  /** `uploading` → `validating` at step 0, remembering the object's ETag and size, and how it is held. */
  beginValidation(
    clientId: string,
    jobId: string,
    source: { readonly eTag: string; readonly size: number; readonly chunked?: boolean },
    now: number,
  ): Promise<boolean>;
  /** Takes the ingest's lease for `step` until `until`, if the job is validating at that step. */
  claimIngest(
    clientId: string,
    jobId: string,
    step: number,
    leaseId: string,
    until: number,
    now: number,
  ): Promise<IngestClaim>;
  /** Records where the job's final report is (`Job.reportArchive`); `updatedAt` is left as it is. */
  recordReportArchive(clientId: string, jobId: string, key: string): Promise<void>;
  /** Records the counts so far while the lease is held (progress for the operator). */
  saveIngestProgress(
    clientId: string,
    jobId: string,
    leaseId: string,
    counts: JobCounts,
    now: number,
  ): Promise<void>;
  /** Ends `step` with a cursor: the next run continues from it. False when the lease was lost. */
  advanceIngest(
    clientId: string,
    jobId: string,
    leaseId: string,
    next: Required<Pick<IngestState, 'step' | 'cursor' | 'filterKey'>>,
    counts: JobCounts,
    now: number,
  ): Promise<boolean>;
  /** Ends the ingest: `validating` → `scheduled` or `failed`. False when the lease was lost or the job cancelled. */
  finishIngest(
    job: Job,
    leaseId: string,
    outcome: { readonly status: 'scheduled' } | { readonly status: 'failed'; readonly reason: string },
    counts: JobCounts,
    now: number,
  ): Promise<boolean>;
  /** Gives the lease up after a run that did not finish, so a retry need not wait for it to expire. */
  releaseIngest(clientId: string, jobId: string, leaseId: string): Promise<void>;
}

export interface TaskStore {
  /** Writes tasks (new ones: a re-run writes the very same items again). */
  put(tasks: readonly Task[]): Promise<void>;
  /** Of `recipients` (at most 100), those that already have a task in the job, with its row. */
  storedRows(jobId: string, recipients: readonly string[]): Promise<ReadonlyMap<string, number>>;
  /** Every task of one shard of a job, in pages. */
  shard(jobId: string, shard: number): AsyncIterable<Task>;
  /**
   * Writes chunks: a shared message's recipients held 500 an item (docs/multicast-chunks.md; a
   * re-run writes the very same items again). A store without it gets tasks only.
   */
  putChunks?(chunks: readonly Chunk[]): Promise<void>;
  /** Every recipient held in the job's chunks, with its row (to confirm a suspected duplicate). */
  chunkedRows?(jobId: string): Promise<Map<string, number>>;
  /**
   * Deletes these chunks where they exist and are still pending (a page read again after a crash
   * whose cut no longer has a member: its rows opted out or were suppressed meanwhile; one a cancel
   * sweep ended is left as it counted it).
   */
  deleteChunks?(jobId: string, taskIds: readonly string[]): Promise<void>;
}

/** The uploads bucket as the jobs use cases see it. */
export interface UploadFiles {
  /** A URL the operator's client PUTs the file to, valid for `expiresInSeconds`. */
  presignPut(key: string, expiresInSeconds: number): Promise<string>;
  presignGet(key: string, expiresInSeconds: number): Promise<string>;
  put(key: string, body: Uint8Array, contentType: string): Promise<void>;
  /**
   * The object's bytes from `fromByte` on, streamed. With `eTag`, throws
   * {@link import('./errors.ts').SourceChangedError} when the object is no longer that version.
   */
  read(
    key: string,
    options?: { readonly fromByte?: number; readonly eTag?: string },
  ): AsyncIterable<Uint8Array>;
  /** A small JSON object (a sidecar), or undefined when there is none. */
  readJson(key: string): Promise<unknown>;
  getBytes(key: string): Promise<Uint8Array | undefined>;
  /** Streams `chunks` into one object (multipart when large). */
  write(key: string, chunks: AsyncIterable<Uint8Array>, contentType: string): Promise<void>;
}

/** A job's validation report: the rejected and skipped rows, stored page by page. */
export interface ValidationReportStore {
  /** Stores one page of entries; storing the same page again replaces it (idempotent). */
  putPage(clientId: string, jobId: string, entries: readonly ReportEntry[]): Promise<void>;
  /** Every entry, in row order. */
  entries(clientId: string, jobId: string): AsyncIterable<ReportEntry>;
}

/** A continuation: run `step` of a job's ingest from the cursor stored on the job. */
export interface ContinueIngestMessage {
  readonly kind: 'continue';
  readonly clientId: string;
  readonly jobId: string;
  readonly step: number;
}

/**
 * A step of a job's sweep ({@link JobSweepMessage}): end the tasks it may end in `shard` from
 * `cursor` on (absent: from the shard's start), then the shards after it.
 */
interface SweepStep {
  readonly clientId: string;
  readonly jobId: string;
  readonly shard: number;
  readonly cursor?: string;
  /**
   * The latest hold end (epoch ms) of the message tasks in flight that earlier runs of this pass
   * left to their broker; absent when they saw none. The pass's last run re-checks after it.
   */
  readonly heldUntil?: number;
}

/** A step of a cancelled job's sweep: its tasks end `cancelled`. */
export interface CancelSweepMessage extends SweepStep {
  readonly kind: 'cancel-sweep';
}

/** A step of the sweep of a job past its end (`endAt`): its tasks end `expired`. */
export interface ExpireSweepMessage extends SweepStep {
  readonly kind: 'expire-sweep';
}

export type JobSweepMessage = CancelSweepMessage | ExpireSweepMessage;

/** How a message is queued. */
export interface QueueSendOptions {
  /** Seconds before the message can be received (SQS `DelaySeconds`, 0–900). */
  readonly delaySeconds?: number;
}

/** The ingest queue: continuations of paused ingests and of the sweeps (cancel, expire, re-time), report archives. */
export interface IngestQueue {
  send(message: IngestQueueMessage, options?: QueueSendOptions): Promise<void>;
}

/** What Switchboard itself puts on the ingest queue. */
export type IngestQueueMessage =
  | ContinueIngestMessage
  | JobSweepMessage
  | RetimeSweepMessage
  | ArchiveReportMessage;

/**
 * A task of a cancelled or ended job that a sweep reads: not started (`pending`, `retry-wait`),
 * or `in-flight` (a message under a broker's claim, held until `readyAt`; a call since `startedAt`).
 */
export type SweptTask = Pick<Task, 'taskId' | 'state' | 'channel' | 'readyAt' | 'startedAt'> & {
  /**
   * A message on a broker's claim page (`shared/adapters/dynamo-claim-pages.ts`): shown `in-flight`,
   * held until its page's hold ends (`readyAt`); its item is still in this (waiting) state.
   */
  readonly storedState?: Task['state'];
  /**
   * A chunk's (`shared/jobs/chunks.ts`): how many members its own state speaks for, and the ends of
   * those that ended apart — all counted when the chunk ends. Absent: one task.
   */
  readonly members?: {
    readonly inState: number;
    readonly apart: readonly { readonly state: Task['state']; readonly reason?: string }[];
    /** Entries in its `except` (ended apart or moved out): the sweep ends it only while unchanged. */
    readonly exceptSize: number;
  };
};

/** A page of the tasks of a shard the sweep reads. */
export interface SweptTaskPage {
  readonly tasks: readonly SweptTask[];
  /** Opaque: where the next page starts; absent after the shard's last page. */
  readonly next?: string;
}

/** How a sweep ends the tasks it reaches, and why. */
export interface SweepEnding {
  readonly state: SweepEnd;
  readonly reason: string;
}

/** The tasks table as the sweeps (cancel, expire) see it. */
export interface TaskCanceller {
  /**
   * One page of `shard`'s tasks from `cursor` on that are `pending`, `retry-wait` or `in-flight`
   * (a call in flight with its `startedAt`).
   */
  sweepPage(
    jobId: string,
    shard: number,
    cursor: string | undefined,
    clientId?: string,
  ): Promise<SweptTaskPage>;
  /**
   * Ends each of `tasks` still as read as `ending.state` (`cancelled` or `expired`) with
   * `ending.reason` (out of the outstanding index), by the lifecycle's `sweepMove`: a waiting task
   * if it is still `pending` or `retry-wait`, a message in flight if it is still `in-flight` with
   * the `readyAt` read (its broker wrote nothing since, nor did another claim it), a call in
   * flight if it is still `in-flight` with the `startedAt` read. Adds how many it ended to the
   * job's count of that state in the same write; a task that moved on meanwhile is left alone and
   * not counted, so a page done twice counts once. Returns how many this call ended.
   */
  endTasks(
    clientId: string,
    jobId: string,
    tasks: readonly SweptTask[],
    ending: SweepEnding,
    now: number,
  ): Promise<number>;
  /**
   * Closes the job's message claim pages whose tasks have all ended, moving the job's counts by
   * what they ended (see `FleetStore.settleClaimPages`). Absent where there are none.
   */
  settleClaimPages?(clientId: string, jobId: string): Promise<void>;
}

/** A job of a client that was paused or cancelled, as its broker is told. */
export interface JobChanged {
  readonly clientId: string;
  readonly jobId: string;
}

/**
 * How a nudge went: `ok` once the broker answered that it read the job and, if it is no longer
 * running, stopped its sends; otherwise why not (unreachable, an error status, no answer in time).
 */
export type NudgeAnswer = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** Tells the broker at `endpoint` that a job changed and waits, briefly, for its answer. */
export interface JobChangeNotifier {
  /** Never throws: a failure is an answer with a reason. */
  jobChanged(endpoint: string, changed: JobChanged): Promise<NudgeAnswer>;
}

export type { IngestCounts };

/** The stores a job's use cases (the operator API, the ingest) work on. */
export interface JobStores {
  readonly clients: ClientStore;
  readonly jobs: JobStore;
  readonly tasks: TaskStore;
  readonly files: UploadFiles;
  readonly validationReports: ValidationReportStore;
  /** The ingest queue (continuations, drops, the cancel sweep). */
  readonly queue: IngestQueue;
}

/** A job's first waiting task (its `readyAt`, and why it waits when it says). */
export interface NextTaskOfJob {
  readonly readyAt: number;
  /** A contact limit's `capped: waiting until …`, when that is what holds it. */
  readonly reason?: string;
  /** The recipient's zone, for a job read in its recipients' zones. */
  readonly timeZone?: string;
}

/** The first waiting task of a job, from the head of its client's outstanding index. */
export interface OutstandingHeadReader {
  nextOf(clientId: string, jobId: string): Promise<NextTaskOfJob | undefined>;
}
