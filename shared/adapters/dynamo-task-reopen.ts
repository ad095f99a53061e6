/**
 * DynamoDB adapter of the reopen store (`shared/jobs/reopen.ts`): a fallback job's ended task moved
 * to its next channel after its channel said it never reached the person (a hard bounce).
 *
 * One transaction:
 * - the task, while still as read (its end, attempts, identifier, and the claim page it ended on):
 *   waiting again (`pending`, back in the `outstanding` index, ready at once) on its next channel as
 *   its identifier there, its attempts kept (a message task's attempt stays 1 across its channels,
 *   as after a move at the send: no second contact-limit slot), the channel left appended to
 *   `tried`; what belonged to the ended send goes (its end's expiry and page, its send keys, its delivery state and proof of
 *   sending: the next channel's events start afresh);
 * - its job, while running or paused and before its end: the count of the task's end down by one,
 *   `reopened` up by one — the job manager completes a job only while `reopened` is what it read
 *   with the job, so a job found with nothing open cannot complete over a task just opened again;
 * - when the task ended on a claim page: the page is gone. A page's ends are counted in the job when
 *   the page is closed (`dynamo-claim-pages.ts`), so before that there is no count to take back, and
 *   a close racing this write would count the task as ended: the event waits until the page is closed.
 */
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { DeliveryAttempt } from '#shared/jobs/delivery-state.ts';
import { type Job, keys, storedJob, type Task } from '#shared/jobs/model.ts';
import type { Reopening, ReopenStore, ReopenWrite } from '#shared/jobs/reopen.ts';
import { claimPagePk } from './dynamo-claim-pages.ts';
import { type TransactItems, transactWrite } from './dynamo-message-table.ts';

/** What an ended send leaves on its task that a task waiting on its next channel must not carry. */
const SEND_ATTRIBUTES = [
  'endedOn',
  'expiresAt',
  'reason',
  'startedAt',
  'maybeSent',
  'batchKey',
  'claimToken',
  'sentWith',
  'requestId',
  'deliveryState',
  'deliveryRank',
  'deliveryAttempt',
  'deliveryEventAt',
  'deliveryReason',
  'emailState',
  'emailRank',
  'emailAttempt',
  'emailEventAt',
  'emailReason',
  // The email's proof of sending: the next channel's attempt is proved by its own events.
  'sentAttempt',
];

export class DynamoTaskReopen implements ReopenStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tables: { readonly controlTable: string; readonly tasksTable: string };

  constructor(doc: DynamoDBDocumentClient, tables: { controlTable: string; tasksTable: string }) {
    this.#doc = doc;
    this.#tables = tables;
  }

  async task(attempt: DeliveryAttempt): Promise<Task | undefined> {
    const item = await this.#get(this.#tables.tasksTable, keys.task(attempt.jobId, attempt.taskId));
    return item as Task | undefined;
  }

  async job(clientId: string, jobId: string): Promise<Job | undefined> {
    const item = await this.#get(this.#tables.controlTable, keys.job(clientId, jobId));
    return item && storedJob(item as unknown as Job);
  }

  async reopen(move: Reopening): Promise<ReopenWrite> {
    const stored = await this.#get(this.#tables.tasksTable, keys.task(move.jobId, move.taskId));
    const page = typeof stored?.endedOn === 'string' ? stored.endedOn : undefined;
    const items: TransactItems = [this.#taskUpdate(move, page), this.#jobUpdate(move)];
    if (page !== undefined)
      items.push({
        ConditionCheck: {
          TableName: this.#tables.tasksTable,
          Key: { pk: claimPagePk(move.clientId), sk: page },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      });
    const codes = await transactWrite(this.#doc, items);
    if (codes === undefined) return 'reopened';
    if (codes[0] !== 'ConditionalCheckFailed' && codes[1] !== 'ConditionalCheckFailed') return 'uncounted';
    return 'changed';
  }

  #taskUpdate(move: Reopening, page: string | undefined): TransactItems[number] {
    const open = keys.outstandingIndex({ ...move, state: 'pending', readyAt: move.readyAt })!;
    return {
      Update: {
        TableName: this.#tables.tasksTable,
        Key: keys.task(move.jobId, move.taskId),
        UpdateExpression:
          'SET #state = :pending, #via = :via, #recipient = :recipient, ' +
          '#tried = list_append(if_not_exists(#tried, :none), :tried), readyAt = :readyAt, ' +
          `openPk = :openPk, openSk = :openSk, lastResult = :lastResult, updatedAt = :readyAt REMOVE ${SEND_ATTRIBUTES.join(', ')}`,
        ConditionExpression:
          'clientId = :clientId AND #state = :endedAs AND attempts = :attempts AND #recipient = :from AND ' +
          (page === undefined ? 'attribute_not_exists(endedOn)' : 'endedOn = :page'),
        ExpressionAttributeNames: {
          '#state': 'state',
          '#via': 'via',
          '#recipient': 'recipient',
          '#tried': 'tried',
        },
        ExpressionAttributeValues: {
          ':pending': 'pending',
          ':via': move.next.channel,
          ':recipient': move.next.recipient,
          ':tried': move.tried,
          ':none': [],
          ':readyAt': move.readyAt,
          ':openPk': open.openPk,
          ':openSk': open.openSk,
          ':lastResult': move.lastResult,
          ':clientId': move.clientId,
          ':endedAs': move.endedAs,
          ':attempts': move.attempts,
          ':from': move.from,
          ...(page === undefined ? {} : { ':page': page }),
        },
      },
    };
  }

  #jobUpdate(move: Reopening): TransactItems[number] {
    return {
      Update: {
        TableName: this.#tables.controlTable,
        Key: keys.job(move.clientId, move.jobId),
        // A task ended for its address's entry was counted among the suppressed too.
        UpdateExpression: `ADD #counts.#end :less, ${move.endedAs === 'cancelled' ? '#counts.suppressed :less, ' : ''}reopened :one SET updatedAt = :now`,
        ConditionExpression:
          'attribute_exists(#counts) AND #status IN (:running, :paused) AND ' +
          '(attribute_not_exists(endAt) OR endAt > :now)',
        ExpressionAttributeNames: { '#counts': 'counts', '#end': move.endedAs, '#status': 'status' },
        ExpressionAttributeValues: {
          ':less': -1,
          ':one': 1,
          ':now': move.readyAt,
          ':running': 'running',
          ':paused': 'paused',
        },
      },
    };
  }

  async #get(table: string, key: Record<string, string>): Promise<Record<string, unknown> | undefined> {
    const out = await this.#doc.send(new GetCommand({ TableName: table, Key: key, ConsistentRead: true }));
    return out.Item;
  }
}
