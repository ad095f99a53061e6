/**
 * The ingest (SQS standard queue → Lambda, partial batch failures): each record is an S3 event
 * notification for an uploaded list, a continuation of a paused ingest, a step of a cancelled
 * or ended job's sweep, of a re-time sweep, or an ended job's report to archive. The run's remaining time comes from the Lambda context, so a long file (or a long
 * sweep) pauses in time and continues in a new run.
 */
import middy from '@middy/core';
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { JobSweep } from '#shared/jobs/cancel.ts';
import type { IngestJob, IngestMessage, IngestOutcome } from '#shared/jobs/ingest.ts';
import type { JobSweepMessage } from '#shared/jobs/ports.ts';
import { parseIngestQueueMessage } from '#shared/jobs/queue-message.ts';
import type { ArchiveReportMessage, ReportArchiver } from '#shared/jobs/report-archive.ts';
import type { RetimeSweep, RetimeSweepMessage } from '#shared/jobs/retime.ts';
import type { Logger } from '#shared/log.ts';

/** What the ingest queue's handler works with. */
interface IngestHandlerDeps {
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
}

type IngestQueueMessage = IngestMessage | JobSweepMessage | RetimeSweepMessage | ArchiveReportMessage;

/** The record a message came in and the run's context: what a step needs to pause in time. */
interface Delivery {
  readonly record: SQSRecord;
  readonly context: Context;
}

export function makeIngestHandler(deps: IngestHandlerDeps) {
  const now = deps.now ?? Date.now;
  return middy(async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    const failures: SQSBatchItemFailure[] = [];
    for (const record of event.Records) {
      const messages = readMessages(record, deps.log);
      if (!messages) continue;
      try {
        for (const message of messages) await handleMessage(message, { record, context }, deps, now);
      } catch (error) {
        deps.log.error('ingest failed; the message will be retried', { messageId: record.messageId, error });
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures: failures };
  });
}

/** The record's messages; undefined (logged, dropped) when it cannot be read: a retry cannot fix it. */
function readMessages(record: SQSRecord, log: Logger): IngestQueueMessage[] | undefined {
  try {
    return parseIngestQueueMessage(record.body);
  } catch (error) {
    log.error('ingest message dropped', { messageId: record.messageId, reason: (error as Error).message });
    return undefined;
  }
}

/** Hands one message to its use case (archive, re-time, sweep or ingest) and logs what it did. */
async function handleMessage(
  message: IngestQueueMessage,
  { record, context }: Delivery,
  deps: IngestHandlerDeps,
  now: () => number,
): Promise<void> {
  const remainingMs = () => context.getRemainingTimeInMillis();
  if (message.kind === 'archive-report') {
    const archived = await deps.archive.handle(message);
    deps.log.info(`report archive ${archived.kind}`, { ...archived });
    return;
  }
  if (message.kind === 'retime-sweep') {
    const retimed = await deps.retime.handle(message, { remainingMs });
    deps.log.info(`re-time sweep ${retimed.kind}`, { ...retimed });
    return;
  }
  if (message.kind === 'cancel-sweep' || message.kind === 'expire-sweep') {
    const swept = await deps.sweep.handle(message, { remainingMs });
    deps.log.info(`${message.kind === 'cancel-sweep' ? 'cancel' : 'expire'} sweep ${swept.kind}`, {
      ...swept,
    });
    return;
  }
  const startedAt = now();
  const outcome = await deps.ingest.handle(message, {
    remainingMs,
    receiveCount: Number(record.attributes.ApproximateReceiveCount ?? 1),
  });
  deps.log.info(`ingest ${outcome.kind}`, { ...outcome });
  if (outcome.kind !== 'ignored') publishIngestMetrics(deps.log, outcome, now() - startedAt);
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
