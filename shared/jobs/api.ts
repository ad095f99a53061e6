/**
 * Use cases of the operator API: client settings, jobs (create with an upload URL or an inline
 * file, read, list, pause / resume / cancel, report), and the client's opt-outs (`opt-outs.ts`).
 *
 * Input: already-parsed requests (path ids, JSON bodies, raw CSV bytes). Output: plain records;
 * problems are typed errors ({@link ValidationError}, {@link ClientNotFoundError},
 * {@link JobNotFoundError}, {@link IllegalTransitionError}, {@link UploadTooLargeError}) that
 * the HTTP handler maps to statuses in one place.
 *
 * Pausing or cancelling a `message` job is exact: once the new status is written, the broker
 * holding the client's lease (if any) is told, and the answer waits for it to confirm that no new
 * send of the job starts. A broker that cannot be reached is logged and left to its own job
 * watch (it stops the sends within a fraction of a second); the operator gets the answer anyway.
 */
import type { JobSeriesReader } from '#shared/broker/job-series.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { newUlid } from '#shared/ids.ts';
import {
  clientSettingsWithOutcomeWebhook,
  type OutcomeWebhookDeps,
} from '#shared/outcomes/client-settings.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { foreignConnectRegion } from '#shared/telephony/settings.ts';
import { BrokerNudge, type BrokerNudgeDeps } from './broker-nudge.ts';
import { cancelSweepStart } from './cancel.ts';
import {
  ClientNotFoundError,
  emptyFieldErrors,
  IllegalTransitionError,
  JobNotFoundError,
  UploadTooLargeError,
  ValidationError,
} from './errors.ts';
import { canTransition, type JobStatus } from './job-lifecycle.ts';
import { type JobLive, JobLiveReader } from './job-live.ts';
import { type ClientSettings, endedTasks, type Job, type JobCounts } from './model.ts';
import { findOptOuts, type OptOutsAnswer } from './opt-outs.ts';
import type { JobStores, OptOutReader, OutstandingHeadReader } from './ports.ts';
import { jobReportCsv, tasksInShardOrder } from './report.ts';
import { contactTimeSettings, jobNeedsRetime, retimeSweepStart } from './retime.ts';
import { uploadKey } from './s3-events.ts';
import { type JobSeriesAnswer, readJobSeries } from './series.ts';
import { clientSettingsInput, isValidClientId, parseClientSettings, parseJobOptions } from './validation.ts';
import { type JobWaiting, jobWaitingFor } from './waiting.ts';

/** Largest inline CSV: API Gateway's body, base64-encoded into a 6 MB Lambda event, must fit. */
export const INLINE_UPLOAD_MAX_BYTES = 4 * 1024 * 1024;
/**
 * Largest report answered in the response; a larger one is written to S3 and redirected to (303 to
 * a presigned URL). The response carries it base64-encoded (4/3 of its size) inside the Lambda
 * result, which must stay under Lambda's 6 MB response limit (`LAMBDA_PAYLOAD_MAX_BYTES`): 4 MiB
 * is 5,592,408 bytes of base64, leaving ~680 KB for the headers and the result's JSON (a few KB).
 * It was 5 MiB: from ~4.4 MiB of CSV the response passed 6 MB and API Gateway answered an error.
 */
export const REPORT_INLINE_MAX_BYTES = 4 * 1024 * 1024;
/** How long a presigned report URL works. */
export const REPORT_URL_SECONDS = 15 * 60;
/** How long a presigned upload URL works. */
export const UPLOAD_URL_SECONDS = 15 * 60;

export const ZERO_COUNTS: JobCounts = {
  rows: 0,
  rejected: 0,
  skipped: 0,
  tasks: 0,
  completed: 0,
  failed: 0,
  cancelled: 0,
  expired: 0,
};

export type JobAction = 'pause' | 'resume' | 'cancel';

/** The status each action moves a job to. */
export const ACTION_TARGET: Readonly<Record<JobAction, JobStatus>> = {
  pause: 'paused',
  resume: 'scheduled',
  cancel: 'cancelled',
};

/** A job as the API shows it: its record, with counts per task state. */
export interface JobView extends Omit<Job, 'counts' | 'startAt' | 'endAt' | 'createdAt' | 'updatedAt'> {
  readonly startAt: string;
  /** The job's end (ISO 8601, UTC), when it has one. */
  readonly endAt?: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly counts: JobCounts & {
    /** Tasks ended because the job reached its end (0 when it has none). */
    readonly expired: number;
    /** Tasks not yet ended: pending, in flight or waiting to retry. */
    readonly outstanding: number;
  };
  /** What a scheduled or running job waits for, and until when (see `waiting.ts`). */
  readonly waiting?: JobWaiting;
  /** A running call job's client: calls in flight now, against its contract (GET of one job only). */
  readonly live?: JobLive;
}

export function jobView(job: Job, waiting?: JobWaiting): JobView {
  const { counts, endAt, ...rest } = job;
  return {
    ...rest,
    ...(waiting ? { waiting } : {}),
    startAt: new Date(job.startAt).toISOString(),
    ...(endAt === undefined ? {} : { endAt: new Date(endAt).toISOString() }),
    createdAt: new Date(job.createdAt).toISOString(),
    updatedAt: new Date(job.updatedAt).toISOString(),
    counts: {
      ...counts,
      expired: counts.expired ?? 0,
      outstanding: Math.max(0, counts.tasks - endedTasks(counts)),
    },
  };
}

export interface CreatedJob {
  readonly jobId: string;
  readonly status: JobStatus;
  /** Where to PUT the file (absent when it was posted inline). */
  readonly upload?: { readonly url: string; readonly method: 'PUT'; readonly expiresAt: string };
}

/** A cancel starts the sweep that ends the job's waiting tasks on the ingest queue (`queue`). */
export interface JobsApiDeps extends JobStores {
  /** The uploads bucket's name (recorded as the job's source). */
  readonly bucket: string;
  readonly clock: Clock;
  readonly newJobId?: (now: number) => string;
  /**
   * Tells the client's broker when a message job is paused or cancelled, and waits for it. Without
   * it (no brokers to reach), the brokers' job watch alone stops the sends, a moment later.
   */
  readonly brokers?: BrokerNudgeDeps;
  /** The client's calls in flight (the lease item), for a job's `waiting`; without it, not said. */
  readonly calls?: CallsInFlightReader;
  /** The client's opt-outs, for {@link JobsApi.optOuts}; without it, that use case fails. */
  readonly optOuts?: OptOutReader;
  /** Outcome webhooks' secret store and URL rule; without it, `outcomeWebhook` is refused. */
  readonly outcomeWebhooks?: OutcomeWebhookDeps;
  /** Each job's series (the console's chart), for {@link JobsApi.jobSeries}; without it, that fails. */
  readonly series?: JobSeriesReader;
  /** The deployment's region: a client's Amazon Connect instance must be in it. */
  readonly region: string;
  /** A job's first waiting task, for its `waiting` (local hours, a contact limit, a retry delay). */
  readonly heads?: OutstandingHeadReader;
}

export interface CallsInFlightReader {
  callsInFlight(clientId: string): Promise<number>;
}

/** The operator API's use cases around their ports. */
export class JobsApi {
  readonly #deps: JobsApiDeps;
  readonly #newJobId: (now: number) => string;
  readonly #live: JobLiveReader;
  /** Absent when there are no brokers to reach: their job watch alone stops the sends. */
  readonly #nudge: BrokerNudge | undefined;

  constructor(deps: JobsApiDeps) {
    this.#deps = deps;
    this.#newJobId = this.#deps.newJobId ?? newUlid;
    this.#live = new JobLiveReader(deps);
    this.#nudge = deps.brokers ? new BrokerNudge(deps.brokers, deps.clock) : undefined;
  }

  async #clientOf(clientId: string): Promise<ClientSettings> {
    if (!isValidClientId(clientId)) throw new ClientNotFoundError(`no client ${clientId}`);
    const client = await this.#deps.clients.get(clientId);
    if (!client) throw new ClientNotFoundError(`no client ${clientId}: PUT /clients/${clientId} first`);
    return client;
  }

  async #jobOf(clientId: string, jobId: string): Promise<Job> {
    // An id no job can have (a slash, 2 KB of text) is no job, not a key DynamoDB refuses with a 500.
    const job =
      isValidClientId(clientId) && isValidClientId(jobId)
        ? await this.#deps.jobs.get(clientId, jobId)
        : undefined;
    if (!job) throw new JobNotFoundError(`no job ${jobId} for client ${clientId}`);
    return job;
  }

  /**
   * Creates or replaces a client's settings. When its hours, zone, restricted periods or holidays
   * change, each of its open jobs read in its recipients' zones gets a re-time sweep on the ingest
   * queue (`shared/jobs/retime.ts`): tasks waiting for an opening the old settings computed move to
   * an earlier one the new settings give (a narrowing is caught by the broker's start check).
   */
  async putClient(clientId: string, request: unknown): Promise<ClientSettings> {
    const now = this.#deps.clock.now();
    const body = clientSettingsInput(clientId, request);
    const existing = isValidClientId(clientId) ? await this.#deps.clients.get(clientId) : undefined;
    const settings = await clientSettingsWithOutcomeWebhook({
      body,
      existing,
      deps: this.#deps.outcomeWebhooks,
      now,
      parse: () => this.#servable(parseClientSettings(clientId, body, now)),
    });
    const saved = await this.#deps.clients.put(settings);
    if (existing && contactTimeSettings(existing) !== contactTimeSettings(saved)) {
      await this.#retimeJobs(clientId, now);
    }
    return saved;
  }

  /** `settings`, when this deployment can serve them; else a {@link ValidationError} saying why. */
  #servable(settings: ClientSettings): ClientSettings {
    const foreign = foreignConnectRegion(settings.telephony, this.#deps.region);
    if (foreign) {
      throw new ValidationError('invalid client settings', {
        ...emptyFieldErrors(),
        'telephony.region': [foreign],
      });
    }
    return settings;
  }

  /** Queues the re-time sweep of each open job of the client read in its recipients' zones. */
  async #retimeJobs(clientId: string, now: number): Promise<void> {
    let next: string | undefined;
    do {
      const page = await this.#deps.jobs.list(clientId, {
        limit: 100,
        ...(next === undefined ? {} : { next }),
      });
      for (const job of page.jobs) {
        if (jobNeedsRetime(job, now)) await this.#deps.queue.send(retimeSweepStart(clientId, job.jobId));
      }
      next = page.next;
    } while (next !== undefined);
  }

  /** Every client, by id, 50 a page (at most 100): the administrators' list. */
  async listClients(query: {
    readonly limit?: string;
    readonly next?: string;
  }): Promise<{ clients: ClientSettings[]; next?: string }> {
    const limit = query.limit === undefined ? 50 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new ValidationError('invalid query', { limit: ['must be a whole number from 1 to 100'] });
    }
    return this.#deps.clients.list({ limit, ...(query.next === undefined ? {} : { next: query.next }) });
  }

  getClient(clientId: string): Promise<ClientSettings> {
    return this.#clientOf(clientId);
  }

  /**
   * Pauses or resumes a whole client: none of its calls or messages start while paused (its
   * brokers see it within seconds; calls in flight end normally). Pausing twice is not an error.
   */
  async setClientPaused(clientId: string, paused: boolean): Promise<ClientSettings> {
    const settings = isValidClientId(clientId)
      ? await this.#deps.clients.setPaused(clientId, paused, this.#deps.clock.now())
      : undefined;
    if (!settings) throw new ClientNotFoundError(`no client ${clientId}: PUT /clients/${clientId} first`);
    return settings;
  }

  /**
   * Creates a job in `uploading`. Without `inline`, returns a presigned PUT URL for the file;
   * with it, stores the file at once. Either way the bucket notification starts the ingest.
   */
  async createJob(clientId: string, body: unknown, inline?: Uint8Array): Promise<CreatedJob> {
    const client = await this.#clientOf(clientId);
    const now = this.#deps.clock.now();
    const options = parseJobOptions(body, client, now);
    if (inline && inline.byteLength > INLINE_UPLOAD_MAX_BYTES) {
      throw new UploadTooLargeError(
        `an inline CSV may be at most ${INLINE_UPLOAD_MAX_BYTES} bytes; create the job without a body and PUT the file to its upload URL`,
      );
    }
    if (inline && inline.byteLength === 0) {
      throw new ValidationError('invalid upload', { body: ['the CSV is empty'] });
    }
    const jobId = this.#newJobId(now);
    const key = uploadKey(clientId, jobId);
    const job: Job = {
      clientId,
      jobId,
      ...options,
      status: 'uploading',
      counts: ZERO_COUNTS,
      source: { bucket: this.#deps.bucket, key },
      createdAt: now,
      updatedAt: now,
    };
    await this.#deps.jobs.create(job);
    if (inline) {
      await this.#deps.files.put(key, inline, 'text/csv');
      return { jobId, status: job.status };
    }
    const url = await this.#deps.files.presignPut(key, UPLOAD_URL_SECONDS);
    return {
      jobId,
      status: job.status,
      upload: { url, method: 'PUT', expiresAt: new Date(now + UPLOAD_URL_SECONDS * 1000).toISOString() },
    };
  }

  /**
   * The job, what it waits for and its live figures: three reads (job, client, lease), never its
   * tasks. `?why=next-task` asks, when nothing else holds a running job and no call is in flight,
   * for its first waiting task too (the head of the client's outstanding index: 16 one-page
   * Queries), which says recipient hours, a contact limit or a retry delay: the console asks it of a
   * job that has stopped moving, the CLI and `npm start` on every read.
   */
  async getJob(
    clientId: string,
    jobId: string,
    query: Readonly<Record<string, string | undefined>> = {},
  ): Promise<JobView> {
    if (query.why !== undefined && query.why !== 'next-task') {
      throw new ValidationError('invalid query', { why: ['must be next-task, or left out'] });
    }
    const job = await this.#jobOf(clientId, jobId);
    const { waiting, live } = await this.#live.liveOf(job, query.why === 'next-task');
    return { ...jobView(job, waiting), ...(live ? { live } : {}) };
  }

  /**
   * A page of the job's series over time (`series.ts`): the job item and one Query of its samples,
   * never its tasks.
   */
  async jobSeries(
    clientId: string,
    jobId: string,
    query: { readonly since?: string; readonly limit?: string },
  ): Promise<JobSeriesAnswer> {
    const job = await this.#jobOf(clientId, jobId);
    if (!this.#deps.series) throw new Error('no job series reader is wired into the jobs API');
    return readJobSeries(this.#deps.series, job, query, this.#deps.clock.now());
  }

  /** A page of a client's jobs, newest first. */
  async listJobs(
    clientId: string,
    query: { readonly limit?: string; readonly next?: string },
  ): Promise<{ jobs: JobView[]; next?: string }> {
    const client = await this.#clientOf(clientId);
    const limit = query.limit === undefined ? 20 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new ValidationError('invalid query', { limit: ['must be a whole number from 1 to 100'] });
    }
    const page = await this.#deps.jobs.list(clientId, {
      limit,
      ...(query.next === undefined ? {} : { next: query.next }),
    });
    const now = this.#deps.clock.now();
    const jobs = page.jobs.map((job) => jobView(job, jobWaitingFor({ job, client, now })));
    return { jobs, ...(page.next ? { next: page.next } : {}) };
  }

  /**
   * The first `limit` rejected or skipped rows of a job's list (row, column, reason, value), in
   * row order, and whether there are more: what an operator checks right after an upload. The
   * report has them all.
   */
  async rowProblems(
    clientId: string,
    jobId: string,
    query: { readonly limit?: string },
  ): Promise<{ entries: ReportEntry[]; more: boolean }> {
    const limit = query.limit === undefined ? 50 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) {
      throw new ValidationError('invalid query', { limit: ['must be a whole number from 1 to 500'] });
    }
    await this.#jobOf(clientId, jobId);
    const entries: ReportEntry[] = [];
    for await (const entry of this.#deps.validationReports.entries(clientId, jobId)) {
      if (entries.length === limit) return { entries, more: true };
      entries.push(entry);
    }
    return { entries, more: false };
  }

  /**
   * Pauses, resumes or cancels a job; an illegal move is an {@link IllegalTransitionError}. A
   * pause or cancel of a message job returns once its broker confirmed that no new send starts
   * (or could not be reached: see {@link BrokerNudgeDeps}). A cancel also starts the sweep that
   * ends the job's tasks not yet started (`cancel.ts`); cancelling a cancelled job starts it
   * again (harmless: the sweep is idempotent), so a cancel whose sweep could not be queued can
   * simply be retried.
   */
  async changeStatus(clientId: string, jobId: string, action: JobAction): Promise<JobView> {
    const to = ACTION_TARGET[action];
    let job = await this.#jobOf(clientId, jobId);
    if (action === 'cancel' && job.status === 'cancelled') {
      // A retried cancel confirms the stop again, as the first one did.
      await this.#nudge?.stopSends(job);
      await this.#deps.queue.send(cancelSweepStart(clientId, jobId));
      return jobView(job);
    }
    // A concurrent change (the job manager starting it, the ingest finishing) is retried once
    // against the new status; the write itself is conditional on the status it was read with.
    for (let attempt = 0; attempt < 3; attempt++) {
      if (!canTransition(job.status, to)) {
        throw new IllegalTransitionError(`cannot ${action} a job that is ${job.status}`, job.status);
      }
      const result = await this.#deps.jobs.transition(job, to, this.#deps.clock.now());
      if (result.ok) {
        // Sends stop first: the sweep only ends tasks that have not started.
        if (to === 'paused' || to === 'cancelled') await this.#nudge?.stopSends(result.job);
        if (to === 'cancelled') await this.#deps.queue.send(cancelSweepStart(clientId, jobId));
        return jobView(result.job);
      }
      if (result.current === undefined) throw new JobNotFoundError(`no job ${jobId} for client ${clientId}`);
      job = await this.#jobOf(clientId, jobId);
    }
    throw new IllegalTransitionError(`the job keeps changing; it is ${job.status}`, job.status);
  }

  /**
   * Whether recipients of the client are opted out, or a page of its opted-out recipients
   * (`opt-outs.ts`); a client reads only its own list.
   */
  async optOuts(
    clientId: string,
    query: Readonly<Record<string, string | undefined>>,
  ): Promise<OptOutsAnswer> {
    const client = await this.#clientOf(clientId);
    if (!this.#deps.optOuts) throw new Error('no opt-out store is wired into the jobs API');
    return findOptOuts(this.#deps.optOuts, client, query);
  }

  /**
   * The job's report CSV (see `report.ts` for its columns and order): in the response when it
   * is small, else streamed into the bucket (`reports/{clientId}/{jobId}/report-{time}.csv`)
   * and answered with a presigned URL, as a Lambda response cannot exceed 6 MB. An ended job whose
   * report is archived is answered with the archive's URL.
   */
  async report(
    clientId: string,
    jobId: string,
  ): Promise<
    (
      | { readonly kind: 'inline'; readonly csv: Buffer }
      | { readonly kind: 'redirect'; readonly url: string }
    ) & { readonly job: JobView }
  > {
    const found = await this.#jobOf(clientId, jobId);
    const job = jobView(found, await this.#live.waitingOf(found));
    // An ended job's final report, kept after its tasks expire (`report-archive.ts`).
    if (found.reportArchive !== undefined)
      return {
        kind: 'redirect',
        url: await this.#deps.files.presignGet(found.reportArchive, REPORT_URL_SECONDS),
        job,
      };
    const chunks = jobReportCsv(
      this.#deps.validationReports.entries(clientId, jobId),
      tasksInShardOrder((shard) => this.#deps.tasks.shard(jobId, shard)),
      found,
    )[Symbol.asyncIterator]();
    const head: Uint8Array[] = [];
    let size = 0;
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
      head.push(next.value);
      size += next.value.byteLength;
      if (size > REPORT_INLINE_MAX_BYTES) {
        const key = `reports/${clientId}/${jobId}/report-${this.#deps.clock.now()}.csv`;
        const rest = { [Symbol.asyncIterator]: () => chunks };
        await this.#deps.files.write(
          key,
          (async function* () {
            yield* head;
            yield* rest;
          })(),
          'text/csv; charset=utf-8',
        );
        return { kind: 'redirect', url: await this.#deps.files.presignGet(key, REPORT_URL_SECONDS), job };
      }
    }
    return { kind: 'inline', csv: Buffer.concat(head), job };
  }
}

/** Builds the operator API's use cases around their ports. */
