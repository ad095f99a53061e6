/** In-memory ports of the jobs use cases, with the same conditional semantics as the adapters. */
import { Readable } from 'node:stream';
import type { ReportEntry } from '#shared/csv/report.ts';
import { ValidationError } from '#shared/jobs/errors.ts';
import type { JobStatus } from '#shared/jobs/job-lifecycle.ts';
import { type ClientSettings, type Job, type Task, taskShard } from '#shared/jobs/model.ts';
import type {
  ClientStore,
  IngestQueue,
  IngestQueueMessage,
  IngestState,
  JobStore,
  SweepEnding,
  SweptTask,
  TaskCanceller,
  TaskStore,
  UploadFiles,
  ValidationReportStore,
} from '#shared/jobs/ports.ts';

interface JobRow {
  job: Job;
  ingest: IngestState;
  lease?: { id: string; until: number };
}

export function memoryClients(): ClientStore & { all: Map<string, ClientSettings> } {
  const all = new Map<string, ClientSettings>();
  return {
    all,
    get: async (id) => all.get(id),
    put: async (s) => {
      const paused = s.paused ?? all.get(s.clientId)?.paused;
      const stored = paused === undefined ? s : { ...s, paused };
      all.set(s.clientId, stored);
      return stored;
    },
    setPaused: async (id, paused, now) => {
      const held = all.get(id);
      if (!held) return undefined;
      const next = { ...held, paused, updatedAt: now };
      all.set(id, next);
      return next;
    },
    list: async ({ limit, next }) => {
      const sorted = [...all.values()].sort((a, b) => a.clientId.localeCompare(b.clientId));
      const from = next === undefined ? 0 : sorted.findIndex((c) => c.clientId > next);
      const clients = from < 0 ? [] : sorted.slice(from, from + limit);
      const more = from >= 0 && from + limit < sorted.length;
      return { clients, ...(more ? { next: clients.at(-1)!.clientId } : {}) };
    },
  };
}

export function memoryJobs(): JobStore & { rows: Map<string, JobRow> } {
  const rows = new Map<string, JobRow>();
  const id = (c: string, j: string) => `${c}/${j}`;
  return {
    rows,
    async create(job) {
      const existing = rows.get(id(job.clientId, job.jobId));
      if (existing) return { job: existing.job, created: false };
      rows.set(id(job.clientId, job.jobId), { job, ingest: { step: 0 } });
      return { job, created: true };
    },
    get: async (c, j) => rows.get(id(c, j))?.job,
    async list(clientId, page) {
      const all = [...rows.values()]
        .map((r) => r.job)
        .filter((j) => j.clientId === clientId)
        .sort((a, b) => (a.jobId < b.jobId ? 1 : -1));
      let start = 0;
      if (page.next) {
        start = all.findIndex((j) => j.jobId === page.next) + 1;
        if (start === 0) throw new ValidationError('invalid query', { next: ['bad token'] });
      }
      const jobs = all.slice(start, start + page.limit);
      const more = start + page.limit < all.length;
      return { jobs, ...(more ? { next: jobs.at(-1)!.jobId } : {}) };
    },
    async transition(job, to, now) {
      const row = rows.get(id(job.clientId, job.jobId));
      if (!row) return { ok: false };
      if (row.job.status !== job.status) return { ok: false, current: row.job.status };
      row.job = { ...row.job, status: to, updatedAt: now };
      return { ok: true, job: row.job };
    },
    async beginValidation(c, j, source, now) {
      const row = rows.get(id(c, j));
      if (row?.job.status !== 'uploading') return false;
      row.job = { ...row.job, status: 'validating', updatedAt: now };
      row.ingest = {
        step: 0,
        eTag: source.eTag,
        size: source.size,
        ...(source.chunked === undefined ? {} : { chunked: source.chunked }),
      };
      return true;
    },
    async claimIngest(c, j, step, leaseId, until, now) {
      const row = rows.get(id(c, j));
      if (row?.job.status !== 'validating') {
        return { kind: 'not-validating', ...(row ? { status: row.job.status } : {}) };
      }
      if (row.ingest.step > step) {
        return { kind: 'stale', state: row.ingest, leased: (row.lease?.until ?? 0) >= now };
      }
      if (row.ingest.step < step || (row.lease && row.lease.until >= now)) return { kind: 'busy' };
      row.lease = { id: leaseId, until };
      return { kind: 'claimed', job: row.job, state: row.ingest };
    },
    async saveIngestProgress(c, j, leaseId, counts) {
      const row = rows.get(id(c, j));
      if (row?.lease?.id === leaseId) row.job = { ...row.job, counts };
    },
    async advanceIngest(c, j, leaseId, next, counts) {
      const row = rows.get(id(c, j));
      if (row?.job.status !== 'validating' || row.lease?.id !== leaseId) return false;
      row.ingest = { ...row.ingest, ...next };
      row.job = { ...row.job, counts };
      delete row.lease;
      return true;
    },
    async finishIngest(job, leaseId, outcome, counts, now) {
      const row = rows.get(id(job.clientId, job.jobId));
      if (row?.job.status !== 'validating' || row.lease?.id !== leaseId) return false;
      const status: JobStatus = outcome.status;
      row.job = {
        ...row.job,
        status,
        counts,
        updatedAt: now,
        ...(outcome.status === 'failed' ? { failureReason: outcome.reason } : {}),
      };
      delete row.lease;
      return true;
    },
    async releaseIngest(c, j, leaseId) {
      const row = rows.get(id(c, j));
      if (row?.lease?.id === leaseId) delete row.lease;
    },
    async recordReportArchive(c, j, key) {
      const row = rows.get(id(c, j));
      if (row) row.job = { ...row.job, reportArchive: key };
    },
  };
}

export function memoryTasks(): TaskStore & { all: Map<string, Task>; puts: number } {
  const all = new Map<string, Task>();
  const store = {
    all,
    puts: 0,
    async put(tasks: readonly Task[]) {
      store.puts += tasks.length;
      for (const t of tasks) all.set(`${t.jobId}/${t.taskId}`, t);
    },
    async storedRows(jobId: string, recipients: readonly string[]) {
      const rows = new Map<string, number>();
      for (const t of all.values())
        if (t.jobId === jobId && recipients.includes(t.recipient)) rows.set(t.recipient, t.row);
      return rows;
    },
    async *shard(jobId: string, shard: number) {
      for (const t of all.values()) if (t.jobId === jobId && taskShard(t.taskId) === shard) yield t;
    },
  };
  return store;
}

export function memoryFiles(): UploadFiles & { objects: Map<string, Uint8Array> } {
  const objects = new Map<string, Uint8Array>();
  return {
    objects,
    presignPut: async (key, exp) => `https://uploads.example/${key}?X-Amz-Expires=${exp}`,
    presignGet: async (key, exp) => `https://uploads.example/${key}?get&X-Amz-Expires=${exp}`,
    put: async (key, body) => void objects.set(key, body),
    async *read(key, options = {}) {
      const bytes = objects.get(key);
      if (!bytes) throw new Error(`no object ${key}`);
      // Small chunks, as a network stream delivers them.
      yield* Readable.from(Buffer.from(bytes.subarray(options.fromByte ?? 0)), {
        objectMode: false,
        highWaterMark: 1024,
      });
    },
    async readJson(key) {
      const bytes = objects.get(key);
      return bytes === undefined ? undefined : JSON.parse(Buffer.from(bytes).toString('utf8'));
    },
    getBytes: async (key) => objects.get(key),
    async write(key, chunks) {
      const parts: Buffer[] = [];
      for await (const c of chunks) parts.push(Buffer.from(c));
      objects.set(key, Buffer.concat(parts));
    },
  };
}

export function memoryReports(): ValidationReportStore & { pages: Map<string, ReportEntry[]> } {
  const pages = new Map<string, ReportEntry[]>();
  return {
    pages,
    putPage: async (c, j, entries) =>
      void pages.set(`${c}/${j}/${String(entries[0]!.row).padStart(10, '0')}`, [...entries]),
    async *entries(c, j) {
      const keys = [...pages.keys()].filter((k) => k.startsWith(`${c}/${j}/`)).sort();
      for (const k of keys) yield* pages.get(k)!;
    },
  };
}

export function memoryQueue(): IngestQueue & {
  sent: IngestQueueMessage[];
} {
  const sent: IngestQueueMessage[] = [];
  return { sent, send: async (m) => void sent.push(m) };
}

/**
 * The tasks table as the sweeps see it, over the in-memory tasks: pages of `pageItems` items
 * read in key order before the filter (as a DynamoDB Query with a FilterExpression: waiting
 * tasks and tasks in flight), and the job's count of the sweep's end moved with each ended group.
 * A task ends only if it is still as read: waiting, a message in flight with the same hold end, a
 * call in flight with the same start.
 */
export function memoryCanceller(
  tasks: ReturnType<typeof memoryTasks>,
  jobs: ReturnType<typeof memoryJobs>,
  pageItems = 3,
): TaskCanceller & { writes: number } {
  const waiting = (t: Pick<Task, 'state'>) => t.state === 'pending' || t.state === 'retry-wait';
  const read = (t: Task) => waiting(t) || t.state === 'in-flight';
  const canceller = {
    writes: 0,
    async sweepPage(jobId: string, shard: number, cursor: string | undefined) {
      const inShard = [...tasks.all.values()]
        .filter((t) => t.jobId === jobId && taskShard(t.taskId) === shard)
        .sort((a, b) => (a.taskId < b.taskId ? -1 : 1))
        .filter((t) => cursor === undefined || t.taskId > cursor);
      const items = inShard.slice(0, pageItems);
      const more = inShard.length > pageItems;
      return {
        tasks: items.filter(read).map((t) => ({
          taskId: t.taskId,
          state: t.state,
          channel: t.channel,
          readyAt: t.readyAt,
          ...(t.startedAt === undefined ? {} : { startedAt: t.startedAt }),
        })),
        ...(more ? { next: items.at(-1)!.taskId } : {}),
      };
    },
    async endTasks(
      clientId: string,
      jobId: string,
      group: readonly SweptTask[],
      ending: SweepEnding,
      now: number,
    ) {
      canceller.writes++;
      let ended = 0;
      for (const seen of group) {
        const t = tasks.all.get(`${jobId}/${seen.taskId}`);
        const asRead =
          seen.state !== 'in-flight'
            ? t !== undefined && waiting(t)
            : seen.channel === 'message'
              ? t?.state === 'in-flight' && t.readyAt === seen.readyAt
              : t?.state === 'in-flight' && t.startedAt === seen.startedAt;
        if (!t || !asRead) continue;
        tasks.all.set(`${jobId}/${seen.taskId}`, {
          ...t,
          state: ending.state,
          reason: ending.reason,
          updatedAt: now,
        });
        ended++;
      }
      const row = jobs.rows.get(`${clientId}/${jobId}`)!;
      const counts = row.job.counts;
      row.job = {
        ...row.job,
        counts: { ...counts, [ending.state]: (counts[ending.state] ?? 0) + ended },
      };
      return ended;
    },
  };
  return canceller;
}

export const TOKYO_CLIENT = {
  maxConcurrentCalls: 5,
  callsPerSecond: 2,
  timeZone: 'Asia/Tokyo',
  callingHours: { mon: [{ start: '09:00', end: '18:00' }], tue: [{ start: '09:00', end: '18:00' }] },
  defaultRegion: 'JP',
};

/** The field errors of the ValidationError `fn` throws (fails when it throws none). */
export function fieldErrorsOf(fn: () => unknown): Record<string, readonly string[]> {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return { ...error.fieldErrors };
    throw error;
  }
  throw new Error('expected a ValidationError');
}
