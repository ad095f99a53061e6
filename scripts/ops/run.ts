/**
 * Runs one command of the operator CLI: reads the command line, finds the API, calls it and
 * prints the answer. Returns the exit status; every error becomes one line on stderr.
 */
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JobAction, JobView } from '#shared/jobs/api.ts';
import { OperatorApi } from './api.ts';
import {
  type CommandLine,
  type GlobalOptions,
  type Options,
  parseCommandLine,
  stringOption,
  wholeNumber,
} from './args.ts';
import { describeError, OpsError } from './errors.ts';
import {
  bytes,
  doneLine,
  FINAL_STATUSES,
  formatClient,
  formatIngestResult,
  formatJob,
  formatJobTable,
  formatOptOuts,
  formatSuppressions,
  formatSuppressionUpload,
  INGEST_STATUSES,
  progressLine,
  type RowProblem,
  uploadLine,
} from './format.ts';
import { clientSettingsBody, jobOptionsBody, settingsForPut } from './inputs.ts';
import { resolveTarget } from './target.ts';
import { type OutputStream, Terminal } from './terminal.ts';
import { listSize, uploadFile } from './upload.ts';
import { JobWatcher, type WatchResult } from './watch.ts';

export interface OpsIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}

interface Context {
  readonly api: OperatorApi;
  readonly term: Terminal;
  readonly positionals: readonly string[];
  readonly options: Options;
  readonly global: GlobalOptions;
  readonly cwd: string;
}

type Runner = (ctx: Context) => Promise<number>;

/** Rejected and skipped rows printed after an ingest, unless `--rows` says. */
const DEFAULT_ROWS = 20;

function required(options: Options, name: string): string {
  const value = stringOption(options, name);
  if (value === undefined) throw new OpsError(`--${name} is missing`);
  return value;
}

function printClient(ctx: Context, client: Parameters<typeof formatClient>[0]): number {
  if (ctx.global.json) ctx.term.printJson(client);
  else ctx.term.print(formatClient(client));
  return 0;
}

/** A watched job's exit status: 0 when it completed; else 1, said in one line on stderr. */
function finalStatus(ctx: Context, job: JobView): number {
  if (job.status === 'completed') return 0;
  ctx.term.error(`job ${job.jobId} ${job.status}${job.failureReason ? `: ${job.failureReason}` : ''}`);
  return 1;
}

/** A watcher of one job, its progress on the live line, its retries said on stderr. */
function watcherOf(ctx: Context, clientId: string, jobId: string): JobWatcher {
  const timeout = wholeNumber(ctx.options, 'timeout', { min: 1 });
  return new JobWatcher({
    fetchJob: () => ctx.api.getJob(clientId, jobId),
    onUpdate: (job) => ctx.term.live(progressLine(job)),
    onRetry: (error, delayMs) =>
      ctx.term.live(`${error.message}: retrying in ${Math.ceil(delayMs / 1000)} s`),
    sleep: (ms) => sleep(ms),
    now: () => Date.now(),
    ...(timeout === undefined ? {} : { deadline: Date.now() + timeout * 1000 }),
  });
}

/** Runs `watch`, turning Ctrl-C into a clean stop (the job goes on) and a time-out into exit 1. */
async function watching(
  ctx: Context,
  clientId: string,
  jobId: string,
  watch: () => Promise<WatchResult>,
): Promise<JobView | undefined> {
  const again = `npm run ops -- jobs show --client ${clientId} --watch ${jobId}`;
  const onInterrupt = () => {
    ctx.term.endLive();
    ctx.term.note(`stopped watching; job ${jobId} goes on (${again})`);
    process.exit(130);
  };
  process.once('SIGINT', onInterrupt);
  try {
    const result = await watch();
    ctx.term.endLive();
    if (result.kind === 'timed-out') {
      ctx.term.error(
        `job ${jobId} is still ${result.job?.status ?? 'not read'} after --timeout; it goes on (${again})`,
      );
      return undefined;
    }
    return result.job;
  } finally {
    process.off('SIGINT', onInterrupt);
  }
}

/** The first rejected and skipped rows (the job's validation entries, not its tasks). */
async function rowProblems(ctx: Context, job: JobView, max: number): Promise<readonly RowProblem[]> {
  if (max === 0 || job.counts.rejected + job.counts.skipped === 0) return [];
  return (await ctx.api.rowProblems(job.clientId, job.jobId, max)).entries;
}

const clientsPut: Runner = async (ctx) => {
  const [clientId] = ctx.positionals as [string];
  const base = ctx.options.merge ? settingsForPut(await ctx.api.getClient(clientId)) : {};
  const saved = await ctx.api.putClient(clientId, clientSettingsBody(ctx.options, base));
  if (!ctx.global.json) ctx.term.note(`client ${clientId} saved`);
  return printClient(ctx, saved);
};

const clientsPaused =
  (paused: boolean): Runner =>
  async (ctx) => {
    const [clientId] = ctx.positionals as [string];
    const client = await ctx.api.setClientPaused(clientId, paused);
    if (!ctx.global.json) ctx.term.note(`client ${clientId} ${paused ? 'paused' : 'resumed'}`);
    return printClient(ctx, client);
  };

const jobsCreate: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const csv = required(ctx.options, 'csv');
  const size = listSize(csv);
  const body = jobOptionsBody(ctx.options);
  const rows = wholeNumber(ctx.options, 'rows', { min: 0, max: 500 }) ?? DEFAULT_ROWS;
  wholeNumber(ctx.options, 'timeout', { min: 1 });

  const created = await ctx.api.createJob(clientId, body);
  const { jobId } = created;
  if (!created.upload) throw new OpsError(`job ${jobId} was created without an upload URL`);
  ctx.term.note(`job ${jobId} created for client ${clientId}`);
  const began = Date.now();
  const name = path.basename(csv);
  let drawn = 0;
  try {
    await uploadFile(created.upload.url, csv, size, (sent) => {
      const now = Date.now();
      if (sent < size && now - drawn < 100) return;
      drawn = now;
      ctx.term.live(uploadLine(name, sent, size, now - began), { transient: true });
    });
  } catch (error) {
    // A job whose list never arrives would wait in `uploading` for good: cancel it, and say so.
    const cancelled = await ctx.api.changeJob(clientId, jobId, 'cancel').then(
      () => `; job ${jobId} cancelled`,
      () =>
        `; job ${jobId} is left uploading (cancel it: npm run ops -- jobs cancel --client ${clientId} ${jobId})`,
    );
    throw new OpsError(`${(error as Error).message}${cancelled}`);
  }
  ctx.term.endLive();
  ctx.term.note(`uploaded ${name} (${bytes(size)}) in ${((Date.now() - began) / 1000).toFixed(1)} s`);

  if (ctx.options.watch !== true) {
    if (ctx.global.json) ctx.term.printJson({ jobId, clientId, status: created.status });
    else {
      ctx.term.print(jobId);
      ctx.term.note(`follow it: npm run ops -- jobs show --client ${clientId} --watch ${jobId}`);
    }
    return 0;
  }
  const watcher = watcherOf(ctx, clientId, jobId);
  const ingested = await watching(ctx, clientId, jobId, () =>
    watcher.until((job) => !INGEST_STATUSES.has(job.status)),
  );
  if (!ingested) return 1;
  const problems = await rowProblems(ctx, ingested, rows);
  if (!ctx.global.json) ctx.term.print(formatIngestResult(ingested, problems));
  const done = FINAL_STATUSES.has(ingested.status)
    ? ingested
    : await watching(ctx, clientId, jobId, () => watcher.until((job) => FINAL_STATUSES.has(job.status)));
  if (!done) return 1;
  if (ctx.global.json) ctx.term.printJson({ job: done, rowProblems: problems });
  else ctx.term.print(doneLine(done));
  return finalStatus(ctx, done);
};

const jobsList: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const limit = wholeNumber(ctx.options, 'limit', { min: 1 });
  const next = stringOption(ctx.options, 'next');
  const page = await ctx.api.listJobs(clientId, {
    ...(limit === undefined ? {} : { limit: String(limit) }),
    ...(next === undefined ? {} : { next }),
  });
  if (ctx.global.json) ctx.term.printJson(page);
  else ctx.term.print(formatJobTable(page.jobs, page.next));
  return 0;
};

const jobsShow: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const [jobId] = ctx.positionals as [string];
  wholeNumber(ctx.options, 'timeout', { min: 1 });
  if (ctx.options.watch !== true) {
    const job = await ctx.api.getJob(clientId, jobId);
    if (ctx.global.json) ctx.term.printJson(job);
    else ctx.term.print(formatJob(job));
    return 0;
  }
  const watcher = watcherOf(ctx, clientId, jobId);
  const done = await watching(ctx, clientId, jobId, () =>
    watcher.until((job) => FINAL_STATUSES.has(job.status)),
  );
  if (!done) return 1;
  if (ctx.global.json) ctx.term.printJson(done);
  else ctx.term.print(doneLine(done));
  return finalStatus(ctx, done);
};

const jobsChange =
  (action: JobAction): Runner =>
  async (ctx) => {
    const clientId = required(ctx.options, 'client');
    const [jobId] = ctx.positionals as [string];
    const job = await ctx.api.changeJob(clientId, jobId, action);
    if (ctx.global.json) ctx.term.printJson(job);
    else ctx.term.print(`job ${jobId}: ${progressLine(job)}`);
    return 0;
  };

const jobsReport: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const [jobId] = ctx.positionals as [string];
  const out = stringOption(ctx.options, 'out');
  const report = await ctx.api.report(clientId, jobId);
  let size = 0;
  const counted = Readable.fromWeb(report.body as WebReadableStream<Uint8Array>).on(
    'data',
    (chunk: Buffer) => {
      size += chunk.length;
    },
  );
  if (out === undefined) await pipeline(counted, process.stdout as NodeJS.WritableStream, { end: false });
  else {
    try {
      await pipeline(counted, createWriteStream(path.resolve(ctx.cwd, out)));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new OpsError(`writing ${out} failed${code ? `: ${code}` : `: ${(error as Error).message}`}`);
    }
  }
  const where = report.waiting
    ? `${report.jobStatus}; ${report.waiting}`
    : (report.jobStatus ?? 'status unknown');
  ctx.term.note(`report of job ${jobId} (${where}): ${bytes(size)}${out ? ` written to ${out}` : ''}`);
  return 0;
};

const optoutsLookup: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const answer = await ctx.api.optOuts(clientId, { recipient: ctx.positionals.join(',') });
  if (ctx.global.json) ctx.term.printJson(answer);
  else ctx.term.print(formatOptOuts(answer));
  return 0;
};

const optoutsList: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const limit = wholeNumber(ctx.options, 'limit', { min: 1 });
  const next = stringOption(ctx.options, 'next');
  const answer = await ctx.api.optOuts(clientId, {
    ...(limit === undefined ? {} : { limit: String(limit) }),
    ...(next === undefined ? {} : { next }),
  });
  if (ctx.global.json) ctx.term.printJson(answer);
  else ctx.term.print(formatOptOuts(answer));
  return 0;
};

const clientsList: Runner = async (ctx) => {
  const limit = wholeNumber(ctx.options, 'limit', { min: 1 });
  const next = stringOption(ctx.options, 'next');
  const answer = await ctx.api.listClients({
    ...(limit === undefined ? {} : { limit: String(limit) }),
    ...(next === undefined ? {} : { next }),
  });
  if (ctx.global.json) ctx.term.printJson(answer);
  else {
    for (const c of answer.clients)
      ctx.term.print(
        `${c.clientId}${c.paused ? '  (paused)' : ''}  ${c.maxConcurrentCalls} calls, ${c.callsPerSecond}/s, ${c.timeZone}`,
      );
    if (answer.next) ctx.term.print(`more: --next ${answer.next}`);
  }
  return 0;
};

const suppressionsAdd: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const reason = stringOption(ctx.options, 'reason');
  const answer = await ctx.api.addSuppressions(clientId, {
    recipients: [...ctx.positionals],
    ...(reason === undefined ? {} : { reason }),
  });
  if (ctx.global.json) ctx.term.printJson(answer);
  else ctx.term.print(formatSuppressions(answer));
  return 0;
};

const suppressionsRemove: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const answer = await ctx.api.removeSuppression(clientId, ctx.positionals[0]!);
  if (ctx.global.json) ctx.term.printJson(answer);
  else ctx.term.print(`${answer.recipient}: ${answer.reason ?? 'removed from the suppression list'}`);
  return 0;
};

const suppressionsList: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const limit = wholeNumber(ctx.options, 'limit', { min: 1 });
  const next = stringOption(ctx.options, 'next');
  const answer = await ctx.api.suppressions(
    clientId,
    ctx.positionals.length > 0
      ? { recipient: ctx.positionals.join(',') }
      : { ...(limit === undefined ? {} : { limit: String(limit) }), ...(next === undefined ? {} : { next }) },
  );
  if (ctx.global.json) ctx.term.printJson(answer);
  else ctx.term.print(formatSuppressions(answer));
  return 0;
};

const suppressionsUpload: Runner = async (ctx) => {
  const clientId = required(ctx.options, 'client');
  const file = required(ctx.options, 'csv');
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path.resolve(ctx.cwd, file));
  } catch (error) {
    throw new OpsError(
      `reading ${file} failed: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  const answer = await ctx.api.uploadSuppressions(clientId, bytes, stringOption(ctx.options, 'reason'));
  if (ctx.global.json) ctx.term.printJson(answer);
  else ctx.term.print(formatSuppressionUpload(answer));
  return 0;
};

const RUNNERS: Readonly<Record<string, Runner>> = {
  'clients put': clientsPut,
  'clients list': clientsList,
  'clients get': async (ctx) => printClient(ctx, await ctx.api.getClient(ctx.positionals[0]!)),
  'clients pause': clientsPaused(true),
  'clients resume': clientsPaused(false),
  'jobs create': jobsCreate,
  'jobs list': jobsList,
  'jobs show': jobsShow,
  'jobs pause': jobsChange('pause'),
  'jobs resume': jobsChange('resume'),
  'jobs cancel': jobsChange('cancel'),
  'jobs report': jobsReport,
  'optouts lookup': optoutsLookup,
  'optouts list': optoutsList,
  'suppressions add': suppressionsAdd,
  'suppressions remove': suppressionsRemove,
  'suppressions list': suppressionsList,
  'suppressions upload': suppressionsUpload,
};

/** Runs the command line `argv`; resolves to the exit status. */
export async function runOps(argv: readonly string[], io: OpsIo): Promise<number> {
  const term = new Terminal(io.stdout, io.stderr);
  try {
    const line: CommandLine = parseCommandLine(argv);
    if (line.kind === 'help') {
      term.print(line.text);
      return 0;
    }
    const runner = RUNNERS[line.command.name];
    if (!runner) throw new OpsError(`${line.command.name} is not implemented`);
    const target = resolveTarget(line.global, { env: io.env, cwd: io.cwd });
    return await runner({
      api: new OperatorApi(target),
      term,
      positionals: line.positionals,
      options: line.options,
      global: line.global,
      cwd: io.cwd,
    });
  } catch (error) {
    const { line, exitCode } = describeError(error);
    term.error(line);
    return exitCode;
  }
}
