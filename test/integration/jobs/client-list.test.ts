import { describe, expect, it } from 'vitest';
import { DynamoClientStore } from '#shared/adapters/dynamo-clients.ts';
import { ValidationError } from '#shared/jobs/errors.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const store = new DynamoClientStore(cloud.doc, cloud.info.tableNames.control!);

const settings = (clientId: string): ClientSettings => ({
  clientId,
  maxConcurrentCalls: 1,
  callsPerSecond: 1,
  timeZone: 'Asia/Tokyo',
  callingHours: { timeZone: 'Asia/Tokyo', weekly: { mon: [{ start: '09:00', end: '18:00' }] } },
  defaultRegion: 'JP',
  updatedAt: 1,
});

describe("the administrators' list of every client", () => {
  it('pages through every client by id, each once, and a client read back has no index attributes', async () => {
    const prefix = uniqueName('list');
    const ours = [`${prefix}-c`, `${prefix}-a`, `${prefix}-b`];
    for (const id of ours) await store.put(settings(id));
    // A client saved before the list existed joins it when paused or resumed.
    await store.setPaused(`${prefix}-b`, true, 2);

    const seen: string[] = [];
    let next: string | undefined;
    do {
      const page = await store.list({ limit: 2, ...(next ? { next } : {}) });
      expect(page.clients.length).toBeLessThanOrEqual(2);
      seen.push(...page.clients.map((c) => c.clientId));
      next = page.next;
    } while (next);
    expect(seen).toEqual([...seen].sort());
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => id.startsWith(prefix))).toEqual([...ours].sort());

    const read = await store.get(`${prefix}-b`);
    expect(read).toEqual({ ...settings(`${prefix}-b`), paused: true, updatedAt: 2 });
  });

  it('reads a client saved with an email configuration set (a retired field) without it, so Save unchanged is accepted', async () => {
    const clientId = uniqueName('retired');
    const email = { from: 'news@shop.example' };
    await store.put({
      ...settings(clientId),
      email: { ...email, configurationSet: 'theirs' } as ClientSettings['email'],
    });
    expect((await store.get(clientId))?.email).toEqual(email);
  });

  it('refuses a page token it did not give', async () => {
    await expect(store.list({ limit: 10, next: '../../etc' })).rejects.toBeInstanceOf(ValidationError);
  });
});
