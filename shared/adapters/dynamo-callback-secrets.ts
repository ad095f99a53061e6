/**
 * Callback secrets in the channels table (its KMS key guards them like channel secrets): one item
 * per provider, keyed `TELEPHONY#{provider}`, a prefix no LINE channel id has, so the call-status
 * role's read is narrowed to these items (`dynamodb:LeadingKeys`) and never reaches a channel.
 */
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import {
  CALLBACK_SECRET_KEY_PREFIX,
  type CallbackSecretRecord,
  type CallbackSecretStore,
} from '#shared/telephony/callback-secrets.ts';

/** The providers' callback secrets in the channels table, one item a provider. */
export class DynamoCallbackSecretStore implements CallbackSecretStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #tableName: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.#tableName = tableName;
  }

  async get(provider: string): Promise<CallbackSecretRecord | undefined> {
    const out = await this.#doc.send(
      new GetCommand({
        TableName: this.#tableName,
        Key: { channelId: `${CALLBACK_SECRET_KEY_PREFIX}${provider}` },
        ConsistentRead: true,
      }),
    );
    const item = out.Item;
    if (!item || typeof item.current !== 'string') return undefined;
    return {
      provider,
      current: item.current,
      ...(typeof item.previous === 'string'
        ? { previous: item.previous, previousValidUntil: Number(item.previousValidUntil) }
        : {}),
      updatedAt: Number(item.updatedAt),
    };
  }

  async put(record: CallbackSecretRecord): Promise<void> {
    await this.#doc.send(
      new PutCommand({
        TableName: this.#tableName,
        Item: {
          channelId: `${CALLBACK_SECRET_KEY_PREFIX}${record.provider}`,
          kind: 'callback-secret',
          ...record,
        },
      }),
    );
  }
}
