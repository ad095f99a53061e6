/**
 * DynamoDB Local's start: the port is chosen free and handed to Java, which binds it seconds
 * later. When something took it in between, the start tries again on another port.
 */
import net from 'node:net';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { freePort, LOCAL_CREDENTIALS, LOCAL_REGION, startDynamoLocalReady, stopChild } from '#local/cloud.ts';

describe('starting DynamoDB Local', () => {
  it('starts again on another port when its port was taken before Java could bind it', async () => {
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '0.0.0.0', resolve));
    const taken = (squatter.address() as net.AddressInfo).port;
    const offered: number[] = [];
    try {
      const dynamo = await startDynamoLocalReady(undefined, async () => {
        const port = offered.length === 0 ? taken : await freePort();
        offered.push(port);
        return port;
      });
      try {
        expect(offered).toHaveLength(2);
        expect(dynamo.port).toBe(offered[1]);
        const ddb = new DynamoDBClient({
          region: LOCAL_REGION,
          credentials: LOCAL_CREDENTIALS,
          endpoint: `http://127.0.0.1:${dynamo.port}`,
        });
        await expect(ddb.send(new ListTablesCommand({}))).resolves.toBeDefined();
        ddb.destroy();
      } finally {
        await stopChild(dynamo.process);
      }
    } finally {
      squatter.close();
    }
  }, 120_000);
});
