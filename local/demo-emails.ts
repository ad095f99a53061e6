/**
 * The email campaign `npm start` runs after the message campaign: the demo client, sending as
 * `news@example.com` (its domain a verified identity of the SES stand-in), emails a coupon to 40
 * addresses of SES's mailbox simulator — most `success+N@`, a few `bounce+N@` and `complaint+N@`
 * (labels keep the addresses apart; the simulator reads only what is before the `+`). The list goes
 * through the operator API and its presigned S3 URL as the other demos' lists do; the job manager
 * starts the job, brokers send through the SES v2 stand-in at the account's rate, its events reach
 * the email-events Lambda, which records each email's delivery state in the report and puts the
 * bounced and complaining addresses on the client's suppression list.
 *
 * The live line counts what the stand-in accepted and the events Switchboard received; at the end,
 * the report's `email` column, the suppression list, and where the emails sent can be read: the
 * stand-in's outbox, one `.eml` file per email (`local/ses/outbox.ts`).
 */
import path from 'node:path';
import { EMAIL_TAGS } from '#shared/email/email-outcomes.ts';
import type { EmailTemplate } from '#shared/email/template.ts';
import {
  type CampaignJobView,
  campaignProgress,
  deliveryStates,
  followJob,
  RateMeter,
} from './demo-follow.ts';
import { createJobWithList, type DemoClientOptions, putDemoClient } from './demo-job.ts';
import { demoRecipientName } from './demo-messages.ts';
import { LOCAL_SES, type SentEmail } from './ses-emulator.ts';
import type { LocalStack } from './stack.ts';

/** Recipients of the demo list. */
export const DEMO_EMAIL_COUNT = 40;

/** The campaign's email: `{{name}}` and `{{coupon}}` are the list's columns. */
export const DEMO_EMAIL: EmailTemplate = {
  subject: '{{name}} 様、12月のクーポンをお届けします',
  text: '{{name}} 様\n\nいつもご利用ありがとうございます。12月のクーポン {{coupon}} をお使いください。\n\nSwitchboard デモ店',
  html: '<p>{{name}} 様</p><p>いつもご利用ありがとうございます。12月のクーポン <b>{{coupon}}</b> をお使いください。</p><p>Switchboard デモ店</p>',
};

/** The demo client's email settings. */
export const DEMO_EMAIL_SETTINGS = { from: LOCAL_SES.from, fromName: 'Switchboard デモ店' } as const;

/** The mailbox simulator's scenario for the `i`-th (0-based) recipient: 1 in 10 bounces, 1 in 20 complains. */
function scenarioOf(i: number): 'success' | 'bounce' | 'complaint' {
  if (i % 10 === 4) return 'bounce';
  return i % 20 === 9 ? 'complaint' : 'success';
}

/** The `i`-th (0-based) recipient's address, e.g. `success+1@simulator.amazonses.com`. */
export function demoEmailAddress(i: number): string {
  return `${scenarioOf(i)}+${i + 1}@simulator.amazonses.com`;
}

/** The demo list of `count` recipients as CSV (`email,name,coupon`). */
export function emailListCsv(count: number): string {
  const rows = ['email,name,coupon'];
  for (let i = 0; i < count; i++) {
    rows.push(`${demoEmailAddress(i)},${demoRecipientName(i)},XMAS-M${String(i + 1).padStart(4, '0')}`);
  }
  return `${rows.join('\n')}\n`;
}

export interface DemoEmailsOptions extends DemoClientOptions {
  /** Recipients (default {@link DEMO_EMAIL_COUNT}). */
  readonly count?: number;
  /** Stop waiting after this long (ms). */
  readonly timeoutMs?: number;
}

/** What SES saw of a job: emails accepted, and the events Switchboard received, by recipient. */
export interface SesCounts {
  /** Recipients the stand-in accepted an email for (at least once). */
  readonly accepted: number;
  /** Emails beyond the first to a recipient: must be 0. */
  readonly duplicates: number;
  readonly delivered: number;
  readonly bounced: number;
  readonly complained: number;
  /** First to last acceptance, ms. */
  readonly sendingMs: number;
}

/** The campaign's end. */
export interface EmailCampaignSummary {
  readonly job: CampaignJobView;
  readonly ses: SesCounts;
  /** The report's `email` column: recipients by delivery state. */
  readonly states: Readonly<Record<string, number>>;
  /** Recipients of the list on the client's suppression list, by source. */
  readonly suppressed: Readonly<Record<string, number>>;
  /** Where the emails sent are, one `.eml` file each (the stand-in's outbox), if it keeps them. */
  readonly outbox?: string;
  /** The emails of the job the stand-in accepted. */
  readonly sent: number;
  /** One email delivered, as its recipient reads it. */
  readonly sample?: { readonly to: string; readonly subject: string; readonly messageId: string };
}

/** The SES stand-in's view of one job, read from its log of sent emails and published events. */
class SesTally {
  readonly #stack: LocalStack;
  readonly #jobId: string;

  constructor(stack: LocalStack, jobId: string) {
    this.#stack = stack;
    this.#jobId = jobId;
  }

  /** The job's emails the stand-in accepted, in order. */
  sent(): SentEmail[] {
    return this.#stack.ses.sent().filter((email) => email.tags[EMAIL_TAGS.job] === this.#jobId);
  }

  read(): SesCounts {
    const sent = this.sent();
    const perRecipient = new Map<string, number>();
    for (const email of sent)
      for (const to of email.to) perRecipient.set(to, (perRecipient.get(to) ?? 0) + 1);
    // Events the email-events Lambda took, each message counted once per type (an event may come twice).
    const seen = { Delivery: new Set<string>(), Bounce: new Set<string>(), Complaint: new Set<string>() };
    for (const published of this.#stack.ses.events()) {
      if (published.fate !== 'delivered') continue;
      const detail = published.event.detail as {
        eventType?: string;
        mail?: { messageId?: string; tags?: Record<string, readonly string[]> };
      };
      if (detail.mail?.tags?.[EMAIL_TAGS.job]?.[0] !== this.#jobId) continue;
      seen[detail.eventType as keyof typeof seen]?.add(detail.mail.messageId ?? '');
    }
    const first = sent[0]?.at;
    const last = sent.at(-1)?.at;
    return {
      accepted: perRecipient.size,
      duplicates: sent.length - perRecipient.size,
      delivered: seen.Delivery.size,
      bounced: seen.Bounce.size,
      complained: seen.Complaint.size,
      sendingMs: first === undefined || last === undefined ? 0 : last - first,
    };
  }
}

/**
 * Runs the demo email campaign end to end on the local stack (which must run the broker fleet),
 * printing its progress; resolves with the job's final view, what SES saw and what was recorded.
 */
export async function runDemoEmails(
  stack: LocalStack,
  log: (line: string) => void,
  options: DemoEmailsOptions = {},
): Promise<EmailCampaignSummary> {
  const count = options.count ?? DEMO_EMAIL_COUNT;
  // As in the SES console (Identities → Create identity): the From address's domain is verified.
  stack.ses.account.verify(LOCAL_SES.domain);
  const { clientId } = await putDemoClient(stack, { ...options, email: DEMO_EMAIL_SETTINGS });
  log(
    `emails: client ${clientId} sends as ${DEMO_EMAIL_SETTINGS.from} (${LOCAL_SES.domain} is a verified identity of the SES stand-in) to SES's mailbox simulator`,
  );
  const list = emailListCsv(count);
  const addresses = list
    .split('\n')
    .slice(1, -1)
    .map((row) => row.split(',')[0]!);
  const jobId = await createJobWithList(
    stack,
    clientId,
    { name: `email-list-${count}.csv`, channel: 'email', email: DEMO_EMAIL },
    Buffer.from(list),
  );
  const mix = (s: string) => addresses.filter((a) => a.startsWith(`${s}+`)).length;
  log(
    `emails: job ${jobId} created; ${count} addresses uploaded (success@ ${mix('success')}, bounce@ ${mix('bounce')}, complaint@ ${mix('complaint')})`,
  );
  log(`emails: the subject: "${DEMO_EMAIL.subject}"`);

  const tally = new SesTally(stack, jobId);
  const job = await followJob(stack, {
    clientId,
    jobId,
    what: 'email job',
    describe: emailProgress(tally),
    log,
    timeoutMs: options.timeoutMs ?? 5 * 60_000,
  });
  if (job.status === 'failed') log(`emails: failed — ${job.failureReason}`);
  // Events still on their way are waited for: the report then shows where each email ended.
  await stack.emailEventsRecorded();
  const sent = tally.sent();
  const sample = sent.find((email) => email.to[0]?.startsWith('success+'));
  return {
    job,
    ses: tally.read(),
    states: await deliveryStates(stack, { clientId, jobId }, log, 'emails'),
    suppressed: await suppressedSources(stack, clientId, addresses),
    sent: sent.length,
    ...(sample
      ? { sample: { to: sample.to[0]!, subject: sample.subject ?? '', messageId: sample.messageId } }
      : {}),
    ...(stack.ses.outbox === undefined ? {} : { outbox: stack.ses.outbox }),
  };
}

/** The campaign's progress line: its sending rate and what SES saw. */
function emailProgress(tally: SesTally): (job: CampaignJobView) => string {
  const meter = new RateMeter();
  return (job) => {
    const ses = tally.read();
    const rate = meter.perSecond(ses.accepted);
    return campaignProgress(
      'emails',
      job,
      `${Math.round(rate)} emails/s  ` +
        `SES accepted ${ses.accepted}, delivered ${ses.delivered}, bounced ${ses.bounced}, complained ${ses.complained}, duplicates ${ses.duplicates}`,
    );
  };
}

/**
 * The list's addresses on the client's suppression list, counted by source (`bounce`, `complaint`
 * …), read page by page (the look-up by recipient takes phone numbers and LINE ids only so far).
 */
async function suppressedSources(
  stack: LocalStack,
  clientId: string,
  addresses: readonly string[],
): Promise<Record<string, number>> {
  const ours = new Set(addresses);
  const sources: Record<string, number> = {};
  let next: string | undefined;
  do {
    const page = `/clients/${clientId}/suppressions?limit=500${next ? `&next=${encodeURIComponent(next)}` : ''}`;
    const answer = await stack.operator('GET', page);
    if (answer.status !== 200) throw new Error(`suppression list refused (${answer.status}): ${answer.body}`);
    const body = answer.json<{ suppressions: { recipient: string; source?: string }[]; next?: string }>();
    for (const entry of body.suppressions) {
      if (!ours.has(entry.recipient)) continue;
      const source = entry.source ?? 'unknown';
      sources[source] = (sources[source] ?? 0) + 1;
    }
    next = body.next;
  } while (next !== undefined);
  return sources;
}

const counted = (by: Readonly<Record<string, number>>) =>
  Object.entries(by)
    .map(([key, n]) => `${key} ${n}`)
    .join(', ') || 'none';

/** The lines `npm start` ends the campaign with: the job and SES, what was recorded, where to read the emails. */
export function emailSummaryLines(summary: EmailCampaignSummary, cwd: string = process.cwd()): string[] {
  const { job, ses } = summary;
  const c = job.counts;
  const rate = ses.sendingMs > 0 ? `${Math.round((ses.accepted * 1000) / ses.sendingMs)} emails/s` : '-';
  const lines = [
    `emails: ${job.status}: ${c.completed} completed, ${c.failed} failed, ${c.cancelled} cancelled of ${c.tasks} tasks ` +
      `(${c.rows} rows, ${c.rejected} rejected, ${c.skipped} skipped); SES accepted ${ses.accepted} (${rate}), ` +
      `delivered ${ses.delivered}, bounced ${ses.bounced}, complained ${ses.complained}, duplicates ${ses.duplicates}`,
    `emails: the report's email column: ${counted(summary.states)}; on the suppression list: ${counted(summary.suppressed)}`,
  ];
  if (summary.outbox !== undefined) {
    const relative = path.relative(cwd, summary.outbox);
    const where = relative.startsWith('..') || path.isAbsolute(relative) ? summary.outbox : relative;
    lines.push(
      `emails: read the ${summary.sent} emails sent in ${where}${path.sep} — one .eml file each, named by SES message id (a mail program opens them; grep -l 'To: bounce' finds one)`,
    );
    const { sample } = summary;
    if (sample) {
      lines.push(
        `emails: e.g. ${path.join(where, `${sample.messageId}.eml`)}, to ${sample.to}: "${sample.subject}"`,
      );
    }
  }
  return lines;
}
