/**
 * A session's multicast records (`{jobId}#batch` / retry key, with its members), written before a
 * multicast's first request: a member reclaimed later comes back with every still-unsettled
 * member, under the recorded key, so the resend is the same request and not a new one to the same
 * people. A record whose members have all settled is deleted; TTL removes the rest after LINE's
 * 24-hour retry-key window.
 */
import { DeleteCommand, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { BatchLedger, MulticastBatch, TaskOutcome } from '#shared/campaign/ports.ts';
import type { Item, MessageTaskTable } from './dynamo-message-table.ts';

/** A multicast record outlives LINE's 24-hour retry-key window, then TTL removes it. */
const BATCH_TTL_SECONDS = 25 * 3600;

const batchPk = (jobId: string) => `${jobId}#batch`;

export interface RecordedBatch {
  readonly jobId: string;
  readonly attempt: number;
  readonly taskIds: string[];
}

export class MulticastRecords implements BatchLedger {
  readonly #table: MessageTaskTable;
  /** Recorded multicasts of this session: members not yet settled. */
  readonly #open = new Map<string, { jobId: string; left: number }>();
  /** Recorded multicasts read back from the table, by retry key (null: there is none). */
  readonly #known = new Map<string, RecordedBatch | null>();

  constructor(table: MessageTaskTable) {
    this.#table = table;
  }

  async record(batch: MulticastBatch): Promise<void> {
    await this.#table.doc.send(
      new PutCommand({
        TableName: this.#table.tasksTable,
        Item: {
          pk: batchPk(batch.jobId),
          sk: batch.retryKey,
          attempt: batch.attempt,
          taskIds: [...batch.taskIds],
          expiresAt: Math.floor(this.#table.clock.now() / 1000) + BATCH_TTL_SECONDS,
        },
      }),
    );
    this.#open.set(batch.retryKey, { jobId: batch.jobId, left: batch.taskIds.length });
  }

  /** The recorded multicast of `jobId` under `retryKey`, if there is one. */
  async batchOf(jobId: string, retryKey: string): Promise<RecordedBatch | undefined> {
    if (!this.#known.has(retryKey)) {
      const out = await this.#table.doc.send(
        new GetCommand({
          TableName: this.#table.tasksTable,
          Key: { pk: batchPk(jobId), sk: retryKey },
          ConsistentRead: true,
        }),
      );
      this.#known.set(
        retryKey,
        out.Item ? { jobId, attempt: Number(out.Item.attempt), taskIds: out.Item.taskIds as string[] } : null,
      );
    }
    return this.#known.get(retryKey) ?? undefined;
  }

  /** The recorded multicasts of `jobIds` (for tasks a dead holder left in flight): retry key by task. */
  async load(jobIds: Iterable<string>): Promise<Map<string, string>> {
    const byTask = new Map<string, string>();
    for (const jobId of jobIds) {
      let startKey: Item | undefined;
      do {
        const out = await this.#table.doc.send(
          new QueryCommand({
            TableName: this.#table.tasksTable,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': batchPk(jobId) },
            ...(startKey ? { ExclusiveStartKey: startKey } : {}),
          }),
        );
        for (const item of out.Items ?? []) {
          const retryKey = String(item.sk);
          const taskIds = item.taskIds as string[];
          this.#known.set(retryKey, { jobId, attempt: Number(item.attempt), taskIds });
          for (const taskId of taskIds) byTask.set(taskId, retryKey);
        }
        startKey = out.LastEvaluatedKey;
      } while (startKey);
    }
    return byTask;
  }

  /** An outcome was written: once every member of its multicast has settled, the record goes. */
  async settled(outcome: TaskOutcome): Promise<void> {
    const retryKey = outcome.retryKey;
    const batch = retryKey ? this.#open.get(retryKey) : undefined;
    if (!retryKey || !batch) return;
    // A release keeps the record for the resend; a move to another channel settles the member:
    // its record left behind would read as this channel's send of it on the next one.
    if (outcome.kind === 'released' && outcome.moveTo === undefined) {
      this.#open.delete(retryKey);
      return;
    }
    if (--batch.left > 0) return;
    this.#open.delete(retryKey);
    // Every member settled: the record has done its job.
    await this.#table.doc
      .send(
        new DeleteCommand({
          TableName: this.#table.tasksTable,
          Key: { pk: batchPk(outcome.jobId), sk: retryKey },
        }),
      )
      .catch(() => undefined);
  }
}
