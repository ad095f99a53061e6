/**
 * The job manager's Lambda handler: an EventBridge scheduled event (every minute) runs the job
 * manager once, alone: the run first takes the run lease (`shared/fleet/run-lease.ts`), and a run
 * that finds another holding it logs that, counts `JobManagerRunsSkipped` and returns `skipped`.
 * The run logs what it did and emits counts as metrics; a run in which some job or
 * client could not be handled still writes the work list and sizes the fleet, then fails, so the
 * function's error alarm fires and EventBridge retries (the run is idempotent).
 */
import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import { FleetError } from '#shared/fleet/errors.ts';
import type { JobManagerResult } from '#shared/fleet/job-manager.ts';
import type { RunLease } from '#shared/fleet/run-lease.ts';
import type { Logger } from '#shared/log.ts';

/** A run that did nothing: another run held the run lease. */
export interface SkippedJobManagerRun {
  readonly skipped: 'another run holds the run lease';
}

export type JobManagerRun = JobManagerResult | SkippedJobManagerRun;

/** True when the run did nothing (another held the run lease). */
export function isSkippedRun(run: JobManagerRun): run is SkippedJobManagerRun {
  return 'skipped' in run;
}

export interface JobManagerHandlerDeps {
  readonly run: () => Promise<JobManagerResult>;
  /** One run at a time (no reserved concurrency). */
  readonly runLease: RunLease;
  readonly log: Logger;
  /** Default `Date.now`: times the run and its lag behind its schedule. */
  readonly now?: () => number;
}

export class JobManagerRunError extends FleetError {}

export function makeJobManagerHandler(deps: JobManagerHandlerDeps) {
  const now = deps.now ?? Date.now;
  return middy(async (event: ScheduledEvent, context: Context): Promise<JobManagerRun> => {
    const startedAt = now();
    // The invocation's id: unique per run (a retry of the same event is a run of its own).
    const runId = context?.awsRequestId ?? randomUUID();
    const alone = await deps.runLease.runAlone(runId, deps.run);
    if (!alone.ran) {
      deps.log.info('job manager run skipped: another run holds the run lease', {
        scheduledAt: event.time,
        runId,
      });
      deps.log.metrics({ JobManagerRunsSkipped: 1 });
      return { skipped: 'another run holds the run lease' };
    }
    const result = alone.result;
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
