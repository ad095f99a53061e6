import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CSV_LIMITS } from '#shared/csv/records.ts';
import { JobsApi } from '#shared/jobs/api.ts';
import { cancelSweepStart, JobSweep } from '#shared/jobs/cancel.ts';
import { type IngestMessage, JobIngest } from '#shared/jobs/ingest.ts';
import type { IngestQueueMessage, JobSweepMessage } from '#shared/jobs/ports.ts';
import { archiveReportStart } from '#shared/jobs/report-archive.ts';
import type { UploadedObject } from '#shared/jobs/s3-events.ts';
import { JOB_FAILED_REASON } from '#shared/jobs/task-lifecycle.ts';
import { MAX_UPLOAD_BYTES } from '#shared/jobs/upload-limit.ts';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import { silentLogger } from '#shared/log.ts';
import {
  memoryCanceller,
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

const NOW = Date.parse('2026-11-20T00:00:00Z');
const BUCKET = 'uploads-bucket';
const mixedList = readFileSync(new URL('../../fixtures/jobs/mixed-list.csv', import.meta.url));

function world(options: { maxRowsPerRun?: number; batchSize?: number; optedOut?: string[] } = {}) {
  const clients = memoryClients();
  const jobs = memoryJobs();
  const tasks = memoryTasks();
  const files = memoryFiles();
  const validationReports = memoryReports();
  const queue = memoryQueue();
  const clock = { now: () => NOW };
  const optedOut = new Set(options.optedOut ?? []);
  void clients.put(parseClientSettings('acme', TOKYO_CLIENT, NOW));
  const api = new JobsApi({
    region: 'ap-northeast-1',
    clients,
    jobs,
    tasks,
    files,
    validationReports,
    queue,
    bucket: BUCKET,
    clock,
  });
  const ingest = new JobIngest({
    clients,
    jobs,
    tasks,
    files,
    validationReports,
    queue,
    clock,
    log: silentLogger,
    optOuts: async (_client, recipients) => new Set(recipients.filter((r) => optedOut.has(r))),
    ...(options.maxRowsPerRun ? { maxRowsPerRun: options.maxRowsPerRun } : {}),
    ...(options.batchSize ? { batchSize: options.batchSize } : {}),
  });
  const ctx = { remainingMs: () => 600_000, receiveCount: 1 };
  /** What the ingest queued besides its continuations (sweeps), in order. */
  const others: IngestQueueMessage[] = [];
  /** Delivers a message, then every continuation it leads to, as the queue would. */
  const drain = async (first: IngestMessage) => {
    const outcomes = [await ingest.handle(first, ctx)];
    while (queue.sent.length > 0) {
      const next = queue.sent.shift()!;
      if (next.kind === 'continue') outcomes.push(await ingest.handle(next, ctx));
      else others.push(next);
    }
    return outcomes;
  };
  /** S3's event for `key`; `size` is what S3 reports (the stored bytes unless a test says). */
  const objectEvent = (key: string, eTag = 'etag-1', size?: number): IngestMessage => ({
    kind: 'object',
    object: {
      bucket: BUCKET,
      key,
      eTag,
      size: size ?? files.objects.get(key)?.byteLength ?? 0,
      eventTime: NOW,
    } satisfies UploadedObject,
  });
  return {
    clients,
    jobs,
    tasks,
    files,
    validationReports,
    queue,
    api,
    ingest,
    ctx,
    drain,
    objectEvent,
    others,
  };
}

async function uploadedJob(w: ReturnType<typeof world>, bytes: Uint8Array = mixedList) {
  const { jobId } = await w.api.createJob('acme', { name: 'March' });
  const key = `uploads/acme/${jobId}.csv`;
  await w.files.put(key, bytes, 'text/csv');
  return { jobId, key };
}

describe('ingest of an uploaded list', () => {
  it('schedules the job with the exact counts and one task per usable row', async () => {
    const w = world({ optedOut: ['+819011110004'] });
    const { jobId, key } = await uploadedJob(w);
    const [outcome] = await w.drain(w.objectEvent(key));
    expect(outcome).toMatchObject({ kind: 'scheduled', jobId });
    const job = await w.api.getJob('acme', jobId);
    expect(job.status).toBe('scheduled');
    expect(job.counts).toEqual({
      rows: 9,
      rejected: 3,
      skipped: 2,
      tasks: 4,
      completed: 0,
      failed: 0,
      cancelled: 0,
      expired: 0,
      outstanding: 4,
    });
    const tasks = [...w.tasks.all.values()].sort((a, b) => a.row - b.row);
    expect(tasks.map((t) => [t.row, t.recipient, t.name, t.variables, t.state, t.readyAt])).toEqual([
      [2, '+819011110001', 'Aiko', { plan: 'gold' }, 'pending', NOW],
      [3, '+819011110002', 'Sato, Ken', { plan: 'silver' }, 'pending', NOW],
      [7, '+819011110003', '=HYPERLINK("http://evil")', { plan: 'gold' }, 'pending', NOW],
      [11, '+819011110006', 'Intl', { plan: 'bronze' }, 'pending', NOW],
    ]);
  });

  it('writes a report of every row, rejected and skipped rows with their reasons, safe to open in Excel', async () => {
    const w = world({ optedOut: ['+819011110004'] });
    const { jobId, key } = await uploadedJob(w);
    await w.drain(w.objectEvent(key));
    const report = await w.api.report('acme', jobId);
    if (report.kind !== 'inline') throw new Error('expected an inline report');
    const text = report.csv.toString('utf8');
    expect(text.startsWith('\ufeffrow,recipient,outcome,attempts,last_result,reason,column,value\r\n')).toBe(
      true,
    );
    const lines = text.slice(1).trimEnd().split('\r\n').slice(1);
    expect(lines.slice(0, 5)).toEqual([
      '4,,rejected,0,,invalid phone number,phone,abc',
      '5,,skipped,0,,duplicate of row 2,phone,090-1111-0001',
      '6,,rejected,0,,phone is empty,phone,',
      '8,,skipped,0,,opted out,phone,090-1111-0004',
      '9,,rejected,0,,"expected 3 columns, got 2",,',
    ]);
    expect(lines.slice(5).sort()).toEqual(
      [
        "11,'+819011110006,pending,0,,,,",
        "2,'+819011110001,pending,0,,,,",
        "3,'+819011110002,pending,0,,,,",
        "7,'+819011110003,pending,0,,,,",
      ].sort(),
    );
  });

  it('continues from its cursor across runs and ends with the same tasks as one pass', async () => {
    const onePass = world({ batchSize: 2 });
    const a = await uploadedJob(onePass);
    await onePass.drain(onePass.objectEvent(a.key));

    const paused = world({ batchSize: 2, maxRowsPerRun: 2 });
    const b = await uploadedJob(paused);
    const outcomes = await paused.drain(paused.objectEvent(b.key));
    expect(outcomes.map((o) => o.kind)).toEqual(['paused', 'paused', 'paused', 'paused', 'scheduled']);
    const rows = (w: ReturnType<typeof world>) =>
      [...w.tasks.all.values()].map((t) => [t.row, t.recipient]).sort();
    expect(rows(paused)).toEqual(rows(onePass));
    expect((await paused.api.getJob('acme', b.jobId)).counts).toEqual(
      (await onePass.api.getJob('acme', a.jobId)).counts,
    );
    // The duplicate in row 5 is found across runs: the filter snapshot travelled with the cursor.
    expect([...paused.validationReports.pages.values()].flat().map((e) => [e.row, e.code])).toContainEqual([
      5,
      'duplicate',
    ]);
  });

  it('repeats a step after a crash without writing a task twice', async () => {
    const w = world({ batchSize: 2, maxRowsPerRun: 4 });
    const { jobId, key } = await uploadedJob(w);
    // A run that dies while writing: its step is retried from the same cursor.
    let crash = true;
    const put = w.tasks.put.bind(w.tasks);
    w.tasks.put = async (tasks) => {
      await put(tasks);
      if (crash && tasks.some((t) => t.row === 3)) {
        crash = false;
        throw new Error('Lambda crashed');
      }
    };
    await expect(w.ingest.handle(w.objectEvent(key), w.ctx)).rejects.toThrow('Lambda crashed');
    await w.drain(w.objectEvent(key));
    expect((await w.api.getJob('acme', jobId)).status).toBe('scheduled');
    expect(w.tasks.all.size).toBe(5);
  });

  it('a retry after a crash whose Bloom filter says "maybe" to the crashed run\'s rows keeps their tasks and counts them', async () => {
    const w = world({ batchSize: 2, maxRowsPerRun: 2 });
    // Rows 2-8: A B | C D | C A | E. Row 6 repeats row 4, row 7 repeats row 2.
    const numbers = ['0001', '0002', '0003', '0004', '0003', '0001', '0005'];
    const list = Buffer.from(
      `phone,name\r\n${numbers.map((n, i) => `090-4040-${n},N${i + 2}`).join('\r\n')}\r\n`,
    );
    const { jobId, key } = await uploadedJob(w, list);
    expect((await w.ingest.handle(w.objectEvent(key), w.ctx)).kind).toBe('paused');
    const continuation = w.queue.sent.shift() as IngestMessage;

    // Step 1 writes the tasks of rows 4-5, then the Lambda dies before it saves its cursor.
    const put = w.tasks.put.bind(w.tasks);
    let crash = true;
    w.tasks.put = async (tasks) => {
      await put(tasks);
      if (crash) {
        crash = false;
        throw new Error('Lambda timed out');
      }
    };
    await expect(w.ingest.handle(continuation, w.ctx)).rejects.toThrow('Lambda timed out');
    expect([...w.tasks.all.values()].map((t) => t.row).sort()).toEqual([2, 3, 4, 5]);

    // The step's snapshot (taken after rows 2-3) now says "maybe" to every recipient: each of
    // rows 4-5 is a false positive whose confirm finds the row's own task.
    const filterKey = [...w.files.objects.keys()].find((k) => k.includes('/filter-'))!;
    const saturated = Uint8Array.from(w.files.objects.get(filterKey)!);
    saturated.fill(0xff, 16); // past the 16-byte header (magic, bit count, hash count, item count)
    w.files.objects.set(filterKey, saturated);

    const outcomes = await w.drain(continuation);
    expect(outcomes.at(-1)).toMatchObject({ kind: 'scheduled', jobId });
    const job = await w.api.getJob('acme', jobId);
    expect(job.counts).toMatchObject({ rows: 7, rejected: 0, skipped: 2, tasks: 5, outstanding: 5 });
    expect([...w.tasks.all.values()].map((t) => t.row).sort()).toEqual([2, 3, 4, 5, 8]);
    expect([...w.validationReports.pages.values()].flat().map((e) => [e.row, e.reason])).toEqual([
      [6, 'duplicate of row 4'],
      [7, 'duplicate of row 2'],
    ]);
  });

  it('reads Excel "Unicode text" (UTF-16, tab-separated) and a semicolon list continued across runs', async () => {
    const w = world({ batchSize: 1, maxRowsPerRun: 1 });
    const tsv = readFileSync(new URL('../../fixtures/csv/utf16le-bom-tab.csv', import.meta.url));
    const a = await uploadedJob(w, tsv);
    const semicolons = readFileSync(new URL('../../fixtures/csv/semicolon-excel-eu.csv', import.meta.url));
    const b = await uploadedJob(w, semicolons);
    for (const { key } of [a, b]) {
      const outcomes = await w.drain(w.objectEvent(key));
      expect(outcomes.map((o) => o.kind)).toEqual(['paused', 'paused', 'paused', 'scheduled']);
    }
    expect((await w.api.getJob('acme', a.jobId)).counts).toMatchObject({
      rows: 4,
      rejected: 1,
      skipped: 1,
      tasks: 2,
    });
    expect((await w.api.getJob('acme', b.jobId)).counts).toMatchObject({
      rows: 4,
      rejected: 1,
      skipped: 1,
      tasks: 2,
    });
    const tasksOf = (jobId: string) =>
      [...w.tasks.all.values()]
        .filter((t) => t.jobId === jobId)
        .sort((x, y) => x.row - y.row)
        .map((t) => [t.row, t.recipient, t.name, t.variables]);
    expect(tasksOf(a.jobId)).toEqual([
      [2, '+819012120001', '山田 太郎', { 住所: '東京都千代田区1-1, 2F', メモ: '初回' }],
      [3, '+819012120002', '鈴木\t花子', { 住所: '大阪府, 北区', メモ: '改行\r\nあり' }],
    ]);
    expect(tasksOf(b.jobId)).toEqual([
      [2, '+819014140001', undefined, { 'Name, Vorname': 'Müller, Anna', 'Betrag, EUR, brutto': '12,50' }],
      [3, '+819014140002', undefined, { 'Name, Vorname': 'Schmidt; Hans', 'Betrag, EUR, brutto': '7,00' }],
    ]);
  });

  it('fails a tab-separated list without a phone column with a reason that says how it was read', async () => {
    const w = world();
    const { jobId, key } = await uploadedJob(w, Buffer.from('email\tname\r\na@example.com\tA\r\n'));
    await w.drain(w.objectEvent(key));
    const job = await w.api.getJob('acme', jobId);
    expect(job.status).toBe('failed');
    expect(job.failureReason).toBe(
      'no phone number column (name it 電話番号, 携帯電話番号, TEL or phone): the header row has email, name (read as tab-separated)',
    );
  });

  it('makes one job of a duplicated notification, and ignores one that arrives while a step runs', async () => {
    const w = world();
    const { jobId, key } = await uploadedJob(w);
    const [first, second] = await Promise.all([
      w.ingest.handle(w.objectEvent(key), w.ctx),
      w.ingest.handle(w.objectEvent(key), w.ctx),
    ]);
    expect([first!.kind, second!.kind].sort()).toEqual(['ignored', 'scheduled']);
    expect(await w.drain(w.objectEvent(key))).toEqual([
      { kind: 'ignored', jobId, reason: 'the job is scheduled, not validating' },
    ]);
    expect(w.jobs.rows.size).toBe(1);
  });

  it('fails the job with one clear reason when the file is not a CSV or has no phone column', async () => {
    const w = world();
    const png = readFileSync(new URL('../../fixtures/csv/binary-png.csv', import.meta.url));
    const a = await uploadedJob(w, png);
    expect((await w.drain(w.objectEvent(a.key)))[0]).toMatchObject({ kind: 'failed' });
    expect((await w.api.getJob('acme', a.jobId)).failureReason).toBe('not a CSV file: it is a PNG image');

    const b = await uploadedJob(w, Buffer.from('email,name\r\na@example.com,A\r\n'));
    await w.drain(w.objectEvent(b.key));
    const job = await w.api.getJob('acme', b.jobId);
    expect(job.status).toBe('failed');
    expect(job.failureReason).toMatch(/phone/);
  });

  it('ends the tasks it wrote before a failure mid-file, through the cancel sweep, which archives the report', async () => {
    const w = world({ batchSize: 2, maxRowsPerRun: 2 });
    // A quote never closed, with more of the file after it than a record may take.
    const runaway = `"${'x'.repeat(2 * DEFAULT_CSV_LIMITS.maxRecordBytes)}\n090-1111-5555,D\n`;
    const list = Buffer.from(`phone,name\n090-1111-2222,A\n090-1111-3333,B\n090-1111-4444,C\n${runaway}`);
    const { jobId, key } = await uploadedJob(w, list);
    const outcomes = await w.drain(w.objectEvent(key));
    expect(outcomes.at(-1)).toMatchObject({ kind: 'failed', jobId });
    const written = [...w.tasks.all.values()];
    expect(written.length).toBeGreaterThan(0);
    expect(w.others).toEqual([cancelSweepStart('acme', jobId)]);

    const sweep = new JobSweep({
      jobs: w.jobs,
      tasks: memoryCanceller(w.tasks, w.jobs),
      queue: w.queue,
      clock: { now: () => NOW },
    });
    expect(await sweep.handle(w.others[0] as JobSweepMessage, w.ctx)).toMatchObject({
      kind: 'swept',
      ended: written.length,
    });
    for (const task of w.tasks.all.values())
      expect(task).toMatchObject({ state: 'cancelled', reason: JOB_FAILED_REASON });
    expect(w.queue.sent).toEqual([archiveReportStart('acme', jobId)]);
    const job = await w.api.getJob('acme', jobId);
    expect(job).toMatchObject({ status: 'failed', counts: { cancelled: written.length } });
  });

  it('fails the job of a file larger than the limit before reading it, with a reason naming the limit', async () => {
    const w = world();
    const { jobId, key } = await uploadedJob(w);
    // S3 says how large the object is: a list of a gigabyte and one byte more.
    const [outcome] = await w.drain(w.objectEvent(key, 'etag-1', MAX_UPLOAD_BYTES + 1));
    expect(outcome).toMatchObject({ kind: 'failed', jobId });
    const job = await w.api.getJob('acme', jobId);
    expect(job.status).toBe('failed');
    expect(job.failureReason).toBe(
      'the file is 1.0 GiB (1073741825 bytes): a list may be at most 1 GiB (1073741824 bytes); split it into smaller lists',
    );
    expect(job.counts.rows).toBe(0);
    expect(w.tasks.all.size).toBe(0);

    // A file of exactly the limit is read.
    const at = await uploadedJob(w);
    expect((await w.drain(w.objectEvent(at.key, 'etag-1', MAX_UPLOAD_BYTES)))[0]).toMatchObject({
      kind: 'scheduled',
    });
  });

  it('stops at the next step when the job is cancelled while it is validated', async () => {
    const w = world({ batchSize: 2, maxRowsPerRun: 2 });
    const { jobId, key } = await uploadedJob(w);
    expect((await w.ingest.handle(w.objectEvent(key), w.ctx)).kind).toBe('paused');
    await w.api.changeStatus('acme', jobId, 'cancel');
    const next = w.queue.sent.shift()!;
    expect(next.kind).toBe('continue');
    expect(await w.ingest.handle(next as IngestMessage, w.ctx)).toMatchObject({
      kind: 'ignored',
      reason: 'the job is cancelled, not validating',
    });
    // The cancel queued the sweep; the step that found the job cancelled queued it again, as
    // tasks a crashed run wrote may have gone into shards the first sweep had passed.
    const sweep = { kind: 'cancel-sweep', clientId: 'acme', jobId, shard: 0 };
    expect(w.queue.sent).toEqual([sweep, sweep]);
  });
});

describe('a list dropped in incoming/', () => {
  it('creates its job from the sidecar options, once for a redelivered event', async () => {
    const w = world();
    await w.files.put(
      'incoming/acme/march list.json',
      Buffer.from(JSON.stringify({ name: 'March drop', maxAttempts: 2 })),
      'application/json',
    );
    await w.files.put('incoming/acme/march list.csv', mixedList, 'text/csv');
    const event = w.objectEvent('incoming/acme/march list.csv', 'etag-drop');
    const [outcome] = await w.drain(event);
    expect(outcome).toMatchObject({ kind: 'scheduled' });
    await w.drain(event);
    expect(w.jobs.rows.size).toBe(1);
    const [job] = [...w.jobs.rows.values()].map((r) => r.job);
    expect(job).toMatchObject({ name: 'March drop', maxAttempts: 2, channel: 'call', status: 'scheduled' });
    expect(job!.counts.tasks).toBe(5);
  });

  it('uses the client defaults without a sidecar, and fails the job on an invalid sidecar', async () => {
    const w = world();
    await w.files.put('incoming/acme/plain.csv', mixedList, 'text/csv');
    await w.drain(w.objectEvent('incoming/acme/plain.csv'));
    await w.files.put('incoming/acme/bad.json', Buffer.from('{"maxAttempts": 99}'), 'application/json');
    await w.files.put('incoming/acme/bad.csv', mixedList, 'text/csv');
    await w.drain(w.objectEvent('incoming/acme/bad.csv'));
    const jobs = [...w.jobs.rows.values()].map((r) => r.job).sort((a, b) => a.name.localeCompare(b.name));
    expect(jobs.map((j) => [j.name, j.status, j.scenarioId])).toEqual([
      ['bad', 'failed', 'default'],
      ['plain', 'scheduled', 'default'],
    ]);
    expect(jobs[0]!.failureReason).toMatch(/sidecar incoming\/acme\/bad\.json is invalid: maxAttempts/);
  });

  it('fails the job of a dropped file larger than the limit, as it fails an uploaded one', async () => {
    const w = world();
    await w.files.put('incoming/acme/huge.csv', mixedList, 'text/csv');
    const [outcome] = await w.drain(
      w.objectEvent('incoming/acme/huge.csv', 'etag-huge', MAX_UPLOAD_BYTES * 2),
    );
    expect(outcome).toMatchObject({ kind: 'failed' });
    const [job] = [...w.jobs.rows.values()].map((r) => r.job);
    expect(job).toMatchObject({ name: 'huge', status: 'failed' });
    expect(job!.failureReason).toMatch(
      /^the file is 2 GiB \(2147483648 bytes\): a list may be at most 1 GiB/,
    );
    expect(w.tasks.all.size).toBe(0);
  });

  it('ignores a drop for a client without settings', async () => {
    const w = world();
    await w.files.put('incoming/nobody/list.csv', mixedList, 'text/csv');
    expect((await w.drain(w.objectEvent('incoming/nobody/list.csv')))[0]).toMatchObject({ kind: 'ignored' });
    expect(w.jobs.rows.size).toBe(0);
  });
});
