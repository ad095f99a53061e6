/**
 * The job manager's Lambda handler: an EventBridge scheduled event (every minute) runs the job
 * manager once. The run logs what it did and emits counts as metrics; a run in which some job or
 * client could not be handled still writes the work list and sizes the fleet, then fails, so the
 * function's error alarm fires and EventBridge retries (the run is idempotent).
 */
import middy from '@middy/core';
import type { ScheduledEvent } from 'aws-lambda';
import type { JobManagerResult } from '#shared/fleet/job-manager.ts';
import type { Logger } from '#shared/log.ts';

export interface JobManagerHandlerDeps {
  readonly run: () => Promise<JobManagerResult>;
  readonly log: Logger;
  /** Default `Date.now`: times the run and its lag behind its schedule. */
  readonly now?: () => number;
}

export class JobManagerRunError extends Error {
  override name = 'JobManagerRunError';
}

export function makeJobManagerHandler(deps: JobManagerHandlerDeps) {
  const now = deps.now ?? Date.now;
  return middy(async (event: ScheduledEvent): Promise<JobManagerResult> => {
    const startedAt = now();
    const result = await deps.run();
    publishRunTimes(deps.log, event, startedAt, now());
    deps.log.info('job manager run', {
      scheduledAt: event.time,
      started: result.started,
      completed: result.completed,
      expiring: result.expiring,
      clients: result.clients,
      served: result.served.length,
      tasksRead: result.read,
      listedUnread: result.unread,
      desiredCount: result.desiredCount,
      desiredVersion: result.desiredVersion,
      superseded: result.desiredCount === undefined,
      stepMs: result.stepMs,
    });
    deps.log.metrics({
      JobsStarted: result.started.length,
      JobsCompleted: result.completed.length,
      ClientsWithWork: result.clients.length,
      // Clients whose outstanding tasks the run read (what changed), and those listed unread
      // because its reads ran out: a run that keeps listing unread is behind.
      ClientsRead: result.read,
      ClientsListedUnread: result.unread,
      JobManagerProblems: result.problems.length,
    });
    if (result.problems.length > 0) {
      for (const problem of result.problems) deps.log.error('job manager step failed', { ...problem });
      throw new JobManagerRunError(
        `${result.problems.length} job manager step(s) failed: ${result.problems
          .map((p) => `${p.step} ${p.id}`)
          .join(', ')}`,
      );
    }
    return result;
  });
}

/**
 * How long the run took, and how late it started after the minute it was scheduled for
 * (EventBridge's `time`): a lag that grows means runs queue behind each other.
 */
function publishRunTimes(log: Logger, event: ScheduledEvent, startedAt: number, endedAt: number): void {
  const scheduledAt = Date.parse(event.time);
  log.metrics(
    {
      JobManagerRunTime: endedAt - startedAt,
      ...(Number.isFinite(scheduledAt) ? { JobManagerLag: Math.max(0, startedAt - scheduledAt) } : {}),
    },
    {},
    { unit: 'Milliseconds', gauge: true },
  );
}
