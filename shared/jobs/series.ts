/**
 * A job's series as the operator API answers it (`GET …/jobs/{jobId}/series?since=&limit=`): the
 * samples the brokers took of the job (`shared/broker/job-series.ts`) with a window starting after
 * `since` (default: the job's last hour — before now while it runs, else before it last changed),
 * oldest first, one per window, at most `limit` (default and most
 * 360: an hour at 10 s) — one Query, whatever the job's size. `next` is the `since` of the next
 * page when there is more; the console passes its last sample's `at` on each refresh.
 */
import { type JobSample, type JobSeriesReader, mergeSamples } from '#shared/broker/job-series.ts';
import { ValidationError } from './errors.ts';
import type { Job } from './model.ts';
import type { JobSeriesPoint } from './series-point.ts';

export const SERIES_DEFAULT_SPAN_MS = 3_600_000;
export const SERIES_MAX_LIMIT = 360;
/** After a job stops, its series goes on for the calls still in flight and the idle windows. */
const SERIES_TAIL_MS = 120_000;

export interface JobSeriesAnswer {
  readonly jobId: string;
  readonly channel: Job['channel'];
  readonly samples: JobSeriesPoint[];
  readonly next?: string;
}

/** Reads one page of a job the caller may see (its client already checked). */
export async function readJobSeries(
  reader: JobSeriesReader,
  job: Job,
  query: { readonly since?: string; readonly limit?: string },
  now: number,
): Promise<JobSeriesAnswer> {
  const { since, limit } = parseSeriesQuery(query, lastHourEnd(job, now));
  const page = await reader.since(job.clientId, job.jobId, since, limit);
  let samples = mergeSamples(page.samples);
  let next: string | undefined;
  if (page.more && samples.length > 0) {
    // The last window may have a part on the next page (another broker's): leave it to that page.
    if (samples.length > 1) samples = samples.slice(0, -1);
    next = new Date(samples.at(-1)!.at).toISOString();
  }
  return { jobId: job.jobId, channel: job.channel, samples: samples.map(pointOf), ...(next ? { next } : {}) };
}

/** Where the default hour ends: now for a job that may be sampled now, else a little after its last change. */
function lastHourEnd(job: Job, now: number): number {
  if (job.status === 'running' || job.status === 'scheduled') return now;
  return Math.min(now, job.updatedAt + SERIES_TAIL_MS);
}

function parseSeriesQuery(
  query: { readonly since?: string; readonly limit?: string },
  end: number,
): { since: number; limit: number } {
  const fieldErrors: Record<string, string[]> = {};
  const since = query.since === undefined ? end - SERIES_DEFAULT_SPAN_MS : Date.parse(query.since);
  if (Number.isNaN(since)) fieldErrors.since = ['must be a date and time (ISO 8601)'];
  const limit = query.limit === undefined ? SERIES_MAX_LIMIT : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > SERIES_MAX_LIMIT) {
    fieldErrors.limit = [`must be a whole number from 1 to ${SERIES_MAX_LIMIT}`];
  }
  if (Object.keys(fieldErrors).length > 0) throw new ValidationError('invalid query', fieldErrors);
  return { since, limit };
}

function pointOf(sample: JobSample): JobSeriesPoint {
  return {
    at: new Date(sample.at).toISOString(),
    seconds: sample.seconds,
    callsInFlight: sample.peakInFlight,
    ...(sample.maxConcurrentCalls === undefined ? {} : { maxConcurrentCalls: sample.maxConcurrentCalls }),
    starts: sample.starts,
    ...(sample.callsPerSecond === undefined ? {} : { callsPerSecond: sample.callsPerSecond }),
    messagesSent: sample.messagesSent,
    rateLimited: sample.rateLimited,
  };
}
