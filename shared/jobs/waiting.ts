/**
 * What a job is waiting for, said where an operator looks (the job's view in the API, the
 * report's response headers, `npm start`'s live line): a job that shows `running` with no call
 * going out must say why, and when it expects to start again, rather than leave the operator to
 * work it out from the client's hours.
 */

import { isCappedWaitingReason } from '#shared/contact-limits/model.ts';
import { effectiveCallingHours, isOpen, nextOpening, wallTimeAt } from '#shared/pacing/calling-hours.ts';
import { type ClientSettings, type Job, jobHasEnded } from './model.ts';
import type { NextTaskOfJob } from './ports.ts';
import { restrictionNow } from './restrictions.ts';

/**
 * - `start-time`: scheduled for later (`startAt`);
 * - `client-paused`: the whole client is paused (`POST /clients/{id}/pause`);
 * - `calling-hours`: outside the job's (or the client's) calling hours;
 * - `restricted-period`: inside a restricted period or public holiday of the client or the job
 *   (until = when it ends);
 * - `concurrent-limit`: as many calls in flight as the client's contract allows;
 * - `job-ended`: the job reached its end (`endAt`): nothing of it starts again; it completes once
 *   its calls in flight have ended and its other tasks have been expired;
 * - `recipient-hours`: a job read in its recipients' zones whose every recipient left is outside
 *   their local hours or inside a restricted period there (until = the first opening);
 * - `contact-limit`: its next recipient has been contacted as often as the client's contact
 *   limits allow (until = the limit's window end);
 * - `retry-delay`: every task left waits for its retry delay (until = the first due).
 * The last three come from the job's first waiting task ({@link nextTaskWait}).
 */
export type JobWaitReason =
  | 'start-time'
  | 'client-paused'
  | 'calling-hours'
  | 'restricted-period'
  | 'concurrent-limit'
  | 'job-ended'
  | 'recipient-hours'
  | 'contact-limit'
  | 'retry-delay';

export interface JobWaiting {
  readonly reason: JobWaitReason;
  /** When the job expects to start again (ISO 8601, UTC); absent when no time is known. */
  readonly until?: string;
  /** One sentence for a person, times in the client's zone. */
  readonly message: string;
}

export interface JobWaitingInput {
  readonly job: Job;
  readonly client: ClientSettings;
  readonly now: number;
  /** The client's calls in flight now, when known (the lease item). */
  readonly callsInFlight?: number;
}

/** Why `job` is not starting calls or messages now, or undefined when nothing holds it back. */
export function jobWaitingFor(input: JobWaitingInput): JobWaiting | undefined {
  const { job, client, now } = input;
  if (job.status !== 'scheduled' && job.status !== 'running') return undefined;
  const zone = client.timeZone;
  if (jobHasEnded(job, now)) {
    return {
      reason: 'job-ended',
      message: `the job ended at ${localTime(zone, job.endAt!)}: nothing more starts; tasks not done expire, and it completes once its calls in flight end`,
    };
  }
  if (job.status === 'scheduled' && job.startAt > now) {
    return at('start-time', job.startAt, `scheduled to start at ${localTime(zone, job.startAt)}`);
  }
  if (client.paused) {
    return {
      reason: 'client-paused',
      message: `the client is paused: nothing starts until POST /clients/${client.clientId}/resume`,
    };
  }
  // Read in each recipient's zone, the hours and periods hold tasks back one by one, not the job.
  if (job.timeZoneBy === 'recipient') return concurrentLimit(input);
  const restricted = restrictionNow(client, job, now);
  if (restricted) {
    const hours = effectiveCallingHours(client.callingHours, job.callingHours);
    const opens = nextOpening(hours, restricted.end);
    const then =
      opens === undefined || opens === restricted.end
        ? ''
        : `; starts resume at ${localTime(zone, opens)}, when the hours open`;
    return at(
      'restricted-period',
      restricted.end,
      `inside the restricted period ${restricted.name} until ${localTime(zone, restricted.end)}${then}`,
    );
  }
  const hours = effectiveCallingHours(client.callingHours, job.callingHours);
  if (!isOpen(hours, now)) {
    const whose = job.callingHours ? "the job's" : "the client's";
    const opens = nextOpening(hours, now);
    if (opens === undefined) {
      return { reason: 'calling-hours', message: `outside ${whose} calling hours, which never open` };
    }
    return at(
      'calling-hours',
      opens,
      `outside ${whose} calling hours; they open at ${localTime(zone, opens)}`,
    );
  }
  return concurrentLimit(input);
}

function concurrentLimit({ job, client, callsInFlight }: JobWaitingInput): JobWaiting | undefined {
  if (job.channel !== 'call' || callsInFlight === undefined) return undefined;
  if (callsInFlight < client.maxConcurrentCalls) return undefined;
  return {
    reason: 'concurrent-limit',
    message: `${callsInFlight} calls in flight, the client's limit of ${client.maxConcurrentCalls}: the next starts when one ends`,
  };
}

/**
 * Why a running job whose hours are open and whose client has room starts nothing: its first
 * waiting task (`next`, from the head of the client's outstanding index) is not due yet. Undefined
 * when it is due, or not known.
 */
export function nextTaskWait(
  job: Job,
  client: ClientSettings,
  next: NextTaskOfJob | undefined,
  now: number,
): JobWaiting | undefined {
  if (job.status !== 'running' || !next || next.readyAt <= now) return undefined;
  const zone = client.timeZone;
  if (isCappedWaitingReason(next.reason)) {
    const limit = /\(contact limit (.+)\)$/.exec(next.reason!)?.[1];
    return at(
      'contact-limit',
      next.readyAt,
      `its next recipient has been contacted as often as the contact limit${limit ? ` (${limit})` : ''} allows; they may be contacted again from ${localTime(zone, next.readyAt)}`,
    );
  }
  if (job.timeZoneBy === 'recipient') {
    return at(
      'recipient-hours',
      next.readyAt,
      `every recipient left is outside their local calling hours or in a restricted period; the first opens at ${localTime(next.timeZone ?? zone, next.readyAt)}`,
    );
  }
  return at(
    'retry-delay',
    next.readyAt,
    `every task left waits for its retry delay; the next is due at ${localTime(zone, next.readyAt)}`,
  );
}

function at(reason: JobWaitReason, instant: number, message: string): JobWaiting {
  return { reason, until: new Date(instant).toISOString(), message };
}

/** `2026-11-25 09:00 Asia/Tokyo`. */
export function localTime(timeZone: string, instant: number): string {
  return `${new Date(wallTimeAt(timeZone, instant)).toISOString().slice(0, 16).replace('T', ' ')} ${timeZone}`;
}
