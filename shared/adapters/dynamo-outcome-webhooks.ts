/**
 * Where a client's outcome webhook lives: its URL in the client's settings (control table,
 * `CLIENT#{id}`/`PROFILE`, `outcomeWebhook.url`), its secret in the channels table under the
 * secrets KMS key, keyed `OUTCOMEWEBHOOK#{clientId}` (a prefix no LINE channel id has), so the
 * delivery function's read and the client API's write are narrowed to these items
 * (`dynamodb:LeadingKeys`) and never reach a channel.
 */
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '#shared/jobs/model.ts';
import type { OutcomeSecretWriter, OutcomeTarget, OutcomeTargets } from '#shared/outcomes/ports.ts';

/** The key prefix of outcome webhook secrets in the channels table. */
export const OUTCOME_SECRET_KEY_PREFIX = 'OUTCOMEWEBHOOK#';

/** The client API's side: writes a client's secret, never reads one. */
export class DynamoOutcomeSecretWriter implements OutcomeSecretWriter {
  readonly #doc: DynamoDBDocumentClient;
  readonly #channelsTable: string;

  constructor(doc: DynamoDBDocumentClient, channelsTable: string) {
    this.#doc = doc;
    this.#channelsTable = channelsTable;
  }

  async put(clientId: string, secret: string, now: number): Promise<void> {
    await this.#doc.send(
      new PutCommand({
        TableName: this.#channelsTable,
        Item: {
          channelId: `${OUTCOME_SECRET_KEY_PREFIX}${clientId}`,
          kind: 'outcome-secret',
          secret,
          updatedAt: now,
        },
      }),
    );
  }
}

/** Whether a client has an outcome webhook: its settings name a URL. */
export async function clientHasOutcomeWebhook(
  doc: DynamoDBDocumentClient,
  controlTable: string,
  clientId: string,
): Promise<boolean> {
  return (await webhookUrlOf(doc, controlTable, clientId)) !== undefined;
}

async function webhookUrlOf(
  doc: DynamoDBDocumentClient,
  controlTable: string,
  clientId: string,
): Promise<string | undefined> {
  const out = await doc.send(
    new GetCommand({
      TableName: controlTable,
      Key: keys.client(clientId),
      ProjectionExpression: 'outcomeWebhook',
    }),
  );
  const url = (out.Item?.outcomeWebhook as { url?: unknown } | undefined)?.url;
  return typeof url === 'string' ? url : undefined;
}

/** The delivery function's side: a client's URL and secret, read at delivery time, cached briefly. */
export class DynamoOutcomeTargets implements OutcomeTargets {
  readonly #doc: DynamoDBDocumentClient;
  readonly #controlTable: string;
  readonly #channelsTable: string;
  readonly #clock: { now(): number };
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { target: OutcomeTarget | undefined; until: number }>();

  constructor(options: {
    doc: DynamoDBDocumentClient;
    controlTable: string;
    channelsTable: string;
    clock: { now(): number };
    /** How long a read target is kept (default 30 s: a changed URL or secret applies within it). */
    ttlMs?: number;
  }) {
    this.#doc = options.doc;
    this.#controlTable = options.controlTable;
    this.#channelsTable = options.channelsTable;
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs ?? 30_000;
  }

  async targetOf(clientId: string): Promise<OutcomeTarget | undefined> {
    const now = this.#clock.now();
    const hit = this.#cache.get(clientId);
    if (hit && hit.until > now) return hit.target;
    const target = await this.#read(clientId);
    this.#cache.set(clientId, { target, until: now + this.#ttlMs });
    return target;
  }

  async #read(clientId: string): Promise<OutcomeTarget | undefined> {
    const url = await webhookUrlOf(this.#doc, this.#controlTable, clientId);
    if (url === undefined) return undefined;
    const out = await this.#doc.send(
      new GetCommand({
        TableName: this.#channelsTable,
        Key: { channelId: `${OUTCOME_SECRET_KEY_PREFIX}${clientId}` },
        ConsistentRead: true,
      }),
    );
    const secret = out.Item?.secret;
    return typeof secret === 'string' ? { url, secret } : undefined;
  }
}
