/**
 * The SMS campaign `npm start` runs after the email campaign: the demo client, texting from the End
 * User Messaging SMS stand-in's number (`LOCAL_SMS.originationNumber`, 3 message parts a second as a
 * toll-free number has), sends a Japanese reminder of two parts (UCS-2: 70 characters fit one part,
 * 67 a part once split) to 20 mobile numbers of a list whose number column is `携帯電話番号`. One
 * number is already on the identity's opt-out list: its task fails with the service's reason. The
 * list goes through the operator API and its presigned S3 URL as the other demos' lists do; the job
 * manager starts the job, brokers send through the stand-in at the identity's rate, its delivery
 * events reach the sms-events function, which records each text's state in the report.
 *
 * Then a customer texts `STOP` back to the number (two-way SMS): the sms-inbound function puts the
 * number on the client's suppression list, which the demo reads back.
 */
import { SMS_CONTEXT } from '#shared/sms/settings.ts';
import type { SmsTemplate } from '#shared/sms/template.ts';
import { DEMO_EMAIL_SETTINGS } from './demo-emails.ts';
import {
  type CampaignJobView,
  campaignProgress,
  deliveryStates,
  followJob,
  RateMeter,
} from './demo-follow.ts';
import { createJobWithList, type DemoClientOptions, putDemoClient } from './demo-job.ts';
import { demoRecipientName } from './demo-messages.ts';
import { LOCAL_SMS, type SentText } from './sms-emulator.ts';
import type { LocalStack } from './stack.ts';

/** Recipients of the demo list. */
export const DEMO_SMS_COUNT = 20;

/** The campaign's text: `{{name}}` is the list's name column, `{{time}}` another column. */
export const DEMO_SMS: SmsTemplate = {
  body: '{{name}}様、Switchboard デモ店です。明日{{time}}のご予約を承っております。ご変更の際は店舗までお電話ください。配信停止はSTOPと返信してください。',
};

/** The demo client's SMS settings: the stand-in's number, at its 3 parts a second. */
export const DEMO_SMS_SETTINGS = {
  originationIdentity: LOCAL_SMS.originationNumber,
  partsPerSecond: LOCAL_SMS.originationMps,
} as const;

/** The `i`-th (0-based) recipient's number as a Japanese list writes it, and in E.164. */
export function demoMobileNumber(i: number): { readonly written: string; readonly e164: string } {
  const digits = String(20_000_000 + i).padStart(8, '0');
  return { written: `090-${digits.slice(0, 4)}-${digits.slice(4)}`, e164: `+8190${digits}` };
}

/** The demo list of `count` recipients as CSV (`携帯電話番号,お名前,time`). */
export function smsListCsv(count: number): string {
  const rows = ['携帯電話番号,お名前,time'];
  for (let i = 0; i < count; i++)
    rows.push(`${demoMobileNumber(i).written},${demoRecipientName(i)},${10 + (i % 8)}時`);
  return `${rows.join('\n')}\n`;
}

export interface DemoSmsOptions extends DemoClientOptions {
  /** Recipients (default {@link DEMO_SMS_COUNT}). */
  readonly count?: number;
  /** Stop waiting after this long (ms). */
  readonly timeoutMs?: number;
}

/** What the stand-in saw of the job. */
export interface SmsCounts {
  /** Numbers texted (at least once). */
  readonly texted: number;
  /** Texts beyond the first to a number: must be 0. */
  readonly duplicates: number;
  /** Message parts of every text accepted. */
  readonly parts: number;
  /** First to last acceptance, ms. */
  readonly sendingMs: number;
}

export interface SmsCampaignSummary {
  readonly job: CampaignJobView;
  readonly sms: SmsCounts;
  /** The report's `sms` column: recipients by delivery state. */
  readonly states: Readonly<Record<string, number>>;
  /** The number that texted STOP back, and whether it is on the client's suppression list now. */
  readonly stop: { readonly number: string; readonly suppressed: boolean };
}

/** The job's texts the stand-in accepted, in order. */
function textsOf(stack: LocalStack, jobId: string): SentText[] {
  return stack.sms.sent().filter((text) => text.context[SMS_CONTEXT.job] === jobId);
}

function countTexts(texts: readonly SentText[]): SmsCounts {
  const numbers = new Set(texts.map((t) => t.destination));
  const first = texts[0]?.at;
  const last = texts.at(-1)?.at;
  return {
    texted: numbers.size,
    duplicates: texts.length - numbers.size,
    parts: texts.reduce((sum, t) => sum + t.parts, 0),
    sendingMs: first === undefined || last === undefined ? 0 : last - first,
  };
}

/**
 * Runs the demo SMS campaign end to end on the local stack (which must run the broker fleet),
 * printing its progress; resolves with the job's final view, what the stand-in saw and what was
 * recorded.
 */
export async function runDemoSms(
  stack: LocalStack,
  log: (line: string) => void,
  options: DemoSmsOptions = {},
): Promise<SmsCampaignSummary> {
  const count = options.count ?? DEMO_SMS_COUNT;
  // The email demo's settings are kept: a PUT of the client's settings replaces them whole.
  const { clientId } = await putDemoClient(stack, {
    ...options,
    email: DEMO_EMAIL_SETTINGS,
    sms: DEMO_SMS_SETTINGS,
  });
  const optedOut = demoMobileNumber(Math.min(3, count - 1)).e164;
  stack.sms.optOut(optedOut);
  log(
    `sms: client ${clientId} texts from ${LOCAL_SMS.originationNumber} (${LOCAL_SMS.originationMps} message parts/s) through the End User Messaging SMS stand-in; ${optedOut} is on its opt-out list`,
  );
  const jobId = await createJobWithList(
    stack,
    clientId,
    { name: `sms-list-${count}.csv`, channel: 'sms', sms: DEMO_SMS },
    Buffer.from(smsListCsv(count)),
  );
  log(
    `sms: job ${jobId} created; ${count} numbers uploaded (the column 携帯電話番号); the text: "${DEMO_SMS.body}"`,
  );
  const meter = new RateMeter();
  const job = await followJob(stack, {
    clientId,
    jobId,
    what: 'SMS job',
    describe: (view: CampaignJobView) => {
      const counts = countTexts(textsOf(stack, jobId));
      const rate = meter.perSecond(counts.parts);
      return campaignProgress(
        'sms',
        view,
        `${rate.toFixed(1)} parts/s  texted ${counts.texted} (${counts.parts} parts), duplicates ${counts.duplicates}`,
      );
    },
    log,
    timeoutMs: options.timeoutMs ?? 5 * 60_000,
  });
  if (job.status === 'failed') log(`sms: failed — ${job.failureReason}`);
  await stack.smsRecorded();
  const states = await deliveryStates(stack, { clientId, jobId }, log, 'sms', 4);
  const stop = await textStop(stack, clientId, demoMobileNumber(0).e164, log);
  return { job, sms: countTexts(textsOf(stack, jobId)), states, stop };
}

/** The customer `number` texts STOP back; resolves with whether the client's suppression list has it then. */
async function textStop(
  stack: LocalStack,
  clientId: string,
  number: string,
  log: (line: string) => void,
): Promise<SmsCampaignSummary['stop']> {
  stack.sms.reply(number, LOCAL_SMS.originationNumber, 'STOP');
  await stack.smsRecorded();
  const answer = await stack.operator(
    'GET',
    `/clients/${clientId}/suppressions?recipient=${encodeURIComponent(number)}`,
  );
  const found =
    answer.status === 200 ? answer.json<{ suppressions: { suppressed?: boolean }[] }>() : undefined;
  const suppressed = found?.suppressions[0]?.suppressed === true;
  log(`sms: ${number} texted STOP back; on the client's suppression list: ${suppressed ? 'yes' : 'no'}`);
  return { number, suppressed };
}

/** The lines `npm start` ends the SMS campaign with. */
export function smsSummaryLines(summary: SmsCampaignSummary): string[] {
  const { job, sms } = summary;
  const c = job.counts;
  const rate = sms.sendingMs > 0 ? `${((sms.parts * 1000) / sms.sendingMs).toFixed(1)} parts/s` : '-';
  // Most first, then by name: the report's rows come in no fixed order of states.
  const states =
    Object.entries(summary.states)
      .sort(([a, m], [b, n]) => n - m || a.localeCompare(b))
      .map(([state, n]) => `${state} ${n}`)
      .join(', ') || 'none';
  return [
    `sms: ${job.status}: ${c.completed} completed, ${c.failed} failed, ${c.cancelled} cancelled of ${c.tasks} tasks ` +
      `(${c.rows} rows, ${c.rejected} rejected, ${c.skipped} skipped); texted ${sms.texted} numbers, ${sms.parts} parts (${rate}), duplicates ${sms.duplicates}`,
    `sms: the report's sms column: ${states}; ${summary.stop.number} texted STOP: ${summary.stop.suppressed ? 'on the suppression list' : 'NOT on the suppression list'}`,
  ];
}
