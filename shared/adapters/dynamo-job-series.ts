/**
 * A job's series (`shared/broker/job-series.ts`) in the tasks table: one small item per sample,
 * `{jobId}#series` / `{window start, ISO 8601}#{brokerId}`, next to the job's tasks and its multicast
 * records (`{jobId}#batch`), and like them removed by the table's TTL (`expiresAt`, epoch seconds).
 * A task's partition is `{jobId}#{shard}` with a numeric shard, so no read of tasks ever meets a
 * sample, and reading the series never reads a task. Why this table and one item per sample (not
 * the control table, not a ring per job-hour): docs/job-series.md.
 */
import { type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { JobSample, JobSeriesReader, JobSeriesStore } from '#shared/broker/job-series.ts';

/** How long samples are kept by default: two weeks of charts, then TTL removes them (free). */
export const JOB_SERIES_RETENTION_DAYS = 14;

export const jobSeriesPk = (jobId: string) => `${jobId}#series`;

/** Sorts after every `{iso}#{brokerId}` of the same window: "after this window" in a key condition. */
const AFTER_WINDOW = '#\uffff';

/** A job's series of samples in the tasks table, one item a broker's window, kept `retentionDays`. */
export class DynamoJobSeries implements JobSeriesStore, JobSeriesReader {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tasksTable: string;
  readonly #retentionSeconds: number;

  constructor(
    doc: DynamoDBDocumentClient,
    tasksTable: string,
    options: { readonly retentionDays?: number } = {},
  ) {
    this.#doc = doc;
    this.#tasksTable = tasksTable;
    this.#retentionSeconds = (options.retentionDays ?? JOB_SERIES_RETENTION_DAYS) * 86_400;
  }

  async put(sample: JobSample): Promise<void> {
    await this.#doc.send(
      new PutCommand({
        TableName: this.#tasksTable,
        Item: {
          pk: jobSeriesPk(sample.jobId),
          sk: `${new Date(sample.at).toISOString()}#${sample.brokerId}`,
          ...sample,
          expiresAt: Math.floor(sample.at / 1000) + this.#retentionSeconds,
        },
      }),
    );
  }

  async since(
    clientId: string,
    jobId: string,
    afterMs: number,
    limit: number,
  ): Promise<{ readonly samples: readonly JobSample[]; readonly more: boolean }> {
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tasksTable,
        KeyConditionExpression: 'pk = :pk AND sk > :after',
        ExpressionAttributeValues: {
          ':pk': jobSeriesPk(jobId),
          ':after': `${new Date(Math.max(0, afterMs)).toISOString()}${AFTER_WINDOW}`,
        },
        Limit: limit,
      }),
    );
    const items = (out.Items ?? []) as (JobSample & { pk?: string; sk?: string; expiresAt?: number })[];
    // Job ids are ULIDs, unique across clients; the check keeps a guessed id from reading another's.
    const samples = items.filter((item) => item.clientId === clientId).map(sampleOf);
    return { samples, more: out.LastEvaluatedKey !== undefined };
  }
}

function sampleOf(item: JobSample & { pk?: string; sk?: string; expiresAt?: number }): JobSample {
  const { pk: _pk, sk: _sk, expiresAt: _expiresAt, ...sample } = item;
  return sample;
}
