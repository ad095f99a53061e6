/**
 * BatchGetItem over any number of keys of one table: 100 keys a call, a few calls at once, each
 * call's unprocessed keys asked again with a growing pause (DynamoDB hands them back under load).
 */
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';

/** Keys a BatchGetItem call takes. */
const KEYS_PER_CALL = 100;
/** Calls of one read in flight at once. */
const CALLS_AT_ONCE = 5;

export interface BatchGetOptions {
  readonly consistent?: boolean;
  readonly projection?: string;
  readonly names?: Record<string, string>;
}

/** The items of `keys` that exist, in no particular order. */
export async function batchGetItems(
  doc: DynamoDBDocumentClient,
  tableName: string,
  keys: readonly Record<string, unknown>[],
  options: BatchGetOptions = {},
): Promise<Record<string, unknown>[]> {
  const calls: Record<string, unknown>[][] = [];
  for (let i = 0; i < keys.length; i += KEYS_PER_CALL) calls.push(keys.slice(i, i + KEYS_PER_CALL));
  const items: Record<string, unknown>[] = [];
  for (let i = 0; i < calls.length; i += CALLS_AT_ONCE) {
    const pages = await Promise.all(
      calls.slice(i, i + CALLS_AT_ONCE).map((k) => getCall(doc, tableName, k, options)),
    );
    for (const page of pages) items.push(...page);
  }
  return items;
}

async function getCall(
  doc: DynamoDBDocumentClient,
  tableName: string,
  first: readonly Record<string, unknown>[],
  options: BatchGetOptions,
): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let keys: readonly Record<string, unknown>[] | undefined = first;
  for (let attempt = 0; keys && keys.length > 0; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** attempt)));
    const out: BatchGetCommandOutput = await doc.send(
      new BatchGetCommand({
        RequestItems: {
          [tableName]: {
            Keys: [...keys],
            ...(options.consistent ? { ConsistentRead: true } : {}),
            ...(options.projection ? { ProjectionExpression: options.projection } : {}),
            ...(options.names ? { ExpressionAttributeNames: options.names } : {}),
          },
        },
      }),
    );
    items.push(...(out.Responses?.[tableName] ?? []));
    keys = out.UnprocessedKeys?.[tableName]?.Keys;
  }
  return items;
}
