/**
 * Defers a waiting task to a later `readyAt` (issue 14 #4): a task of a job read in its
 * recipients' zones whose recipient is outside their hours or inside a restricted period now is
 * moved, in the `outstanding` index, to the instant its zone opens, so the next index read of the
 * client hands a broker recipients it may call now instead of the same closed ones again. A task
 * that moved meanwhile (started, settled, cancelled, deferred by another broker) is left alone.
 * A task over a contact limit is deferred the same way to its window's end, with the reason it
 * waits (`cappedWaitingReason`), which the job's report shows until the task starts.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys, type Task } from '#shared/jobs/model.ts';
import { WAITING_STATES } from '#shared/jobs/task-lifecycle.ts';
import { STATE_NAME, stateIn } from './task-state-conditions.ts';

/**
 * True when deferred; false when the task had moved on. Never earlier than it was. `reason`, when
 * given, is why it waits; `notBefore`, the instant it may not start before whatever the hours say
 * (a contact limit's window end); the start clears both.
 */
export async function deferTask(
  doc: DynamoDBDocumentClient,
  tableName: string,
  task: Task,
  readyAt: number,
  now: number,
  why: { readonly reason?: string; readonly notBefore?: number } = {},
): Promise<boolean> {
  if (readyAt <= task.readyAt) return false;
  return moveTask(doc, tableName, task, readyAt, now, why);
}

/**
 * Moves a waiting task *earlier*, to `readyAt` (a re-time after its client's hours widened: see
 * `shared/jobs/retime.ts`), on the same conditions as a deferral. True when moved.
 */
export async function advanceTask(
  doc: DynamoDBDocumentClient,
  tableName: string,
  task: Pick<Task, 'clientId' | 'jobId' | 'taskId' | 'state' | 'readyAt' | 'attempts'>,
  readyAt: number,
  now: number,
): Promise<boolean> {
  if (readyAt >= task.readyAt) return false;
  return moveTask(doc, tableName, task, readyAt, now, {});
}

async function moveTask(
  doc: DynamoDBDocumentClient,
  tableName: string,
  task: Pick<Task, 'clientId' | 'jobId' | 'taskId' | 'state' | 'readyAt' | 'attempts'>,
  readyAt: number,
  now: number,
  why: { readonly reason?: string; readonly notBefore?: number },
): Promise<boolean> {
  const { reason, notBefore } = why;
  const waiting = stateIn(WAITING_STATES);
  const index = keys.outstandingIndex({ ...task, readyAt });
  if (!index) return false;
  try {
    await doc.send(
      new UpdateCommand({
        TableName: tableName,
        Key: keys.task(task.jobId, task.taskId),
        UpdateExpression:
          'SET readyAt = :readyAt, openSk = :openSk, updatedAt = :now' +
          (reason === undefined ? '' : ', reason = :reason') +
          (notBefore === undefined ? '' : ', notBefore = :notBefore'),
        ConditionExpression: `${waiting.condition} AND readyAt = :was AND attempts = :attempts`,
        ExpressionAttributeNames: STATE_NAME,
        ExpressionAttributeValues: {
          ...waiting.values,
          ':readyAt': readyAt,
          ':openSk': index.openSk,
          ':now': now,
          ':was': task.readyAt,
          ':attempts': task.attempts,
          ...(reason === undefined ? {} : { ':reason': reason }),
          ...(notBefore === undefined ? {} : { ':notBefore': notBefore }),
        },
      }),
    );
    return true;
  } catch (error) {
    if (
      error instanceof ConditionalCheckFailedException ||
      (error as Error)?.name === 'ConditionalCheckFailedException'
    )
      return false;
    throw error;
  }
}
