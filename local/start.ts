/**
 * `npm start`: the local cloud running Switchboard — DynamoDB Local, fauxqs (SQS + S3), the API
 * Gateway stand-in, the SQS pollers and the sandboxes — until Ctrl-C, which stops it cleanly.
 */

import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isKnownRegion } from '#shared/csv/recipients.ts';
import { operatorFromClaims } from '#shared/operators/tenancy.ts';
import { LOCAL_CREDENTIALS } from './cloud.ts';
import { playWebhookDemo } from './demo.ts';
import { DEMO_EMAIL_COUNT, emailSummaryLines, runDemoEmails } from './demo-emails.ts';
import { DEMO_PROVIDERS, type DemoProvider, runDemoJob } from './demo-job.ts';
import { DEMO_MESSAGE_COUNT, runDemoMessages, summaryLine } from './demo-messages.ts';
import { DEMO_SMS_COUNT, runDemoSms, smsSummaryLines } from './demo-sms.ts';
import { LocalCloudError } from './errors.ts';
import { LOCAL_CONSOLE_USERS, type LocalStack, startLocalStack } from './stack.ts';
import { localOutboxPath, writeLocalState } from './state-file.ts';
import { MAX_BODY_BYTES } from './strict-s3.ts';

const HELP = `Usage: npm start -- [options]

Runs Switchboard on your machine: the same handlers and brokers AWS runs, against DynamoDB Local,
fauxqs (SQS + S3), a LINE Messaging API sandbox and a telephony provider sandbox. The main job: a
demo client uploads a call list, it is validated row by row, the job manager starts it and sizes the
broker fleet, and brokers call at the client's limits; progress is shown until the job completes.
Then a message campaign: the same client sends a LINE push to 2,000 recipients through the demo
channel (one of them unfollowed first, so it is skipped), and the LINE sandbox counts deliveries.
Last, an email campaign to ${DEMO_EMAIL_COUNT} addresses of SES's mailbox simulator (a few bounce, two complain)
through the SES v2 stand-in, which writes each email it sends to ${path.relative(process.cwd(), localOutboxPath()) || '.'}/ as a .eml file.

Bring your own call list: a CSV with a phone column (phone, tel, 電話番号, 携帯電話…; any other
columns become per-row variables), UTF-8 (with or without BOM) or Shift_JIS, as Excel exports it:

  npm start -- --csv ~/Downloads/list.csv --limit 6 --rate 1 --region JP

Options:
  --csv FILE       the call list to run (default: local/demo/call-list.csv, 63 rows, 3 of them bad)
  --limit N        the client's concurrent-call limit (default 6)
  --rate R         the client's calls per second (default 2)
  --region CC      region for numbers without a country code (default JP)
  --provider P     the telephony the demo client calls through: http (the sandbox of
                   docs/telephony-provider.md, default), connect (the Amazon Connect emulator)
                   or twilio (the Twilio emulator)
  --time-scale X   call seconds per wall second in the telephony sandbox (default 30)
  --no-job         do not run the call job (the local cloud keeps running)
  --messages N     recipients of the message campaign (default ${DEMO_MESSAGE_COUNT}: local/demo/message-list.csv)
  --no-messages    do not run the message campaign
  --emails N       recipients of the email campaign (default ${DEMO_EMAIL_COUNT}, SES mailbox simulator addresses)
  --no-emails      do not run the email campaign
  --sms N          numbers of the SMS campaign (default ${DEMO_SMS_COUNT}, texts through the End User Messaging SMS stand-in)
  --no-sms         do not run the SMS campaign
  --data-dir DIR   keep DynamoDB data in DIR between runs (default: in memory)
  --port N         serve the HTTP API on port N (default: 3000; 0 picks a free port)
  --no-demo        do not play the demo webhooks (the demo channel is still created)
  --exit-after S   stop by itself after S seconds (for scripts and CI)
  --at TIME        run every clock of the local cloud from TIME (ISO 8601 with its offset), to try
                   a day that is not today: a public holiday, a window closing at midnight, a
                   quota month's end, e.g. --at 2027-01-01T09:58:00+09:00
  -h, --help       show this help
`;

interface StartOptions {
  readonly dataDir?: string;
  readonly port: number;
  readonly csv?: string;
  readonly limit: number;
  readonly rate: number;
  readonly region?: string;
  readonly timeScale: number;
  readonly provider: DemoProvider;
  readonly job: boolean;
  readonly messages: number | false;
  readonly emails: number | false;
  readonly sms: number | false;
  readonly demo: boolean;
  readonly exitAfter?: number;
  /** The instant the local cloud's clocks read at start (epoch ms). */
  readonly at?: number;
}

class OptionError extends LocalCloudError {}

/** The options, each checked up front: a bad one is an {@link OptionError} naming it. */
function parseStartOptions(args: readonly string[]): StartOptions | 'help' {
  const values = parsedValues(args);
  if (values.help) return 'help';
  const port = portOption(values.port);
  const exitAfter = exitAfterOption(values['exit-after']);
  const csv = csvOption(values.csv);
  const region = regionOption(values.region);
  const messages = numberOption('messages', values.messages, DEMO_MESSAGE_COUNT, 'whole');
  const emails = numberOption('emails', values.emails, DEMO_EMAIL_COUNT, 'whole');
  const sms = numberOption('sms', values.sms, DEMO_SMS_COUNT, 'whole');
  const provider = providerOption(values.provider);
  return {
    ...(values['data-dir'] ? { dataDir: values['data-dir'] } : {}),
    port,
    ...(csv ? { csv } : {}),
    limit: numberOption('limit', values.limit, 6, 'whole'),
    rate: numberOption('rate', values.rate, 2, 'positive'),
    ...(region ? { region } : {}),
    timeScale: numberOption('time-scale', values['time-scale'], 30, 'positive'),
    provider,
    job: !values['no-job'],
    messages: values['no-messages'] ? false : messages,
    emails: values['no-emails'] ? false : emails,
    sms: values['no-sms'] ? false : sms,
    demo: !values['no-demo'],
    ...(exitAfter === undefined ? {} : { exitAfter }),
    ...atOption(values.at),
  };
}

type OptionValues = ReturnType<
  typeof parseArgs<{ options: typeof OPTIONS; strict: true; args: string[] }>
>['values'];

/** The arguments as `parseArgs` reads them; an unknown option or a missing value shows the help. */
function parsedValues(args: readonly string[]): OptionValues {
  try {
    return parseArgs({ args: [...args], options: OPTIONS, strict: true }).values;
  } catch (error) {
    throw new OptionError(`${(error as Error).message}\n\n${HELP}`, { cause: error });
  }
}

/** `--port`: 0 to 65535, 3000 when not given. */
function portOption(raw: string | undefined): number {
  const port = raw === undefined ? 3000 : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new OptionError(`--port must be a port number, got ${JSON.stringify(raw)}`);
  }
  return port;
}

/** `--exit-after`: a positive number of seconds, or none. */
function exitAfterOption(raw: string | undefined): number | undefined {
  const exitAfter = raw === undefined ? undefined : Number(raw);
  if (exitAfter !== undefined && !(exitAfter > 0)) {
    throw new OptionError(`--exit-after must be a positive number of seconds, got ${JSON.stringify(raw)}`);
  }
  return exitAfter;
}

/** A numeric option: a whole number ≥ 1 or any number > 0, `fallback` when not given. */
function numberOption(
  name: string,
  raw: string | undefined,
  fallback: number,
  kind: 'whole' | 'positive',
): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  const ok = kind === 'whole' ? Number.isInteger(n) && n >= 1 : n > 0;
  if (!ok) {
    throw new OptionError(
      `--${name} must be ${kind === 'whole' ? 'a whole number ≥ 1' : 'a number > 0'}, got ${JSON.stringify(raw)}`,
    );
  }
  return n;
}

/** `--csv`: a file that exists and that the local S3 stand-in takes in one upload. */
function csvOption(csv: string | undefined): string | undefined {
  if (csv === undefined) return undefined;
  if (!existsSync(csv)) throw new OptionError(`--csv: no such file ${csv}`);
  const csvBytes = statSync(csv).size;
  if (csvBytes > MAX_BODY_BYTES) {
    throw new OptionError(
      `--csv: ${csv} is ${csvBytes} bytes; the local S3 stand-in takes files up to ${MAX_BODY_BYTES} bytes in one upload (S3 takes 5 GiB)`,
    );
  }
  return csv;
}

/** `--region`: a region code the CSV rules know, such as JP. */
function regionOption(region: string | undefined): string | undefined {
  if (region !== undefined && !isKnownRegion(region)) {
    throw new OptionError(`--region must be a region code such as JP or US, got ${JSON.stringify(region)}`);
  }
  return region;
}

/** `--provider`: one of {@link DEMO_PROVIDERS}, `http` when not given. */
function providerOption(raw: string | undefined): DemoProvider {
  const provider = raw ?? 'http';
  if (!(DEMO_PROVIDERS as readonly string[]).includes(provider)) {
    throw new OptionError(
      `--provider must be one of ${DEMO_PROVIDERS.join(', ')}, got ${JSON.stringify(provider)}`,
    );
  }
  return provider as DemoProvider;
}

/** `--at`: an ISO 8601 date-time with its offset (a zone-less one would mean this machine's zone). */
function atOption(raw: string | undefined): { at?: number } {
  if (raw === undefined) return {};
  const at = Date.parse(raw);
  if (!/(Z|[+-]\d\d:\d\d)$/.test(raw) || Number.isNaN(at)) {
    throw new OptionError(
      `--at must be an ISO 8601 date-time with its offset, such as 2027-01-01T09:58:00+09:00, got ${JSON.stringify(raw)}`,
    );
  }
  return { at };
}

const OPTIONS = {
  'data-dir': { type: 'string' },
  port: { type: 'string' },
  csv: { type: 'string' },
  limit: { type: 'string' },
  rate: { type: 'string' },
  region: { type: 'string' },
  'time-scale': { type: 'string' },
  provider: { type: 'string' },
  'no-job': { type: 'boolean' },
  messages: { type: 'string' },
  'no-messages': { type: 'boolean' },
  emails: { type: 'string' },
  'no-emails': { type: 'boolean' },
  sms: { type: 'string' },
  'no-sms': { type: 'boolean' },
  'no-demo': { type: 'boolean' },
  'exit-after': { type: 'string' },
  at: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Starts the stack, plays the demos the options ask for, and runs until Ctrl-C. */
async function run(options: StartOptions): Promise<void> {
  const log = (line: string) => console.log(`[switchboard] ${line}`);
  const stack = await startStack(options, log);
  if (!stack) return;
  // `npm run ops -- --local` finds this cloud through .switchboard/local.json (gone when this exits).
  writeLocalState({ apiUrl: stack.api.url, region: stack.cloud.region, credentials: LOCAL_CREDENTIALS });
  const shutdown = new Shutdown(stack, log);
  shutdown.listen(options.exitAfter);
  // The demos' lines stop with the stack: a poll cut short by the stop is no news.
  const demoLog = (line: string) => {
    if (!shutdown.stopping) log(line);
  };
  announce(stack, options, log);
  await playDemos(stack, options, demoLog);
  demoLog(consoleLine(stack));
  demoLog('ready — press Ctrl-C to stop');
}

/** The local stack the options describe, or none (and exit code 1) when it could not start. */
async function startStack(
  options: StartOptions,
  log: (line: string) => void,
): Promise<LocalStack | undefined> {
  const sentEmailDir = freshOutbox();
  try {
    return await startLocalStack({
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      port: options.port,
      fleet: options.job || options.messages !== false || options.emails !== false || options.sms !== false,
      sentEmailDir,
      telephonyTimeScale: options.timeScale,
      ...(options.at === undefined ? {} : { startAt: options.at }),
      log,
    });
  } catch (error) {
    console.error(`[switchboard] could not start: ${(error as Error).message}`);
    process.exitCode = 1;
    return undefined;
  }
}

/** Stops the stack on Ctrl-C, SIGTERM or `--exit-after`; a second signal leaves without waiting. */
class Shutdown {
  readonly #stack: LocalStack;
  readonly #log: (line: string) => void;
  #stopping = false;

  constructor(stack: LocalStack, log: (line: string) => void) {
    this.#stack = stack;
    this.#log = log;
  }

  /** Whether a stop has begun. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** Stops on SIGINT and SIGTERM, and after `exitAfter` seconds when given. */
  listen(exitAfter: number | undefined): void {
    process.on('SIGINT', () => void this.stop('Ctrl-C'));
    process.on('SIGTERM', () => void this.stop('SIGTERM'));
    if (exitAfter !== undefined) {
      setTimeout(() => void this.stop(`--exit-after ${exitAfter}s`), exitAfter * 1000);
    }
  }

  async stop(why: string): Promise<void> {
    if (this.#stopping) {
      // A second Ctrl-C while brokers drain their calls (up to their stop timeout): leave now. A
      // terminal's Ctrl-C reaches the children (brokers, DynamoDB Local) as well.
      this.#log(`${why} again: exiting without waiting for the brokers to drain`);
      process.exit(130);
    }
    this.#stopping = true;
    this.#log(`${why}: stopping…`);
    await this.#stack.stop();
    this.#log('stopped cleanly');
    process.exit(0);
  }
}

/** The first lines: where the demo channel's webhook and the console are, and the clock if moved. */
function announce(stack: LocalStack, options: StartOptions, log: (line: string) => void): void {
  // The secret itself is never printed (logs are searched for it): it is in the source, for signing by hand.
  log(
    `demo channel "demo": webhook URL ${stack.webhookUrl('demo')}, channel secret: DEMO_CHANNEL.channelSecret in local/stack.ts`,
  );
  log(consoleLine(stack));
  if (options.at !== undefined) {
    log(`clock: every part of the local cloud runs from ${new Date(stack.clock.now()).toISOString()} (--at)`);
  }
}

/** Where the console is and who may sign in to it. */
function consoleLine(stack: LocalStack): string {
  return `console: ${stack.consoleUrl} — sign in as ${LOCAL_CONSOLE_USERS.map((u) => `${u.username} (${userScope(u.groups)})`).join(', ')}; their local passwords are in the README and LOCAL_CONSOLE_USERS in local/stack.ts`;
}

/** The webhook demo, the call job, the message, email and SMS campaigns, each as the options ask. */
async function playDemos(
  stack: LocalStack,
  options: StartOptions,
  demoLog: (line: string) => void,
): Promise<void> {
  if (options.demo) {
    await playWebhookDemo(stack, demoLog).catch((error: unknown) =>
      demoLog(`demo failed: ${(error as Error).message}`),
    );
  }
  const limits = campaignLimits(options);
  const { messages, emails, sms } = options;
  if (options.job) await play('job', () => playCallJob(stack, options, demoLog), demoLog);
  if (messages !== false) {
    await play(
      'message campaign',
      async () => [summaryLine(await runDemoMessages(stack, demoLog, { count: messages, ...limits }))],
      demoLog,
    );
  }
  if (emails !== false) {
    await play(
      'email campaign',
      async () => emailSummaryLines(await runDemoEmails(stack, demoLog, { count: emails, ...limits })),
      demoLog,
    );
  }
  if (sms !== false) {
    await play(
      'SMS campaign',
      async () => smsSummaryLines(await runDemoSms(stack, demoLog, { count: sms, ...limits })),
      demoLog,
    );
  }
}

/** Plays one demo and logs the lines it ends with; a demo that fails is a line, not the end of the run. */
async function play(
  what: string,
  demo: () => Promise<readonly string[]>,
  demoLog: (line: string) => void,
): Promise<void> {
  try {
    for (const line of await demo()) demoLog(line);
  } catch (error) {
    demoLog(`${what} failed to run: ${(error as Error).message}`);
  }
}

/** The demo's pacing and default region, as every demo campaign takes them. */
function campaignLimits(options: StartOptions) {
  return {
    maxConcurrentCalls: options.limit,
    callsPerSecond: options.rate,
    ...(options.region ? { defaultRegion: options.region } : {}),
  };
}

/** Runs the call job; the line it ends with. */
async function playCallJob(
  stack: LocalStack,
  options: StartOptions,
  demoLog: (line: string) => void,
): Promise<string[]> {
  const view = await runDemoJob(stack, demoLog, {
    ...(options.csv ? { csvPath: options.csv } : {}),
    ...campaignLimits(options),
    provider: options.provider,
  });
  return [
    `job: ${view.status}: ${view.counts.completed} completed, ${view.counts.failed} failed of ${view.counts.tasks} tasks`,
  ];
}

async function main(): Promise<void> {
  let options: StartOptions | 'help';
  try {
    options = parseStartOptions(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof OptionError)) throw error;
    console.error(error.message);
    process.exitCode = 2;
    return;
  }
  if (options === 'help') {
    console.log(HELP);
    return;
  }
  await run(options);
}

await main();

/**
 * The directory the SES stand-in writes the emails it sends to, emptied of a previous run's: each
 * `npm start` begins with an empty outbox, which stays readable after it stops.
 */
function freshOutbox(): string {
  const dir = localOutboxPath();
  if (existsSync(dir)) {
    for (const name of readdirSync(dir))
      if (name.endsWith('.eml')) rmSync(path.join(dir, name), { force: true });
  }
  return dir;
}

/** What a local console user may do, in a few words: "every client", "demo-client: viewer". */
function userScope(groups: readonly string[]): string {
  const operator = operatorFromClaims({ 'cognito:groups': groups });
  if (operator.admin) return 'every client';
  return Object.entries(operator.roles)
    .map(([clientId, role]) => `${clientId}: ${role}`)
    .join(', ');
}
