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

export function makeDynamoChannelStore(
  doc: DynamoDBDocumentClient,
  tableName: string,
): ChannelStore & ChannelAdminStore {
  return {
    async get(channelId) {
      const out = await doc.send(
        new GetCommand({ TableName: tableName, Key: { channelId }, ConsistentRead: false }),
      );
      return out.Item as Channel | undefined;
    },
    async put(channel) {
      await doc.send(new PutCommand({ TableName: tableName, Item: channel }));
    },
    async listByClient(clientId) {
      const channels: Channel[] = [];
      let ExclusiveStartKey: Record<string, unknown> | undefined;
      do {
        const out = await doc.send(
          new QueryCommand({
            TableName: tableName,
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
    },
    async putIfUnchanged(channel, seenUpdatedAt) {
      try {
        await doc.send(
          new PutCommand({
            TableName: tableName,
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
    },
  };
}
