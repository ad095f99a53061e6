/**
 * One phase of bench/csv-ingest, run in a child process of its own so that its peak RSS is its
 * own. Prints one JSON line: `{ rows, ms, peakRssBytes, ... }`.
 *
 *   node bench/lib/csv-phase.ts <phase> <json-args>
 *
 * Phases:
 * - `stream-parse`: `ingestRows` over a file stream, Bloom duplicate filter, no store.
 * - `stream-write`: the ingest use case with the real adapters on the local cloud — ranged S3
 *   reads, opt-out lookups, BatchWriteItem, report pages, pausing and continuing every
 *   `rowsPerRun` rows as the Lambda does when its time runs low (up to `writeRows` rows).
 * - `baseline-parse`: read the whole file into memory, parse it at once (csv-parse/sync), check
 *   each phone number the same way.
 * - `baseline-write`: the same, then one PutItem per row, awaited one after another.
 */
import { createReadStream, readFileSync } from 'node:fs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { parse } from 'csv-parse/sync';
import { LOCAL_CREDENTIALS, type LocalCloudInfo } from '#local/cloud.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { DynamoClientStore } from '#shared/adapters/dynamo-clients.ts';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { S3UploadFiles, S3ValidationReportStore } from '#shared/adapters/s3-uploads.ts';
import { bloomDuplicateFilter, recipientTaskId } from '#shared/csv/duplicates.ts';
import { ingestRows } from '#shared/csv/read-list.ts';
import { normalizePhoneNumber } from '#shared/csv/recipients.ts';
import { JobIngest } from '#shared/jobs/ingest.ts';
import { keys } from '#shared/jobs/model.ts';
import type { ContinueIngestMessage } from '#shared/jobs/ports.ts';
import { silentLogger } from '#shared/log.ts';

export interface PhaseArgs {
  readonly file: string;
  readonly rows: number;
  readonly cloud?: LocalCloudInfo;
  readonly clientId?: string;
  readonly jobId?: string;
  /** stream-write: rows per run before a continuation. */
  readonly rowsPerRun?: number;
  /**
   * baseline-write: rows written (the rest of the file is parsed, not written); stream-write:
   * stop after the run that reaches this many rows.
   */
  readonly writeRows?: number;
  /**
   * stream-parse: force a full GC (needs `--expose-gc`) every this many rows, while the run's
   * state is alive, and report the largest heap left: what the run holds, without garbage.
   */
  readonly liveEvery?: number;
}

export interface PhaseResult {
  readonly rows: number;
  readonly written: number;
  readonly ms: number;
  readonly peakRssBytes: number;
  readonly runs?: number;
  /** baseline-parse: rows with a valid number. */
  readonly valid?: number;
  /** stream-parse with `liveEvery`: the largest V8 heap in use right after a forced full GC. */
  readonly liveHeapBytes?: number;
  /** stream-parse with `liveEvery`: the largest external memory (Buffers, the Bloom filter) then. */
  readonly liveExternalBytes?: number;
}

const [phase, rawArgs] = process.argv.slice(2);
const args = JSON.parse(rawArgs ?? '{}') as PhaseArgs;

let peak = process.memoryUsage.rss();
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage.rss());
}, 20);

function clients(cloud: LocalCloudInfo) {
  const base = { region: cloud.region, credentials: LOCAL_CREDENTIALS };
  const doc = makeDocumentClient(new DynamoDBClient({ ...base, endpoint: cloud.dynamoEndpoint }));
  const s3 = new S3Client({ ...base, endpoint: cloud.s3Endpoint, forcePathStyle: true });
  return { doc, s3 };
}

async function streamParse(): Promise<Omit<PhaseResult, 'ms' | 'peakRssBytes'>> {
  const every = args.liveEvery;
  const gc = (globalThis as { gc?: () => void }).gc;
  if (every !== undefined && !gc) throw new Error('liveEvery needs node --expose-gc');
  let rows = 0;
  let liveHeapBytes = 0;
  let liveExternalBytes = 0;
  const measureLive = () => {
    gc!();
    const m = process.memoryUsage();
    liveHeapBytes = Math.max(liveHeapBytes, m.heapUsed);
    liveExternalBytes = Math.max(liveExternalBytes, m.external);
  };
  const result = await ingestRows({
    source: createReadStream(args.file, { highWaterMark: 64 * 1024 }),
    channel: 'call',
    defaultRegion: 'JP',
    isOptedOut: async () => new Set(),
    duplicates: bloomDuplicateFilter({ expectedRows: args.rows, confirm: async () => new Map() }),
    onBatch: async (tasks) => {
      const before = rows;
      rows += tasks.length;
      if (every !== undefined && Math.floor(rows / every) > Math.floor(before / every)) measureLive();
    },
    onReport: async () => {},
  });
  return {
    rows: result.counts.dataRows,
    written: 0,
    ...(every === undefined ? {} : { liveHeapBytes, liveExternalBytes }),
  };
}

async function streamWrite(): Promise<Omit<PhaseResult, 'ms' | 'peakRssBytes'>> {
  const cloud = args.cloud!;
  const { doc, s3 } = clients(cloud);
  const bucket = cloud.bucketNames.uploads!;
  const sent: ContinueIngestMessage[] = [];
  const optOuts = new DynamoOptOutStore(doc, cloud.tableNames.control!);
  const ingest = new JobIngest({
    clients: new DynamoClientStore(doc, cloud.tableNames.control!),
    jobs: new DynamoJobStore(doc, cloud.tableNames.control!),
    tasks: new DynamoTaskStore(doc, cloud.tableNames.tasks!),
    files: new S3UploadFiles(s3, bucket),
    validationReports: new S3ValidationReportStore(s3, bucket),
    queue: {
      send: async (m) => {
        if (m.kind === 'continue') sent.push(m);
      },
    },
    optOuts: (clientId, recipients) => optOuts.optedOut(clientId, recipients),
    clock: { now: () => Date.now() },
    log: silentLogger,
    ...(args.rowsPerRun ? { maxRowsPerRun: args.rowsPerRun } : {}),
  });
  const ctx = { remainingMs: () => 600_000, receiveCount: 1 };
  let outcome = await ingest.handle(
    { kind: 'continue', clientId: args.clientId!, jobId: args.jobId!, step: 0 },
    ctx,
  );
  let runs = 1;
  // With writeRows, stop after the run that passes it (the job stays in validating).
  const limit = args.writeRows ?? Number.POSITIVE_INFINITY;
  while (sent.length > 0 && outcome.kind === 'paused' && outcome.counts.rows < limit) {
    outcome = await ingest.handle(sent.shift()!, ctx);
    runs++;
  }
  if (outcome.kind !== 'scheduled' && outcome.kind !== 'paused')
    throw new Error(`ingest ended ${JSON.stringify(outcome)}`);
  return { rows: outcome.counts.rows, written: outcome.counts.tasks, runs };
}

function baselineRows(): string[][] {
  const text = readFileSync(args.file, 'utf8').replace(/^\ufeff/, '');
  return parse(text, { relax_column_count: true, skip_empty_lines: true }) as string[][];
}

async function baselineParse(): Promise<Omit<PhaseResult, 'ms' | 'peakRssBytes'>> {
  const records = baselineRows();
  let ok = 0;
  for (const record of records.slice(1)) if (normalizePhoneNumber(record[0] ?? '', 'JP').ok) ok++;
  return { rows: records.length - 1, written: 0, valid: ok };
}

async function baselineWrite(): Promise<Omit<PhaseResult, 'ms' | 'peakRssBytes'>> {
  const cloud = args.cloud!;
  const { doc } = clients(cloud);
  const records = baselineRows();
  const jobId = args.jobId!;
  const limit = Math.min(records.length - 1, args.writeRows ?? Number.POSITIVE_INFINITY);
  let written = 0;
  for (const record of records.slice(1, 1 + limit)) {
    const checked = normalizePhoneNumber(record[0] ?? '', 'JP');
    if (!checked.ok) continue;
    const taskId = recipientTaskId(jobId, checked.recipient);
    await doc.send(
      new PutCommand({
        TableName: cloud.tableNames.tasks!,
        Item: {
          ...keys.task(jobId, taskId),
          jobId,
          taskId,
          recipient: checked.recipient,
          name: record[1],
          state: 'pending',
        },
      }),
    );
    written++;
  }
  return { rows: limit, written };
}

const phases: Record<string, () => Promise<Omit<PhaseResult, 'ms' | 'peakRssBytes'>>> = {
  'stream-parse': streamParse,
  'stream-write': streamWrite,
  'baseline-parse': baselineParse,
  'baseline-write': baselineWrite,
};
const run = phases[phase ?? ''];
if (!run) throw new Error(`unknown phase ${phase}`);
const started = performance.now();
const result = await run();
const ms = performance.now() - started;
clearInterval(sampler);
// maxRSS (KiB) is the kernel's high-water mark: it catches peaks between samples.
const peakRssBytes = Math.max(peak, process.resourceUsage().maxRSS * 1024);
process.stdout.write(`${JSON.stringify({ ...result, ms, peakRssBytes } satisfies PhaseResult)}\n`);
process.exit(0);
