/** The final report of an ended job, archived before its tasks expire. */
import { describe, expect, it } from 'vitest';
import type { Job, Task } from '#shared/jobs/model.ts';
import type { QueueSendOptions } from '#shared/jobs/ports.ts';
import { parseIngestQueueMessage } from '#shared/jobs/queue-message.ts';
import {
  ARCHIVE_MAX_ATTEMPTS,
  ARCHIVE_RECHECK_SECONDS,
  archiveReportStart,
  DELIVERY_SETTLE_MS,
  ReportArchiver,
  reportArchiveKey,
} from '#shared/jobs/report-archive.ts';
import { MalformedS3EventError } from '#shared/jobs/s3-events.ts';
import { job as makeJob, task as makeTask } from '../fleet/fakes.ts';
import { memoryFiles, memoryJobs, memoryReports, memoryTasks } from './fakes.ts';

async function world(
  status: Job['status'],
  states: readonly Task['state'][],
  channel: Job['channel'] = 'call',
) {
  const jobs = memoryJobs();
  const tasks = memoryTasks();
  const files = memoryFiles();
  const validationReports = memoryReports();
  const job = makeJob('acme', { status, channel });
  const clock = { at: 1_800_000_000_000, now: () => clock.at };
  await jobs.create(job);
  await tasks.put(states.map((state, i) => makeTask(job, { taskId: `T${i}`, row: i + 2, state })));
  await validationReports.putPage('acme', job.jobId, [
    { row: 1, outcome: 'rejected', code: 'ragged-row', reason: 'more cells than the header' },
  ]);
  const sent: { message: unknown; options?: QueueSendOptions }[] = [];
  const archiver = new ReportArchiver({
    jobs,
    tasks,
    files,
    validationReports,
    queue: { send: async (message, options) => void sent.push({ message, ...(options ? { options } : {}) }) },
    clock,
  });
  const archived = () => jobs.get('acme', job.jobId).then((j) => j?.reportArchive);
  const csv = () =>
    Buffer.from(files.objects.get(reportArchiveKey('acme', job.jobId)) ?? []).toString('utf8');
  return { job, archiver, sent, archived, csv, jobs, clock };
}

describe('the report archive', () => {
  it('writes every row of an ended job, then records its key', async () => {
    const w = await world('completed', ['completed', 'failed', 'cancelled']);
    const outcome = await w.archiver.handle(archiveReportStart('acme', w.job.jobId));
    expect(outcome).toEqual({
      kind: 'archived',
      jobId: w.job.jobId,
      key: `archives/acme/${w.job.jobId}/report.csv`,
      open: 0,
    });
    expect(await w.archived()).toBe(reportArchiveKey('acme', w.job.jobId));
    const lines = w.csv().split('\r\n').filter(Boolean);
    expect(lines).toHaveLength(1 + 1 + 3); // header, the rejected row, three tasks
    expect(w.sent).toEqual([]);
    // A later message archives again (a sweep after an ingest that wrote tasks late); same rows here.
    const before = w.csv();
    expect((await w.archiver.handle(archiveReportStart('acme', w.job.jobId))).kind).toBe('archived');
    expect(w.csv()).toBe(before);
  });

  it('archives nothing of a job that has not ended', async () => {
    for (const status of ['running', 'paused', 'scheduled', 'validating'] as const) {
      const w = await world(status, ['pending']);
      expect(await w.archiver.handle(archiveReportStart('acme', w.job.jobId))).toMatchObject({
        kind: 'ignored',
        reason: `the job is ${status}`,
      });
      expect(await w.archived()).toBeUndefined();
    }
  });

  it('tries again later while a task is open, and archives what it sees after a day of tries', async () => {
    const w = await world('cancelled', ['cancelled', 'in-flight']);
    const first = archiveReportStart('acme', w.job.jobId);
    expect(await w.archiver.handle(first)).toMatchObject({ kind: 'recheck', open: 1, attempt: 1 });
    expect(await w.archived()).toBeUndefined();
    expect(w.sent).toEqual([
      { message: { ...first, attempt: 2 }, options: { delaySeconds: ARCHIVE_RECHECK_SECONDS } },
    ]);
    const last = { ...first, attempt: ARCHIVE_MAX_ATTEMPTS };
    expect(await w.archiver.handle(last)).toMatchObject({ kind: 'archived', open: 1 });
    expect(w.csv()).toContain('in-flight');
  });

  it("waits for an email or SMS job's delivery events to settle, writing nothing until then", async () => {
    for (const channel of ['email', 'sms'] as const) {
      const w = await world('completed', ['completed', 'completed'], channel);
      const first = archiveReportStart('acme', w.job.jobId);
      const settleAt = w.clock.at + DELIVERY_SETTLE_MS;
      expect(await w.archiver.handle(first)).toEqual({ kind: 'settling', jobId: w.job.jobId, settleAt });
      expect(w.sent).toEqual([
        { message: { ...first, settleAt }, options: { delaySeconds: ARCHIVE_RECHECK_SECONDS } },
      ]);
      expect(w.csv()).toBe('');
      expect(await w.archived()).toBeUndefined();
      // The last wait is what is left of the window; the attempt is not spent on waiting.
      w.clock.at = settleAt - 100_500;
      expect((await w.archiver.handle({ ...first, settleAt })).kind).toBe('settling');
      expect(w.sent[1]).toEqual({ message: { ...first, settleAt }, options: { delaySeconds: 101 } });
      w.clock.at = settleAt;
      expect(await w.archiver.handle({ ...first, settleAt })).toMatchObject({ kind: 'archived', open: 0 });
      expect(w.csv().split('\r\n')[0]).toMatch(new RegExp(`,${channel}$`));
      expect(await w.archived()).toBe(reportArchiveKey('acme', w.job.jobId));
    }
    // A call or LINE job's report has nothing more to wait for.
    const line = await world('completed', ['completed'], 'line');
    expect((await line.archiver.handle(archiveReportStart('acme', line.job.jobId))).kind).toBe('archived');
  });

  it('reads its message from the ingest queue, and refuses a malformed one', () => {
    const message = archiveReportStart('acme', 'J1');
    expect(parseIngestQueueMessage(JSON.stringify(message))).toEqual([message]);
    const settling = { ...message, settleAt: 1_800_000_000_000 };
    expect(parseIngestQueueMessage(JSON.stringify(settling))).toEqual([settling]);
    for (const bad of [
      { kind: 'archive-report', clientId: 'acme', jobId: 'J1' },
      { kind: 'archive-report', clientId: 'acme', jobId: 'J1', attempt: 0 },
      { kind: 'archive-report', jobId: 'J1', attempt: 1 },
      { kind: 'archive-report', clientId: 'acme', jobId: 'J1', attempt: 1, settleAt: 'tomorrow' },
    ])
      expect(() => parseIngestQueueMessage(JSON.stringify(bad))).toThrow(MalformedS3EventError);
  });
});
