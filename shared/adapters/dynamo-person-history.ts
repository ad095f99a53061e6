/**
 * A person's tasks from the tasks table's byRecipient index (keys only: `shared/resources.ts`): the
 * newest of each of the person's identifiers, then the tasks and their jobs read in batches. A
 * lookup costs a Query an identifier (at most 20) and a read a task shown.
 */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { type Job, keys, storedJob, type Task } from '#shared/jobs/model.ts';
import type { PersonTask, PersonTaskReader } from '#shared/people/history.ts';
import { TASKS_BY_RECIPIENT_INDEX } from '#shared/resources.ts';
import { batchGetItems } from './dynamo-batch-get.ts';
import { tasksOf } from './dynamo-job-tasks.ts';

/** A table item's key as one string. */
function itemKey(item: { readonly pk?: unknown; readonly sk?: unknown }): string {
  return `${String(item.pk)}\u0000${String(item.sk)}`;
}

interface IndexHit {
  readonly pk: string;
  readonly sk: string;
  readonly recipientSk: string;
}

export class DynamoPersonHistory implements PersonTaskReader {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tasksTable: string;
  readonly #controlTable: string;

  constructor(doc: DynamoDBDocumentClient, tasksTable: string, controlTable: string) {
    this.#doc = doc;
    this.#tasksTable = tasksTable;
    this.#controlTable = controlTable;
  }

  async latest(clientId: string, identifiers: readonly string[], limit: number) {
    const found = (await Promise.all(identifiers.map((id) => this.#newest(clientId, id, limit + 1)))).flat();
    const hits = [...new Map(found.map((hit) => [itemKey(hit), hit])).values()].sort((a, b) =>
      a.recipientSk < b.recipientSk ? 1 : a.recipientSk > b.recipientSk ? -1 : 0,
    );
    const shown = hits.slice(0, limit);
    const tasks = await this.#tasks(shown);
    const jobs = await this.#jobs(clientId, [...new Set([...tasks.values()].map((t) => t.jobId))]);
    return {
      // In the hits' order (newest first); a hit whose task is gone since is left out.
      tasks: shown.flatMap((hit): PersonTask[] => {
        const task = tasks.get(itemKey(hit));
        return task ? [{ task, job: jobs.get(task.jobId) }] : [];
      }),
      more: hits.length > limit,
    };
  }

  /** The newest `limit` index entries of one identifier. */
  async #newest(clientId: string, identifier: string, limit: number): Promise<IndexHit[]> {
    const out = await this.#doc.send(
      new QueryCommand({
        TableName: this.#tasksTable,
        IndexName: TASKS_BY_RECIPIENT_INDEX,
        KeyConditionExpression: 'recipientPk = :pk',
        ExpressionAttributeValues: { ':pk': keys.recipientTasks(clientId, identifier) },
        ScanIndexForward: false,
        Limit: limit,
      }),
    );
    return (out.Items ?? []).map((item) => ({
      pk: String(item.pk),
      sk: String(item.sk),
      recipientSk: String(item.recipientSk),
    }));
  }

  /** The tasks of `hits`, by their item's key. */
  async #tasks(hits: readonly IndexHit[]): Promise<Map<string, Task>> {
    const items = await batchGetItems(
      this.#doc,
      this.#tasksTable,
      hits.map(({ pk, sk }) => ({ pk, sk })),
    );
    // An index entry is a task's item's (`taskItem`), never a chunk's: one task an item.
    return new Map(items.flatMap((item) => tasksOf(item).map((task) => [itemKey(item), task] as const)));
  }

  async #jobs(clientId: string, jobIds: readonly string[]): Promise<Map<string, PersonTask['job']>> {
    const items = await batchGetItems(
      this.#doc,
      this.#controlTable,
      jobIds.map((jobId) => keys.job(clientId, jobId)),
      { projection: 'jobId, #name, channel', names: { '#name': 'name' } },
    );
    return new Map(
      items.map((item) => {
        const job = storedJob(item as unknown as Pick<Job, 'jobId' | 'name' | 'channel'>);
        return [job.jobId, job];
      }),
    );
  }
}
