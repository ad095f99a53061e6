/**
 * The ingest (SQS standard queue → Lambda, partial batch failures): each record is an S3 event
 * notification for an uploaded list, a continuation of a paused ingest, a step of a cancelled
 * or ended job's sweep, of a re-time sweep, or an ended job's report to archive. The run's remaining time comes from the Lambda context, so a long file (or a long
 * sweep) pauses in time and continues in a new run.
 */
import middy from '@middy/core';
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { JobSweep } from '#shared/jobs/cancel.ts';
import type { IngestJob, IngestMessage, IngestOutcome } from '#shared/jobs/ingest.ts';
import type { JobSweepMessage } from '#shared/jobs/ports.ts';
import { parseIngestQueueMessage } from '#shared/jobs/queue-message.ts';
import type { ArchiveReportMessage, ReportArchiver } from '#shared/jobs/report-archive.ts';
import type { RetimeSweep, RetimeSweepMessage } from '#shared/jobs/retime.ts';
import type { Logger } from '#shared/log.ts';

export function makeIngestHandler(deps: {
  readonly ingest: IngestJob;
  /** The cancel and expire sweeps. */
  readonly sweep: JobSweep;
  /** The re-time sweep after a client's hours changed. */
  readonly retime: RetimeSweep;
  /** An ended job's final report, archived to S3 before its tasks expire. */
  readonly archive: ReportArchiver;
  readonly log: Logger;
  /** Default `Date.now`: times a run for the rows-per-second metric. */
  readonly now?: () => number;
}) {
  const now = deps.now ?? Date.now;
  return middy(async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    const failures: SQSBatchItemFailure[] = [];
    for (const record of event.Records) {
      let messages: (IngestMessage | JobSweepMessage | RetimeSweepMessage | ArchiveReportMessage)[];
      try {
        messages = parseIngestQueueMessage(record.body);
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
          if (message.kind === 'archive-report') {
            const archived = await deps.archive.handle(message);
            deps.log.info(`report archive ${archived.kind}`, { ...archived });
            continue;
          }
          if (message.kind === 'retime-sweep') {
            const retimed = await deps.retime.handle(message, {
              remainingMs: () => context.getRemainingTimeInMillis(),
            });
            deps.log.info(`re-time sweep ${retimed.kind}`, { ...retimed });
            continue;
          }
          if (message.kind === 'cancel-sweep' || message.kind === 'expire-sweep') {
            const swept = await deps.sweep.handle(message, {
              remainingMs: () => context.getRemainingTimeInMillis(),
            });
            deps.log.info(`${message.kind === 'cancel-sweep' ? 'cancel' : 'expire'} sweep ${swept.kind}`, {
              ...swept,
            });
            continue;
          }
          const startedAt = now();
          const outcome = await deps.ingest.handle(message, {
            remainingMs: () => context.getRemainingTimeInMillis(),
            receiveCount: Number(record.attributes.ApproximateReceiveCount ?? 1),
          });
          deps.log.info(`ingest ${outcome.kind}`, { ...outcome });
          if (outcome.kind !== 'ignored') publishIngestMetrics(deps.log, outcome, now() - startedAt);
        }
      } catch (error) {
        deps.log.error('ingest failed; the message will be retried', { messageId: record.messageId, error });
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures: failures };
  });
}

/** One run's count by outcome (`IngestScheduled`, `IngestPaused`, `IngestFailed`), rows and rows per second. */
function publishIngestMetrics(
  log: Logger,
  outcome: Exclude<IngestOutcome, { kind: 'ignored' }>,
  elapsedMs: number,
): void {
  log.metrics({ [`Ingest${outcome.kind[0]!.toUpperCase()}${outcome.kind.slice(1)}`]: 1 });
  const rows = outcome.rowsRead ?? 0;
  if (rows === 0) return;
  log.metrics({ IngestRows: rows });
  log.metrics(
    { IngestRowsPerSecond: Math.round((rows * 1000) / Math.max(1, elapsedMs)) },
    {},
    { unit: 'Count/Second' },
  );
}
