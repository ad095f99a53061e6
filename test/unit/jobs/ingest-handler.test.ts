import { readFileSync } from 'node:fs';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeIngestHandler } from '#lambdas/ingest/handler.ts';
import { JobSweep } from '#shared/jobs/cancel.ts';
import type { IngestJob, IngestMessage } from '#shared/jobs/ingest.ts';
import { parseIngestQueueMessage as ingestMessages } from '#shared/jobs/queue-message.ts';
import { ReportArchiver } from '#shared/jobs/report-archive.ts';
import { RetimeSweep } from '#shared/jobs/retime.ts';
import { MalformedS3EventError } from '#shared/jobs/s3-events.ts';
import { silentLogger } from '#shared/log.ts';

const s3Event = readFileSync(new URL('../../fixtures/jobs/s3-event-put.json', import.meta.url), 'utf8');

const record = (messageId: string, body: string, receiveCount = '1'): SQSRecord =>
  ({
    messageId,
    body,
    receiptHandle: messageId,
    attributes: { ApproximateReceiveCount: receiveCount },
  }) as unknown as SQSRecord;

const context = { getRemainingTimeInMillis: () => 123_456 } as Context;

describe('ingest queue messages', () => {
  it('reads continuations and S3 notifications, and refuses anything else', () => {
    expect(ingestMessages('{"kind":"continue","clientId":"acme","jobId":"J","step":3}')).toEqual([
      { kind: 'continue', clientId: 'acme', jobId: 'J', step: 3 },
    ]);
    expect(ingestMessages(s3Event)).toMatchObject([
      { kind: 'object', object: { key: 'incoming/acme/March list 電話(2).csv' } },
    ]);
    expect(
      ingestMessages('{"kind":"cancel-sweep","clientId":"acme","jobId":"J","shard":4,"cursor":"t-9"}'),
    ).toEqual([{ kind: 'cancel-sweep', clientId: 'acme', jobId: 'J', shard: 4, cursor: 't-9' }]);
    expect(
      ingestMessages(
        '{"kind":"cancel-sweep","clientId":"acme","jobId":"J","shard":7,"heldUntil":1795000000000}',
      ),
    ).toEqual([
      { kind: 'cancel-sweep', clientId: 'acme', jobId: 'J', shard: 7, heldUntil: 1_795_000_000_000 },
    ]);
    // The sweep of a job past its end travels the same way, and continues as what it is.
    expect(
      ingestMessages('{"kind":"expire-sweep","clientId":"acme","jobId":"J","shard":2,"cursor":"t-3"}'),
    ).toEqual([{ kind: 'expire-sweep', clientId: 'acme', jobId: 'J', shard: 2, cursor: 't-3' }]);
    expect(() => ingestMessages('{"kind":"expire-sweep","clientId":"acme","shard":0}')).toThrow(
      MalformedS3EventError,
    );
    expect(() => ingestMessages('{"kind":"cancel-sweep","clientId":"acme","jobId":"J","shard":99}')).toThrow(
      MalformedS3EventError,
    );
    expect(() =>
      ingestMessages('{"kind":"cancel-sweep","clientId":"acme","jobId":"J","shard":0,"heldUntil":"soon"}'),
    ).toThrow(MalformedS3EventError);
    expect(() => ingestMessages('not json')).toThrow(MalformedS3EventError);
    expect(() => ingestMessages('{"kind":"continue","clientId":"acme"}')).toThrow(MalformedS3EventError);
  });
});

describe('ingest handler', () => {
  it('hands each message over with the run time left, drops unreadable ones and retries failed ones', async () => {
    const seen: { message: IngestMessage; remaining: number; receiveCount: number }[] = [];
    const ingest: IngestJob = {
      async handle(message, ctx) {
        seen.push({ message, remaining: ctx.remainingMs(), receiveCount: ctx.receiveCount });
        if (message.kind === 'continue' && message.jobId === 'boom') throw new Error('DynamoDB unavailable');
        return { kind: 'ignored', reason: 'test' };
      },
    };
    const sweep = new JobSweep({
      jobs: { get: async () => undefined },
      tasks: {
        sweepPage: async () => ({ tasks: [] }),
        endTasks: async () => 0,
      },
      queue: { send: async () => {} },
      clock: { now: () => 0 },
    });
    const retime = new RetimeSweep({
      jobs: { get: async () => undefined },
      clients: { get: async () => undefined },
      tasks: { retimePage: async () => ({ tasks: [] }), advance: async () => false },
      queue: { send: async () => {} },
      clock: { now: () => 0 },
    });
    const archive = new ReportArchiver({
      jobs: { get: async () => undefined, recordReportArchive: async () => {} },
      tasks: { shard: async function* () {} },
      files: { write: async () => {} },
      validationReports: { entries: async function* () {} },
      queue: { send: async () => {} },
      clock: { now: () => 0 },
    });
    const handler = makeIngestHandler({ ingest, sweep, retime, archive, log: silentLogger });
    const event: SQSEvent = {
      Records: [
        record('a', s3Event),
        record('b', '{"kind":"continue","clientId":"acme","jobId":"J","step":1}', '2'),
        record('c', 'garbage'),
        record('d', '{"kind":"continue","clientId":"acme","jobId":"boom","step":0}'),
      ],
    };
    expect(await handler(event, context)).toEqual({ batchItemFailures: [{ itemIdentifier: 'd' }] });
    expect(seen.map((s) => [s.message.kind, s.remaining, s.receiveCount])).toEqual([
      ['object', 123_456, 1],
      ['continue', 123_456, 2],
      ['continue', 123_456, 1],
    ]);
  });
});
