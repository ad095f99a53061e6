/**
 * What the demos of `npm start` share once their list is uploaded: following the job through the
 * operator API until it ends, one progress line each time it changes, and reading its report.
 */
import type { JobCounts } from '#shared/jobs/model.ts';
import { reportExcerpt } from './demo-job.ts';
import type { LocalStack } from './stack.ts';

/** A campaign's job as the operator API shows it, as far as a demo reads it. */
export interface CampaignJobView {
  readonly jobId: string;
  readonly status: string;
  readonly failureReason?: string;
  readonly counts: JobCounts & { readonly outstanding: number };
}

const ENDED = ['completed', 'failed', 'cancelled'];

/**
 * Polls the job each second, logging the line `describe` makes of it when the line changes, until
 * the job ends; resolves with its last view, throws at the timeout.
 */
export async function followJob<View extends { readonly status: string }>(
  stack: LocalStack,
  follow: {
    readonly clientId: string;
    readonly jobId: string;
    /** How the timeout's error names the job ("message job" …). */
    readonly what: string;
    /** Added to the job's path (`?why=next-task`). */
    readonly query?: string;
    readonly describe: (job: View) => string;
    readonly log: (line: string) => void;
    readonly timeoutMs: number;
  },
): Promise<View> {
  const { clientId, jobId, log } = follow;
  const deadline = Date.now() + follow.timeoutMs;
  let last = '';
  for (;;) {
    const got = await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}${follow.query ?? ''}`);
    const job = got.json<View>();
    const line = follow.describe(job);
    if (line !== last) log(line);
    last = line;
    if (ENDED.includes(job.status)) return job;
    if (Date.now() > deadline)
      throw new Error(`${follow.what} ${jobId} still ${job.status} after the timeout`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** A campaign's progress line: `prefix`, the job's counts, then what follows (rate, the provider's view). */
export function campaignProgress(prefix: string, job: CampaignJobView, rest: string): string {
  const c = job.counts;
  return (
    `${prefix}: ${job.status.padEnd(10)} rows ${c.rows} (rejected ${c.rejected}, skipped ${c.skipped})  ` +
    `done ${c.completed + c.failed + c.cancelled}/${c.tasks}: completed ${c.completed}, failed ${c.failed}, ` +
    `cancelled ${c.cancelled}  ${rest}`
  );
}

/**
 * A count's growth per second since the previous reading: a poll can wait on a busy DynamoDB
 * Local, so the rate is over the time that really passed.
 */
export class RateMeter {
  #at = Date.now();
  #count = 0;

  perSecond(count: number): number {
    const now = Date.now();
    const rate = ((count - this.#count) * 1000) / Math.max(1, now - this.#at);
    this.#at = now;
    this.#count = count;
    return rate;
  }
}

/** The job's report (`GET …/report`) as its non-empty lines, the header first, without the BOM. */
export async function reportLines(stack: LocalStack, clientId: string, jobId: string): Promise<string[]> {
  const report = await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}/report`);
  return report.body
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)
    .filter(Boolean);
}

/**
 * Reads an email or SMS job's report, logs its header and its first rows not delivered (bounced,
 * failed …), and counts its last column (the delivery state the channel's events moved each task to).
 */
export async function deliveryStates(
  stack: LocalStack,
  job: { readonly clientId: string; readonly jobId: string },
  log: (line: string) => void,
  prefix: string,
  shown = 6,
): Promise<Record<string, number>> {
  const { clientId, jobId } = job;
  const [header, ...rows] = await reportLines(stack, clientId, jobId);
  const stateOf = (row: string) => row.slice(row.lastIndexOf(',') + 1) || 'none';
  const states: Record<string, number> = {};
  for (const row of rows) states[stateOf(row)] = (states[stateOf(row)] ?? 0) + 1;
  const notDelivered = [header ?? '', ...rows.filter((row) => stateOf(row) !== 'delivered')];
  log(
    `${prefix}: report (GET /clients/${clientId}/jobs/${jobId}/report): ${rows.length} rows; not delivered:`,
  );
  for (const row of reportExcerpt(notDelivered, shown)) log(`  ${row}`);
  return states;
}
