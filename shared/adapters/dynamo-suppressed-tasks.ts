/**
 * Ends a waiting task whose recipient is on the client's suppression list (its start transaction
 * was refused by the suppression ConditionCheck): one `TransactWriteItems` in which the entry still
 * exists, the task is still waiting on the attempts seen → `cancelled` with `suppressed: <source>`,
 * out of the index, and the job's `cancelled` and `suppressed` counts move. If the entry was removed
 * meanwhile, nothing changes and the task may start at its next turn.
 */
import { randomUUID } from 'node:crypto';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { Task } from '#shared/jobs/model.ts';
import { TASK_MOVES } from '#shared/jobs/task-lifecycle.ts';
import { suppressedReason, suppressionKeys } from '#shared/suppressions/model.ts';
import { entryOf } from './dynamo-suppressions.ts';
import { policyCancelItems } from './dynamo-task-cancel-items.ts';

export interface SuppressedTaskTables {
  readonly controlTable: string;
  readonly tasksTable: string;
}

/** `ended` with the reason written, or `gone` (the entry was removed, or the task moved on). */
export type SuppressedEnd = { readonly kind: 'ended'; readonly reason: string } | { readonly kind: 'gone' };

/** See the module comment. `entry` is the item the failed ConditionCheck returned, when it did. */
export async function endSuppressedTask(
  doc: DynamoDBDocumentClient,
  tables: SuppressedTaskTables,
  task: Task,
  now: number,
  entry?: Record<string, unknown>,
): Promise<SuppressedEnd> {
  const key = suppressionKeys.entry(task.clientId, task.recipient);
  const item =
    entry ??
    (await doc.send(new GetCommand({ TableName: tables.controlTable, Key: key, ConsistentRead: true }))).Item;
  if (!item) return { kind: 'gone' };
  const reason = suppressedReason(entryOf(item).source);
  const entryStays = {
    ConditionCheck: { TableName: tables.controlTable, Key: key, ConditionExpression: 'attribute_exists(pk)' },
  };
  return endWith(doc, tables, task, reason, now, [entryStays]);
}

/**
 * Ends a waiting task as suppressed through its person (`dynamo-person-suppressions.ts`): another
 * identifier of the person is on the list person-wide. `reason` names that entry's source.
 */
export function endPersonSuppressedTask(
  doc: DynamoDBDocumentClient,
  tables: SuppressedTaskTables,
  task: Task,
  reason: string,
  now: number,
): Promise<SuppressedEnd> {
  return endWith(doc, tables, task, reason, now, []);
}

async function endWith(
  doc: DynamoDBDocumentClient,
  tables: SuppressedTaskTables,
  task: Task,
  reason: string,
  now: number,
  checks: readonly { ConditionCheck: Record<string, unknown> }[],
): Promise<SuppressedEnd> {
  try {
    await doc.send(
      new TransactWriteCommand({
        ClientRequestToken: randomUUID(),
        TransactItems: [
          ...policyCancelItems(tables, task, { move: TASK_MOVES.suppress, reason, rule: 'suppressed' }, now),
          ...(checks as NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>),
        ],
      }),
    );
    return { kind: 'ended', reason };
  } catch (error) {
    if (error instanceof TransactionCanceledException) return { kind: 'gone' };
    throw error;
  }
}
