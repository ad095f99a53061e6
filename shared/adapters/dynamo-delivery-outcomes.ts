/**
 * DynamoDB adapter of the delivery outcome store (`shared/jobs/delivery-state.ts`): a message
 * task's delivery state as attributes of its item in the tasks table (`keys.task(jobId, taskId)`),
 * the same for every channel whose own events report delivery (email, SMS):
 *
 * - `deliveryState` (the channel's state name), `deliveryRank` (its rank in the channel's table) and
 *   `deliveryAttempt` (the attempt it belongs to): what the report shows and the order events are
 *   compared in;
 * - `deliveryEventAt` (epoch ms) of the event recorded, `deliveryReason` when that event said why;
 * - `sentAttempt`: the highest attempt an event proved to have left the channel's service.
 *
 * Items written before these names (email only) hold `emailState`, `emailRank`, `emailAttempt`,
 * `emailEventAt` and `emailReason`: the condition compares with those too, and a write that passes
 * moves the item to the new names (it removes the old ones), so either is read, and one item never
 * holds both after its next event.
 *
 * One conditional UpdateItem decides supersession: the item must exist, be the tagged client's and
 * be on the store's channel (a fallback job's task that left it keeps none of its late events), and
 * hold no state yet, an earlier attempt's, or a lower rank of the same attempt. So events in any
 * order, and more than once, never move it back; a refused condition is an answer (`stale` or
 * `unknown-task`), not an error.
 *
 * `sentAttempt` is set in that same write when the event proves sending. That never lowers it: only
 * this store writes it, and only with an attempt no lower than the `deliveryAttempt` the item then
 * holds, which never decreases; so `sentAttempt <= deliveryAttempt` always, and a write that passes
 * the condition has an attempt `>= deliveryAttempt`. When the write is refused as stale, an earlier
 * attempt's proof can still be news (its send event lost, a later attempt's refusal recorded
 * first): a second UpdateItem raises `sentAttempt` alone, under `sentAttempt < :attempt`, which
 * keeps the invariant and writes nothing for a mere duplicate.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type {
  DeliveryOutcomeStore,
  DeliveryRecordResult,
  DeliveryStateChange,
} from '#shared/jobs/delivery-state.ts';
import { keys, type MessageChannel } from '#shared/jobs/model.ts';

/** The item exists and is the client's: a task of that client. */
const THE_CLIENTS_TASK = 'attribute_exists(pk) AND clientId = :clientId';

/**
 * The task is on the store's channel: its job's (no `via`), or the one it moved to. A fallback job's
 * task that left this channel after a send (an email's hard bounce) keeps no late event of it.
 */
const ON_THE_CHANNEL = '(attribute_not_exists(#via) OR #via = :channel)';

/** The change supersedes what the item records under these attribute names (absent: nothing recorded). */
const supersedesUnder = (rank: string, attempt: string) =>
  `(attribute_not_exists(${rank}) OR ${attempt} < :attempt OR (${attempt} = :attempt AND ${rank} < :rank))`;

/** Supersession, under the current names and under email's names of before. */
const SUPERSEDES = `${supersedesUnder('deliveryRank', 'deliveryAttempt')} AND ${supersedesUnder('emailRank', 'emailAttempt')}`;

/** Email's names of before, removed by every write that passes. */
const OLD_NAMES = ['emailState', 'emailRank', 'emailAttempt', 'emailEventAt', 'emailReason'];

export class DynamoDeliveryOutcomeStore<State extends string> implements DeliveryOutcomeStore<State> {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;
  readonly #rank: Readonly<Record<State, number>>;
  readonly #channel: MessageChannel;

  /**
   * `rank`: the channel's states in the order they move (a higher rank supersedes a lower);
   * `channel`: the channel whose events these are.
   */
  constructor(
    doc: DynamoDBDocumentClient,
    tasksTable: string,
    rank: Readonly<Record<State, number>>,
    channel: MessageChannel,
  ) {
    this.#doc = doc;
    this.#tableName = tasksTable;
    this.#rank = rank;
    this.#channel = channel;
  }

  async record(change: DeliveryStateChange<State>): Promise<DeliveryRecordResult> {
    const set = [
      'deliveryState = :state',
      'deliveryRank = :rank',
      'deliveryAttempt = :attempt',
      'deliveryEventAt = :at',
      ...(change.reason === undefined ? [] : ['deliveryReason = :reason']),
      ...(change.sent ? ['sentAttempt = :attempt'] : []),
    ];
    // A reason belongs to the state it came with: a later state without one clears it.
    const remove = [...OLD_NAMES, ...(change.reason === undefined ? ['deliveryReason'] : [])];
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: keys.task(change.jobId, change.taskId),
          UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
          ConditionExpression: `${THE_CLIENTS_TASK} AND ${ON_THE_CHANNEL} AND ${SUPERSEDES}`,
          ExpressionAttributeNames: { '#via': 'via' },
          ExpressionAttributeValues: {
            ':clientId': change.clientId,
            ':channel': this.#channel,
            ':state': change.state,
            ':rank': this.#rank[change.state],
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
      // ALL_OLD hands the item back: none, or another client's, is no task of this event's.
      if (error.Item?.clientId?.S !== change.clientId) return 'unknown-task';
      if (change.sent) await this.#raiseSentAttempt(change);
      return 'stale';
    }
  }

  /** Raises `sentAttempt` to the change's attempt when it is lower (or absent); else writes nothing. */
  async #raiseSentAttempt(change: DeliveryStateChange<State>): Promise<void> {
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tableName,
          Key: keys.task(change.jobId, change.taskId),
          UpdateExpression: 'SET sentAttempt = :attempt',
          ConditionExpression: `${THE_CLIENTS_TASK} AND ${ON_THE_CHANNEL} AND (attribute_not_exists(sentAttempt) OR sentAttempt < :attempt)`,
          ExpressionAttributeNames: { '#via': 'via' },
          ExpressionAttributeValues: {
            ':clientId': change.clientId,
            ':attempt': change.attempt,
            ':channel': this.#channel,
          },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }
}
