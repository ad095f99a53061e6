/**
 * A message's end written as a plain conditional update, not a transaction: a PartiQL `UPDATE`
 * (the only conditional single-item write DynamoDB batches: `BatchExecuteStatement`, up to 25
 * statements a request, each applied or refused on its own, 1 write unit a task of under 1 KB
 * instead of a transaction's 2). PartiQL's `UPDATE … WHERE` is the condition: the key, then the
 * task still open (`state`), its attempt at most the outcome's, and not marked left on the page it
 * names (`leftOn`, set by a broker taking the client over). Sources: DynamoDB developer guide,
 * "PartiQL update statements" and "Running batch operations with PartiQL"; the API reference of
 * `BatchExecuteStatement` (per-statement `Error`, `ReturnValuesOnConditionCheckFailure`).
 */
import { BatchExecuteStatementCommand } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { convertToAttr, unmarshall } from '@aws-sdk/util-dynamodb';
import type { TaskOutcome } from '#shared/campaign/ports.ts';
import { keys } from '#shared/jobs/model.ts';
import { type MessageEndMove, TASK_MOVES } from '#shared/jobs/task-lifecycle.ts';
import { type Item, MAX_TRIES, sleep } from './dynamo-message-table.ts';
import { AdapterError } from './errors.ts';

export interface PageStatement {
  readonly Statement: string;
  readonly Parameters: unknown[];
}

/** What a statement did: applied, or refused by its condition (with the item as it was). */
export interface StatementResult {
  readonly applied: boolean;
  readonly item?: Item;
}

/** Per-statement errors worth another try (throttling, a concurrent transaction, a server fault). */
const RETRYABLE = new Set([
  'ThrottlingError',
  'ProvisionedThroughputExceeded',
  'RequestLimitExceeded',
  'TransactionConflict',
  'InternalServerError',
]);

/** As the document client marshals (`makeDocumentClient`): undefined members of a map left out. */
const MARSHALL = { removeUndefinedValues: true } as const;

export class StatementError extends AdapterError {}

const q = (name: string) => `"${name}"`;

/**
 * The `UPDATE` that ends a message's task on `page`: its final state, result, end time and TTL,
 * out of the `outstanding` index, claim fields dropped; `startedAt` is the claim's (the stored one
 * when the task had one: a task claimed again keeps its first claim's time).
 */
export function endOnPageStatement(
  table: string,
  outcome: TaskOutcome,
  end: MessageEndMove,
  page: string,
  extra: {
    startedAt?: number;
    multicastKey: string | undefined;
    expiresAt: number;
    /** More attributes to set (a chunk's `except`). */
    set?: readonly (readonly [string, unknown])[];
  },
): PageStatement {
  const set: [string, unknown][] = [
    ['state', end.state],
    ['attempts', outcome.attempt],
    ['lastResult', outcome.lastResult],
    ['updatedAt', outcome.at],
    ['expiresAt', extra.expiresAt],
    ['endedOn', page],
  ];
  const remove = ['claimToken', 'openPk', 'openSk', 'batchKey', 'maybeSent'];
  if (extra.startedAt !== undefined) set.push(['startedAt', extra.startedAt]);
  if (outcome.requestId) set.push(['requestId', outcome.requestId]);
  if (end.reason === undefined) remove.push('reason');
  else set.push(['reason', end.reason]);
  if (extra.multicastKey) set.push(['sentWith', extra.multicastKey]);
  for (const [name, value] of extra.set ?? []) set.push([name, value]);
  const from = TASK_MOVES.endMessage.from;
  const key = keys.task(outcome.jobId, outcome.taskId);
  return {
    Statement:
      `UPDATE ${q(table)} ${set.map(([name]) => `SET ${q(name)} = ?`).join(' ')} ` +
      `${remove.map((name) => `REMOVE ${q(name)}`).join(' ')} ` +
      `WHERE ${q('pk')} = ? AND ${q('sk')} = ? AND ${q('state')} IN [${from.map(() => '?').join(', ')}] ` +
      `AND ${q('attempts')} <= ? AND NOT contains(${q('leftOn')}, ?)`,
    Parameters: [...set.map(([, value]) => value), key.pk, key.sk, ...from, outcome.attempt, page],
  };
}

/**
 * Runs write statements (≤ 25) as one `BatchExecuteStatement`, each again while its error is one
 * worth another try; the result of each, in order. Throws on any other error (a bad statement, no
 * permission), or when a statement is still refused for capacity after {@link MAX_TRIES}.
 */
export async function executeStatements(
  doc: DynamoDBDocumentClient,
  statements: readonly PageStatement[],
): Promise<StatementResult[]> {
  const results: (StatementResult | undefined)[] = statements.map(() => undefined);
  // Marshalled here, once, and sent as the low-level command: the document client's marshalling
  // walks the whole input again on every try, ~30 % of the client's CPU a statement.
  const marshalled = statements.map((statement) => ({
    Statement: statement.Statement,
    Parameters: statement.Parameters.map((value) => convertToAttr(value, MARSHALL)),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  }));
  let pending = statements.map((_, j) => j);
  for (let tryNo = 1; pending.length > 0; tryNo++) {
    if (tryNo > 1) await sleep(Math.min(1_000, 25 * 2 ** tryNo) * Math.random());
    const out = await doc.send(
      new BatchExecuteStatementCommand({
        Statements: pending.map((j) => marshalled[j]!),
      }),
    );
    const retry: number[] = [];
    pending.forEach((j, n) => {
      const error = out.Responses?.[n]?.Error;
      if (!error) results[j] = { applied: true };
      else if (error.Code === 'ConditionalCheckFailed')
        results[j] = { applied: false, ...(error.Item ? { item: unmarshall(error.Item) as Item } : {}) };
      else if (RETRYABLE.has(String(error.Code)) && tryNo < MAX_TRIES) retry.push(j);
      else throw new StatementError(`statement refused: ${error.Code} ${error.Message ?? ''}`.trim());
    });
    pending = retry;
  }
  return results as StatementResult[];
}
