/**
 * The message campaign `npm start` runs after the call job: the demo client sends a LINE push to
 * every recipient of a list (2,000 by default, `local/demo/message-list.csv`) through the demo
 * channel. The list is uploaded through the operator API as the call list is; brokers claim the
 * tasks and send through the LINE sandbox, whose delivery log is the proof that each recipient got
 * the message exactly once. One recipient unfollowed the channel first: the campaign skips them.
 *
 * The list file is `messageListCsv(DEMO_MESSAGE_COUNT)`; `npm exec -- node local/demo-messages.ts`
 * writes it again.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { LOCAL_CREDENTIALS } from './cloud.ts';
import { type CampaignJobView, campaignProgress, followJob, RateMeter, reportLines } from './demo-follow.ts';
import { createJobWithList, type DemoClientOptions, putDemoClient } from './demo-job.ts';
import type { Delivery } from './line-sandbox.ts';
import { DEMO_CHANNEL, type LocalStack } from './stack.ts';

/** Recipients in the demo list file. */
export const DEMO_MESSAGE_COUNT = 2_000;

export const DEMO_MESSAGE_CSV = path.join(import.meta.dirname, 'demo', 'message-list.csv');

/**
 * The list's first recipient: the webhook demo's user, who unfollows the demo channel there (and
 * again before the campaign, so the skip shows with `--no-demo` too).
 */
export const OPTED_OUT_RECIPIENT = `U${'d'.repeat(31)}1`;

/** The campaign's message: `{{name}}` and `{{coupon}}` are the list's columns. */
export const DEMO_MESSAGE =
  '{{name}} 様、いつもご利用ありがとうございます。12月のクーポン {{coupon}} をお使いください。';

const FAMILY_NAMES = ['佐藤', '鈴木', '高橋', '田中', '伊藤', '渡辺', '山本', '中村', '小林', '加藤'];
const GIVEN_NAMES = ['陽翔', '結衣', '蓮', '葵', '湊', '陽菜', '大和', '凛', '悠真', '芽依', '樹'];

/** The `i`-th (0-based) recipient of the demo list: a stable LINE user id (`U` + 32 hex digits). */
export function demoLineUserId(i: number): string {
  if (i === 0) return OPTED_OUT_RECIPIENT;
  return `U${createHash('sha256').update(`switchboard demo recipient ${i}`).digest('hex').slice(0, 32)}`;
}

/** The name of the `i`-th (0-based) recipient of a demo list. */
export function demoRecipientName(i: number): string {
  if (i === 0) return 'デモ ユーザー';
  return `${FAMILY_NAMES[i % FAMILY_NAMES.length]} ${GIVEN_NAMES[Math.floor(i / FAMILY_NAMES.length) % GIVEN_NAMES.length]}`;
}

/**
 * The demo list of `count` recipients as CSV (`userId,name,coupon`); the same rows for the same
 * `count`, and a longer list starts with a shorter one.
 */
export function messageListCsv(count: number): string {
  const rows = ['userId,name,coupon'];
  for (let i = 0; i < count; i++) {
    const coupon = `XMAS-${String(i + 1).padStart(5, '0')}`;
    rows.push(`${demoLineUserId(i)},${demoRecipientName(i)},${coupon}`);
  }
  return `${rows.join('\n')}\n`;
}

export interface DemoMessagesOptions extends DemoClientOptions {
  /** Recipients (default {@link DEMO_MESSAGE_COUNT}: the list file; otherwise generated alike). */
  readonly count?: number;
  /** Stop waiting after this long (ms). */
  readonly timeoutMs?: number;
}

/** The campaign's end, as the job and the LINE sandbox saw it. */
export interface MessageCampaignSummary {
  readonly job: CampaignJobView;
  /** Recipients of the list LINE delivered to (at least once). */
  readonly delivered: number;
  /** Deliveries beyond the first to a recipient: must be 0. */
  readonly duplicates: number;
  /** Sending time: first to last delivery, ms. */
  readonly sendingMs: number;
}

/** What the LINE sandbox delivered to the campaign's recipients, read as its log grows. */
function deliveryTally(stack: LocalStack, recipients: ReadonlySet<string>, channelId: string) {
  let cursor = stack.line.deliveries().length;
  const perRecipient = new Map<string, number>();
  const times: number[] = [];
  let duplicates = 0;
  const counts = (d: Delivery) =>
    d.channelId === channelId && (d.endpoint === 'push' || d.endpoint === 'multicast');
  return {
    read() {
      const log = stack.line.deliveries();
      for (; cursor < log.length; cursor++) {
        const d = log[cursor]!;
        if (!counts(d)) continue;
        for (const to of d.to) {
          if (!recipients.has(to)) continue;
          const n = (perRecipient.get(to) ?? 0) + 1;
          perRecipient.set(to, n);
          if (n > 1) duplicates++;
          times.push(d.at);
        }
      }
      return {
        deliveries: times.length,
        delivered: perRecipient.size,
        duplicates,
        first: times[0],
        last: times.at(-1),
      };
    },
  };
}

/**
 * Plays an unfollow of {@link OPTED_OUT_RECIPIENT} to the client's channel (so they are opted out
 * of the client's jobs); resolves once it is recorded.
 */
async function optOutOne(
  stack: LocalStack,
  clientId: string,
  channelId: string,
  log: (line: string) => void,
): Promise<void> {
  const url = stack.webhookUrl(channelId);
  const sent = await stack.line.sendWebhook({
    url,
    channelSecret: DEMO_CHANNEL.channelSecret,
    events: [stack.line.events.unfollow({ channelId, from: OPTED_OUT_RECIPIENT })],
  });
  log(`messages: ${OPTED_OUT_RECIPIENT} (row 2 of the list) unfollows the demo channel → ${sent.status}`);
  const ddb = new DynamoDBClient({
    region: stack.cloud.region,
    endpoint: stack.cloud.dynamoEndpoint,
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    const optOuts = new DynamoOptOutStore(makeDocumentClient(ddb), stack.cloud.tableNames.control!);
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if ((await optOuts.optedOut(clientId, [OPTED_OUT_RECIPIENT])).size > 0) {
        log(`messages: ${OPTED_OUT_RECIPIENT} is opted out of ${clientId}'s jobs: the campaign skips them`);
        return;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    log(`messages: the unfollow of ${OPTED_OUT_RECIPIENT} is not recorded yet; they may get the message`);
  } finally {
    ddb.destroy();
  }
}

/**
 * Runs the demo message campaign end to end on the local stack (which must run the broker fleet),
 * printing its progress; resolves with the job's final view and what LINE delivered.
 */
export async function runDemoMessages(
  stack: LocalStack,
  log: (line: string) => void,
  options: DemoMessagesOptions = {},
): Promise<MessageCampaignSummary> {
  const count = options.count ?? DEMO_MESSAGE_COUNT;
  const { clientId, messageChannelId: channelId } = await putDemoClient(stack, options);
  log(`messages: client ${clientId} sends through LINE channel "${channelId}"`);
  if (count > 0) await optOutOne(stack, clientId, channelId, log);

  const list = demoList(count);
  const tally = deliveryTally(stack, list.recipients, channelId);
  const jobId = await createJobWithList(
    stack,
    clientId,
    { name: list.fileName, channel: 'line', message: DEMO_MESSAGE },
    list.bytes,
  );
  log(`messages: job ${jobId} created; ${list.name} uploaded to its presigned S3 URL`);
  log(`messages: the message: "${DEMO_MESSAGE}"`);

  const job = await followJob(stack, {
    clientId,
    jobId,
    what: 'message job',
    describe: messageProgress(tally),
    log,
    timeoutMs: options.timeoutMs ?? 10 * 60_000,
  });
  if (job.status === 'failed') log(`messages: failed — ${job.failureReason}`);
  await logReport(stack, clientId, jobId, log);
  logSampleDelivery(stack, list.recipients, log);
  const end = tally.read();
  return {
    job,
    delivered: end.delivered,
    duplicates: end.duplicates,
    sendingMs: end.first === undefined || end.last === undefined ? 0 : end.last - end.first,
  };
}

/** The list of `count` recipients: the list file for the default count, else one generated alike. */
function demoList(count: number) {
  const bytes =
    count === DEMO_MESSAGE_COUNT ? readFileSync(DEMO_MESSAGE_CSV) : Buffer.from(messageListCsv(count));
  const recipients = new Set(
    bytes
      .toString('utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.split(',')[0]!)
      .filter(Boolean),
  );
  return {
    bytes,
    /** How the log names it. */
    name: count === DEMO_MESSAGE_COUNT ? DEMO_MESSAGE_CSV : `${count} generated demo recipients`,
    /** The job's name. */
    fileName: count === DEMO_MESSAGE_COUNT ? path.basename(DEMO_MESSAGE_CSV) : `message-list-${count}.csv`,
    recipients,
  };
}

/** The campaign's progress line: its sending rate and what LINE delivered. */
function messageProgress(tally: ReturnType<typeof deliveryTally>): (job: CampaignJobView) => string {
  const meter = new RateMeter();
  return (job) => {
    const line = tally.read();
    const rate = meter.perSecond(line.deliveries);
    return campaignProgress(
      'messages',
      job,
      `${Math.round(rate)} msgs/s  LINE delivered ${line.delivered}, duplicates ${line.duplicates}`,
    );
  };
}

/** Logs the job's report: its header and the first rows not sent. */
async function logReport(
  stack: LocalStack,
  clientId: string,
  jobId: string,
  log: (line: string) => void,
): Promise<void> {
  const rows = await reportLines(stack, clientId, jobId);
  const notSent = rows.slice(1).filter((r) => !r.includes(',completed,'));
  log(`messages: report (GET /clients/${clientId}/jobs/${jobId}/report): ${rows.length - 1} rows; not sent:`);
  for (const r of [rows[0]!, ...notSent.slice(0, 5)]) log(`  ${r}`);
  if (notSent.length > 5) log(`  … and ${notSent.length - 5} more`);
}

/** Logs one push LINE delivered to a recipient of the list (not the opted-out one). */
function logSampleDelivery(
  stack: LocalStack,
  recipients: ReadonlySet<string>,
  log: (line: string) => void,
): void {
  const sample = stack.line
    .deliveries()
    .find(
      (d) => d.endpoint === 'push' && d.to.some((to) => to !== OPTED_OUT_RECIPIENT && recipients.has(to)),
    );
  if (sample) {
    const text = (sample.messages[0] as { text?: string } | undefined)?.text;
    log(`messages: LINE delivered to ${sample.to[0]} (retry key ${sample.retryKey ?? '-'}): "${text}"`);
  }
}

/** The one-line end of the campaign `npm start` prints. */
export function summaryLine(summary: MessageCampaignSummary): string {
  const { job, delivered, duplicates, sendingMs } = summary;
  const c = job.counts;
  const rate = sendingMs > 0 ? `${Math.round((delivered * 1000) / sendingMs)} msgs/s` : '-';
  return (
    `messages: ${job.status}: ${c.completed} completed, ${c.failed} failed, ${c.cancelled} cancelled of ${c.tasks} tasks ` +
    `(${c.rows} rows, ${c.rejected} rejected, ${c.skipped} skipped); LINE delivered ${delivered} (${rate}), duplicates ${duplicates}`
  );
}

if (import.meta.main) {
  writeFileSync(DEMO_MESSAGE_CSV, messageListCsv(DEMO_MESSAGE_COUNT));
  console.log(`wrote ${DEMO_MESSAGE_CSV} (${DEMO_MESSAGE_COUNT} recipients)`);
}
