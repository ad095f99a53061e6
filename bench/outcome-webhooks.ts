/**
 * What outcome webhooks cost a campaign, and how soon a customer hears of each task end.
 *
 * On the local stack (a broker process, the LINE sandbox, DynamoDB Local's streams read by the event
 * source mapping stand-in, the delivery queue on fauxqs, a local receiver that verifies signatures):
 *
 * 1. the same message campaign for a client without a webhook (the baseline) and for one with a
 *    webhook: messages/s of each and their ratio — the delivery is off the broker's path, so the
 *    ratio should be ~1;
 * 2. for the client with a webhook: events received, POSTs, events per POST, the delay from a task's
 *    end (`occurredAt`) to its first receipt (p50, p95, max), and how long after the job completed
 *    the last event arrived;
 * 3. the same campaign again with a receiver that fails one POST in four (503, lost answers, dropped
 *    connections, a second late): every event still arrives, duplicates are counted, the delay grows.
 *
 * `node bench/outcome-webhooks.ts [--rows 2000] [--fault-rows 500] [--rate 1000]`
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { type OutcomeReceiver, type ReceiverFault, startOutcomeReceiver } from '#local/outcome-receiver.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1]! : fallback;
};
const ROWS = Number(arg('rows', '2000'));
const FAULT_ROWS = Number(arg('fault-rows', '500'));
const RATE = Number(arg('rate', '1000'));
const SECRET = 'outcome-webhook-bench-secret-0001';
const ALL_DAY = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
);

interface CampaignRun {
  readonly jobId: string;
  /** From the upload to the job's `completed`. */
  readonly seconds: number;
  readonly completedAt: number;
}

const userId = (run: string, i: number) =>
  `U${Buffer.from(run).toString('hex').slice(0, 8).padEnd(8, '0')}${i.toString(16).padStart(24, '0')}`;

async function putClient(stack: LocalStack, clientId: string, webhookUrl?: string): Promise<void> {
  const channelId = `${clientId}-channel`;
  await stack.putChannel({
    channelId,
    clientId,
    channelSecret: `${clientId}-secret`,
    accessToken: `${clientId}-token`,
    autoAnswer: 'push',
    rules: [],
  });
  const put = await stack.operator('PUT', `/clients/${clientId}`, {
    json: {
      maxConcurrentCalls: 1,
      callsPerSecond: 1,
      timeZone: 'Asia/Tokyo',
      callingHours: ALL_DAY,
      defaultRegion: 'JP',
      messageChannelId: channelId,
      ...(webhookUrl ? { outcomeWebhook: { url: webhookUrl, secret: SECRET } } : {}),
    },
  });
  if (put.status !== 200) throw new Error(`PUT /clients/${clientId}: ${put.status} ${put.body}`);
}

async function runCampaign(
  stack: LocalStack,
  dir: string,
  clientId: string,
  rows: number,
): Promise<CampaignRun> {
  const lines = ['LINEユーザーID,お名前'];
  for (let i = 0; i < rows; i++) lines.push(`${userId(clientId, i)},顧客${i}`);
  const csv = path.join(dir, `${clientId}.csv`);
  writeFileSync(csv, `${lines.join('\r\n')}\r\n`);
  const created = await stack.operator('POST', `/clients/${clientId}/jobs`, {
    json: { name: 'bench', channel: 'message', message: '{{name}}様、ご予約の確認です' },
  });
  if (created.status !== 201) throw new Error(`create job: ${created.status} ${created.body}`);
  const { jobId, upload } = created.json<{ jobId: string; upload: { url: string; method: string } }>();
  const started = Date.now();
  const put = await fetch(upload.url, { method: upload.method, body: readFileSync(csv) });
  if (!put.ok) throw new Error(`upload: ${put.status}`);
  for (;;) {
    const { json } = await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}`);
    const job = json<{ status: string; counts: Record<string, number> }>();
    if (job.status === 'completed') {
      const completedAt = Date.now();
      return { jobId, seconds: (completedAt - started) / 1000, completedAt };
    }
    if (job.status === 'failed' || job.status === 'cancelled') throw new Error(`job ${job.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the delivery queue holds nothing, visible or in flight (retries included). */
async function queueDrained(stack: LocalStack): Promise<void> {
  const sqs = new SQSClient({
    region: stack.cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: stack.cloud.sqsEndpoint,
  });
  try {
    for (;;) {
      const out = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: stack.cloud.queues['outcome-webhooks']!.url,
          AttributeNames: [
            'ApproximateNumberOfMessages',
            'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed',
          ],
        }),
      );
      const left = Object.values(out.Attributes ?? {}).reduce((n, v) => n + Number(v), 0);
      if (left === 0) return;
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    sqs.destroy();
  }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Waits for every task end and the job's `completed`, then measures what the receiver saw. */
async function deliveryFigures(stack: LocalStack, receiver: OutcomeReceiver, run: CampaignRun, rows: number) {
  const ofJob = () =>
    receiver
      .events()
      .filter((e) => (e.event.type === 'task.ended' ? e.event.data.jobId : e.event.data.jobId) === run.jobId);
  await receiver.waitFor(() => {
    const events = ofJob();
    return (
      events.filter((e) => e.event.type === 'task.ended').length === rows &&
      events.some((e) => e.event.type === 'job.status_changed' && e.event.data.status === 'completed')
    );
  }, 600_000);
  await queueDrained(stack);
  const events = ofJob();
  const ends = events.filter((e) => e.event.type === 'task.ended');
  const delays = ends.map((e) => e.receivedAt - Date.parse(e.event.occurredAt)).sort((a, b) => a - b);
  const lastAt = Math.max(...events.map((e) => e.receivedAt));
  return {
    taskEnds: ends.length,
    jobEvents: events.length - ends.length,
    duplicates: events.reduce((n, e) => n + e.deliveries - 1, 0),
    p50: percentile(delays, 50),
    p95: percentile(delays, 95),
    max: delays.at(-1) ?? Number.NaN,
    drainMs: Math.max(0, lastAt - run.completedAt),
  };
}

const FAULTS: readonly ReceiverFault[] = [
  { kind: 'status', status: 503 },
  { kind: 'lose-response' },
  { kind: 'drop-connection' },
  { kind: 'latency', ms: 1_000 },
];

async function main(): Promise<void> {
  process.env.LOG_LEVEL ??= 'error';
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-outcomes-'));
  const receiver = await startOutcomeReceiver({ secret: SECRET });
  const stack = await startLocalStack({
    stage: 'benchoutcomes',
    port: 0,
    fleet: true,
    maxBrokers: 1,
    jobManagerIntervalMs: 1_000,
    lineRateLimitPerSecond: RATE,
    brokerEnv: { BROKER_IDLE_WAIT_MS: '300' },
  });
  try {
    await putClient(stack, 'bench-plain');
    await putClient(stack, 'bench-hooked', receiver.url);
    await putClient(stack, 'bench-faulty', receiver.url);

    console.log(`outcome webhooks: message campaigns of ${ROWS} recipients, LINE sandbox at ${RATE}/s`);
    const plain = await runCampaign(stack, dir, 'bench-plain', ROWS);
    const requestsBefore = receiver.stats().requests;
    const hooked = await runCampaign(stack, dir, 'bench-hooked', ROWS);
    const clean = await deliveryFigures(stack, receiver, hooked, ROWS);
    const posts = receiver.stats().requests - requestsBefore;
    const rate = (run: CampaignRun) => ROWS / run.seconds;
    console.log('');
    console.log('campaign                      seconds   msgs/s');
    console.log(
      `no webhook (baseline)         ${plain.seconds.toFixed(1).padStart(7)} ${rate(plain).toFixed(0).padStart(8)}`,
    );
    console.log(
      `with webhook                  ${hooked.seconds.toFixed(1).padStart(7)} ${rate(hooked).toFixed(0).padStart(8)}`,
    );
    console.log(`ratio (with / without)        ${(rate(hooked) / rate(plain)).toFixed(2).padStart(16)}`);
    console.log('');
    console.log(
      `deliveries: ${clean.taskEnds} task ends + ${clean.jobEvents} job status changes in ${posts} POSTs (${((clean.taskEnds + clean.jobEvents) / posts).toFixed(1)} events per POST), ${clean.duplicates} duplicates`,
    );
    console.log(
      `delay from task end to receipt: p50 ${clean.p50} ms, p95 ${clean.p95} ms, max ${clean.max} ms; last event ${clean.drainMs} ms after the job completed`,
    );

    // One POST in four fails, cycling through the receiver's faults, for the whole campaign.
    let nextFaultAt = receiver.stats().requests;
    let faultsFed = 0;
    const feeder = setInterval(() => {
      if (receiver.stats().requests < nextFaultAt) return;
      receiver.inject(FAULTS[faultsFed++ % FAULTS.length]!);
      nextFaultAt += 4;
    }, 20);
    const faulty = await runCampaign(stack, dir, 'bench-faulty', FAULT_ROWS);
    const rough = await deliveryFigures(stack, receiver, faulty, FAULT_ROWS);
    clearInterval(feeder);
    console.log('');
    console.log(
      `with a receiver failing ~1 POST in 4 (${FAULT_ROWS} recipients, ${receiver.stats().faults} faults injected):`,
    );
    console.log(
      `  ${rough.taskEnds}/${FAULT_ROWS} task ends and ${rough.jobEvents} job status changes received, ${rough.duplicates} duplicates dropped by event id, ${receiver.stats().badSignatures} bad signatures`,
    );
    console.log(
      `  delay from task end to receipt: p50 ${rough.p50} ms, p95 ${rough.p95} ms, max ${rough.max} ms; last event ${rough.drainMs} ms after the job completed`,
    );
  } finally {
    await stack.stop();
    await receiver.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
