/**
 * Call links on DynamoDB Local: an event that comes before its call is linked is held and handed
 * to the link; one that comes after finds the link; raced many times, no event is both lost and
 * unlinked.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { DynamoCallLinks } from '#shared/adapters/dynamo-call-links.ts';
import type { CallLinkStore } from '#shared/broker/ports.ts';
import { tableSpec } from '#shared/resources.ts';
import type { CallStatusEvent } from '#shared/telephony/port.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
let links: CallLinkStore;

beforeAll(async () => {
  const tasksTable = await createTable(cloud.ddb, uniqueName('links'), tableSpec('tasks'));
  links = new DynamoCallLinks(cloud.doc, tasksTable);
});

// Links carry a TTL DynamoDB Local enforces: a fixed date would expire under the test one day.
const NOW = Date.now();
const link = (taskId: string) => ({ clientId: 'c1', jobId: 'j1', taskId, attempt: 1 });
const ended = (callId: string): CallStatusEvent => ({
  callId,
  idempotencyKey: '',
  status: 'failed',
  at: new Date(NOW).toISOString(),
  sequence: 3,
  reason: 'telecom_number_invalid',
});

describe('call links', () => {
  it('holds an event that comes first and hands it to the link', async () => {
    expect(await links.resolve('call-1', ended('call-1'), NOW)).toBeUndefined();
    expect(await links.link('call-1', link('t1'), NOW)).toEqual([ended('call-1')]);
  });

  it('an event after the link finds its attempt', async () => {
    expect(await links.link('call-2', link('t2'), NOW)).toEqual([]);
    expect(await links.resolve('call-2', ended('call-2'), NOW)).toEqual(link('t2'));
  });

  it('raced 40 times, every event is either handed to the link or finds it', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const callId = `race-${i}`;
        const [held, found] = await Promise.all([
          links.link(callId, link(`t-${i}`), NOW),
          links.resolve(callId, ended(callId), NOW),
        ]);
        return held.length === 1 || found?.taskId === `t-${i}`;
      }),
    );
    expect(results.every(Boolean)).toBe(true);
  });
});
