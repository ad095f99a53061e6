/**
 * Retries by outcome (issue 14 #5): per job, for each way an attempt can end without a
 * conversation — `busy`, `no-answer`, `voicemail` (an answering machine), `failed` — how many
 * attempts a task may make in all and how long it waits before the next one. The wait is a
 * schedule: fixed, linear, exponential (capped), or a list (its last entry repeats). A retry waits
 * in the `outstanding` index at its `readyAt`, among the first attempts of the job (earliest
 * first), and starts only inside calling hours like any start; each attempt keeps its own
 * idempotency key (`attemptKey`).
 *
 * Without a policy for an outcome, the job's `maxAttempts` and `retryDelaySeconds` apply to busy,
 * no-answer and voicemail, and `failed` is not retried — the behaviour before policies existed.
 */
import { z } from 'zod';

export const RETRY_OUTCOMES = ['busy', 'no-answer', 'voicemail', 'failed'] as const;
export type RetryOutcome = (typeof RETRY_OUTCOMES)[number];

/** How long the n-th retry waits (n = 1 after the first attempt), in seconds. */
export type RetrySchedule =
  | { readonly kind: 'fixed'; readonly seconds: number }
  | { readonly kind: 'linear'; readonly seconds: number; readonly stepSeconds: number }
  | {
      readonly kind: 'exponential';
      readonly seconds: number;
      readonly factor: number;
      /** The longest wait (default a day). */
      readonly maxSeconds?: number;
    }
  | { readonly kind: 'list'; readonly seconds: readonly number[] };

export interface OutcomeRetry {
  /** Attempts a task may make in all, the first included (1: no retry after this outcome). */
  readonly maxAttempts: number;
  /** Required when `maxAttempts` > 1. */
  readonly delay?: RetrySchedule;
}

export type RetryPolicy = { readonly [O in RetryOutcome]?: OutcomeRetry };

/** A retry never waits longer than LINE's and the providers' patience allows a job: a week. */
export const MAX_RETRY_DELAY_SECONDS = 7 * 86_400;
const DAY_SECONDS = 86_400;

const seconds = z
  .number()
  .int('must be a whole number of seconds')
  .min(0, 'must be 0 or more')
  .max(MAX_RETRY_DELAY_SECONDS, 'must be at most a week (604800)');

const scheduleSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('fixed'), seconds }),
  z.strictObject({ kind: z.literal('linear'), seconds, stepSeconds: seconds }),
  z.strictObject({
    kind: z.literal('exponential'),
    seconds: seconds.min(1, 'must be at least 1'),
    factor: z.number().min(1, 'must be 1 or more').max(10, 'must be at most 10'),
    maxSeconds: seconds.optional(),
  }),
  z.strictObject({ kind: z.literal('list'), seconds: z.array(seconds).min(1, 'must list a wait').max(20) }),
]);

const outcomeRetrySchema = z
  .strictObject({
    maxAttempts: z.number().int('must be a whole number').min(1).max(10),
    delay: scheduleSchema.optional(),
  })
  .refine((r) => r.maxAttempts === 1 || r.delay !== undefined, {
    message: 'a delay schedule is needed when maxAttempts is over 1',
    path: ['delay'],
  });

/** The job option `retries`: one entry per outcome, each optional. */
export const retryPolicySchema = z.strictObject({
  busy: outcomeRetrySchema.optional(),
  'no-answer': outcomeRetrySchema.optional(),
  voicemail: outcomeRetrySchema.optional(),
  failed: outcomeRetrySchema.optional(),
});

/** The wait before retry number `n` (1 = the first retry), in ms. */
export function retryDelayMs(schedule: RetrySchedule, n: number): number {
  const i = Math.max(1, Math.floor(n)) - 1;
  let s: number;
  switch (schedule.kind) {
    case 'fixed':
      s = schedule.seconds;
      break;
    case 'linear':
      s = schedule.seconds + schedule.stepSeconds * i;
      break;
    case 'exponential':
      s = Math.min(schedule.maxSeconds ?? DAY_SECONDS, schedule.seconds * schedule.factor ** i);
      break;
    case 'list':
      s = schedule.seconds[Math.min(i, schedule.seconds.length - 1)]!;
      break;
  }
  return Math.min(MAX_RETRY_DELAY_SECONDS, s) * 1000;
}

/** What the job says of retries, as far as an outcome is concerned. */
export interface RetrySettings {
  readonly maxAttempts: number;
  readonly retryDelaySeconds: number;
  readonly retries?: RetryPolicy;
}

/**
 * Whether a task whose attempt number `attempts` ended with `outcome` is tried again, and after
 * how long: `{ delayMs }`, or undefined when it has used the attempts that outcome allows.
 */
export function nextRetry(
  outcome: RetryOutcome,
  attempts: number,
  job: RetrySettings,
): { readonly delayMs: number } | undefined {
  const policy = job.retries?.[outcome];
  if (policy) {
    if (attempts >= policy.maxAttempts || !policy.delay) return undefined;
    return { delayMs: retryDelayMs(policy.delay, attempts) };
  }
  if (outcome === 'failed' || attempts >= job.maxAttempts) return undefined;
  return { delayMs: job.retryDelaySeconds * 1000 };
}
