/**
 * The local cloud's tables as a deploy leaves them: a table kept from an earlier run (`npm start
 * --data-dir`) gets the indexes its spec gained since, as CloudFormation adds them to a deployed one.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud } from '../../support/cloud.ts';

const cloud = testCloud();

describe('a table created again', () => {
  it('gains the indexes its spec has and it lacks, keys only where the spec says so', async () => {
    const stage = `tbl${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
    const spec = tableSpec('tasks');
    const [first] = spec.globalIndexes;
    const name = await createTable(cloud.ddb, stage, { ...spec, globalIndexes: [first!] });
    expect(await createTable(cloud.ddb, stage, spec)).toBe(name);
    const { Table } = await cloud.ddb.send(new DescribeTableCommand({ TableName: name }));
    const indexes = Object.fromEntries(
      (Table?.GlobalSecondaryIndexes ?? []).map((i) => [i.IndexName, i.Projection?.ProjectionType]),
    );
    expect(indexes).toEqual(
      Object.fromEntries(
        spec.globalIndexes.map((i) => [i.name, i.projection === 'keys-only' ? 'KEYS_ONLY' : 'ALL']),
      ),
    );
    // Created again with nothing new: nothing to do.
    expect(await createTable(cloud.ddb, stage, spec)).toBe(name);
  });
});
