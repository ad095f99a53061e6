/**
 * The two writes that end a waiting task as `cancelled` for a rule of the contact policy (a cap
 * with no window left in its job's life, a suppressed recipient), to go in one transaction: the
 * task, still waiting on the attempts seen, → `cancelled` with its reason and out of the index; the
 * job's `cancelled` count and the rule's own count (`capped`, `suppressed`) move by one.
 */
import { keys, type Task } from '#shared/jobs/model.ts';
import type { TaskMove } from '#shared/jobs/task-lifecycle.ts';
import { endedTaskExpiry } from '#shared/resources.ts';
import { moveFrom, STATE_NAME, stateValue } from './task-state-conditions.ts';

export interface PolicyCancel {
  /** The lifecycle's move (`TASK_MOVES.cap`, `TASK_MOVES.suppress`). */
  readonly move: TaskMove;
  readonly reason: string;
  /** The task's `lastResult`, and the job's count that moves with `cancelled`. */
  readonly rule: 'capped' | 'suppressed';
}

export function policyCancelItems(
  tables: { readonly controlTable: string; readonly tasksTable: string },
  task: Task,
  cancel: PolicyCancel,
  now: number,
) {
  const from = moveFrom(cancel.move);
  const to = stateValue('cancelled');
  return [
    {
      Update: {
        TableName: tables.tasksTable,
        Key: keys.task(task.jobId, task.taskId),
        UpdateExpression: `SET #state = ${to.placeholder}, reason = :reason, lastResult = :lastResult, updatedAt = :now, expiresAt = :expiresAt REMOVE openPk, openSk`,
        ConditionExpression: `${from.condition} AND attempts = :seen`,
        ExpressionAttributeNames: STATE_NAME,
        ExpressionAttributeValues: {
          ...to.values,
          ...from.values,
          ':reason': cancel.reason,
          ':lastResult': cancel.rule,
          ':now': now,
          ':expiresAt': endedTaskExpiry(now),
          ':seen': task.attempts,
        },
      },
    },
    {
      Update: {
        TableName: tables.controlTable,
        Key: keys.job(task.clientId, task.jobId),
        UpdateExpression: 'ADD #counts.#cancelled :one, #counts.#rule :one',
        ConditionExpression: 'attribute_exists(#counts)',
        ExpressionAttributeNames: { '#counts': 'counts', '#cancelled': 'cancelled', '#rule': cancel.rule },
        ExpressionAttributeValues: { ':one': 1 },
      },
    },
  ];
}
