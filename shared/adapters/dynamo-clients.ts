/**
 * DynamoDB adapter of the {@link ClientStore}: a client's settings as one control-table item
 * (`CLIENT#{clientId}` / `PROFILE`), written as an update so a pause set by its own route stays.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type ClientSettings, keys } from '#shared/jobs/model.ts';
import type { ClientStore } from '#shared/jobs/ports.ts';

export function makeDynamoClientStore(doc: DynamoDBDocumentClient, tableName: string): ClientStore {
  return {
    async get(clientId) {
      const out = await doc.send(new GetCommand({ TableName: tableName, Key: keys.client(clientId) }));
      if (!out.Item) return undefined;
      const { pk: _pk, sk: _sk, ...settings } = out.Item;
      return settings as ClientSettings;
    },
    async put(settings) {
      // An update, not a put: a pause set by its own route stays unless the settings name it.
      const names: Record<string, string> = {};
      const values: Record<string, unknown> = {};
      const set: string[] = [];
      for (const [field, value] of Object.entries(settings)) {
        if (value === undefined) continue;
        names[`#${field}`] = field;
        values[`:${field}`] = value;
        set.push(`#${field} = :${field}`);
      }
      const remove = CLIENT_OPTIONAL_FIELDS.filter((field) => settings[field] === undefined);
      for (const field of remove) names[`#${field}`] = field;
      const out = await doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key: keys.client(settings.clientId),
          UpdateExpression: `SET ${set.join(', ')}${remove.length > 0 ? ` REMOVE ${remove.map((f) => `#${f}`).join(', ')}` : ''}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
        }),
      );
      const { pk: _pk, sk: _sk, ...stored } = out.Attributes ?? {};
      return stored as ClientSettings;
    },
    async setPaused(clientId, paused, now) {
      try {
        const out = await doc.send(
          new UpdateCommand({
            TableName: tableName,
            Key: keys.client(clientId),
            UpdateExpression: 'SET paused = :paused, updatedAt = :now',
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: { ':paused': paused, ':now': now },
            ReturnValues: 'ALL_NEW',
          }),
        );
        const { pk: _pk, sk: _sk, ...settings } = out.Attributes ?? {};
        return settings as ClientSettings;
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException) return undefined;
        throw error;
      }
    },
  };
}

/** Settings a `PUT /clients/{id}` may leave out: removed when it does (`paused` is kept). */
const CLIENT_OPTIONAL_FIELDS = ['messageChannelId', 'jobDefaults', 'telephony', 'outcomeWebhook'] as const;
