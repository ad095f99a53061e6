/**
 * The main job `npm start` runs: a demo client (6 calls at once, 2 calls/s, open all week) uploads
 * a call list through the operator API (SigV4-signed, as on AWS) and its presigned S3 URL; the
 * ingest validates it row by row, the job manager starts it and sizes the broker fleet, brokers
 * call through the telephony sandbox, and the job's progress is shown live until it completes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { EmailSettings } from '#shared/jobs/model.ts';
import type { SmsSettings } from '#shared/sms/settings.ts';
import { LOCAL_CONNECT } from './connect-emulator.ts';
import { followJob, reportLines } from './demo-follow.ts';
import { DEMO_CHANNEL, type LocalStack } from './stack.ts';
import type { TelephonyEmulator } from './telephony-sandbox.ts';
import { LOCAL_TWILIO } from './twilio-emulator.ts';

export const DEMO_CLIENT = 'demo-client';
const ALL_WEEK = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
);

/** The demo client's contract: what `PUT /clients/{clientId}` is given. */
export interface DemoClientOptions {
  readonly clientId?: string;
  readonly maxConcurrentCalls?: number;
  readonly callsPerSecond?: number;
  readonly timeZone?: string;
  readonly defaultRegion?: string;
  /** The telephony the client's calls go through (default `http`: the telephony sandbox). */
  readonly provider?: DemoProvider;
  /** How the client's email jobs are sent (default: none, the client sends no email). */
  readonly email?: EmailSettings;
  /** How the client's SMS jobs are sent (default: none, the client sends no text). */
  readonly sms?: SmsSettings;
}

/** The providers the local cloud emulates. */
export const DEMO_PROVIDERS = ['http', 'connect', 'twilio'] as const;
export type DemoProvider = (typeof DEMO_PROVIDERS)[number];

/** The emulator that sees a provider's calls from the far side. */
export function emulatorOf(stack: LocalStack, provider: DemoProvider = 'http'): TelephonyEmulator {
  if (provider === 'connect') return stack.connect;
  return provider === 'twilio' ? stack.twilio : stack.telephony;
}

/** A client's `telephony` settings for the local emulator of `provider` (none: the default HTTP). */
function telephonyFor(provider: DemoProvider | undefined) {
  if (provider === 'twilio') {
    return {
      telephony: {
        provider: 'twilio',
        accountSid: LOCAL_TWILIO.accountSid,
        from: LOCAL_TWILIO.from,
        voiceUrl: LOCAL_TWILIO.voiceUrl,
      },
    };
  }
  if (provider !== 'connect') return {};
  return {
    telephony: {
      provider: 'connect',
      instanceId: LOCAL_CONNECT.instanceId,
      contactFlowId: LOCAL_CONNECT.contactFlowId,
      sourcePhoneNumber: LOCAL_CONNECT.sourcePhoneNumber,
    },
  };
}

export interface DemoJobOptions extends DemoClientOptions {
  /** The CSV to call (default: the demo list). */
  readonly csvPath?: string;
  /** Stop waiting after this long (ms). */
  readonly timeoutMs?: number;
  /** More job options (e.g. `endAt`), added to the demo's. */
  readonly jobOptions?: Readonly<Record<string, unknown>>;
}

interface JobView {
  readonly jobId: string;
  readonly name: string;
  readonly status: string;
  readonly waiting?: { readonly reason: string; readonly until?: string; readonly message: string };
  readonly failureReason?: string;
  readonly counts: {
    rows: number;
    rejected: number;
    skipped: number;
    tasks: number;
    completed: number;
    failed: number;
    outstanding: number;
  };
}

const DEFAULT_CSV = path.join(import.meta.dirname, 'demo', 'call-list.csv');

/**
 * The demo LINE channel a client's message jobs go through: the demo channel for the demo client,
 * a channel of its own for another (a broker sends only through the client's own channel).
 */
export function demoChannelOf(clientId: string): string {
  return clientId === DEMO_CHANNEL.clientId
    ? DEMO_CHANNEL.channelId
    : `${DEMO_CHANNEL.channelId}-${clientId}`;
}

/**
 * The demo client's settings: its calls, and, for the demo client itself (no `clientId`, or
 * `demo-client`), the demo LINE channel for its message jobs (the channel's opt-outs are this
 * client's). The call job and the message campaign put the same ones; another client's channel is
 * made by {@link putDemoClient}.
 */
export function demoClientSettings(options: DemoClientOptions = {}) {
  const clientId = options.clientId ?? DEMO_CLIENT;
  return {
    maxConcurrentCalls: options.maxConcurrentCalls ?? 6,
    callsPerSecond: options.callsPerSecond ?? 2,
    timeZone: options.timeZone ?? 'Asia/Tokyo',
    callingHours: ALL_WEEK,
    defaultRegion: options.defaultRegion ?? 'JP',
    ...(clientId === DEMO_CLIENT ? { messageChannelId: DEMO_CHANNEL.channelId as string } : {}),
    ...telephonyFor(options.provider),
    ...(options.email ? { email: options.email } : {}),
    ...(options.sms ? { sms: options.sms } : {}),
  };
}

/** Puts the demo client's settings through the operator API; resolves with them. */
export async function putDemoClient(
  stack: LocalStack,
  options: DemoClientOptions = {},
): Promise<
  ReturnType<typeof demoClientSettings> & { readonly clientId: string; readonly messageChannelId: string }
> {
  const clientId = options.clientId ?? DEMO_CLIENT;
  const settings = { ...demoClientSettings(options), messageChannelId: demoChannelOf(clientId) };
  // Another client sends through a LINE channel of its own on the sandbox.
  if (clientId !== DEMO_CLIENT)
    await stack.putChannel({
      ...DEMO_CHANNEL,
      channelId: settings.messageChannelId,
      clientId,
      accessToken: `${DEMO_CHANNEL.accessToken}-${clientId}`,
    });
  // A Twilio client's auth token is a secret: stored encrypted, never part of its settings.
  if (options.provider === 'twilio') await stack.putTelephonySecret(clientId, LOCAL_TWILIO.authToken);
  const put = await stack.operator('PUT', `/clients/${clientId}`, { json: settings });
  if (put.status !== 200) throw new Error(`client settings refused (${put.status}): ${put.body}`);
  return { clientId, ...settings };
}

/**
 * Creates a job through the operator API and uploads its list to the presigned S3 URL the API
 * answers with, as a client's tool does; resolves with the job id.
 */
export async function createJobWithList(
  stack: LocalStack,
  clientId: string,
  jobOptions: Readonly<Record<string, unknown>>,
  list: Uint8Array,
): Promise<string> {
  const created = await stack.operator('POST', `/clients/${clientId}/jobs`, { json: jobOptions });
  if (created.status !== 201) throw new Error(`job refused (${created.status}): ${created.body}`);
  const { jobId, upload } = created.json<{ jobId: string; upload: { url: string; method: string } }>();
  const uploaded = await fetch(upload.url, { method: upload.method, body: list });
  if (!uploaded.ok) throw new Error(`upload to S3 failed: ${uploaded.status} ${await uploaded.text()}`);
  return jobId;
}

/** Runs a call job end to end on the local stack and prints its progress; resolves with its final view. */
export async function runDemoJob(
  stack: LocalStack,
  log: (line: string) => void,
  options: DemoJobOptions = {},
): Promise<JobView> {
  const { clientId, ...settings } = await putDemoClient(stack, options);
  log(
    `job: client ${clientId}: ${settings.maxConcurrentCalls} calls at once, ${settings.callsPerSecond} calls/s, ${settings.timeZone}, provider ${options.provider ?? 'http'}`,
  );
  const csvPath = options.csvPath ?? DEFAULT_CSV;
  const jobId = await createJobWithList(
    stack,
    clientId,
    {
      name: path.basename(csvPath),
      channel: 'call',
      scenarioId: 'reminder',
      maxAttempts: 2,
      retryDelaySeconds: 5,
      ...options.jobOptions,
    },
    readFileSync(csvPath),
  );
  log(`job: ${jobId} created; ${csvPath} uploaded to its presigned S3 URL`);
  const view = await followCallJob(stack, clientId, jobId, log, options);
  if (view.status === 'failed') log(`job: failed — ${view.failureReason}`);
  const lines = await reportLines(stack, clientId, jobId);
  log(
    `job: report (GET /clients/${clientId}/jobs/${jobId}/report): ${lines.length - 1} rows, first ones by row:`,
  );
  for (const l of reportExcerpt(lines)) log(`  ${l}`);
  return view;
}

/**
 * Follows the call job until it ends, with what the provider's emulator saw (calls in flight, the
 * rate, the most at once) and why the job waits, if it does; throws at the timeout.
 */
function followCallJob(
  stack: LocalStack,
  clientId: string,
  jobId: string,
  log: (line: string) => void,
  options: DemoJobOptions,
): Promise<JobView> {
  const started = Date.now();
  return followJob<JobView>(stack, {
    clientId,
    jobId,
    what: 'job',
    query: '?why=next-task',
    log,
    timeoutMs: options.timeoutMs ?? 15 * 60_000,
    describe: (view) => {
      const c = view.counts;
      const done = c.completed + c.failed;
      const stats = emulatorOf(stack, options.provider).stats(clientId);
      const seconds = Math.max(1, (Date.now() - started) / 1000);
      return (
        `job: ${view.status.padEnd(10)} rows ${c.rows} (rejected ${c.rejected}, skipped ${c.skipped})  ` +
        `done ${done}/${c.tasks}  in flight ${stats.inFlight}  failed ${c.failed}  ` +
        `rate ${(stats.rings / seconds).toFixed(2)} calls/s  max in flight ${stats.maxInFlight}, max starts/s ${stats.maxStartsPerSecond}` +
        (view.waiting ? `  waiting: ${view.waiting.message}` : '')
      );
    },
  });
}

/**
 * The header and the first rows of a report, in row order: the report itself is written shard
 * by shard (see `shared/jobs/report.ts`), which reads as random in an excerpt.
 */
export function reportExcerpt(lines: readonly string[], rows = 5): string[] {
  const [header, ...body] = lines;
  const rowOf = (line: string) => Number.parseInt(line.slice(0, line.indexOf(',')), 10);
  const sorted = [...body].sort((a, b) => rowOf(a) - rowOf(b));
  return header === undefined ? [] : [header, ...sorted.slice(0, rows)];
}
