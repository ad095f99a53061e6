/**
 * LINE's monthly message quota against what message jobs still have to send: the rule that decides
 * whether a job may (go on) send(ing), or must be paused before it reaches part of its list.
 *
 * LINE counts one message per recipient of a push or multicast (replies are free), whatever the
 * number of message objects in the request; `GET /v2/bot/message/quota` answers the plan's monthly
 * limit (`{"type":"limited","value":N}`, or `{"type":"none"}` for none) and
 * `/quota/consumption` what was sent this month (`{"totalUsage":N}`):
 * https://developers.line.biz/en/reference/messaging-api/#get-quota and #get-consumption.
 *
 * Pure: no I/O, no clock.
 */
import { endedTasks, type JobCounts } from '#shared/jobs/model.ts';
import type { MessageQuota } from '#shared/line/messaging-client.ts';

/** Messages a job still has to send: its tasks not ended yet (each is one message to one person). */
export function messagesLeft(counts: JobCounts): number {
  return Math.max(0, counts.tasks - endedTasks(counts));
}

/** Messages the channel may still send this month; Infinity when its plan sets no limit. */
export function quotaRemaining(quota: MessageQuota): number {
  return quota.limit === undefined ? Number.POSITIVE_INFINITY : Math.max(0, quota.limit - quota.used);
}

/** What a job needs of the quota: its messages left, once admitted. */
export interface QuotaNeed {
  readonly jobId: string;
  readonly left: number;
}

/** A job the quota cannot cover, with what it needs and what was left for it. */
export interface QuotaShortfall {
  readonly jobId: string;
  readonly left: number;
  /** What the quota leaves this job once the jobs before it are covered. */
  readonly available: number;
}

/**
 * The jobs `remaining` cannot cover, taking them in the order given (the one admitted first is
 * covered first: a later job must not starve an earlier one of the messages it was admitted with).
 * `slack` is added to what is left: messages sent that LINE has counted but the jobs' needs do not
 * show yet (requests in flight while the quota was read).
 */
export function quotaShortfalls(remaining: number, needs: readonly QuotaNeed[], slack = 0): QuotaShortfall[] {
  const short: QuotaShortfall[] = [];
  let available = remaining + slack;
  for (const need of needs) {
    if (need.left <= available) available -= need.left;
    else short.push({ jobId: need.jobId, left: need.left, available });
  }
  return short;
}

/** Why a job was paused for the quota, in an operator's words, with the figures. */
export function quotaPauseReason(short: QuotaShortfall, quota: MessageQuota): string {
  const n = (x: number) => Math.max(0, Math.floor(x)).toLocaleString('en-US');
  const plan =
    quota.limit === undefined
      ? ''
      : ` (the channel's plan allows ${n(quota.limit)} a month, ${n(quota.used)} used)`;
  return (
    `line-quota: LINE's monthly message quota cannot cover this job: ${n(short.left)} messages left to send, ` +
    `${n(short.available)} left in the quota for it${plan}. Raise the plan's limit and resume, or set ` +
    'allowPartialDelivery on the client to send what the quota allows'
  );
}

/** Why a job was paused when LINE itself answered the monthly limit (`429 You have reached your monthly limit.`). */
export const MONTHLY_LIMIT_PAUSE_REASON =
  "line-quota: LINE refused a send: the channel's monthly message limit is reached (429 You have reached " +
  "your monthly limit.). Raise the plan's limit and resume, or set allowPartialDelivery on the client";

/** The reason a task ends `failed` with when LINE refuses it for the monthly limit and partial delivery is allowed. */
export const MONTHLY_LIMIT_FAILURE_REASON =
  "LINE's monthly message limit is reached (429 You have reached your monthly limit.): not delivered " +
  '(the client allows partial delivery)';
