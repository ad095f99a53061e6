/**
 * A job's life: its statuses and the moves between them. Imports nothing, so the console (a
 * browser bundle, typechecked without Node's types) reads the same `JobStatus`.
 */

/** uploading → validating → scheduled → running → completed; paused, cancelled, failed. */
export type JobStatus =
  | 'uploading'
  | 'validating'
  | 'scheduled'
  | 'running'
  | 'paused'
  | 'completed'
  | 'cancelled'
  | 'failed';

/** Legal job transitions; anything else is a 409. */
export const JOB_TRANSITIONS: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  uploading: ['validating', 'cancelled', 'failed'],
  validating: ['scheduled', 'failed', 'cancelled'],
  scheduled: ['running', 'paused', 'cancelled'],
  // failed: LINE refused the message of a running job, whose tasks then failed unsent.
  running: ['completed', 'paused', 'cancelled', 'failed'],
  paused: ['scheduled', 'running', 'cancelled'],
  completed: [],
  cancelled: [],
  failed: [],
};

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return JOB_TRANSITIONS[from].includes(to);
}
