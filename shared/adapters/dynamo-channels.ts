import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Channel } from '#shared/channels/channel.ts';
import type { ChannelStore } from '#shared/webhooks/ports.ts';
export function makeDynamoChannelStore(doc: DynamoDBDocumentClient, tableName: string): ChannelStore {
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
  };
}
