/** The API's records as the console reads them (see shared/jobs/api.ts and model.ts). */
import type { JobView as ApiJobView } from '#shared/jobs/api.ts';
import type { JobStatus } from '#shared/jobs/job-lifecycle.ts';
import type { JobChannel, ClientSettings as StoredClientSettings } from '#shared/jobs/model.ts';
import type { JobSeriesPoint } from '#shared/jobs/series-point.ts';
import type { CallingHours, CallingWindow, Weekday } from '#shared/pacing/calling-hours.ts';

export type { Operator } from '#shared/operators/tenancy.ts';
export type { PersonHistoryView, PersonView } from '#shared/people/api.ts';
export type { HistoryEntry } from '#shared/people/history.ts';

export type { CallingHours, CallingWindow, Weekday };

/** The weekdays in the order the calling-hours editor shows them (the shared model's own order). */
export const WEEKDAYS = [
  'mon',
  'tue',
  'wed',
  'thu',
  'fri',
  'sat',
  'sun',
] as const satisfies readonly Weekday[];

/**
 * A client as `GET /clients/{id}` answers it: the shared model itself, so a field the console
 * reads in another shape (calling hours are `{timeZone, weekly}`) does not compile.
 */
export type ClientSettings = StoredClientSettings;

export type { RestrictedPeriod } from '#shared/pacing/restricted-periods.ts';

export type { JobChannel, JobStatus };

/** A job's counts as the API answers them: the stored counts, with `expired` and `outstanding`. */
export type JobCounts = ApiJobView['counts'];

export interface JobView {
  readonly clientId: string;
  readonly jobId: string;
  readonly name: string;
  readonly channel: JobChannel;
  /** The message channels the job falls back through after `channel`, in order. */
  readonly fallback?: ApiJobView['fallback'];
  readonly status: JobStatus;
  readonly startAt: string;
  /** When the job ends: its tasks not done by then expire. */
  readonly endAt?: string;
  /** `recipient`: the hours are read in each recipient's zone. */
  readonly timeZoneBy?: 'client' | 'recipient';
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly counts: JobCounts;
  /** A call job's attempts ended, by result (`Job.results`). */
  readonly results?: ApiJobView['results'];
  readonly failureReason?: string;
  /** Why Switchboard paused the job (LINE's monthly quota…), when it did. */
  readonly pausedReason?: string;
  readonly waiting?: { readonly reason: string; readonly until?: string; readonly message: string };
  readonly live?: {
    readonly callsInFlight: number;
    readonly maxConcurrentCalls: number;
    readonly callsPerSecond: number;
  };
}

export interface RowProblem {
  readonly row: number;
  readonly outcome: 'rejected' | 'skipped';
  readonly code: string;
  readonly reason: string;
  readonly column?: string;
  readonly value?: string;
}

export const FINAL_STATUSES: readonly JobStatus[] = ['completed', 'cancelled', 'failed'];

/** A job's channels as an operator reads them: `line`, or `line → email → sms` for one that falls back. */
export function jobChannels(job: Pick<JobView, 'channel' | 'fallback'>): string {
  return [job.channel, ...(job.fallback ?? [])].join(' → ');
}

/** Tasks that have ended, of all tasks. */
export function doneOf(counts: JobCounts): number {
  return counts.completed + counts.failed + counts.cancelled + (counts.expired ?? 0);
}

/** A LINE channel as the channels API shows it (`shared/channels/api.ts`): no secret, no token. */
export interface ChannelView {
  readonly channelId: string;
  readonly clientId: string;
  readonly autoAnswer: 'reply' | 'push';
  readonly greeting?: string;
  readonly rules: readonly {
    readonly match: 'exact' | 'contains' | 'regex';
    readonly pattern: string;
    readonly answer: string;
    readonly ignoreCase?: boolean;
  }[];
  readonly fallback?: string;
  readonly updatedAt: string;
  readonly secret: { readonly set: true; readonly previousAcceptedUntil?: string };
  readonly accessToken: { readonly set: true };
}

export type { OptOutView } from '#shared/jobs/opt-outs.ts';
export type { SuppressionView } from '#shared/suppressions/api.ts';

/** One window of a job's series (`GET …/jobs/{jobId}/series`), as the brokers sampled it. */
export type { JobSeriesPoint };

export interface JobSeriesPage {
  readonly jobId: string;
  readonly channel: JobChannel;
  readonly samples: readonly JobSeriesPoint[];
  readonly next?: string;
}

export type {
  OutcomeRetry,
  RetryOutcome,
  RetryPolicy,
  RetrySchedule,
} from '#shared/jobs/retry-policy.ts';
