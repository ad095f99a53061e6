/**
 * Contact limits in DynamoDB: one counter item per person, limit and window in the tasks table
 * (`pk=CAP#{clientId}#{person}`, `sk={limit name}#{window start}`, gone by TTL a day after its
 * window), taken in a start's own transaction (`ADD n 1` if `n < max`), so two brokers or two jobs
 * can never both take a person's last slot. A person is the task's recipient alone, or the person
 * it is linked to (`shared/people/model.ts`): the same transaction checks that the recipient's link
 * still names that person ({@link personCapItems}), so a call and an email to one customer's phone
 * and address count as one. What a refused task does is the domain's rule
 * (`overCapMove`): it waits for the window's end (its `readyAt` moves there), or ends `cancelled`
 * with `cappedReason` and the job's `capped` count.
 */
import { randomUUID } from 'node:crypto';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { CapSlot } from '#shared/contact-limits/model.ts';
import type { Task } from '#shared/jobs/model.ts';
import { TASK_MOVES } from '#shared/jobs/task-lifecycle.ts';
import { personLinkCheck } from './dynamo-people.ts';
import { policyCancelItems } from './dynamo-task-cancel-items.ts';

/** How long a counter outlives its window (TTL), seconds. */
const COUNTER_GRACE_SECONDS = 24 * 3600;

/** The person a task's contacts are counted under: its linked person's key, else its recipient. */
export function personOfTask(task: Pick<Task, 'person' | 'recipient'>): string {
  return task.person ?? task.recipient;
}

/**
 * What a start under contact limits adds to its transaction: the check that the recipient's link
 * still names the task's person (first), then one counter per limit under that person.
 */
export function personCapItems(
  tables: { readonly controlTable: string; readonly tasksTable: string },
  task: Task,
  slots: readonly CapSlot[],
) {
  if (slots.length === 0) return [];
  return [
    personLinkCheck(tables.controlTable, task.clientId, task.recipient, personOfTask(task)),
    ...capCounterUpdates(tables.tasksTable, task, slots),
  ];
}

/** The counter items of a start: one Update per limit, each refused at the cap. */
export function capCounterUpdates(tasksTable: string, task: Task, slots: readonly CapSlot[]) {
  return slots.map((slot) => ({
    Update: {
      TableName: tasksTable,
      Key: { pk: `CAP#${task.clientId}#${personOfTask(task)}`, sk: slot.counter },
      UpdateExpression: 'ADD n :one SET expiresAt = :ttl',
      ConditionExpression: 'attribute_not_exists(n) OR n < :max',
      ExpressionAttributeValues: {
        ':one': 1,
        ':max': slot.max,
        ':ttl': Math.ceil(slot.window.end / 1000) + COUNTER_GRACE_SECONDS,
      },
    },
  }));
}

/** The task ends `cancelled` with `reason`, and the job's `cancelled` and `capped` counts move. */
export async function endCappedTask(
  doc: DynamoDBDocumentClient,
  tables: { readonly controlTable: string; readonly tasksTable: string },
  task: Task,
  reason: string,
  now: number,
): Promise<boolean> {
  try {
    await doc.send(
      new TransactWriteCommand({
        ClientRequestToken: randomUUID(),
        TransactItems: policyCancelItems(tables, task, { move: TASK_MOVES.cap, reason, rule: 'capped' }, now),
      }),
    );
    return true;
  } catch (error) {
    if (error instanceof TransactionCanceledException) return false;
    throw error;
  }
}
