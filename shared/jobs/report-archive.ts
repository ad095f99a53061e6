/**
 * The final report of an ended job, archived to S3 before its tasks are deleted.
 *
 * An ended task is kept `ENDED_TASK_RETENTION_DAYS` (DynamoDB's TTL then deletes it, free of write
 * units), and the job's report is made of its tasks. So once a job has ended — completed (the job
 * manager found no open task), cancelled or failed (its sweep has ended every task it could) — its report is
 * written once to `archives/{clientId}/{jobId}/report.csv` and the job records the key; the report
 * route serves that object from then on (`api.ts`).
 *
 * Input: an {@link ArchiveReportMessage} on the ingest queue (sent by the job manager as it completes a
 * job, and by the cancel sweep as it finishes; a job not ended yet when it is read is not archived). Main course:
 * 1. nothing unless the job has ended. An archived job is archived again: a redelivery writes the
 *    same rows, and a later sweep's message must replace an earlier one (a job cancelled while its
 *    list was read: the sweep at the cancel saw no task, the ingest run then wrote some and swept
 *    again when it stopped);
 * 2. stream the report (rejected and skipped rows, then every task) into the object, counting the
 *    tasks still open as they pass;
 * 3. none open: record the key on the job. Some open (a cancelled job's call still ringing, an index
 *    the cancel sweep read before a broker's last write): send the message again, delayed
 *    {@link ARCHIVE_RECHECK_SECONDS}; after {@link ARCHIVE_MAX_ATTEMPTS} record the key anyway, the
 *    report then showing those tasks as they were (a task open a day after its job was cancelled).
 *
 * A job whose channel's own events report delivery (email, SMS: {@link DELIVERY_REPORT_COLUMN}) is
 * archived only once those events have settled: the tasks' delivery states keep moving after the job
 * ends (an SES delivery is retried for up to 14 hours, an SMS is valid for 72 hours by default), and
 * an archive taken at once would freeze the report's delivery column at its first minute. So its
 * first message records when the events settle ({@link DELIVERY_SETTLE_MS} on) and is sent again,
 * delayed, until then, writing nothing meanwhile; the report route serves the tasks live until the
 * key is recorded.
 *
 * Rows the report would have had are lost only if a task ended more than the retention before its
 * job ended (a job running longer than that), or if the message is lost for good (it goes to the
 * ingest queue's DLQ, whose alarm pages).
 */

import type { Clock } from '#shared/pacing/clock.ts';
import { JobError } from './errors.ts';
import { channelsOf, type Job } from './model.ts';
import type { IngestQueue, JobStore, TaskStore, UploadFiles, ValidationReportStore } from './ports.ts';
import { DELIVERY_REPORT_COLUMN, jobReportCsv, tasksInShardOrder } from './report.ts';
import { OPEN_TASK_STATES } from './task-lifecycle.ts';

/**
 * The job manager queues the archive just before it completes a job, delayed by this: a completion
 * that fails is tried again by its next run, which queues again; one that lands is seen by the try.
 */
export const ARCHIVE_AFTER_COMPLETION_SECONDS = 60;
/** Delay between two tries while some task of the ended job is still open (SQS's longest delay). */
export const ARCHIVE_RECHECK_SECONDS = 900;
/** Tries before the report is archived with tasks still open: a day of re-checks. */
export const ARCHIVE_MAX_ATTEMPTS = 96;
/**
 * How long after an email or SMS job ended its delivery events are awaited before its report is
 * archived: End User Messaging's default validity of a text (72 hours, after which it reports
 * `TTL_EXPIRED`), longer than SES's longest delivery try (14 hours), and an hour of slack.
 */
export const DELIVERY_SETTLE_MS = 73 * 3_600_000;

export interface ArchiveReportMessage {
  readonly kind: 'archive-report';
  readonly clientId: string;
  readonly jobId: string;
  /** 1 for the first try. */
  readonly attempt: number;
  /** Epoch ms from which the job's delivery events are taken as settled (email and SMS jobs). */
  readonly settleAt?: number;
}

export class MalformedArchiveReportError extends JobError {}

/** The first try's message. */
export function archiveReportStart(clientId: string, jobId: string): ArchiveReportMessage {
  return { kind: 'archive-report', clientId, jobId, attempt: 1 };
}

/** Reads a queue message whose `kind` is `archive-report`; throws {@link MalformedArchiveReportError}. */
export function parseArchiveReport(value: Record<string, unknown>): ArchiveReportMessage {
  const { kind, clientId, jobId, attempt, settleAt } = value;
  if (
    kind !== 'archive-report' ||
    typeof clientId !== 'string' ||
    typeof jobId !== 'string' ||
    !Number.isInteger(attempt) ||
    (attempt as number) < 1
  )
    throw new MalformedArchiveReportError('report archive without its clientId, jobId or attempt');
  if (settleAt !== undefined && !Number.isSafeInteger(settleAt))
    throw new MalformedArchiveReportError('report archive whose settleAt is not epoch ms');
  return {
    kind,
    clientId,
    jobId,
    attempt: attempt as number,
    ...(settleAt === undefined ? {} : { settleAt: settleAt as number }),
  };
}

/** Where an ended job's final report is kept in the uploads bucket. */
export function reportArchiveKey(clientId: string, jobId: string): string {
  return `archives/${clientId}/${jobId}/report.csv`;
}

export type ArchiveReportOutcome =
  | { readonly kind: 'archived'; readonly jobId: string; readonly key: string; readonly open: number }
  | { readonly kind: 'recheck'; readonly jobId: string; readonly open: number; readonly attempt: number }
  | { readonly kind: 'settling'; readonly jobId: string; readonly settleAt: number }
  | { readonly kind: 'ignored'; readonly jobId: string; readonly reason: string };

export interface ReportArchiverDeps {
  readonly jobs: Pick<JobStore, 'get' | 'recordReportArchive'>;
  readonly tasks: Pick<TaskStore, 'shard'>;
  readonly files: Pick<UploadFiles, 'write'>;
  readonly validationReports: Pick<ValidationReportStore, 'entries'>;
  readonly queue: Pick<IngestQueue, 'send'>;
  readonly clock: Pick<Clock, 'now'>;
}

/** Why a job is not archived (now), or undefined when it is to be. */
function notToArchive(job: Job | undefined): string | undefined {
  if (!job) return 'the job is gone';
  if (job.status !== 'completed' && job.status !== 'cancelled' && job.status !== 'failed')
    return `the job is ${job.status}`;
  return undefined;
}

export class ReportArchiver {
  readonly #deps: ReportArchiverDeps;

  constructor(deps: ReportArchiverDeps) {
    this.#deps = deps;
  }

  /** Runs one message; throws only when it should be retried. */
  async handle(message: ArchiveReportMessage): Promise<ArchiveReportOutcome> {
    const { clientId, jobId, attempt } = message;
    const job = await this.#deps.jobs.get(clientId, jobId);
    const reason = notToArchive(job);
    if (reason !== undefined) return { kind: 'ignored', jobId, reason };
    const settling = await this.#awaitSettling(message, job!);
    if (settling) return settling;
    let open = 0;
    const tasks = this.#deps.tasks;
    const counted = (async function* () {
      for await (const task of tasksInShardOrder((shard) => tasks.shard(jobId, shard))) {
        if (OPEN_TASK_STATES.includes(task.state)) open++;
        yield task;
      }
    })();
    const key = reportArchiveKey(clientId, jobId);
    await this.#deps.files.write(
      key,
      jobReportCsv(this.#deps.validationReports.entries(clientId, jobId), counted, job),
      'text/csv; charset=utf-8',
    );
    if (open > 0 && attempt < ARCHIVE_MAX_ATTEMPTS) {
      await this.#deps.queue.send(
        { ...message, attempt: attempt + 1 },
        { delaySeconds: ARCHIVE_RECHECK_SECONDS },
      );
      return { kind: 'recheck', jobId, open, attempt };
    }
    await this.#deps.jobs.recordReportArchive(clientId, jobId, key);
    return { kind: 'archived', jobId, key, open };
  }

  /**
   * An email or SMS job whose delivery events have not settled yet: the message again, delayed as
   * long as SQS allows or until they have (its attempt unchanged), and nothing written. Undefined
   * when the archive is to be written now.
   */
  async #awaitSettling(message: ArchiveReportMessage, job: Job): Promise<ArchiveReportOutcome | undefined> {
    if (!channelsOf(job).some((channel) => DELIVERY_REPORT_COLUMN[channel] !== undefined)) return undefined;
    const now = this.#deps.clock.now();
    const settleAt = message.settleAt ?? now + DELIVERY_SETTLE_MS;
    if (now >= settleAt) return undefined;
    const delaySeconds = Math.min(ARCHIVE_RECHECK_SECONDS, Math.ceil((settleAt - now) / 1000));
    await this.#deps.queue.send({ ...message, settleAt }, { delaySeconds });
    return { kind: 'settling', jobId: job.jobId, settleAt };
  }
}
