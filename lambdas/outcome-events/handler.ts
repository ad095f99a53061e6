/**
 * The outcome event producer (DynamoDB Streams of the tasks and control tables → Lambda): turns a
 * batch of task and job changes into queued webhook deliveries. A failure throws, and the event
 * source mapping retries the batch (the same changes give the same event ids).
 */
import middy from '@middy/core';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { changesOfStreamRecords } from '#shared/adapters/dynamo-stream-changes.ts';
import type { Logger } from '#shared/log.ts';
import type { OutcomeRouter, RouteSummary } from '#shared/outcomes/route.ts';

export interface OutcomeEventsDeps {
  readonly router: Pick<OutcomeRouter, 'route'>;
  readonly log: Logger;
}

export function makeOutcomeEventsHandler(deps: OutcomeEventsDeps) {
  return middy(async (event: DynamoDBStreamEvent): Promise<RouteSummary> => {
    const summary = await deps.router.route(changesOfStreamRecords(event.Records));
    if (summary.deliveries > 0) deps.log.info('outcome events queued', { ...summary });
    return summary;
  });
}
