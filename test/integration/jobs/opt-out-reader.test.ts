import { describe, expect, it } from 'vitest';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { ValidationError } from '#shared/jobs/errors.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const T0 = Date.UTC(2026, 10, 20, 9);
const user = (i: number) => `U${String(i).padStart(32, '0')}`;

describe("the operator's read of a client's opt-outs", () => {
  const store = new DynamoOptOutStore(cloud.doc, controlTable);

  it('answers the records of the recipients asked for: opted out, opted back in, and none', async () => {
    const client = uniqueName('client');
    await store.record(client, user(1), true, T0);
    await store.record(client, user(2), true, T0);
    await store.record(client, user(2), false, T0 + 1_000);
    await store.record(uniqueName('other'), user(3), true, T0);
    const records = await store.records(client, [user(1), user(2), user(3), user(1)]);
    expect([...records].sort((a, b) => a.recipient.localeCompare(b.recipient))).toEqual([
      { recipient: user(1), optedOut: true, eventAt: T0 },
      { recipient: user(2), optedOut: false, eventAt: T0 + 1_000 },
    ]);
    expect(await store.records(client, [])).toEqual([]);
  });

  it('pages through opted-out recipients only, however many opted back in between them', async () => {
    const client = uniqueName('client');
    // 30 recipients; every third is opted out (0, 3, …, 27), the others followed back.
    for (let i = 0; i < 30; i++) await store.record(client, user(i), i % 3 === 0, T0 + i);
    const seen: string[] = [];
    let next: string | undefined;
    let pages = 0;
    do {
      const page = await store.page(client, { limit: 4, ...(next ? { next } : {}) });
      expect(page.records.length).toBeLessThanOrEqual(4);
      for (const r of page.records) expect(r.optedOut).toBe(true);
      seen.push(...page.records.map((r) => r.recipient));
      next = page.next;
      pages++;
    } while (next);
    expect(seen).toEqual(Array.from({ length: 10 }, (_, k) => user(k * 3)));
    expect(pages).toBeGreaterThanOrEqual(3);
  });

  it('refuses a page token it did not hand out', async () => {
    await expect(store.page(uniqueName('client'), { limit: 5, next: '!!' })).rejects.toBeInstanceOf(
      ValidationError,
    );
  });
});
