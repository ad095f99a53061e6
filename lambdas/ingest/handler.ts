/**
 * The ingest (SQS standard queue → Lambda, partial batch failures): each record is an S3 event
 * notification for an uploaded list, or a continuation of a paused ingest. The run's remaining
 * time comes from the Lambda context, so a long file pauses in time and continues in a new run.
 */
import middy from '@middy/core';
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { IngestJob, IngestMessage } from '#shared/jobs/ingest.ts';
import { MalformedS3EventError, parseS3Event } from '#shared/jobs/s3-events.ts';
import type { Logger } from '#shared/log.ts';

/** The messages of one SQS record; throws {@link MalformedS3EventError} for a body that is neither. */
export function ingestMessages(body: string): IngestMessage[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new MalformedS3EventError('queue message is not JSON');
  }
  const message = parsed as Partial<Extract<IngestMessage, { kind: 'continue' }>>;
  if (message?.kind === 'continue') {
    if (
      typeof message.clientId !== 'string' ||
      typeof message.jobId !== 'string' ||
      !Number.isInteger(message.step)
    ) {
      throw new MalformedS3EventError('continuation without clientId, jobId or step');
    }
    return [{ kind: 'continue', clientId: message.clientId, jobId: message.jobId, step: message.step! }];
  }
  return parseS3Event(parsed).map((object) => ({ kind: 'object', object }));
}

export function makeIngestHandler(deps: { readonly ingest: IngestJob; readonly log: Logger }) {
  return middy(async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    const failures: SQSBatchItemFailure[] = [];
    for (const record of event.Records) {
      let messages: IngestMessage[];
      try {
        messages = ingestMessages(record.body);
      } catch (error) {
        // Retrying cannot make it readable: drop it, loudly.
        deps.log.error('ingest message dropped', {
          messageId: record.messageId,
          reason: (error as Error).message,
        });
        continue;
      }
      try {
        for (const message of messages) {
          const outcome = await deps.ingest.handle(message, {
            remainingMs: () => context.getRemainingTimeInMillis(),
            receiveCount: Number(record.attributes.ApproximateReceiveCount ?? 1),
          });
          deps.log.info(`ingest ${outcome.kind}`, { ...outcome });
          if (outcome.kind !== 'ignored')
            deps.log.metrics({ [`Ingest${outcome.kind[0]!.toUpperCase()}${outcome.kind.slice(1)}`]: 1 });
        }
      } catch (error) {
        deps.log.error('ingest failed; the message will be retried', { messageId: record.messageId, error });
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures: failures };
  });
}
