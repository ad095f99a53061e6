/**
 * bench:email — an email campaign through the SES v2 stand-in (in its own process, its account at
 * each rate), sent by the real broker (worker/process.ts: lease, claims, the message pipeline, the
 * SES transport, outcome transactions on DynamoDB Local), side by side in the same run with two
 * baselines of the same SDK client against the same stand-in:
 *
 * - one `SendEmail` a recipient in sequence (a 429 waits a second and sends again);
 * - a fixed pool of 16 senders of `SendEmail` (each: a 429 waits a second), no shared pacing.
 *
 * Printed per rate: emails a second, the slowest whole second against the rate (goal ≥ 97 %), the
 * throttled answers (429s and `ACCOUNT_THROTTLED` entries; goal 0), recipients per request, and CPU
 * ms per email of the sending process (the stand-in's apart; DynamoDB Local is another process).
 *
 *   npm run bench:email -- [--recipients 20000] [--rates 200,1000] [--baseline 3000]
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SESv2Client, SendEmailCommand } from '@aws-sdk/client-sesv2';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { createTable, LOCAL_CREDENTIALS, startLocalCloud } from '#local/cloud.ts';
import { LOCAL_SES } from '#local/ses-emulator.ts';
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { fleetWorkItem } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, keys } from '#shared/jobs/model.ts';
import { silentLogger } from '#shared/log.ts';
import { tableSpec } from '#shared/resources.ts';
import { readBrokerConfig } from '#worker/config.ts';
import { startBrokerProcess } from '#worker/process.ts';
import { pendingTask, runningJob, seedRunningJob } from './lib/seed-job.ts';

const { values } = parseArgs({
  options: {
    recipients: { type: 'string', default: '20000' },
    rates: { type: 'string', default: '200,1000' },
    baseline: { type: 'string', default: '3000' },
  },
});
const RECIPIENTS = Number(values.recipients);
const RATES = values.rates.split(',').map(Number);
const BASELINE = Number(values.baseline);
const POOL = 16;

const ALWAYS_OPEN = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};

interface Row {
  readonly contender: string;
  readonly rate: number;
  readonly recipients: number;
  readonly seconds: number;
  readonly slowestSecond: number | undefined;
  readonly throttled: number;
  readonly requests: number;
  readonly cpuMsPerEmail: number;
  /** Recipients accepted in each whole second from the first. */
  readonly perSecond: readonly number[];
}

/** The stand-in process: its URL, and its count of accepted recipients per whole second. */
class StandIn {
  readonly #child: ChildProcess;
  readonly url: string;

  static async start(rate: number): Promise<StandIn> {
    const child = fork(fileURLToPath(new URL('./lib/ses-stand-in.ts', import.meta.url)), [
      JSON.stringify({ maxSendRate: rate }),
    ]);
    const { url } = await once<{ url: string }>(child);
    return new StandIn(child, url);
  }

  private constructor(child: ChildProcess, url: string) {
    this.#child = child;
    this.url = url;
  }

  async rate(maxSendRate: number): Promise<void> {
    this.#child.send({ kind: 'rate', maxSendRate });
    await once(this.#child);
  }

  async stats(): Promise<{ perSecond: number[]; accepted: number; seconds: number }> {
    this.#child.send({ kind: 'stats' });
    return once(this.#child);
  }

  stop(): void {
    this.#child.disconnect();
  }
}

function once<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve) => child.once('message', (m) => resolve(m as T)));
}

/** An SES client that counts its requests and what SES throttled (429s, `ACCOUNT_THROTTLED` entries). */
function countingSes(url: string) {
  const counts = { requests: 0, throttled: 0 };
  const ses = new SESv2Client({
    region: LOCAL_SES.region,
    endpoint: url,
    credentials: { accessKeyId: LOCAL_SES.accessKeyId, secretAccessKey: LOCAL_SES.secretAccessKey },
    maxAttempts: 1,
  });
  ses.middlewareStack.add(
    (next) => async (args) => {
      counts.requests++;
      try {
        const out = await next(args);
        const results = (out.output as { BulkEmailEntryResults?: { Status?: string }[] })
          .BulkEmailEntryResults;
        counts.throttled += results?.filter((r) => r.Status === 'ACCOUNT_THROTTLED').length ?? 0;
        return out;
      } catch (error) {
        if ((error as Error).name === 'TooManyRequestsException') counts.throttled++;
        throw error;
      }
    },
    { step: 'initialize', name: 'benchCounts' },
  );
  return { ses, counts };
}

/** The slowest whole second between the first and the last (both partial), as a share of the rate. */
function slowest(perSecond: readonly number[], rate: number): number | undefined {
  const whole = perSecond.slice(1, -1);
  return whole.length === 0 ? undefined : Math.min(...whole) / rate;
}

const cloud = await startLocalCloud({ stage: `bench-email-${process.pid}` });
const ddb = makeDynamoClient({
  region: cloud.region,
  endpoint: cloud.dynamoEndpoint,
  credentials: LOCAL_CREDENTIALS,
});
const doc = makeDocumentClient(ddb);
const stage = `be${process.pid}`;
const [controlTable, tasksTable, channelsTable] = await Promise.all([
  createTable(ddb, stage, tableSpec('control')),
  createTable(ddb, stage, tableSpec('tasks')),
  createTable(ddb, stage, tableSpec('channels')),
]);
const standIn = await StandIn.start(RATES[0]!);
const rows: Row[] = [];

/** A client with email settings and a running email job of `n` recipients, as ingest writes them. */
async function seedEmailJob(clientId: string, n: number): Promise<Job> {
  const now = Date.now();
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 1,
    callsPerSecond: 1,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    email: { from: LOCAL_SES.from },
    updatedAt: now,
  };
  const job = runningJob(
    {
      name: 'bench newsletter',
      channel: 'email',
      scenarioId: 'default',
      email: {
        subject: '{{name}}様へのお知らせ',
        text: 'こんにちは {{name}} さん',
        html: '<p>{{name}} さん</p>',
      },
      startAt: now - 1000,
      maxAttempts: 1,
      retryDelaySeconds: 0,
    },
    clientId,
    n,
    now,
  );
  await seedRunningJob(
    doc,
    { controlTable, tasksTable },
    {
      client,
      job,
      count: n,
      tasks: (i) =>
        pendingTask(job, i, {
          channel: 'message',
          recipient: `user${i}@customers.example.org`,
          variables: { name: `顧客${i}` },
          readyAt: now - 1000,
          updatedAt: now,
        }),
    },
  );
  return job;
}

/** Switchboard: the broker serving a running email job of `n` recipients at the account's `rate`. */
async function switchboard(rate: number, n: number): Promise<Row> {
  await standIn.rate(rate);
  const clientId = `bench${rate}`;
  const job = await seedEmailJob(clientId, n);
  const { ses, counts } = countingSes(standIn.url);
  const broker = await startBrokerProcess(
    readBrokerConfig({
      CONTROL_TABLE: controlTable,
      TASKS_TABLE: tasksTable,
      CHANNELS_TABLE: channelsTable,
      TELEPHONY_API_URL: 'http://127.0.0.1:9',
      TELEPHONY_API_TOKEN: 'unused',
      CALL_STATUS_CALLBACK_URL: 'http://127.0.0.1:9/status',
      BROKER_VERSION: 'v1',
      SES_CONFIGURATION_SET: 'bench',
      // Experiments: more of the broker's environment, as JSON (e.g. `{"EMAIL_CONCURRENCY":"64"}`).
      ...(JSON.parse(process.env.BENCH_BROKER_ENV ?? '{}') as Record<string, string>),
    }),
    { doc, logger: silentLogger, ses },
  );
  const cpu = process.cpuUsage();
  await doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: fleetWorkItem({ clients: [clientId], desiredVersion: 'v1', updatedAt: Date.now() }),
    }),
  );
  for (;;) {
    const out = await doc.send(
      new GetCommand({ TableName: controlTable, Key: keys.job(clientId, job.jobId) }),
    );
    const c = (out.Item as Job).counts;
    if (c.completed + c.failed + c.cancelled >= n) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const used = process.cpuUsage(cpu);
  broker.stop('sigterm');
  await broker.done;
  const stats = await standIn.stats();
  return rowOf('Switchboard (bulk, paced)', { rate, n, recipients: stats.accepted, stats, counts, used });
}

/** A contender's row: what the stand-in accepted and when, the SDK's requests, the CPU per email. */
function rowOf(
  contender: string,
  run: {
    readonly rate: number;
    readonly n: number;
    readonly recipients: number;
    readonly stats: { readonly seconds: number; readonly perSecond: readonly number[] };
    readonly counts: { readonly throttled: number; readonly requests: number };
    readonly used: NodeJS.CpuUsage;
  },
): Row {
  const { rate, stats, counts, used } = run;
  return {
    contender,
    rate,
    recipients: run.recipients,
    seconds: stats.seconds,
    perSecond: stats.perSecond,
    slowestSecond: slowest(stats.perSecond, rate),
    throttled: counts.throttled,
    requests: counts.requests,
    cpuMsPerEmail: (used.user + used.system) / 1000 / run.n,
  };
}

/** A baseline: `senders` loops of one SendEmail a recipient; a 429 waits a second and sends again. */
async function baseline(name: string, rate: number, n: number, senders: number): Promise<Row> {
  await standIn.rate(rate);
  const { ses, counts } = countingSes(standIn.url);
  let next = 0;
  const cpu = process.cpuUsage();
  const sender = async () => {
    for (let i = next++; i < n; i = next++) {
      for (;;) {
        try {
          await ses.send(
            new SendEmailCommand({
              FromEmailAddress: LOCAL_SES.from,
              Destination: { ToAddresses: [`base${i}@customers.example.org`] },
              Content: {
                Simple: {
                  Subject: { Data: `顧客${i}様へのお知らせ` },
                  Body: { Text: { Data: `こんにちは 顧客${i} さん` } },
                },
              },
            }),
          );
          break;
        } catch (error) {
          if ((error as Error).name !== 'TooManyRequestsException') throw error;
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    }
  };
  await Promise.all(Array.from({ length: senders }, sender));
  const used = process.cpuUsage(cpu);
  const stats = await standIn.stats();
  return rowOf(name, { rate, n, recipients: n, stats, counts, used });
}

try {
  for (const rate of RATES) {
    rows.push(await switchboard(rate, RECIPIENTS));
    rows.push(await baseline('one SendEmail a recipient, in sequence', rate, BASELINE, 1));
    rows.push(await baseline(`a fixed pool of ${POOL} SendEmail senders`, rate, BASELINE, POOL));
  }
} finally {
  standIn.stop();
  await cloud.stop();
}

const pct = (x: number | undefined) => (x === undefined ? 'n/a' : `${(x * 100).toFixed(1)} %`);
console.log(
  `\nbench:email — SES v2 stand-in, ${RECIPIENTS} recipients for Switchboard, ${BASELINE} for each baseline\n`,
);
console.log(
  'rate/s  contender                                   emails/s  slowest second  throttled  recipients/request  CPU ms/email',
);
for (const r of rows) {
  console.log(
    [
      String(r.rate).padStart(6),
      r.contender.padEnd(42),
      (r.recipients / r.seconds).toFixed(0).padStart(9),
      pct(r.slowestSecond).padStart(15),
      String(r.throttled).padStart(10),
      (r.recipients / Math.max(1, r.requests)).toFixed(1).padStart(19),
      r.cpuMsPerEmail.toFixed(3).padStart(13),
    ].join('  '),
  );
}
for (const r of rows.filter((row) => row.contender.startsWith('Switchboard')))
  console.log(`\nSwitchboard at ${r.rate}/s, recipients a second: ${r.perSecond.join(' ')}`);
for (const rate of RATES) {
  const ours = rows.find((r) => r.rate === rate && r.contender.startsWith('Switchboard'))!;
  const pool = rows.find((r) => r.rate === rate && r.contender.startsWith('a fixed pool'))!;
  console.log(
    `\nat ${rate}/s: slowest whole second ${pct(ours.slowestSecond)} of the rate (goal ≥ 97 %), ${ours.throttled} throttled (goal 0); ` +
      `CPU per email ×${(pool.cpuMsPerEmail / ours.cpuMsPerEmail).toFixed(1)} less than the pool's; ` +
      `${(ours.recipients / Math.max(1, ours.requests)).toFixed(1)} recipients a request against 1`,
  );
}
