/**
 * Call links in the tasks table (`pk=CALL#{callId}, sk=LINK`, expiring after 8 days, past
 * Connect's 7-day client-token window). Both writes are UpdateItems on the one item, which
 * DynamoDB applies one after the other: the link returns the item with any events held before
 * it; an event is held only while the item has no link (a condition), and otherwise reads the
 * link with a consistent read once its condition fails. So an event is either seen by the link or sees it.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { CallLink, CallLinkStore } from '#shared/broker/ports.ts';
import { keys } from '#shared/jobs/model.ts';
import type { CallStatusEvent } from '#shared/telephony/port.ts';

const LINK_TTL_SECONDS = 8 * 24 * 3600;
/** Events held per call at most (a call has three that matter; duplicates beyond are dropped). */
const MAX_HELD = 20;

const expiresAt = (now: number) => Math.floor(now / 1000) + LINK_TTL_SECONDS;

/** Call links in the tasks table: a link and the events held before it, one item a call. */
export class DynamoCallLinks implements CallLinkStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tasksTable: string;

  constructor(doc: DynamoDBDocumentClient, tasksTable: string) {
    this.#doc = doc;
    this.#tasksTable = tasksTable;
  }

  async link(callId: string, link: CallLink, now: number): Promise<readonly CallStatusEvent[]> {
    const out = await this.#doc.send(
      new UpdateCommand({
        TableName: this.#tasksTable,
        Key: keys.callLink(callId),
        UpdateExpression:
          'SET clientId = :clientId, jobId = :jobId, taskId = :taskId, attempt = :attempt, expiresAt = :exp',
        ExpressionAttributeValues: {
          ':clientId': link.clientId,
          ':jobId': link.jobId,
          ':taskId': link.taskId,
          ':attempt': link.attempt,
          ':exp': expiresAt(now),
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return heldOf(out.Attributes);
  }

  async find(callId: string): Promise<CallLink | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#tasksTable, Key: keys.callLink(callId), ConsistentRead: true }),
    );
    return linkOf(out.Item);
  }

  async resolve(callId: string, event: CallStatusEvent, now: number): Promise<CallLink | undefined> {
    try {
      await this.#doc.send(
        new UpdateCommand({
          TableName: this.#tasksTable,
          Key: keys.callLink(callId),
          UpdateExpression: 'SET held = list_append(if_not_exists(held, :none), :event), expiresAt = :exp',
          ConditionExpression:
            'attribute_not_exists(taskId) AND (attribute_not_exists(held) OR size(held) < :max)',
          ExpressionAttributeValues: {
            ':none': [],
            ':event': [JSON.stringify({ ...event, idempotencyKey: '' })],
            ':exp': expiresAt(now),
            ':max': MAX_HELD,
          },
        }),
      );
      return undefined;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      // Linked meanwhile (or too many held): the link is read with a strongly consistent read.
      return this.find(callId);
    }
  }
}

function linkOf(item: Record<string, unknown> | undefined): CallLink | undefined {
  if (!item || typeof item.taskId !== 'string') return undefined;
  return {
    clientId: String(item.clientId),
    jobId: String(item.jobId),
    taskId: item.taskId,
    attempt: Number(item.attempt),
  };
}

function heldOf(item: Record<string, unknown> | undefined): CallStatusEvent[] {
  const held = item?.held;
  if (!Array.isArray(held)) return [];
  return held.map((raw) => JSON.parse(String(raw)) as CallStatusEvent);
}
