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
});
