/**
 * When a job's calls and messages may start, all rules together: the job's end, a paused client,
 * the calling hours that apply, and the restricted periods and holidays of the client and of the
 * job (a job's restrictions add to its client's, never replace them: a client's closed day is
 * closed for every job). Every place that decides a start asks here: {@link mayStartNow},
 * {@link earliestStart} or {@link jobMayStartSomewhere}.
 */
import {
  type CallingHours,
  effectiveCallingHours,
  isOpen,
  nextOpening,
} from '#shared/pacing/calling-hours.ts';
import { hoursInZone } from '#shared/pacing/recipient-zone.ts';
import {
  isRestricted,
  NO_RESTRICTIONS,
  type RestrictionHit,
  type Restrictions,
  restrictionAt,
} from '#shared/pacing/restricted-periods.ts';
import { type ClientSettings, type Job, jobHasEnded, type Task } from './model.ts';

type RestrictionSource = Pick<ClientSettings, 'restrictedPeriods' | 'holidays'>;

const memo = new WeakMap<RestrictionSource, WeakMap<RestrictionSource, Restrictions>>();

/**
 * The restrictions of `job` under `client` (the same object again for the same two records, so
 * its compiled form is cached: a start's check costs a lookup, not a parse).
 */
export function jobRestrictions(client: RestrictionSource, job: RestrictionSource): Restrictions {
  let byJob = memo.get(client);
  if (!byJob) {
    byJob = new WeakMap();
    memo.set(client, byJob);
  }
  let restrictions = byJob.get(job);
  if (!restrictions) {
    restrictions = combine(client, job);
    byJob.set(job, restrictions);
  }
  return restrictions;
}

function combine(client: RestrictionSource, job: RestrictionSource): Restrictions {
  const periods = [...(client.restrictedPeriods ?? []), ...(job.restrictedPeriods ?? [])];
  const holidays = [...new Set([client.holidays?.country, job.holidays?.country])].filter(
    (c): c is string => c !== undefined,
  );
  if (periods.length === 0 && holidays.length === 0) return NO_RESTRICTIONS;
  return { periods, holidays };
}

/** The zone calling hours and restricted periods use for `job` in the client's zone. */
export function startZone(client: ClientSettings, job: Job): string {
  return effectiveCallingHours(client.callingHours, job.callingHours).timeZone;
}

/**
 * The zone a task's hours and periods are read in: its recipient's when the job says
 * `timeZoneBy: 'recipient'` and the task knows it, else the client's (the hours' own zone).
 */
export function taskZone(client: ClientSettings, job: Job, task?: Pick<Task, 'timeZone'>): string {
  if (job.timeZoneBy === 'recipient' && task?.timeZone) return task.timeZone;
  return startZone(client, job);
}

/** The hours that govern `job`, read in `zone` (the same weekly windows, another clock). */
function hoursFor(client: ClientSettings, job: Job, zone: string | undefined): CallingHours {
  const hours = effectiveCallingHours(client.callingHours, job.callingHours);
  return zone === undefined ? hours : hoursInZone(hours, zone);
}

/** The restriction holding `now` for `job`, in `zone` (default: {@link startZone}). */
export function restrictionNow(
  client: ClientSettings,
  job: Job,
  now: number,
  zone: string = startZone(client, job),
): RestrictionHit | undefined {
  return restrictionAt(jobRestrictions(client, job), zone, now);
}

/**
 * Whether a call or message of `job` may start now: the job not past its end, the client not
 * paused, inside the hours that apply, outside every restricted period and holiday — all read in
 * `zone` when given (a recipient's, see {@link taskZone}), else in the hours' own zone.
 */
export function mayStartNow(client: ClientSettings, job: Job, now: number, zone?: string): boolean {
  if (jobHasEnded(job, now) || client.paused) return false;
  const hours = hoursFor(client, job, zone);
  if (!isOpen(hours, now)) return false;
  return !isRestricted(jobRestrictions(client, job), hours.timeZone, now);
}

/**
 * Whether some task of `job` may start now: {@link mayStartNow} in the client's zone, or, for a
 * job read in its recipients' zones, only the job's end and the client's pause (whose recipients
 * are inside their hours is the tasks' `readyAt`, stamped with their zone's next opening).
 */
export function jobMayStartSomewhere(client: ClientSettings, job: Job, now: number): boolean {
  if (job.timeZoneBy !== 'recipient') return mayStartNow(client, job, now);
  return !jobHasEnded(job, now) && !client.paused;
}

/**
 * The first instant at or after `now` when the hours are open and no restriction holds, in `zone`
 * when given (ignoring a pause and the job's end, which no clock settles); undefined when that
 * never comes (hours that never open). `now` itself when a start may happen now.
 */
export function earliestStart(
  client: ClientSettings,
  job: Job,
  now: number,
  zone?: string,
): number | undefined {
  const hours = hoursFor(client, job, zone);
  const restrictions = jobRestrictions(client, job);
  let at = now;
  // Each round moves past a closed stretch or a restriction; a year of holidays is far fewer.
  for (let round = 0; round < 800; round++) {
    const opens = nextOpening(hours, at);
    if (opens === undefined) return undefined;
    const hit = restrictionAt(restrictions, hours.timeZone, opens);
    if (!hit) return opens;
    at = hit.end;
  }
  return undefined;
}
