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
 * A file larger than `MAX_UPLOAD_BYTES` (`upload-limit.ts`), by the size S3 reported for the
 * object, fails its job before a byte is read, with a reason that names the limit.
 *
 * A re-run after a crash repeats the step from the last stored cursor: task ids derive from job
 * and recipient and report pages are keyed by their first row, so nothing is written twice. Tasks
 * are only ever written while the job is `validating`, before any broker may start them.
 */

import { randomUUID } from 'node:crypto';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { PeopleStore } from '#shared/people/ports.ts';
import { ZERO_COUNTS } from './api.ts';
import { cancelSweepStart } from './cancel.ts';
import { ValidationError } from './errors.ts';
import { holdsInChunks, IngestStepRun, type IngestTuning } from './ingest-step.ts';
import type { ClientSettings, Job, JobCounts } from './model.ts';
import type { ContinueIngestMessage, IngestClaim, JobStores } from './ports.ts';
import { dropJobId, type UploadedObject, uploadTarget } from './s3-events.ts';
import { JOB_DEFAULTS, type JobOptions, jobRetryOptions, parseJobOptions } from './validation.ts';

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

export interface IngestJobDeps extends JobStores {
  /** Which of the recipients (at most 100) opted out of the client's contacts. */
  readonly optOuts?: (clientId: string, recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  /** Which of the recipients are on the client's suppression list (skipped at upload, checked again at the start). */
  readonly suppressed?: (clientId: string, recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  /** Links the identifiers each row carries into persons (`shared/people/model.ts`); none when absent. */
  readonly people?: PeopleStore;
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
  /** The largest file read; default `MAX_UPLOAD_BYTES` (tests lower it to refuse a small file). */
  readonly maxUploadBytes?: number;
  /** The largest list (S3's size of the file) held in chunks; default `MAX_CHUNKED_LIST_BYTES` (`ingest-step.ts`). */
  readonly maxChunkedListBytes?: number;
}

/** The ingest use case as the ingest Lambda's handler sees it. */
export interface IngestJob {
  /** Handles one ingest message; throws only when the message should be retried. */
  handle(message: IngestMessage, ctx: IngestRunContext): Promise<IngestOutcome>;
}

/** What a dropped file's sidecar gives: the job's options, or why it is refused. */
interface SidecarReading {
  readonly options: JobOptions | undefined;
  readonly failureReason: string | undefined;
}

/** The ingest use case around its ports: creates a dropped file's job, then runs its steps. */
export class JobIngest implements IngestJob {
  readonly #deps: IngestJobDeps;
  readonly #tuning: IngestTuning;

  constructor(deps: IngestJobDeps) {
    this.#deps = deps;
    this.#tuning = {
      reserveMs: deps.reserveMs ?? 60_000,
      leaseMs: deps.leaseMs ?? 16 * 60_000,
      progressEvery: deps.progressEveryPages ?? 20,
    };
  }

  /** Handles one ingest message; throws only when the message should be retried. */
  async handle(message: IngestMessage, ctx: IngestRunContext): Promise<IngestOutcome> {
    if (message.kind === 'object') return this.#onObject(message.object, ctx);
    return this.#runStep(message.clientId, message.jobId, message.step, ctx);
  }

  async #onObject(object: UploadedObject, ctx: IngestRunContext): Promise<IngestOutcome> {
    const target = uploadTarget(object.key);
    if (!target) return { kind: 'ignored', reason: `not an upload Switchboard reads: ${object.key}` };
    let job: Job | undefined;
    if (target.kind === 'drop') {
      const created = await this.#jobForDrop(object, target.clientId, target.fileName, target.sidecarKey);
      if (!('jobId' in created && 'status' in created)) return created;
      job = created;
    } else {
      job = await this.#deps.jobs.get(target.clientId, target.jobId);
      if (!job) return { kind: 'ignored', reason: `no job ${target.jobId} for client ${target.clientId}` };
    }
    if (job.status === 'uploading') {
      await this.#deps.jobs.beginValidation(
        job.clientId,
        job.jobId,
        { eTag: object.eTag, size: object.size, chunked: holdsInChunks(this.#deps, job, object.size) },
        this.#deps.clock.now(),
      );
    }
    return this.#runStep(job.clientId, job.jobId, 0, ctx);
  }

  /** The job of a dropped file, created on its first notification. */
  async #jobForDrop(
    object: UploadedObject,
    clientId: string,
    fileName: string,
    sidecarKey: string,
  ): Promise<Job | IngestOutcome> {
    const client = await this.#deps.clients.get(clientId);
    if (!client)
      return { kind: 'ignored', reason: `no client ${clientId}: the dropped file names no known client` };
    const now = this.#deps.clock.now();
    const jobId = dropJobId(object);
    const { options, failureReason } = await this.#readSidecar(sidecarKey, fileName, client, now);
    const job: Job = {
      clientId,
      jobId,
      ...(options ?? defaultDropOptions(client, fileName, now)),
      status: failureReason ? 'failed' : 'uploading',
      counts: ZERO_COUNTS,
      ...(failureReason ? { failureReason } : {}),
      source: { bucket: object.bucket, key: object.key },
      createdAt: now,
      updatedAt: now,
    };
    const { job: stored, created } = await this.#deps.jobs.create(job);
    if (created) this.#deps.log.info('job created from a dropped file', { clientId, jobId, key: object.key });
    if (stored.status === 'failed' && failureReason) {
      return { kind: 'failed', jobId, counts: stored.counts, reason: failureReason };
    }
    return stored;
  }

  /** The options of a dropped file's sidecar; an invalid or unreadable one is a reason to fail the job. */
  async #readSidecar(
    sidecarKey: string,
    fileName: string,
    client: ClientSettings,
    now: number,
  ): Promise<SidecarReading> {
    try {
      const sidecar = await this.#deps.files.readJson(sidecarKey);
      const given = sidecar === undefined ? {} : sidecar;
      if (typeof given !== 'object' || given === null || Array.isArray(given)) {
        throw new ValidationError('invalid sidecar', { '(body)': ['must be a JSON object'] });
      }
      return {
        options: parseJobOptions({ name: fileName, ...given }, client, now),
        failureReason: undefined,
      };
    } catch (error) {
      if (error instanceof ValidationError) {
        const fields = Object.entries(error.fieldErrors)
          .map(([field, messages]) => `${field} ${messages.join(', ')}`)
          .join('; ');
        return { options: undefined, failureReason: `the sidecar ${sidecarKey} is invalid: ${fields}` };
      }
      if (error instanceof SyntaxError) {
        return { options: undefined, failureReason: `the sidecar ${sidecarKey} is not JSON` };
      }
      throw error;
    }
  }

  /** Runs `step` of the job's ingest if this run can take the step's lease. */
  async #runStep(
    clientId: string,
    jobId: string,
    step: number,
    ctx: IngestRunContext,
  ): Promise<IngestOutcome> {
    const leaseId = randomUUID();
    const now = this.#deps.clock.now();
    const claim = await this.#deps.jobs.claimIngest(
      clientId,
      jobId,
      step,
      leaseId,
      now + this.#tuning.leaseMs,
      now,
    );
    if (claim.kind !== 'claimed') return this.#notClaimed(claim, clientId, jobId, step, ctx);
    let settled = false;
    try {
      const run = new IngestStepRun({
        deps: this.#deps,
        tuning: this.#tuning,
        job: claim.job,
        state: claim.state,
        leaseId,
        ctx,
      });
      const outcome = await run.run();
      settled = true;
      if (outcome.kind === 'ignored') return outcome;
      return { ...outcome, rowsRead: outcome.counts.rows - claim.job.counts.rows };
    } finally {
      if (!settled) await this.#deps.jobs.releaseIngest(clientId, jobId, leaseId).catch(() => {});
    }
  }

  /** Why a step's lease was not taken; resends what a crashed run may have left unsent. */
  async #notClaimed(
    claim: Exclude<IngestClaim, { kind: 'claimed' }>,
    clientId: string,
    jobId: string,
    step: number,
    ctx: IngestRunContext,
  ): Promise<IngestOutcome> {
    switch (claim.kind) {
      case 'not-validating':
        // A run that wrote tasks and then crashed leaves them for the sweep, which may have passed.
        if (claim.status === 'cancelled') await this.#deps.queue.send(cancelSweepStart(clientId, jobId));
        return { kind: 'ignored', jobId, reason: `the job is ${claim.status ?? 'gone'}, not validating` };
      case 'busy':
        return { kind: 'ignored', jobId, reason: `step ${step} is being run by another invocation` };
      case 'stale':
        // A step ended but its continuation may not have been sent (the send failed, and this
        // message came back): send it again. A duplicate continuation finds the step leased or done.
        if (claim.state.step === step + 1 && !claim.leased && ctx.receiveCount > 1) {
          await this.#deps.queue.send({ kind: 'continue', clientId, jobId, step: step + 1 });
        }
        return { kind: 'ignored', jobId, reason: `step ${step} already ran` };
    }
  }
}

/** A dropped file's job options when its sidecar could not be used: the client's defaults. */
function defaultDropOptions(client: ClientSettings, fileName: string, now: number): JobOptions {
  return {
    name: fileName,
    channel: client.jobDefaults?.channel ?? JOB_DEFAULTS.channel,
    scenarioId: client.jobDefaults?.scenarioId ?? JOB_DEFAULTS.scenarioId,
    startAt: now,
    maxAttempts: client.jobDefaults?.maxAttempts ?? JOB_DEFAULTS.maxAttempts,
    retryDelaySeconds: client.jobDefaults?.retryDelaySeconds ?? JOB_DEFAULTS.retryDelaySeconds,
    ...jobRetryOptions({}, client.jobDefaults),
  };
}

/** Builds the ingest use case around its ports. */
