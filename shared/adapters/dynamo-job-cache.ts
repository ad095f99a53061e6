/**
 * A broker's reads of its jobs (control table): a strongly consistent read that refreshes the
 * cache, and a cached read trusted for a while. The brokers filter index pages by the job's status
 * through the cache; the transaction that starts or claims a task re-checks what matters.
 */
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { type Job, keys, storedJob } from '#shared/jobs/model.ts';

export class JobCache {
  readonly #doc: DynamoDBDocumentClient;
  readonly #table: string;
  readonly #now: () => number;
  readonly #ttlMs: number;
  readonly #jobs = new Map<string, { job: Job | undefined; at: number }>();

  constructor(doc: DynamoDBDocumentClient, controlTable: string, now: () => number, ttlMs: number) {
    this.#doc = doc;
    this.#table = controlTable;
    this.#now = now;
    this.#ttlMs = ttlMs;
  }

  /** The job as stored now (strongly consistent); the cache keeps it. */
  async get(clientId: string, jobId: string): Promise<Job | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#table, Key: keys.job(clientId, jobId), ConsistentRead: true }),
    );
    const job = withoutKeys(out.Item);
    this.#jobs.set(`${clientId}/${jobId}`, { job, at: this.#now() });
    return job;
  }

  /** The job as read at most `ttlMs` ago. */
  async cached(clientId: string, jobId: string): Promise<Job | undefined> {
    const hit = this.#jobs.get(`${clientId}/${jobId}`);
    if (hit && this.#now() - hit.at < this.#ttlMs) return hit.job;
    return this.get(clientId, jobId);
  }
}

function withoutKeys(item: Record<string, unknown> | undefined): Job | undefined {
  if (!item) return undefined;
  const { pk: _pk, sk: _sk, statusKey: _statusKey, dueKey: _dueKey, ...job } = item;
  return storedJob(job as unknown as Job);
}
