import { randomUUID } from 'node:crypto';
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const control = cloud.info.tableNames.control!;

describe('DynamoDB Local, provisioned from the shared resource specs', () => {
  it('refuses a conditional write that conflicts, and keeps the first value', async () => {
    const pk = `LEASE#${uniqueName('client')}`;
    await cloud.doc.send(
      new PutCommand({
        TableName: control,
        Item: { pk, sk: 'LEASE', owner: 'broker-a', token: 1 },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    await expect(
      cloud.doc.send(
        new PutCommand({
          TableName: control,
          Item: { pk, sk: 'LEASE', owner: 'broker-b', token: 1 },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      ),
    ).rejects.toBeInstanceOf(ConditionalCheckFailedException);
    const got = await cloud.doc.send(new GetCommand({ TableName: control, Key: { pk, sk: 'LEASE' } }));
    expect(got.Item?.owner).toBe('broker-a');
  });

  it('cancels a whole TransactWriteItems when its ConditionCheck fails (fencing)', async () => {
    const clientId = uniqueName('client');
    const tasks = cloud.info.tableNames.tasks!;
    await cloud.doc.send(
      new PutCommand({
        TableName: control,
        Item: { pk: `LEASE#${clientId}`, sk: 'LEASE', owner: 'b', token: 2 },
      }),
    );
    const startTask = (token: number) =>
      cloud.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              ConditionCheck: {
                TableName: control,
                Key: { pk: `LEASE#${clientId}`, sk: 'LEASE' },
                ConditionExpression: '#t = :t',
                ExpressionAttributeNames: { '#t': 'token' },
                ExpressionAttributeValues: { ':t': token },
              },
            },
            { Put: { TableName: tasks, Item: { pk: `job#0`, sk: `${clientId}-task`, state: 'dialing' } } },
          ],
        }),
      );
    const stale = await startTask(1).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(TransactionCanceledException);
    expect((stale as TransactionCanceledException).CancellationReasons?.[0]?.Code).toBe(
      'ConditionalCheckFailed',
    );
    expect(
      (
        await cloud.doc.send(
          new GetCommand({ TableName: tasks, Key: { pk: 'job#0', sk: `${clientId}-task` } }),
        )
      ).Item,
    ).toBeUndefined();

    await startTask(2);
    const started = await cloud.doc.send(
      new GetCommand({ TableName: tasks, Key: { pk: 'job#0', sk: `${clientId}-task` } }),
    );
    expect(started.Item?.state).toBe('dialing');
  });

  it('answers a TransactWriteItems sent again with its ClientRequestToken as done, without applying it twice', async () => {
    const key = { pk: `COUNTER#${uniqueName('c')}`, sk: 'C' };
    await cloud.doc.send(new PutCommand({ TableName: control, Item: { ...key, n: 0, state: 'pending' } }));
    const start = (token: string) =>
      cloud.doc.send(
        new TransactWriteCommand({
          ClientRequestToken: token,
          TransactItems: [
            {
              Update: {
                TableName: control,
                Key: key,
                UpdateExpression: 'SET #s = :started ADD n :one',
                ConditionExpression: '#s = :pending',
                ExpressionAttributeNames: { '#s': 'state' },
                ExpressionAttributeValues: { ':started': 'started', ':pending': 'pending', ':one': 1 },
              },
            },
          ],
        }),
      );
    const token = randomUUID();
    await start(token);
    // The same request again (a retry after a lost answer): done, not a failed condition.
    await start(token);
    const { Item } = await cloud.doc.send(new GetCommand({ TableName: control, Key: key }));
    expect(Item).toMatchObject({ state: 'started', n: 1 });
    // A new request is checked anew.
    expect(await start(randomUUID()).catch((e: unknown) => e)).toBeInstanceOf(TransactionCanceledException);
  });
});
