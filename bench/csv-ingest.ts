/**
 * bench/csv-ingest: how fast, and in how little memory, a call list becomes a job's tasks.
 *
 * For each size (100,000 and 1,000,000 rows by default) it generates a list like a real export
 * (Japanese headers, BOM, numbers typed every which way, ~1% invalid, ~1% duplicates) and runs,
 * each in a child process of its own so that each peak RSS is that phase's alone:
 *   - streaming parse-only: `ingestRows` over a file stream (Bloom duplicate filter, no store);
 *   - streaming parse+write: the ingest use case with the real adapters on the local cloud
 *     (DynamoDB Local + fauxqs S3): ranged GETs, opt-out lookups, BatchWriteItem, report pages,
 *     a pause and a continuation every `--rows-per-run` rows, as the Lambda does near its timeout —
 *     on the first `--write-rows` rows of each file by default, because DynamoDB Local (a Java
 *     process on the same two cores) takes a few thousand writes a second at best; pass
 *     `--write-rows 1000000` to write a whole million;
 *   - baseline parse-only: the whole file read into memory and parsed at once (csv-parse/sync),
 *     each number checked the same way;
 *   - baseline parse+write: the same, then one PutItem per row, one after another — on the
 *     first `--baseline-write-rows` rows only (it would take far too long on a million).
 * It prints rows/s and peak RSS side by side, the ratios, and whether RSS grew with the size.
 * Peak RSS also counts garbage V8 has not collected yet, and V8 sizes its heap by the allocation
 * rate (a longer run grows its young generation), so streaming parse-only is run once more per
 * size with the heap's size fixed (`--max-old-space-size=64 --max-semi-space-size=4`), forcing a
 * full GC every tenth of the rows: its peak RSS and the heap left in use after those GCs (what
 * the run really holds) answer "does memory grow with the file?" without V8's sizing in the way.
 *
 *   npm run bench:csv-ingest [-- --rows 100000,1000000 --write-rows 50000 --baseline-write-rows 5000 --rows-per-run 10000]
 */
import { spawn } from 'node:child_process';
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { LOCAL_CREDENTIALS, startLocalCloud } from '#local/cloud.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { DynamoClientStore } from '#shared/adapters/dynamo-clients.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { S3UploadFiles } from '#shared/adapters/s3-uploads.ts';
import { newUlid } from '#shared/ids.ts';
import { ZERO_COUNTS } from '#shared/jobs/api.ts';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import { generateCallList } from './lib/csv-generate.ts';
import type { PhaseArgs, PhaseResult } from './lib/csv-phase.ts';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '100000,1000000' },
    'write-rows': { type: 'string', default: '50000' },
    'baseline-write-rows': { type: 'string', default: '5000' },
    'rows-per-run': { type: 'string', default: '10000' },
  },
});
const sizes = values.rows.split(',').map((s) => Number(s.trim()));
const writeRows = Number(values['write-rows']);
const baselineWriteRows = Number(values['baseline-write-rows']);
const rowsPerRun = Number(values['rows-per-run']);
if (
  sizes.some((n) => !Number.isInteger(n) || n < 1) ||
  !(writeRows > 0) ||
  !(baselineWriteRows > 0) ||
  !(rowsPerRun > 0)
) {
  console.error(
    '--rows takes sizes like 100000,1000000; --write-rows, --baseline-write-rows and --rows-per-run positive numbers',
  );
  process.exit(2);
}

const PHASE_SCRIPT = path.join(import.meta.dirname, 'lib', 'csv-phase.ts');
const dir = mkdtempSync(path.join(tmpdir(), 'switchboard-csv-bench-'));
process.env.LOG_LEVEL = 'error';
const cloud = await startLocalCloud({ stage: 'bench' });
const { fauxqs: _f, env: _e, stop: _s, ...info } = cloud;
const base = { region: cloud.region, credentials: LOCAL_CREDENTIALS };
const doc = makeDocumentClient(new DynamoDBClient({ ...base, endpoint: cloud.dynamoEndpoint }));
const s3 = new S3Client({ ...base, endpoint: cloud.s3Endpoint, forcePathStyle: true });
const bucket = cloud.bucketNames.uploads!;
const clientId = 'bench';
await new DynamoClientStore(doc, cloud.tableNames.control!).put(
  parseClientSettings(
    clientId,
    {
      maxConcurrentCalls: 10,
      callsPerSecond: 5,
      timeZone: 'Asia/Tokyo',
      callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
      defaultRegion: 'JP',
    },
    Date.now(),
  ),
);
const jobs = new DynamoJobStore(doc, cloud.tableNames.control!);

/**
 * Runs a phase in its own process. Asynchronously: fauxqs (S3) lives in this process, and a
 * blocked event loop here would leave the child's S3 requests unanswered.
 */
async function runPhase(
  phase: string,
  args: PhaseArgs,
  nodeArgs: readonly string[] = [],
): Promise<PhaseResult> {
  const child = spawn(process.execPath, [...nodeArgs, PHASE_SCRIPT, phase, JSON.stringify(args)], {
    env: { ...process.env, LOG_LEVEL: 'error' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`${phase} failed (${code}):\n${stderr}`);
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as PhaseResult;
}

/** Uploads the list and creates its job in `validating`, as the API and notification would. */
async function uploadedJob(file: string, rows: number): Promise<string> {
  const jobId = newUlid();
  const key = `uploads/${clientId}/${jobId}.csv`;
  await new S3UploadFiles(s3, bucket).write(key, createReadStream(file), 'text/csv');
  const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
  const now = Date.now();
  await jobs.create({
    clientId,
    jobId,
    name: `bench ${rows}`,
    channel: 'call',
    scenarioId: 'default',
    startAt: now,
    maxAttempts: 3,
    retryDelaySeconds: 1800,
    status: 'uploading',
    counts: ZERO_COUNTS,
    source: { bucket, key },
    createdAt: now,
    updatedAt: now,
  });
  await jobs.beginValidation(
    clientId,
    jobId,
    { eTag: head.ETag!.replaceAll('"', ''), size: head.ContentLength! },
    now,
  );
  return jobId;
}

interface Row {
  readonly size: number;
  readonly phase: string;
  readonly result: PhaseResult;
}
const results: Row[] = [];
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
const rate = (r: PhaseResult) => Math.round(r.rows / (r.ms / 1000));
const fmt = (n: number) => n.toLocaleString('en-US');

try {
  for (const size of sizes) {
    const file = path.join(dir, `list-${size}.csv`);
    const bytes = await generateCallList(file, size);
    console.log(`generated ${fmt(size)} rows (${mb(bytes)}) in ${file}`);
    if (writeRows < size)
      console.log(`  parse+write phases cover the first ${fmt(writeRows)} rows (--write-rows)`);
    const record = (phase: string, result: PhaseResult) => {
      results.push({ size, phase, result });
      console.log(
        `  ${phase.padEnd(24)} ${fmt(result.rows).padStart(10)} rows ${fmt(rate(result)).padStart(9)} rows/s  peak RSS ${mb(result.peakRssBytes).padStart(7)}${result.runs ? `  (${result.runs} runs)` : ''}`,
      );
    };
    record('streaming parse-only', await runPhase('stream-parse', { file, rows: size }));
    record('baseline parse-only', await runPhase('baseline-parse', { file, rows: size }));
    const jobId = await uploadedJob(file, size);
    record(
      'streaming parse+write',
      await runPhase('stream-write', {
        file,
        rows: size,
        cloud: info,
        clientId,
        jobId,
        rowsPerRun,
        writeRows,
      }),
    );
    record(
      'baseline parse+write',
      await runPhase('baseline-write', {
        file,
        rows: size,
        cloud: info,
        jobId: newUlid(),
        writeRows: baselineWriteRows,
      }),
    );
  }

  const find = (size: number, phase: string) =>
    results.find((r) => r.size === size && r.phase === phase)!.result;
  console.log('\nSide by side (rows/s; peak RSS):');
  console.log(
    'rows        phase         streaming                 baseline                  ratio (speed, memory)',
  );
  for (const size of sizes) {
    for (const kind of ['parse-only', 'parse+write']) {
      const ours = find(size, `streaming ${kind}`);
      const theirs = find(size, `baseline ${kind}`);
      const capped =
        kind === 'parse+write' && (theirs.rows < size || ours.rows < size)
          ? ` (first ${fmt(ours.rows)} rows streamed, first ${fmt(theirs.rows)} rows for the baseline)`
          : '';
      console.log(
        `${fmt(size).padEnd(11)} ${kind.padEnd(13)} ${`${fmt(rate(ours))}/s; ${mb(ours.peakRssBytes)}`.padEnd(25)} ${`${fmt(rate(theirs))}/s; ${mb(theirs.peakRssBytes)}`.padEnd(25)} ${(rate(ours) / rate(theirs)).toFixed(1)}x faster, ${(theirs.peakRssBytes / ours.peakRssBytes).toFixed(1)}x less memory${capped}`,
      );
    }
  }
  if (sizes.length > 1) {
    const small = Math.min(...sizes);
    const large = Math.max(...sizes);
    console.log(`\nPeak RSS from ${fmt(small)} to ${fmt(large)} rows:`);
    for (const phase of ['streaming parse-only', 'streaming parse+write', 'baseline parse-only']) {
      const a = find(small, phase).peakRssBytes;
      const b = find(large, phase).peakRssBytes;
      console.log(
        `  ${phase.padEnd(24)} ${mb(a)} → ${mb(b)} (x${(b / a).toFixed(2)} for ${large / small}x the rows)`,
      );
    }
  }

  // RSS is a high-water mark that also counts V8's lazily collected garbage, and V8 grows its
  // heap (the young generation's semi-spaces above all) the longer a run allocates at a high
  // rate. Two sharper tests of "memory does not grow with the file": RSS with the heap's size
  // fixed, and the heap still in use right after full GCs forced during the run.
  const fixedHeap = ['--expose-gc', '--max-old-space-size=64', '--max-semi-space-size=4'];
  console.log(
    `\nStreaming parse-only memory, V8 default vs fixed heap (${fixedHeap.slice(1).join(' ')});\n` +
      'live = the most heap (external) in use just after a full GC forced every tenth of the rows:',
  );
  console.log('rows        peak RSS (default)  peak RSS (fixed heap)  live heap  live external');
  const fixed: { size: number; result: PhaseResult }[] = [];
  for (const size of sizes) {
    const result = await runPhase(
      'stream-parse',
      { file: path.join(dir, `list-${size}.csv`), rows: size, liveEvery: Math.ceil(size / 10) },
      fixedHeap,
    );
    fixed.push({ size, result });
    console.log(
      `${fmt(size).padEnd(11)} ${mb(find(size, 'streaming parse-only').peakRssBytes).padStart(18)}  ${mb(result.peakRssBytes).padStart(21)}  ${mb(result.liveHeapBytes!).padStart(9)}  ${mb(result.liveExternalBytes!).padStart(13)}`,
    );
  }
  if (fixed.length > 1) {
    const a = fixed.find((f) => f.size === Math.min(...sizes))!.result;
    const b = fixed.find((f) => f.size === Math.max(...sizes))!.result;
    const x = (key: 'peakRssBytes' | 'liveHeapBytes' | 'liveExternalBytes') =>
      `x${(b[key]! / a[key]!).toFixed(2)}`;
    const defaultRatio =
      find(Math.max(...sizes), 'streaming parse-only').peakRssBytes /
      find(Math.min(...sizes), 'streaming parse-only').peakRssBytes;
    console.log(
      `${`${Math.max(...sizes) / Math.min(...sizes)}x rows`.padEnd(11)} ${`x${defaultRatio.toFixed(2)}`.padStart(18)}  ${x('peakRssBytes').padStart(21)}  ${x('liveHeapBytes').padStart(9)}  ${x('liveExternalBytes').padStart(13)}`,
    );
  }

  // A Lambda has a fixed size: the whole-file baseline does not fit in a small heap at all.
  const largest = Math.max(...sizes);
  const file = path.join(dir, 'heap-check.csv');
  await generateCallList(file, largest);
  const outcome = async (phase: string) => {
    try {
      const r = await runPhase(phase, { file, rows: largest }, ['--max-old-space-size=64']);
      return `completes ${fmt(r.rows)} rows (peak RSS ${mb(r.peakRssBytes)})`;
    } catch {
      return 'runs out of memory';
    }
  };
  console.log(`\nWith a 64 MB V8 heap (--max-old-space-size=64), ${fmt(largest)} rows:`);
  console.log(`  streaming parse-only     ${await outcome('stream-parse')}`);
  console.log(`  baseline parse-only      ${await outcome('baseline-parse')}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
  doc.destroy();
  s3.destroy();
  await cloud.stop();
}
