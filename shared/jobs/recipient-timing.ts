/**
 * A task's zone and first `readyAt` when its job reads hours and periods in each recipient's zone
 * (issue 14 #4). The zone is the list's `timezone` cell, else the number's country's single zone,
 * else the client's. `readyAt` is the first instant from the job's start when that zone's hours
 * are open and no restriction holds, so the `outstanding` index, ordered by `readyAt`, hands a
 * broker the recipients it may call now first and keeps the others behind until their morning
 * (see `docs/contact-time.md`, "Claiming by zone").
 */
import { recipientZone } from '#shared/pacing/recipient-zone.ts';
import type { ClientSettings, Job, Task } from './model.ts';
import { earliestStart, taskZone } from './restrictions.ts';

export function recipientTiming(
  job: Job,
  client: ClientSettings,
  draft: { readonly recipient: string; readonly timeZone?: string },
): Pick<Task, 'readyAt' | 'timeZone'> {
  if (job.timeZoneBy !== 'recipient' || job.channel !== 'call') return { readyAt: job.startAt };
  const timeZone = draft.timeZone ?? recipientZone(draft.recipient, client.timeZone);
  // Hours that never open leave the task at the job's start: the broker's check still holds it.
  const readyAt = earliestStart(client, job, job.startAt, timeZone) ?? job.startAt;
  return { readyAt, timeZone };
}

/**
 * When a retry of `task` that falls due at `dueAt` (the end of its retry delay) may start: for a
 * job read in its recipients' zones, the first instant at or after `dueAt` when the recipient's
 * zone is inside the hours and outside every restricted period and holiday, so the retry waits in
 * the `outstanding` index until its recipient's morning instead of falling due at night; `dueAt`
 * itself for any other job (its hours are the job's, checked at the job) or when the hours never open.
 */
export function retryReadyAt(
  client: ClientSettings,
  job: Job,
  task: Pick<Task, 'timeZone'>,
  dueAt: number,
): number {
  if (job.timeZoneBy !== 'recipient' || job.channel !== 'call') return dueAt;
  return earliestStart(client, job, dueAt, taskZone(client, job, task)) ?? dueAt;
}
