/**
 * One step of a job's ingest (`ingest.ts` tells the whole course): under the step's lease, the file
 * read on from the cursor, pages of tasks (or, for a LINE job, chunks of recipients) and report
 * entries written, then the ingest finished or paused for a continuation.
 */

import { isSharedMessage } from '#shared/campaign/template.ts';
import { bloomDuplicateFilter, type DuplicateFilter, recipientTaskId } from '#shared/csv/duplicates.ts';
import {
  type IngestCounts,
  type IngestCursor,
  type IngestResult,
  type IngestRowsInput,
  ingestRows,
  type PageRead,
  type TaskDraft,
} from '#shared/csv/read-list.ts';
import { identifierKind } from '#shared/people/model.ts';
import { ZERO_COUNTS } from './api.ts';
import { cancelSweepStart } from './cancel.ts';
import { type Chunk, isChunkable, packMembers, pageChunks } from './chunks.ts';
import { SourceChangedError } from './errors.ts';
import type { IngestJobDeps, IngestOutcome, IngestRunContext } from './ingest.ts';
import {
  CHANNEL_IDENTIFIER,
  type ClientSettings,
  type Job,
  type JobCounts,
  type Task,
  taskSideOf,
} from './model.ts';
import { contentPlaceholders, unfilledPlaceholders } from './placeholders.ts';
import type { IngestState } from './ports.ts';
import { recipientTiming } from './recipient-timing.ts';
import { uploadTooLargeReason } from './upload-limit.ts';

/**
 * Lists larger than this are held a task a recipient, whatever their message. A chunked job confirms
 * a suspected duplicate against every recipient already in its chunks, held in memory (~100 bytes a
 * recipient): 100 MiB of list is at most ~3 million rows (a LINE user id and a line break are 34
 * bytes), ~300 MB on the 1,024 MB ingest function. Decided by the file's size when validation begins.
 */
export const MAX_CHUNKED_LIST_BYTES = 100 * 1024 * 1024;

/** Row estimate for sizing the duplicate filter: short rows (a number and a name) are ~25 bytes. */
const BYTES_PER_ROW_ESTIMATE = 25;

/** The knobs of a run, with their defaults applied. */
export interface IngestTuning {
  readonly reserveMs: number;
  readonly leaseMs: number;
  readonly progressEvery: number;
}

export interface IngestStepRunInput {
  readonly deps: IngestJobDeps;
  readonly tuning: IngestTuning;
  readonly job: Job;
  readonly state: IngestState;
  readonly leaseId: string;
  readonly ctx: IngestRunContext;
}

type IngestFinish = { status: 'scheduled' } | { status: 'failed'; reason: string };

/**
 * One run of one step, under the step's lease: reads the file on from the cursor, writing pages of
 * tasks and report entries, then finishes the ingest or pauses it for a continuation.
 */
export class IngestStepRun {
  readonly #deps: IngestJobDeps;
  readonly #tuning: IngestTuning;
  readonly #job: Job;
  readonly #state: IngestState;
  readonly #leaseId: string;
  readonly #ctx: IngestRunContext;
  /** Data rows read before this run (a continuation goes on from the cursor's counts). */
  readonly #startRows: number;
  /** Pages stored by this run. */
  #pages = 0;
  /** Recipients held in the job's chunks, read at this run's first suspected duplicate, then kept up to date. */
  #chunkRows: Map<string, number> | undefined;

  constructor(input: IngestStepRunInput) {
    this.#deps = input.deps;
    this.#tuning = input.tuning;
    this.#job = input.job;
    this.#state = input.state;
    this.#leaseId = input.leaseId;
    this.#ctx = input.ctx;
    this.#startRows = input.state.cursor?.counts.dataRows ?? 0;
  }

  async run(): Promise<IngestOutcome> {
    const { clientId } = this.#job;
    const client: ClientSettings | undefined = await this.#deps.clients.get(clientId);
    if (!client)
      return this.#finish(
        { status: 'failed', reason: `the client ${clientId} has no settings` },
        this.#job.counts,
      );
    if (!this.#job.source)
      return this.#finish({ status: 'failed', reason: 'the job has no uploaded file' }, this.#job.counts);
    // S3's own count of the object's bytes, from its event: refused before a byte is read (on the
    // first step only: a later one has written tasks, and a limit lowered meanwhile must not strand them).
    const firstStep = this.#state.cursor === undefined;
    const tooLarge = firstStep && uploadTooLargeReason(this.#state.size ?? 0, this.#deps.maxUploadBytes);
    if (tooLarge) return this.#finish({ status: 'failed', reason: tooLarge }, this.#job.counts);

    const duplicates = await this.#duplicateFilter();
    const input = this.#rowsInput(client, this.#job.source.key, duplicates);
    let result: IngestResult;
    try {
      result = await ingestRows(input);
    } catch (error) {
      if (error instanceof SourceChangedError) {
        return this.#finish(
          {
            status: 'failed',
            reason: 'the file was replaced while it was being read: create a new job for the new file',
          },
          this.#job.counts,
        );
      }
      throw error;
    }

    const counts = jobCounts(result.counts);
    if (result.status === 'failed')
      return this.#finish({ status: 'failed', reason: result.failure.reason }, counts);
    if (result.status === 'completed') return this.#finish({ status: 'scheduled' }, counts);
    return this.#pause(result.cursor, duplicates, counts);
  }

  /** The job's duplicate filter: restored from the last step's snapshot, else new, sized to the file. */
  async #duplicateFilter(): Promise<DuplicateFilter> {
    const state = this.#state;
    const snapshot = state.filterKey ? await this.#deps.files.getBytes(state.filterKey) : undefined;
    if (state.filterKey && !snapshot)
      throw new Error(`the duplicate filter snapshot ${state.filterKey} is missing`);
    const confirm = (recipients: readonly string[]) => this.#storedRows(recipients);
    return snapshot
      ? bloomDuplicateFilter({ expectedRows: 1, confirm, from: snapshot })
      : bloomDuplicateFilter({
          expectedRows: Math.max(1000, Math.ceil((state.size ?? 0) / BYTES_PER_ROW_ESTIMATE)),
          confirm,
        });
  }

  /** What `ingestRows` reads (from the cursor's byte offset) and where it writes its pages. */
  #rowsInput(client: ClientSettings, sourceKey: string, duplicates: DuplicateFilter): IngestRowsInput {
    const job = this.#job;
    const { clientId, jobId } = job;
    const cursor = this.#state.cursor;
    const fromByte = cursor?.byteOffset ?? 0;
    const source = this.#deps.files.read(sourceKey, {
      fromByte,
      ...(this.#state.eTag ? { eTag: this.#state.eTag } : {}),
    });
    const now = this.#deps.clock.now();
    // A job that falls back keeps a row whose first channel cannot reach it: the claim moves it on
    // (or ends it, when the person is suppressed everywhere), so it is not skipped here.
    const screens = job.fallback === undefined;
    return {
      source,
      channel: job.channel,
      defaultRegion: client.defaultRegion,
      isOptedOut: async (recipients) =>
        this.#deps.optOuts && screens ? this.#deps.optOuts(clientId, recipients) : new Set<string>(),
      isSuppressed: async (recipients) =>
        this.#deps.suppressed && screens ? this.#deps.suppressed(clientId, recipients) : new Set<string>(),
      duplicates,
      onBatch: (drafts, page) => this.#store(drafts, page, client, now),
      onReport: async (entries) => this.#deps.validationReports.putPage(clientId, jobId, entries),
      ...(this.#deps.batchSize ? { batchSize: this.#deps.batchSize } : {}),
      ...(cursor ? { resumeFrom: cursor } : {}),
      ...(job.recipientColumn ? { recipientColumn: job.recipientColumn } : {}),
      unfilled: (header) => unfilledPlaceholders(contentPlaceholders(job), header),
      shouldPause: (counts) => this.#shouldPause(counts),
    };
  }

  /**
   * True when this job's recipients are held in chunks: as recorded when its validation began (a job
   * begun before that was recorded decides by what is deployed, as it did).
   */
  #chunked(): boolean {
    const recorded = this.#state.chunked;
    if (recorded === undefined) return holdsInChunks(this.#deps, this.#job, this.#state.size ?? 0);
    return recorded && storesChunks(this.#deps.tasks);
  }

  /** True when the job's message differs per recipient: its chunks carry the members' variables. */
  #personalised(): boolean {
    return !isSharedMessage(this.#job.message);
  }

  /** Of `recipients`, those the job holds already (as tasks, or in its chunks), with their rows. */
  async #storedRows(recipients: readonly string[]): Promise<ReadonlyMap<string, number>> {
    const stored = await this.#deps.tasks.storedRows(this.#job.jobId, recipients);
    // A message job's chunks are read whether this step chunks or not: an earlier step may have
    // (a flag or the size bound deployed between two steps), and its recipients are held all the same.
    const tasks = this.#deps.tasks;
    if (this.#job.channel !== 'line' || !tasks.chunkedRows) return stored;
    this.#chunkRows ??= await tasks.chunkedRows(this.#job.jobId);
    const out = new Map(stored);
    for (const recipient of recipients) {
      const row = this.#chunkRows.get(recipient);
      if (row !== undefined && !out.has(recipient)) out.set(recipient, row);
    }
    return out;
  }

  /**
   * A page of accepted drafts: LINE users in chunks, others as tasks. The chunks are cut from the
   * page's rows *read* (`page.read`, before opt-outs, suppressions and duplicates), each named by
   * its first row read, and hold the accepted members of their rows: a page read again after a
   * crash, when those lists may have changed, writes the same chunks or fewer, never one that
   * overlaps another (a personalised message's chunks are cut by their variables' bytes too). A cut
   * left with no member is deleted, in case the crashed run wrote it: its recipients, held there,
   * would be held again where they appear further down the list.
   */
  async #store(drafts: readonly TaskDraft[], page: PageRead, client: ClientSettings, now: number) {
    const persons = await this.#linkPeople(page);
    const chunked = this.#chunked();
    const chunkable = chunked ? drafts.filter((d) => isChunkable(d.recipient)) : [];
    const apart = chunkable.length === drafts.length ? [] : drafts.filter((d) => !chunkable.includes(d));
    if (apart.length > 0)
      await this.#deps.tasks.put(
        apart.map((draft) => this.#toTask(draft, client, now, persons.get(draft.recipient))),
      );
    if (!chunked) return;
    const read = page.read.filter((d) => isChunkable(d.recipient));
    const cuts = pageChunks(page.firstRow, read, this.#personalised());
    const accepted = acceptedByCut(cuts, chunkable);
    const chunks = [...accepted].map(([taskId, members]) => this.#toChunk(taskId, members, client, now));
    if (chunks.length > 0) await this.#deps.tasks.putChunks!(chunks);
    const empty = cuts.filter((cut) => !accepted.has(cut.taskId)).map((cut) => cut.taskId);
    if (empty.length > 0) await this.#deps.tasks.deleteChunks!(this.#job.jobId, empty);
    this.#heldOnPage(read, chunkable);
  }

  /**
   * The persons of a page's rows: each row read (opted out, suppressed or repeated too: its
   * identifiers still belong together) links its identifiers (`shared/people/model.ts`); returns
   * each linked recipient's person key. A group that would make a person too large stays unlinked.
   */
  async #linkPeople(page: PageRead): Promise<ReadonlyMap<string, string>> {
    const people = this.#deps.people;
    if (!people) return new Map();
    const groups = page.read.map((draft) => [draft.recipient, ...(draft.identifiers ?? [])]);
    const { persons, refused } = await people.link(this.#job.clientId, groups);
    // No identifiers in the log: they are the customers' numbers and addresses.
    if (refused.length > 0)
      this.#deps.log.warn('rows whose identifiers would make a person too large were not linked', {
        groups: refused.length,
      });
    return persons;
  }

  /**
   * Keeps the recipients read from the job's chunks (`#chunkRows`, when read) true of this page's
   * rows: those accepted are held at their rows, the others no longer are (a crashed run may have
   * held them there; their chunk was written again without them, or deleted).
   */
  #heldOnPage(read: readonly TaskDraft[], accepted: readonly TaskDraft[]): void {
    const rows = this.#chunkRows;
    if (!rows) return;
    for (const { recipient, row } of read) if (rows.get(recipient) === row) rows.delete(recipient);
    for (const { recipient, row } of accepted)
      if ((rows.get(recipient) ?? Number.POSITIVE_INFINITY) > row) rows.set(recipient, row);
  }

  #toChunk(taskId: string, members: readonly TaskDraft[], client: ClientSettings, now: number): Chunk {
    const { clientId, jobId } = this.#job;
    return {
      clientId,
      jobId,
      taskId,
      channel: 'message',
      state: 'pending',
      attempts: 0,
      readyAt: recipientTiming(this.#job, client, members[0]!).readyAt,
      updatedAt: now,
      ...packMembers(members, this.#personalised()),
    };
  }

  #toTask(draft: TaskDraft, client: ClientSettings, now: number, person: string | undefined): Task {
    const { clientId, jobId } = this.#job;
    return {
      clientId,
      jobId,
      taskId: recipientTaskId(jobId, draft.recipient),
      row: draft.row,
      channel: taskSideOf(this.#job.channel),
      recipient: draft.recipient,
      ...(person === undefined ? {} : { person }),
      ...fallbackReach(this.#job, draft),
      ...(draft.name === undefined ? {} : { name: draft.name }),
      variables: draft.variables,
      state: 'pending',
      attempts: 0,
      ...recipientTiming(this.#job, client, draft),
      updatedAt: now,
    };
  }

  /** Asked after each page: saves progress every few pages; pauses at the row limit or when time runs low. */
  #shouldPause(counts: IngestCounts): boolean {
    this.#pages++;
    if (this.#pages % this.#tuning.progressEvery === 0) {
      void this.#deps.jobs
        .saveIngestProgress(
          this.#job.clientId,
          this.#job.jobId,
          this.#leaseId,
          jobCounts(counts),
          this.#deps.clock.now(),
        )
        .catch(() => {});
    }
    const maxRowsPerRun = this.#deps.maxRowsPerRun;
    if (maxRowsPerRun !== undefined && counts.dataRows - this.#startRows >= maxRowsPerRun) return true;
    return this.#ctx.remainingMs() < this.#tuning.reserveMs;
  }

  /** Ends the ingest (the job's status and counts), unless the job changed meanwhile. */
  async #finish(outcome: IngestFinish, counts: JobCounts): Promise<IngestOutcome> {
    const { jobId } = this.#job;
    const done = await this.#deps.jobs.finishIngest(
      this.#job,
      this.#leaseId,
      outcome,
      counts,
      this.#deps.clock.now(),
    );
    if (!done) {
      await this.#sweepIfCancelled();
      return { kind: 'ignored', jobId, reason: 'the job changed while it was validated (cancelled?)' };
    }
    if (outcome.status === 'scheduled') return { kind: 'scheduled', jobId, counts };
    // Failed after some rows became tasks: the cancel sweep ends them (and archives the report).
    if (counts.tasks > 0) await this.#deps.queue.send(cancelSweepStart(this.#job.clientId, jobId));
    return { kind: 'failed', jobId, counts, reason: outcome.reason };
  }

  /** Stores the duplicate filter's snapshot, advances the step with the cursor, sends the continuation. */
  async #pause(cursor: IngestCursor, duplicates: DuplicateFilter, counts: JobCounts): Promise<IngestOutcome> {
    const { clientId, jobId } = this.#job;
    const next = this.#state.step + 1;
    const filterKey = `state/${clientId}/${jobId}/filter-${String(next).padStart(6, '0')}.bin`;
    await this.#deps.files.write(
      filterKey,
      (async function* () {
        yield duplicates.snapshot();
      })(),
      'application/octet-stream',
    );
    const advanced = await this.#deps.jobs.advanceIngest(
      clientId,
      jobId,
      this.#leaseId,
      { step: next, cursor, filterKey },
      counts,
      this.#deps.clock.now(),
    );
    if (!advanced) {
      await this.#sweepIfCancelled();
      return { kind: 'ignored', jobId, reason: 'lost the ingest lease (or the job was cancelled)' };
    }
    await this.#deps.queue.send({ kind: 'continue', clientId, jobId, step: next });
    return { kind: 'paused', jobId, counts };
  }

  /**
   * A job cancelled while this run wrote tasks: the sweep the cancel started may have passed the
   * shards they went into, so sweep again now that this run writes no more.
   */
  async #sweepIfCancelled(): Promise<void> {
    const { clientId, jobId } = this.#job;
    const job = await this.#deps.jobs.get(clientId, jobId);
    if (job?.status === 'cancelled') await this.#deps.queue.send(cancelSweepStart(clientId, jobId));
  }
}

function jobCounts(counts: IngestCounts): JobCounts {
  return {
    ...ZERO_COUNTS,
    rows: counts.dataRows,
    rejected: counts.rejected,
    skipped: counts.skipped,
    tasks: counts.accepted,
  };
}

/** The accepted drafts of a page by the cut (a chunk's name) their row was read into; cuts with none are left out. */
function acceptedByCut(
  cuts: readonly { readonly taskId: string; readonly members: readonly TaskDraft[] }[],
  accepted: readonly TaskDraft[],
): Map<string, TaskDraft[]> {
  const cutOfRow = new Map<number, string>();
  for (const { taskId, members } of cuts) for (const member of members) cutOfRow.set(member.row, taskId);
  const out = new Map<string, TaskDraft[]>();
  for (const draft of accepted) {
    const taskId = cutOfRow.get(draft.row);
    if (taskId === undefined)
      throw new Error(`ingest: row ${draft.row} was accepted but not read on its page`);
    const members = out.get(taskId);
    if (members) members.push(draft);
    else out.set(taskId, [draft]);
  }
  return out;
}

/** True when the task store writes chunks (and reads and deletes them). */
function storesChunks(tasks: IngestJobDeps['tasks']): boolean {
  return tasks.putChunks !== undefined && tasks.chunkedRows !== undefined && tasks.deleteChunks !== undefined;
}

/**
 * Whether a job's LINE recipients are to be held in chunks of 500, shared or personalised
 * (docs/multicast-chunks.md): a LINE job, a list (by S3's size) within the bound and a store that
 * writes chunks; otherwise a task a recipient (a job that falls back: each task carries its person's
 * identifiers and moves on its own). Decided when validation begins and recorded with the
 * ingest's state (`IngestState.chunked`).
 */
export function holdsInChunks(deps: IngestJobDeps, job: Job, size: number): boolean {
  return (
    job.channel === 'line' &&
    job.fallback === undefined &&
    size <= (deps.maxChunkedListBytes ?? MAX_CHUNKED_LIST_BYTES) &&
    storesChunks(deps.tasks)
  );
}

/**
 * A fallback job's task: the row's identifier for each of the job's channels (the recipient for the
 * job's own, the first of the row's other identifiers of the kind each fallback channel takes).
 */
function fallbackReach(job: Job, draft: TaskDraft): Pick<Task, 'reach'> {
  if (job.fallback === undefined) return {};
  const reach: Partial<Record<string, string>> = { [job.channel]: draft.recipient };
  for (const channel of job.fallback) {
    const id = draft.identifiers?.find((i) => identifierKind(i) === CHANNEL_IDENTIFIER[channel]);
    if (id !== undefined) reach[channel] = id;
  }
  return { reach };
}
