/** Builders for the job manager's tests: clients, jobs and tasks with sensible defaults. */
import { type ClientSettings, type Job, type Task, taskSideOf } from '#shared/jobs/model.ts';
import type { CallingHours } from '#shared/pacing/calling-hours.ts';

/** Monday 5 January 2026, 03:00 UTC: 12:00 in Tokyo, 22:00 on Sunday in New York. */
export const NOW = Date.parse('2026-01-05T03:00:00Z');
export const MINUTE = 60_000;

export const weekdays = (timeZone: string, start: string, end: string): CallingHours => ({
  timeZone,
  weekly: {
    mon: [{ start, end }],
    tue: [{ start, end }],
    wed: [{ start, end }],
    thu: [{ start, end }],
    fri: [{ start, end }],
  },
});

export function client(
  clientId: string,
  hours: CallingHours = weekdays('Asia/Tokyo', '09:00', '18:00'),
): ClientSettings {
  return {
    clientId,
    maxConcurrentCalls: 6,
    callsPerSecond: 1,
    timeZone: hours.timeZone,
    callingHours: hours,
    defaultRegion: 'JP',
    updatedAt: 0,
  };
}

let seq = 0;
export function job(clientId: string, overrides: Partial<Job> = {}): Job {
  seq += 1;
  return {
    clientId,
    jobId: `01JOB${String(seq).padStart(21, '0')}`,
    name: `list ${seq}`,
    channel: 'call',
    scenarioId: 'reminder',
    startAt: NOW - 5 * MINUTE,
    maxAttempts: 3,
    retryDelaySeconds: 600,
    status: 'running',
    counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 0, failed: 0, cancelled: 0 },
    createdAt: 0,
    updatedAt: 0,
    ...overrides,
  };
}

export function task(of: Job, overrides: Partial<Task> = {}): Task {
  seq += 1;
  return {
    clientId: of.clientId,
    jobId: of.jobId,
    taskId: `task-${seq}`,
    row: seq,
    channel: taskSideOf(of.channel),
    recipient: '+81312345678',
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: of.startAt,
    updatedAt: 0,
    ...overrides,
  };
}
