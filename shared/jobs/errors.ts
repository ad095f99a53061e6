/** Typed errors of the jobs use cases; each transport maps them to its statuses once. */
import { SwitchboardError } from '#shared/errors.ts';
import type { JobStatus } from './job-lifecycle.ts';

/** Field path (`callingHours.mon[0].start`) → what is wrong with it. */
export type FieldErrors = Readonly<Record<string, readonly string[]>>;

/**
 * An empty map of field errors. Field names come from the request (an unknown key is reported by
 * name), so the map has no prototype: `__proto__`, `constructor` or `toString` are keys like any other.
 */
export function emptyFieldErrors(): Record<string, string[]> {
  return Object.create(null) as Record<string, string[]>;
}

/** The base of every error in jobs: their use cases, lists, sweeps and reports. */
export class JobError extends SwitchboardError {}

/**
 * A job error class that carries one detail beside its message, under `key`: what a transport
 * puts in its answer besides the message (a 400's field errors, a 409's current status).
 */
function jobErrorWith<Key extends string, Detail>(key: Key) {
  class JobErrorWithDetail extends JobError {
    constructor(message: string, detail: Detail, options?: ErrorOptions) {
      super(message, options);
      Object.assign(this, { [key]: detail });
    }
  }
  return JobErrorWithDetail as new (
    message: string,
    detail: Detail,
    options?: ErrorOptions,
  ) => JobErrorWithDetail & { readonly [K in Key]: Detail };
}

export class ValidationError extends jobErrorWith<'fieldErrors', FieldErrors>('fieldErrors') {}

export class ClientNotFoundError extends JobError {}

export class JobNotFoundError extends JobError {}

/** A status change the job's lifecycle does not allow from where the job is now. */
export class IllegalTransitionError extends jobErrorWith<'current', JobStatus>('current') {}

export class UploadTooLargeError extends JobError {}

/** The uploaded object was replaced while it was being read. */
export class SourceChangedError extends JobError {}
