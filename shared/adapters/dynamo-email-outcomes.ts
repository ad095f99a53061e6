/**
 * DynamoDB adapter of the email outcome store: a task's email state as attributes of its item in the
 * tasks table (`keys.task(jobId, taskId)`):
 *
 * - `emailState` (an `EmailDeliveryState`), `emailRank` (its `EMAIL_DELIVERY_RANK`) and
 *   `emailAttempt` (the attempt whose email it is): what the report shows and the order events are
 *   compared in;
 * - `emailEventAt` (epoch ms) of the event recorded, `emailReason` when that event said why;
 * - `sentAttempt`: the highest attempt an event proved to have left SES.
 *
 * One conditional UpdateItem translates `supersedes` (`shared/email/email-outcomes.ts`): the item
 * must exist and be the tagged client's, and hold no state yet, an earlier attempt's, or a lower rank
 * of the same attempt. So events in any order, and more than once, never move it back; a refused
 * condition is an answer (`stale` or `unknown-task`), not an error.
 *
 * `sentAttempt` is set in that same write when the event proves sending. That never lowers it:
 * only this store writes it, and only with an attempt no lower than the `emailAttempt` the item then
 * holds, which never decreases; so `sentAttempt <= emailAttempt` always, and a write that passes the
 * condition has an attempt `>= emailAttempt`. When the write is refused as stale, an earlier
 * attempt's proof can still be news (its Send lost, a later attempt's Reject recorded first): a
 * second UpdateItem raises `sentAttempt` alone, under `sentAttempt < :attempt`, which keeps the
 * invariant (that attempt is below `emailAttempt`) and writes nothing for a mere duplicate.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { EmailOutcomeStore, EmailRecordResult, EmailStateChange } from '#shared/email/email-outcomes.ts';
import { EMAIL_DELIVERY_RANK } from '#shared/email/ses-events.ts';
import { keys } from '#shared/jobs/model.ts';

/** The item exists and is the client's: a task of that client. */
const THE_CLIENTS_TASK = 'attribute_exists(pk) AND clientId = :clientId';

/** `supersedes`, in the item's attributes. */
const SUPERSEDES =
  '(attribute_not_exists(emailRank) OR emailAttempt < :attempt OR (emailAttempt = :attempt AND emailRank < :rank))';

export class DynamoEmailOutcomeStore implements EmailOutcomeStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;

  constructor(doc: DynamoDBDocumentClient, tasksTable: string) {
    this.#doc = doc;
    this.#tableName = tasksTable;
  }

  async record(change: EmailStateChange): Promise<EmailRecordResult> {
    const set = [
      'emailState = :state',
      'emailRank = :rank',
      'emailAttempt = :attempt',
      'emailEventAt = :at',
      ...(change.reason === undefined ? [] : ['emailReason = :reason']),
      ...(change.sent ? ['sentAttempt = :attempt'] : []),
    ];
    // A reason belongs to the state it came with: a later state without one clears it.
    const remove = change.reason === undefined ? ' REMOVE emailReason' : '';
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: keys.task(change.jobId, change.taskId),
          UpdateExpression: `SET ${set.join(', ')}${remove}`,
          ConditionExpression: `${THE_CLIENTS_TASK} AND ${SUPERSEDES}`,
          ExpressionAttributeValues: {
            ':clientId': change.clientId,
            ':state': change.state,
            ':rank': EMAIL_DELIVERY_RANK[change.state],
            ':attempt': change.attempt,
            ':at': change.at,
            ...(change.reason === undefined ? {} : { ':reason': change.reason }),
          },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return 'recorded';
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      // ALL_OLD hands the item back: none, or another client's, is no task of this email's.
      if (error.Item?.clientId?.S !== change.clientId) return 'unknown-task';
      if (change.sent) await this.#raiseSentAttempt(change);
      return 'stale';
    }
  }

  /** Raises `sentAttempt` to the change's attempt when it is lower (or absent); else writes nothing. */
  async #raiseSentAttempt(change: EmailStateChange): Promise<void> {
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: keys.task(change.jobId, change.taskId),
          UpdateExpression: 'SET sentAttempt = :attempt',
          ConditionExpression: `${THE_CLIENTS_TASK} AND (attribute_not_exists(sentAttempt) OR sentAttempt < :attempt)`,
          ExpressionAttributeValues: { ':clientId': change.clientId, ':attempt': change.attempt },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }
}
