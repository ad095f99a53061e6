/**
 * Clients, jobs and tasks: the records and their keys (see `shared/resources.ts` for the access
 * patterns). Pure: no AWS SDK. The DynamoDB adapters map these one to one.
 *
 * A client's contract (concurrent calls, calls per second of the line, calling hours in its time
 * zone) bounds how its tasks start. A job is one uploaded list; each usable row is a task. A task
 * is outstanding (in the sparse `outstanding` index) while it may be started: `pending`, or
 * `retry-wait` once its retry delay has passed.
 */

import { createHash } from 'node:crypto';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import type { ContactLimit } from '#shared/contact-limits/model.ts';
import type { EmailDeliveryState } from '#shared/email/ses-events.ts';
import type { EmailTemplate } from '#shared/email/template.ts';
import type { OutcomeWebhookSettings } from '#shared/outcomes/settings.ts';
import type { CallingHours } from '#shared/pacing/calling-hours.ts';
import type { HolidayCalendar, RestrictedPeriod } from '#shared/pacing/restricted-periods.ts';
import { JOB_STATUS_SHARDS, TASK_SHARDS } from '#shared/resources.ts';
import type { SmsSettings } from '#shared/sms/settings.ts';
import type { SmsDeliveryState } from '#shared/sms/sms-events.ts';
import type { SmsTemplate } from '#shared/sms/template.ts';
import type { SuppressionScope, SuppressionSource } from '#shared/suppressions/model.ts';
import type { TelephonySettings } from '#shared/telephony/settings.ts';
import type { JobStatus } from './job-lifecycle.ts';
import type { RetryPolicy } from './retry-policy.ts';
import { isWaiting } from './task-lifecycle.ts';

/**
 * A call's longest duration when its job sets none (the broker reconciles a call after it; the
 * cancel sweep holds a job's calls that long). The one default: the broker's settings take it
 * (`DEFAULT_SERVE_SETTINGS`), and only the local drills shorten a broker's through its
 * `DEFAULT_MAX_CALL_SECONDS` environment variable, which the CDK never sets.
 */
export const DEFAULT_MAX_CALL_SECONDS = 600;

/**
 * How a job reaches its recipients: an outbound `call`, a LINE push (`line`), an `email`, a text
 * (`sms`, AWS End User Messaging SMS). The API
 * still takes `message` for `line` (the word before email), and a job stored so reads as `line`.
 */
export type JobChannel = 'call' | MessageChannel;

/** The channels the message pipeline sends (`shared/campaign/transport.ts`). */
export type MessageChannel = 'line' | 'email' | 'sms';

/**
 * The side of the broker that works a task, as its item says: `call`, or `message` for the message
 * pipeline whatever the job's channel (LINE, email, SMS) — the job says which.
 */
export type TaskSide = 'call' | 'message';

/** The side that works a job's tasks. */
export function taskSideOf(channel: JobChannel): TaskSide {
  return channel === 'call' ? 'call' : 'message';
}

/** True for a job the message pipeline sends (LINE, email, SMS), false for calls. */
export function isMessageChannel(channel: JobChannel | undefined): channel is MessageChannel {
  return channel === 'line' || channel === 'email' || channel === 'sms';
}

/** The message channels whose service takes no idempotency key (SES, End User Messaging SMS). */
export type UnkeyedChannel = 'email' | 'sms';

/**
 * Whether the channel's requests carry an idempotency key (LINE's retry key), so a request that may
 * have gone out can be made again safely. Not so for email and SMS: a task left by a dead holder may
 * have been sent only if its request was recorded (`BatchLedger`) just before it went.
 */
export function resendsAreSafe(channel: JobChannel): boolean {
  return channel !== 'email' && channel !== 'sms';
}

/** A stored or requested channel in today's words: `message` (before email) is `line`. */
export function currentChannel(channel: string): JobChannel {
  return channel === 'message' ? 'line' : (channel as JobChannel);
}

/** An email job's content: `{{column}}` placeholders in any part; HTML, text or both. */
export type EmailContent = EmailTemplate;

/** A client's email sending (Amazon SES v2): `docs/email.md`. */
export interface EmailSettings {
  /** The From address; its address or domain must be a verified SES identity in the region. */
  readonly from: string;
  /** The display name shown with it (`"Shop" <news@shop.example>`). */
  readonly fromName?: string;
  readonly replyTo?: readonly string[];
  /**
   * What a send SES did not answer, and of which no event came, becomes: `at-most-once` (default):
   * the task ends `in-doubt`; `at-least-once`: it is sent once more.
   */
  readonly delivery?: 'at-most-once' | 'at-least-once';
}

/** An SMS job's text: one body with `{{column}}` placeholders. */
export type SmsContent = SmsTemplate;

/** The content a message job's tasks carry: a LINE job's message, an email job's email, an SMS job's text. */
export function contentOf(
  job: Job,
  channel: JobChannel = job.channel,
): MessageTemplate | EmailContent | SmsContent | undefined {
  if (channel === 'line') return job.message;
  if (channel === 'email') return job.email;
  if (channel === 'sms') return job.sms;
  return undefined;
}

/** A job's message channels in the order it tries them: its channel, then its `fallback`. */
export function channelsOf(job: Pick<Job, 'channel' | 'fallback'>): readonly JobChannel[] {
  return [job.channel, ...(job.fallback ?? [])];
}

/** The channel a message task is on now: the one it fell back to, else its job's. */
export function taskChannelOf(task: { readonly via?: unknown }, job: Pick<Job, 'channel'>): JobChannel {
  return isMessageChannel(task.via as JobChannel) ? (task.via as MessageChannel) : job.channel;
}

/** Which identifier kind reaches a person on each message channel. */
export const CHANNEL_IDENTIFIER: Readonly<Record<MessageChannel, 'line' | 'email' | 'phone'>> = {
  line: 'line',
  email: 'email',
  sms: 'phone',
};

/** One channel a task could not reach its person on, and why (`Task.tried`). */
export interface TriedChannel {
  readonly channel: MessageChannel;
  readonly reason: string;
}

/** The job item's attribute counting the attempts that ended with `result` (`Job.results`). */
export function resultAttribute(result: string): string {
  return `${RESULT_ATTRIBUTE_PREFIX}${result}`;
}
export const RESULT_ATTRIBUTE_PREFIX = 'result#';

/** A job as stored, in today's words (a job stored with channel `message` is a `line` job). */
export function storedJob<J extends { readonly channel?: string }>(job: J): J {
  return job.channel === 'message' ? { ...job, channel: 'line' } : job;
}

export interface ClientSettings {
  readonly clientId: string;
  /** Most calls in flight at once (the contract). */
  readonly maxConcurrentCalls: number;
  /** Most call starts per second (the phone line). */
  readonly callsPerSecond: number;
  /** IANA zone the calling hours are in, e.g. `Asia/Tokyo`. */
  readonly timeZone: string;
  readonly callingHours: CallingHours;
  /** ISO 3166 region for numbers written without a country code, e.g. `JP`. */
  readonly defaultRegion: string;
  /** The LINE channel message jobs send through. */
  readonly messageChannelId?: string;
  /** How its email jobs are sent (Amazon SES); none: the client sends no email. */
  readonly email?: EmailSettings;
  /** How its SMS jobs are sent (AWS End User Messaging SMS); none: the client sends no text. */
  readonly sms?: SmsSettings;
  /** Options for jobs that do not give them (e.g. a CSV dropped in S3 without a sidecar). */
  readonly jobDefaults?: JobDefaults;
  /**
   * Set by `POST /clients/{id}/pause`, cleared by `/resume`: no call or message of the client
   * starts (its jobs stay `running`, waiting for the client). Kept by `PUT /clients/{id}`.
   */
  readonly paused?: boolean;
  /** The provider the client's calls go through; the deployment's default HTTP provider when absent. */
  readonly telephony?: TelephonySettings;
  /** Where the client's task ends and job status changes are POSTed (its secret is kept apart). */
  readonly outcomeWebhook?: OutcomeWebhookSettings;
  /** Dates or ranges when none of the client's calls or messages starts (`shared/jobs/restrictions.ts`). */
  readonly restrictedPeriods?: readonly RestrictedPeriod[];
  /** The public holidays of a country during which nothing of the client starts. */
  readonly holidays?: HolidayCalendar;
  /** How often one person may be contacted, across jobs and channels (`shared/contact-limits/model.ts`). */
  readonly contactLimits?: readonly ContactLimit[];
  /**
   * Per source of suppression entry, whether its entries reach the identifier's whole person or its
   * own identifier only; a source left out has its default (`DEFAULT_SUPPRESSION_SCOPE`).
   */
  readonly suppressionScope?: Partial<Record<SuppressionSource, SuppressionScope>>;
  /**
   * Send a message job even when LINE's monthly quota left cannot cover the rest of it: what the
   * quota allows goes out, and the tasks LINE then refuses for the monthly limit end `failed`. When
   * absent (false), such a job is paused before it sends, with the reason (`shared/campaign/quota.ts`).
   */
  readonly allowPartialDelivery?: boolean;
  readonly updatedAt: number;
}

/** A client's defaults for new jobs. */
export interface JobDefaults {
  readonly channel?: JobChannel;
  readonly scenarioId?: string;
  readonly maxAttempts?: number;
  readonly retryDelaySeconds?: number;
  readonly restrictedPeriods?: readonly RestrictedPeriod[];
  readonly holidays?: HolidayCalendar;
  /** Retries by outcome for a job that gives no `retries` of its own (replaced whole, not merged). */
  readonly retries?: RetryPolicy;
}

/**
 * Whether `job` has reached its end at `now`: from `endAt` on (that instant included) no call or
 * message of it may start, and its tasks not ended yet are to end `expired`. A job without an end
 * never has. Every place that starts, claims, retries or sweeps asks this; the DynamoDB start
 * condition says the same (`endAt > :now`).
 */
export function jobHasEnded(job: Pick<Job, 'endAt'>, now: number): boolean {
  return job.endAt !== undefined && now >= job.endAt;
}

export interface JobCounts {
  /** Data rows read from the file. */
  readonly rows: number;
  readonly rejected: number;
  readonly skipped: number;
  /** Tasks written (= accepted rows). */
  readonly tasks: number;
  readonly completed: number;
  readonly failed: number;
  readonly cancelled: number;
  /**
   * Tasks ended because the job reached its end (`endAt`) before they did. Absent on jobs stored
   * before the job end existed: read it with {@link endedTasks}.
   */
  readonly expired?: number;
  /** Of the `cancelled`, those whose recipient was on the suppression list at their start. Absent when none. */
  readonly suppressed?: number;
  /** Of the `cancelled`, those whose recipient's contact limit held them past the job's end. Absent when none. */
  readonly capped?: number;
}

/** Tasks of the job that have ended, whatever the way (completed, failed, cancelled, expired). */
export function endedTasks(counts: JobCounts): number {
  return counts.completed + counts.failed + counts.cancelled + (counts.expired ?? 0);
}

export interface Job {
  readonly clientId: string;
  /** A ULID: jobs of a client sort by creation. */
  readonly jobId: string;
  readonly name: string;
  readonly channel: JobChannel;
  /**
   * Message channels to fall back through, in order, when `channel` cannot reach a task's person
   * (no identifier for it, opted out or suppressed on it alone, refused as unreachable): the task
   * moves to the next inside the same job and the same contact-limit slot (`docs/fallback.md`).
   */
  readonly fallback?: readonly MessageChannel[];
  /** The call scenario or message template the tasks run. */
  readonly scenarioId: string;
  /** Epoch ms: not started before. */
  readonly startAt: number;
  /**
   * Epoch ms: the job's end (the `endAt` option, or `startAt` + `expireAfter`). No call or message
   * of the job starts at or after it; its tasks not ended by then end `expired` and the job
   * completes once its calls in flight have ended (see {@link jobHasEnded}). No end when absent.
   */
  readonly endAt?: number;
  /** Overrides the client's calling hours for this job. */
  readonly callingHours?: CallingHours;
  /** Restricted periods of this job, on top of the client's (see `shared/jobs/restrictions.ts`). */
  readonly restrictedPeriods?: readonly RestrictedPeriod[];
  /** Public holidays of a country during which this job starts nothing, on top of the client's. */
  readonly holidays?: HolidayCalendar;
  /**
   * Whose zone calling hours and restricted periods are read in: the client's (default) or each
   * recipient's (`Task.timeZone`; call jobs only). See `shared/jobs/restrictions.ts`.
   */
  readonly timeZoneBy?: 'client' | 'recipient';
  /** Attempts per task, including the first (busy / no-answer / voicemail are retried). */
  readonly maxAttempts: number;
  readonly retryDelaySeconds: number;
  /** Retries by outcome (attempts and delay schedule per busy, no-answer, voicemail, failed). */
  readonly retries?: RetryPolicy;
  /** Longest a call of this job may last (the provider hangs up then); the broker's default when absent. */
  readonly maxCallDurationSeconds?: number;
  /** How long a call may ring before it is `no-answer`; the provider's default when absent. */
  readonly ringTimeoutSeconds?: number;
  readonly status: JobStatus;
  /** Not counted against, nor held by, the client's contact limits (a transactional notice). */
  readonly ignoreContactLimits?: boolean;
  readonly counts: JobCounts;
  /**
   * A call job's attempts ended, by result (`completed`: answered, `busy`, `no-answer`,
   * `voicemail`, `failed`, …): each attempt's end adds one, a retried one too, in its end's own
   * transaction. Stored as one attribute a result ({@link resultAttribute}).
   */
  readonly results?: Readonly<Record<string, number>>;
  /** Why the job failed (file unusable…), when it did. */
  readonly failureReason?: string;
  /**
   * Why Switchboard paused the job, when it did (not an operator's pause): e.g. LINE's monthly
   * quota cannot cover the rest of a message job (`line-quota: …`). Cleared by a resume.
   */
  readonly pausedReason?: string;
  /**
   * The key of the job's final report in the uploads bucket (`archives/…`), written once the job
   * has ended and none of its tasks is open (`report-archive.ts`): the report is served from it
   * from then on, as ended tasks are deleted after `ENDED_TASK_RETENTION_DAYS`.
   */
  readonly reportArchive?: string;
  /**
   * How many of its ended tasks were opened again on a next channel (`shared/jobs/reopen.ts`: an
   * email's hard bounce); the job completes only while this is what was read with it.
   */
  readonly reopened?: number;
  /** Where the uploaded list is. */
  readonly source?: { readonly bucket: string; readonly key: string };
  /** The recipient column's header, when the job names it instead of relying on the aliases. */
  readonly recipientColumn?: string;
  /** A `line` job's message (LINE message objects with `{{column}}` placeholders). */
  readonly message?: MessageTemplate;
  /** An `email` job's email (subject, HTML and text parts with `{{column}}` placeholders). */
  readonly email?: EmailContent;
  /** An `sms` job's text (a body with `{{column}}` placeholders). */
  readonly sms?: SmsContent;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/**
 * A task's state (`shared/jobs/task-lifecycle.ts` says which may become which). `expired`: its job
 * reached its end (`endAt`) before the task did.
 */
export type TaskState =
  | 'pending'
  | 'in-flight'
  | 'retry-wait'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'expired';

export interface Task {
  readonly clientId: string;
  readonly jobId: string;
  /** Deterministic from job + recipient (`recipientTaskId`): a re-run writes the same task. */
  readonly taskId: string;
  /** The spreadsheet row it came from. */
  readonly row: number;
  /** Which side works it: the broker's calls, or its message pipeline (a LINE or an email job's task). */
  readonly channel: TaskSide;
  /** E.164 number for calls, LINE user id for messages. */
  readonly recipient: string;
  /**
   * The key of the recipient's person when the recipient is linked to other identifiers
   * (`shared/people/model.ts`), as the ingest read it; absent: the recipient is a person alone. A
   * start checks it against the link and counts the contact limits under it.
   */
  readonly person?: string;
  /**
   * A fallback job's task: the identifier of the row for each of the job's channels it has (the
   * recipient is the one of the channel it is on), the channel it is on when not the job's
   * (`via`), and the channels it could not reach its person on, in order, with why (`tried`).
   */
  readonly reach?: Readonly<Partial<Record<MessageChannel, string>>>;
  readonly via?: MessageChannel;
  readonly tried?: readonly TriedChannel[];
  readonly name?: string;
  readonly variables: Readonly<Record<string, string>>;
  readonly state: TaskState;
  /** Attempts started so far. */
  readonly attempts: number;
  /** Epoch ms from which the task may start (job start, or after a retry delay). */
  readonly readyAt: number;
  /** busy, no-answer, answered, delivered, … */
  readonly lastResult?: string;
  /**
   * A message task's delivery state as its channel's events last moved it (`shared/jobs/delivery-state.ts`;
   * for email, SES's: the report's `email` column; for SMS, End User Messaging's). Absent before any event.
   */
  readonly deliveryState?: EmailDeliveryState | SmsDeliveryState;
  /** The same, as items written before the channel-neutral names hold it (email only). */
  readonly emailState?: EmailDeliveryState;
  readonly reason?: string;
  readonly callId?: string;
  /** Epoch ms the current attempt started (set when it goes in flight). */
  readonly startedAt?: number;
  /** Epoch ms the last call attempt ended (its settle): with `startedAt`, the call's length. */
  readonly callEndedAt?: number;
  /** The recipient's IANA zone, for a job with `timeZoneBy: 'recipient'` (from the list's cell or the number). */
  readonly timeZone?: string;
  /**
   * Epoch ms before which the waiting attempt may not start whatever the hours say: a retry's delay
   * end, a contact limit's window end. Absent: the job's start. `readyAt` is this or later (moved to
   * the recipient's opening); a re-time after the hours change never moves it earlier than this.
   */
  readonly notBefore?: number;
  readonly updatedAt: number;
}

/** The shard of a task: a stable hash of its id, spread over {@link TASK_SHARDS}. */
export function taskShard(taskId: string): number {
  return createHash('sha1').update(taskId).digest().readUInt16BE(0) % TASK_SHARDS;
}

/** The `outstanding` index (tasks table): a client's tasks by when they are ready. */
export const OUTSTANDING_INDEX = 'outstanding';

/** The `outstanding` index sort key of a task ready (or, in flight, held) until `readyAt`. */
function openSk(readyAt: number, jobId: string, taskId: string): string {
  return `${new Date(readyAt).toISOString()}#${jobId}#${taskId}`;
}

function taskShardPk(jobId: string, shard: number): string {
  return `${jobId}#${shard}`;
}

function openShardPk(clientId: string, shard: number): string {
  return `${clientId}#${shard}`;
}

export const keys = {
  client: (clientId: string) => ({ pk: `CLIENT#${clientId}`, sk: 'PROFILE' }),
  job: (clientId: string, jobId: string) => ({ pk: `CLIENT#${clientId}`, sk: `JOB#${jobId}` }),
  jobsOf: (clientId: string) => ({ pk: `CLIENT#${clientId}`, skPrefix: 'JOB#' }),
  lease: (clientId: string) => ({ pk: `LEASE#${clientId}`, sk: 'LEASE' }),
  /** The lease of a process that must run alone (the job manager: `shared/fleet/run-lease.ts`). */
  runLease: (name: string) => ({ pk: `RUN#${name}`, sk: 'LEASE' }),
  optOut: (clientId: string, recipient: string) => ({ pk: `OPTOUT#${clientId}`, sk: recipient }),
  task: (jobId: string, taskId: string) => ({ pk: taskShardPk(jobId, taskShard(taskId)), sk: taskId }),
  /** The partition of one shard of a job's tasks (tasks table). */
  taskShardPk,
  /** The `outstanding` index partition of one shard of a client's tasks. */
  openShardPk,
  /** Which attempt a provider's call id belongs to (tasks table; for events that name only the call). */
  callLink: (callId: string) => ({ pk: `CALL#${callId}`, sk: 'LINK' }),
  /**
   * The byStatus index entry of a job that the job manager must look at: in one of
   * {@link JOB_STATUS_SHARDS} partitions of its status, by a hash of its id.
   */
  jobStatusIndex: (job: Pick<Job, 'status' | 'startAt' | 'jobId'>) =>
    job.status === 'scheduled' || job.status === 'running'
      ? {
          statusKey: `JOBSTATUS#${job.status}#${taskShard(job.jobId) % JOB_STATUS_SHARDS}`,
          dueKey: `${new Date(job.startAt).toISOString()}#${job.jobId}`,
        }
      : undefined,
  /**
   * Every byStatus partition that may list jobs of `status`: its shards, and the one partition
   * jobs written before the shards were listed in (they leave it at their next change of status).
   */
  jobStatusPartitions: (status: 'scheduled' | 'running') => [
    `JOBSTATUS#${status}`,
    ...Array.from({ length: JOB_STATUS_SHARDS }, (_, shard) => `JOBSTATUS#${status}#${shard}`),
  ],
  /** The outstanding index entry of a task that may be started. */
  outstandingIndex: (task: Pick<Task, 'clientId' | 'jobId' | 'taskId' | 'state' | 'readyAt'>) =>
    isWaiting(task.state)
      ? {
          openPk: openShardPk(task.clientId, taskShard(task.taskId)),
          openSk: openSk(task.readyAt, task.jobId, task.taskId),
        }
      : undefined,
  openSk,
  /** The byRecipient index partition of the tasks of one identifier of a client (a person's history). */
  recipientTasks: (clientId: string, identifier: string) => `RECIPIENT#${clientId}#${identifier}`,
  /**
   * The byRecipient index entry of a task: under its recipient as the ingest wrote it (a fallback
   * task's first channel's identifier), sorted by job (ULIDs: newest last) and task. A person's
   * history reads each of its identifiers, so linking, joining and unlinking move history with them.
   */
  recipientIndex: (task: Pick<Task, 'clientId' | 'jobId' | 'taskId' | 'recipient'>) => ({
    recipientPk: `RECIPIENT#${task.clientId}#${task.recipient}`,
    recipientSk: `${task.jobId}#${task.taskId}`,
  }),
  /** Sorts after every `openSk` of the instant `ms` (ids are ASCII < '~'): "ready by `ms`". */
  openSkAfter: (ms: number) => `${new Date(ms).toISOString()}#~`,
} as const;
