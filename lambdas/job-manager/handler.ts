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
}

export class JobManagerRunError extends Error {
  override name = 'JobManagerRunError';
}

export function makeJobManagerHandler(deps: JobManagerHandlerDeps) {
  return middy(async (event: ScheduledEvent): Promise<JobManagerResult> => {
    const result = await deps.run();
    deps.log.info('job manager run', {
      scheduledAt: event.time,
      started: result.started,
      completed: result.completed,
      clients: result.clients,
      desiredCount: result.desiredCount,
      desiredVersion: result.desiredVersion,
      superseded: result.desiredCount === undefined,
    });
    deps.log.metrics(
      {
        JobsStarted: result.started.length,
        JobsCompleted: result.completed.length,
        ClientsWithWork: result.clients.length,
        JobManagerProblems: result.problems.length,
      },
      { service: 'job-manager' },
    );
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
