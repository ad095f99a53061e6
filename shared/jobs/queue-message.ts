/**
 * The ingest queue's messages, written and read through this one module: an S3 event notification
 * for an uploaded list (written by S3), a continuation of a paused ingest, a step of a cancelled
 * or ended job's sweep, of a re-time sweep after a client's hours changed, or an ended job's report
 * to archive (written by Switchboard as JSON).
 */
import { isJobSweepKind, MalformedCancelSweepError, parseCancelSweep } from './cancel.ts';
import type { IngestMessage } from './ingest.ts';
import type { IngestQueueMessage, JobSweepMessage } from './ports.ts';
import {
  type ArchiveReportMessage,
  MalformedArchiveReportError,
  parseArchiveReport,
} from './report-archive.ts';
import { MalformedRetimeSweepError, parseRetimeSweep, type RetimeSweepMessage } from './retime.ts';
import { MalformedS3EventError, parseS3Event } from './s3-events.ts';

/** The body of a message Switchboard itself puts on the ingest queue. */
export function encodeIngestQueueMessage(message: IngestQueueMessage): string {
  return JSON.stringify(message);
}

/** The messages of one SQS record; throws {@link MalformedS3EventError} for a body that is neither. */
export function parseIngestQueueMessage(
  body: string,
): (IngestMessage | JobSweepMessage | RetimeSweepMessage | ArchiveReportMessage)[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    throw new MalformedS3EventError('queue message is not JSON', { cause: error });
  }
  const message = parsed as Partial<Extract<IngestMessage, { kind: 'continue' }>>;
  const kind = (parsed as { kind?: unknown })?.kind;
  if (isJobSweepKind(kind)) return [asQueueMessage(parsed, parseCancelSweep, MalformedCancelSweepError)];
  if (kind === 'retime-sweep') return [asQueueMessage(parsed, parseRetimeSweep, MalformedRetimeSweepError)];
  if (kind === 'archive-report')
    return [asQueueMessage(parsed, parseArchiveReport, MalformedArchiveReportError)];
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

/** One of Switchboard's own messages, read by its parser; its malformation said as the queue's. */
function asQueueMessage<T>(
  parsed: unknown,
  parse: (value: Record<string, unknown>) => T,
  Malformed: new (...args: never[]) => Error,
): T {
  try {
    return parse(parsed as Record<string, unknown>);
  } catch (error) {
    if (error instanceof Malformed) throw new MalformedS3EventError(error.message, { cause: error });
    throw error;
  }
}
