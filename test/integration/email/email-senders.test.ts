/**
 * Who sends email in the deployment, on DynamoDB Local: each broker's entry counts for the others
 * until it lapses, and never for itself.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { DynamoEmailSenders } from '#shared/adapters/dynamo-email-senders.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud } from '../../support/cloud.ts';

const cloud = testCloud();
let senders: DynamoEmailSenders;

beforeAll(async () => {
  const stage = `snd${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
  senders = new DynamoEmailSenders(cloud.doc, await createTable(cloud.ddb, stage, tableSpec('tasks')));
});

describe('the brokers sending email', () => {
  it('counts the others whose entry has not lapsed; a renewal extends it', async () => {
    const now = Date.now();
    await senders.announce('a', now + 30_000);
    await senders.announce('b', now + 30_000);
    await senders.announce('c', now - 1);
    expect(await senders.others('a', now)).toBe(1);
    expect(await senders.others('z', now)).toBe(2);
    expect(await senders.others('a', now + 31_000)).toBe(0);
    await senders.announce('b', now + 60_000);
    expect(await senders.others('a', now + 31_000)).toBe(1);
  });
});
