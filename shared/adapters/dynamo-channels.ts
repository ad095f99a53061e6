/**
 * DynamoDB adapter of the channel stores: the channels table (own KMS key), one item per channel.
 * The webhook receiver and processor read a channel by id; the channels API also lists a client's
 * channels (index `byClient`) and writes only where the item is new or still the client's,
 * unchanged since it was read.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { ChannelAdminStore } from '#shared/channels/api.ts';
import type { Channel } from '#shared/channels/channel.ts';
import { CHANNELS_BY_CLIENT_INDEX } from '#shared/resources.ts';
import type { ChannelStore } from '#shared/webhooks/ports.ts';

/** Channels in the channels table, one item a channel, listed by client through `byClient`. */
export class DynamoChannelStore implements ChannelStore, ChannelAdminStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.#tableName = tableName;
  }

  async get(channelId: string): Promise<Channel | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.#tableName, Key: { channelId }, ConsistentRead: false }),
    );
    return out.Item as Channel | undefined;
  }

  async put(channel: Channel): Promise<void> {
    await this.#doc.send(new PutCommand({ TableName: this.#tableName, Item: channel }));
  }

  async listByClient(clientId: string): Promise<Channel[]> {
    const channels: Channel[] = [];
    let ExclusiveStartKey: Record<string, unknown> | undefined;
    do {
      const out = await this.#doc.send(
        new QueryCommand({
          TableName: this.#tableName,
          IndexName: CHANNELS_BY_CLIENT_INDEX,
          KeyConditionExpression: 'clientId = :clientId',
          ExpressionAttributeValues: { ':clientId': clientId },
          ExclusiveStartKey,
        }),
      );
      channels.push(...((out.Items ?? []) as Channel[]));
      ExclusiveStartKey = out.LastEvaluatedKey;
    } while (ExclusiveStartKey);
    return channels;
  }

  async putIfUnchanged(channel: Channel, seenUpdatedAt: number | undefined): Promise<boolean> {
    try {
      await this.#doc.send(
        new PutCommand({
          TableName: this.#tableName,
          Item: channel,
          ...(seenUpdatedAt === undefined
            ? { ConditionExpression: 'attribute_not_exists(channelId)' }
            : {
                ConditionExpression: 'clientId = :clientId AND updatedAt = :seen',
                ExpressionAttributeValues: { ':clientId': channel.clientId, ':seen': seenUpdatedAt },
              }),
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }
}
