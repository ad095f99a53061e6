/**
 * Use case: turn an uploaded list into a job's tasks, across as many Lambda runs as it takes.
 *
 * Input: an ingest message — an uploaded object (from the bucket notification) or a
 * continuation `{kind:'continue', clientId, jobId, step}` — and the run's remaining time.
 * Output: what became of the message (for logs and metrics).
 *
 * Main course:
 * 1. An `incoming/` drop creates its job first (deterministic id, conditional put, options from
 *    the sidecar `.json` or the client's defaults); an `uploads/` object names its job.
 * 2. `uploading` → `validating` (conditional), then the run takes the job's ingest lease for its
 *    step, so a duplicated message never runs a step twice at once.
 * 3. `ingestRows` streams the file (from the cursor's byte offset when continuing), writing each
 *    page of tasks (with their outstanding-index keys) and report entries before reading on.
 * 4. When time runs low it pauses: the duplicate filter's snapshot is stored, the job's step
 *    advances with the cursor (conditional on the lease), and a continuation is sent.
 * 5. At the end: `validating` → `scheduled` with the counts, or `failed` with one clear reason.
 *
 * A re-run after a crash repeats the step from the last stored cursor: task ids derive from job
 * and recipient and report pages are keyed by their first row, so nothing is written twice. Tasks
 * are only ever written while the job is `validating`, before any broker may start them.
 */

import { randomUUID } from 'node:crypto';
import { bloomDuplicateFilter, recipientTaskId } from '#shared/csv/duplicates.ts';
import { type IngestCounts, type IngestResult, ingestRows, type TaskDraft } from '#shared/csv/ingest.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { ZERO_COUNTS } from './api.ts';
import { cancelSweepStart } from './cancel.ts';
import { SourceChangedError, ValidationError } from './errors.ts';
import type { ClientSettings, Job, JobCounts, Task } from './model.ts';
import type {
  ClientStore,
  ContinueIngestMessage,
  IngestQueue,
  IngestState,
  JobStore,
  TaskStore,
  UploadFiles,
  ValidationReportStore,
} from './ports.ts';
import { dropJobId, type UploadedObject, uploadTarget } from './s3-events.ts';
import { JOB_DEFAULTS, parseJobOptions } from './validation.ts';

export type IngestMessage =
  | { readonly kind: 'object'; readonly object: UploadedObject }
  | ContinueIngestMessage;

export type IngestOutcome =
  | {
      readonly kind: 'scheduled' | 'failed' | 'paused';
      readonly jobId: string;
      readonly counts: JobCounts;
      readonly reason?: string;
      /** Data rows this run read (a paused ingest reads the rest in later runs). */
      readonly rowsRead?: number;
    }
  | { readonly kind: 'ignored'; readonly reason: string; readonly jobId?: string };

export interface IngestRunContext {
  /** Milliseconds this run may still take (Lambda's `getRemainingTimeInMillis`). */
  remainingMs(): number;
  /** How many times this message was received (SQS `ApproximateReceiveCount`). */
  readonly receiveCount: number;
}

export interface IngestJobDeps {
  readonly clients: ClientStore;
  readonly jobs: JobStore;
  readonly tasks: TaskStore;
  readonly files: UploadFiles;
  readonly validationReports: ValidationReportStore;
  readonly queue: IngestQueue;
  /** Which of the recipients (at most 100) opted out of the client's contacts. */
  readonly optOuts?: (clientId: string, recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  readonly clock: Clock;
  readonly log: Logger;
  /** Pause when less than this is left of the run (to store the state and send the continuation). */
  readonly reserveMs?: number;
  /** Pause after this many data rows in one run (tests force continuations with it). */
  readonly maxRowsPerRun?: number;
  /** How long a run's lease on its step lasts: at least the function's timeout. */
  readonly leaseMs?: number;
  /** Rows a page of `ingestRows` holds. */
  readonly batchSize?: number;
  /** Pages between progress updates of the job's counts. */
  readonly progressEveryPages?: number;
}

/** Row estimate for sizing the duplicate filter: short rows (a number and a name) are ~25 bytes. */
const BYTES_PER_ROW_ESTIMATE = 25;

function jobCounts(counts: IngestCounts): JobCounts {
  return {
    ...ZERO_COUNTS,
    rows: counts.dataRows,
    rejected: counts.rejected,
    skipped: counts.skipped,
    tasks: counts.accepted,
  };
}

/** Builds the ingest use case around its ports. */
export function makeIngestJob(deps: IngestJobDeps) {
  const reserveMs = deps.reserveMs ?? 60_000;
  const leaseMs = deps.leaseMs ?? 16 * 60_000;
  const progressEvery = deps.progressEveryPages ?? 20;

  /** The job of a dropped file, created on its first notification. */
  async function jobForDrop(
    object: UploadedObject,
    clientId: string,
    fileName: string,
    sidecarKey: string,
  ): Promise<Job | IngestOutcome> {
    const client = await deps.clients.get(clientId);
    if (!client)
      return { kind: 'ignored', reason: `no client ${clientId}: the dropped file names no known client` };
    const now = deps.clock.now();
    const jobId = dropJobId(object);
    let failureReason: string | undefined;
    let options: ReturnType<typeof parseJobOptions> | undefined;
    try {
      const sidecar = await deps.files.readJson(sidecarKey);
      const given = sidecar === undefined ? {} : sidecar;
      if (typeof given !== 'object' || given === null || Array.isArray(given)) {
        throw new ValidationError('invalid sidecar', { '(body)': ['must be a JSON object'] });
      }
      options = parseJobOptions({ name: fileName, ...given }, client, now);
    } catch (error) {
      if (error instanceof ValidationError) {
        failureReason = `the sidecar ${sidecarKey} is invalid: ${Object.entries(error.fieldErrors)
          .map(([field, messages]) => `${field} ${messages.join(', ')}`)
          .join('; ')}`;
      } else if (error instanceof SyntaxError) {
        failureReason = `the sidecar ${sidecarKey} is not JSON`;
      } else throw error;
    }
    const job: Job = {
      clientId,
      jobId,
      ...(options ?? {
        name: fileName,
        channel: client.jobDefaults?.channel ?? JOB_DEFAULTS.channel,
        scenarioId: client.jobDefaults?.scenarioId ?? JOB_DEFAULTS.scenarioId,
        startAt: now,
        maxAttempts: client.jobDefaults?.maxAttempts ?? JOB_DEFAULTS.maxAttempts,
        retryDelaySeconds: client.jobDefaults?.retryDelaySeconds ?? JOB_DEFAULTS.retryDelaySeconds,
      }),
      status: failureReason ? 'failed' : 'uploading',
      counts: ZERO_COUNTS,
      ...(failureReason ? { failureReason } : {}),
      source: { bucket: object.bucket, key: object.key },
      createdAt: now,
      updatedAt: now,
    };
    const { job: stored, created } = await deps.jobs.create(job);
    if (created) deps.log.info('job created from a dropped file', { clientId, jobId, key: object.key });
    if (stored.status === 'failed' && failureReason) {
      return { kind: 'failed', jobId, counts: stored.counts, reason: failureReason };
    }
    return stored;
  }

  async function onObject(object: UploadedObject, ctx: IngestRunContext): Promise<IngestOutcome> {
    const target = uploadTarget(object.key);
    if (!target) return { kind: 'ignored', reason: `not an upload Switchboard reads: ${object.key}` };
    let job: Job | undefined;
    if (target.kind === 'drop') {
      const created = await jobForDrop(object, target.clientId, target.fileName, target.sidecarKey);
      if (!('jobId' in created && 'status' in created)) return created;
      job = created;
    } else {
      job = await deps.jobs.get(target.clientId, target.jobId);
      if (!job) return { kind: 'ignored', reason: `no job ${target.jobId} for client ${target.clientId}` };
    }
    if (job.status === 'uploading') {
      await deps.jobs.beginValidation(
        job.clientId,
        job.jobId,
        { eTag: object.eTag, size: object.size },
        deps.clock.now(),
      );
    }
    return runStep(job.clientId, job.jobId, 0, ctx);
  }

  async function runStep(
    clientId: string,
    jobId: string,
    step: number,
    ctx: IngestRunContext,
  ): Promise<IngestOutcome> {
    const leaseId = randomUUID();
    const now = deps.clock.now();
    const claim = await deps.jobs.claimIngest(clientId, jobId, step, leaseId, now + leaseMs, now);
    switch (claim.kind) {
      case 'not-validating':
        // A run that wrote tasks and then crashed leaves them for the sweep, which may have passed.
        if (claim.status === 'cancelled') await deps.queue.send(cancelSweepStart(clientId, jobId));
        return { kind: 'ignored', jobId, reason: `the job is ${claim.status ?? 'gone'}, not validating` };
      case 'busy':
        return { kind: 'ignored', jobId, reason: `step ${step} is being run by another invocation` };
      case 'stale':
        // A step ended but its continuation may not have been sent (the send failed, and this
        // message came back): send it again. A duplicate continuation finds the step leased or done.
        if (claim.state.step === step + 1 && !claim.leased && ctx.receiveCount > 1) {
          await deps.queue.send({ kind: 'continue', clientId, jobId, step: step + 1 });
        }
        return { kind: 'ignored', jobId, reason: `step ${step} already ran` };
    }
    let settled = false;
    try {
      const outcome = await ingest(claim.job, claim.state, leaseId, ctx);
      settled = true;
      if (outcome.kind === 'ignored') return outcome;
      return { ...outcome, rowsRead: outcome.counts.rows - claim.job.counts.rows };
    } finally {
      if (!settled) await deps.jobs.releaseIngest(clientId, jobId, leaseId).catch(() => {});
    }
  }

  /**
   * A job cancelled while this run wrote tasks: the sweep the cancel started may have passed the
   * shards they went into, so sweep again now that this run writes no more.
   */
  async function sweepIfCancelled(clientId: string, jobId: string): Promise<void> {
    const job = await deps.jobs.get(clientId, jobId);
    if (job?.status === 'cancelled') await deps.queue.send(cancelSweepStart(clientId, jobId));
  }

  async function ingest(
    job: Job,
    state: IngestState,
    leaseId: string,
    ctx: IngestRunContext,
  ): Promise<IngestOutcome> {
    const { clientId, jobId } = job;
    const finish = async (
      outcome: { status: 'scheduled' } | { status: 'failed'; reason: string },
      counts: JobCounts,
    ): Promise<IngestOutcome> => {
      const done = await deps.jobs.finishIngest(job, leaseId, outcome, counts, deps.clock.now());
      if (!done) {
        await sweepIfCancelled(clientId, jobId);
        return { kind: 'ignored', jobId, reason: 'the job changed while it was validated (cancelled?)' };
      }
      return outcome.status === 'failed'
        ? { kind: 'failed', jobId, counts, reason: outcome.reason }
        : { kind: 'scheduled', jobId, counts };
    };
    const client: ClientSettings | undefined = await deps.clients.get(clientId);
    if (!client)
      return finish({ status: 'failed', reason: `the client ${clientId} has no settings` }, job.counts);
    if (!job.source) return finish({ status: 'failed', reason: 'the job has no uploaded file' }, job.counts);

    const snapshot = state.filterKey ? await deps.files.getBytes(state.filterKey) : undefined;
    if (state.filterKey && !snapshot)
      throw new Error(`the duplicate filter snapshot ${state.filterKey} is missing`);
    const confirm = (recipients: readonly string[]) => deps.tasks.storedRows(jobId, recipients);
    const duplicates = snapshot
      ? bloomDuplicateFilter({ expectedRows: 1, confirm, from: snapshot })
      : bloomDuplicateFilter({
          expectedRows: Math.max(1000, Math.ceil((state.size ?? 0) / BYTES_PER_ROW_ESTIMATE)),
          confirm,
        });
    const cursor = state.cursor;
    const startRows = cursor?.counts.dataRows ?? 0;
    const fromByte = cursor?.byteOffset ?? 0;
    const source = deps.files.read(job.source.key, {
      fromByte,
      ...(state.eTag ? { eTag: state.eTag } : {}),
    });
    let pages = 0;
    const now = deps.clock.now();
    const toTask = (draft: TaskDraft): Task => ({
      clientId,
      jobId,
      taskId: recipientTaskId(jobId, draft.recipient),
      row: draft.row,
      channel: job.channel,
      recipient: draft.recipient,
      ...(draft.name === undefined ? {} : { name: draft.name }),
      variables: draft.variables,
      state: 'pending',
      attempts: 0,
      readyAt: job.startAt,
      updatedAt: now,
    });
    let result: IngestResult;
    try {
      result = await ingestRows({
        source,
        channel: job.channel,
        defaultRegion: client.defaultRegion,
        isOptedOut: async (recipients) =>
          deps.optOuts ? deps.optOuts(clientId, recipients) : new Set<string>(),
        duplicates,
        onBatch: async (drafts) => deps.tasks.put(drafts.map(toTask)),
        onReport: async (entries) => deps.validationReports.putPage(clientId, jobId, entries),
        ...(deps.batchSize ? { batchSize: deps.batchSize } : {}),
        ...(cursor ? { resumeFrom: cursor } : {}),
        ...(job.recipientColumn ? { recipientColumn: job.recipientColumn } : {}),
        shouldPause: (counts) => {
          pages++;
          if (pages % progressEvery === 0) {
            void deps.jobs
              .saveIngestProgress(clientId, jobId, leaseId, jobCounts(counts), deps.clock.now())
              .catch(() => {});
          }
          if (deps.maxRowsPerRun !== undefined && counts.dataRows - startRows >= deps.maxRowsPerRun)
            return true;
          return ctx.remainingMs() < reserveMs;
        },
      });
    } catch (error) {
      if (error instanceof SourceChangedError) {
        return finish(
          {
            status: 'failed',
            reason: 'the file was replaced while it was being read: create a new job for the new file',
          },
          job.counts,
        );
      }
      throw error;
    }

    const counts = jobCounts(result.counts);
    if (result.status === 'failed')
      return finish({ status: 'failed', reason: result.failure.reason }, counts);
    if (result.status === 'completed') return finish({ status: 'scheduled' }, counts);

    const next = state.step + 1;
    const filterKey = `state/${clientId}/${jobId}/filter-${String(next).padStart(6, '0')}.bin`;
    await deps.files.write(
      filterKey,
      (async function* () {
        yield duplicates.snapshot();
      })(),
      'application/octet-stream',
    );
    const advanced = await deps.jobs.advanceIngest(
      clientId,
      jobId,
      leaseId,
      { step: next, cursor: result.cursor, filterKey },
      counts,
      deps.clock.now(),
    );
    if (!advanced) {
      await sweepIfCancelled(clientId, jobId);
      return { kind: 'ignored', jobId, reason: 'lost the ingest lease (or the job was cancelled)' };
    }
    await deps.queue.send({ kind: 'continue', clientId, jobId, step: next });
    return { kind: 'paused', jobId, counts };
  }

  return {
    /** Handles one ingest message; throws only when the message should be retried. */
    async handle(message: IngestMessage, ctx: IngestRunContext): Promise<IngestOutcome> {
      if (message.kind === 'object') return onObject(message.object, ctx);
      return runStep(message.clientId, message.jobId, message.step, ctx);
    },
  };
}

export type IngestJob = ReturnType<typeof makeIngestJob>;
