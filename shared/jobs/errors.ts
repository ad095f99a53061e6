/** Typed errors of the jobs use cases; each transport maps them to its statuses once. */
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

export class ValidationError extends Error {
  override name = 'ValidationError';
  readonly fieldErrors: FieldErrors;

  constructor(message: string, fieldErrors: FieldErrors) {
    super(message);
    this.fieldErrors = fieldErrors;
  }
}

export class ClientNotFoundError extends Error {
  override name = 'ClientNotFoundError';
}

export class JobNotFoundError extends Error {
  override name = 'JobNotFoundError';
}

/** A status change the job's lifecycle does not allow from where the job is now. */
export class IllegalTransitionError extends Error {
  override name = 'IllegalTransitionError';
  readonly current: JobStatus;

  constructor(message: string, current: JobStatus) {
    super(message);
    this.current = current;
  }
}

export class UploadTooLargeError extends Error {
  override name = 'UploadTooLargeError';
}

/** The uploaded object was replaced while it was being read. */
export class SourceChangedError extends Error {
  override name = 'SourceChangedError';
}
