/**
 * A 20,000-recipient message campaign, end to end on the local stack with real broker processes:
 * created and uploaded through the operator API, ingested, started by the job manager, and sent
 * by the brokers through the LINE sandbox while it drops 5% of responses after delivering,
 * answers 5% with 500 and bursts of 429, and while the broker holding the client is SIGKILLed
 * twice and SIGTERMed once. Recipients unfollow before and during the campaign (webhooks).
 * Checked from the sandbox's delivery log and the job's report: each recipient who had not
 * opted out got the message exactly once, the job's counts match the sandbox, nothing is stuck.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import type { LocalFleet } from '#local/ecs-service.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { OPTED_OUT_MAYBE_SENT_REASON } from '#shared/jobs/task-lifecycle.ts';
import { eventually as waitUp } from '../support/wait.ts';

/** The campaign's waits: a bound of 3 minutes against a hang, on a loaded machine. */
const waitFor = <T>(check: () => Promise<T | undefined>, what: string) =>
  waitUp(check, what, { timeoutMs: 180_000 });

const RECIPIENTS = 20_000;
const CLIENT = 'campaign-client';
const CHANNEL = {
  channelId: 'campaign',
  clientId: CLIENT,
  channelSecret: 'campaign-channel-secret',
  accessToken: 'campaign-channel-access-token',
  autoAnswer: 'push',
  rules: [],
};
/** Unfollowed before the upload: ingest skips their rows. */
const GONE_BEFORE = [17, 4_242, 19_999];
/** Unfollow while the campaign runs: skipped if not yet sent, else sent once. */
const GONE_DURING = [3, 9_000, 12_345, 15_000, 18_888];

let stack: LocalStack;
let fleet: LocalFleet;
let doc: DynamoDBDocumentClient;
let dir: string;

const userId = (i: number) => `U${(0xc0ffee00 + i).toString(16)}${'0'.repeat(24)}`;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  dir = mkdtempSync(path.join(tmpdir(), 'message-campaign-'));
  stack = await startLocalStack({
    stage: 'e2ecampaign',
    port: 0,
    fleet: true,
    maxBrokers: 2,
    jobManagerIntervalMs: 1_000,
    lineRateLimitPerSecond: 1_000,
    // A dead holder's lease runs out after 6 s (heartbeats every 2 s, on a loaded DynamoDB Local).
    brokerEnv: { LEASE_MS: '6000', BROKER_IDLE_WAIT_MS: '300' },
  });
  fleet = stack.fleet!;
  doc = makeDocumentClient(
    new DynamoDBClient({
      region: stack.cloud.region,
      credentials: LOCAL_CREDENTIALS,
      endpoint: stack.cloud.dynamoEndpoint,
    }),
  );
  await stack.putChannel(CHANNEL);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  doc?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function unfollow(i: number): Promise<void> {
  const sent = await stack.line.sendWebhook({
    url: stack.webhookUrl(CHANNEL.channelId),
    channelSecret: CHANNEL.channelSecret,
    events: [stack.line.events.unfollow({ channelId: CHANNEL.channelId, from: userId(i) })],
  });
  expect(sent.status).toBe(200);
}

async function holder(): Promise<{ owner: string; token: number } | undefined> {
  const { Item } = await doc.send(
    new GetCommand({
      TableName: stack.cloud.tableNames.control!,
      Key: { pk: `LEASE#${CLIENT}`, sk: 'LEASE' },
      ConsistentRead: true,
    }),
  );
  if (!Item || typeof Item.owner !== 'string' || Number(Item.expiresAt) <= Date.now()) return undefined;
  return { owner: Item.owner, token: Number(Item.token) };
}

const delivered = () => stack.line.counters().deliveries;

describe('a message campaign under faults and broker kills', () => {
  it('delivers exactly once to every recipient who had not opted out, and the job says so', {
    timeout: 600_000,
  }, async () => {
    const began = Date.now();
    const marks: string[] = [];
    const mark = (what: string) => marks.push(`${what} ${((Date.now() - began) / 1000).toFixed(1)} s`);
    for (const i of GONE_BEFORE) await unfollow(i);
    const lines = ['LINEユーザーID,お名前'];
    for (let i = 0; i < RECIPIENTS; i++) lines.push(`${userId(i)},顧客${i}`);
    const csv = path.join(dir, 'campaign.csv');
    writeFileSync(csv, `\uFEFF${lines.join('\r\n')}\r\n`);

    const put = await stack.operator('PUT', `/clients/${CLIENT}`, {
      json: {
        maxConcurrentCalls: 1,
        callsPerSecond: 1,
        timeZone: 'Asia/Tokyo',
        callingHours: Object.fromEntries(
          ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [
            d,
            [{ start: '00:00', end: '24:00' }],
          ]),
        ),
        defaultRegion: 'JP',
        messageChannelId: CHANNEL.channelId,
      },
    });
    expect(put.status).toBe(200);
    const created = await stack.operator('POST', `/clients/${CLIENT}/jobs`, {
      json: {
        name: 'campaign',
        channel: 'message',
        message: '{{name}}様、ご来店ありがとうございました 🎁',
      },
    });
    expect(created.status).toBe(201);
    const { jobId, upload } = created.json<{ jobId: string; upload: { url: string; method: string } }>();
    const { readFileSync } = await import('node:fs');
    expect((await fetch(upload.url, { method: upload.method, body: readFileSync(csv) })).ok).toBe(true);
    mark('uploaded');
    void waitFor(async () => {
      const { json } = await stack.operator('GET', `/clients/${CLIENT}/jobs/${jobId}`);
      return json<{ status: string }>().status === 'running' ? true : undefined;
    }, 'running').then(() => mark('running'));
    void waitFor(async () => (delivered() > 0 ? true : undefined), 'a delivery').then(() =>
      mark('first delivery'),
    );

    // The sandbox turns hostile once sending starts: 5% 500s, 5% responses dropped after
    // delivering, and bursts of 429s between the kills.
    stack.line.faults.setProbabilities({ status500: 0.05, dropAfterDeliver: 0.05 });
    const kills: { signal: NodeJS.Signals; brokerId: string; token: number }[] = [];
    try {
      for (const [threshold, signal] of [
        [2_500, 'SIGKILL'],
        [7_500, 'SIGKILL'],
        [12_500, 'SIGTERM'],
      ] as const) {
        await waitFor(
          async () => (delivered() >= threshold - 1_500 ? true : undefined),
          `${threshold - 1_500} deliveries`,
        );
        stack.line.faults.burst429(30);
        const victim = await waitFor(async () => {
          if (delivered() < threshold) return undefined;
          const lease = await holder();
          return lease && fleet.list().find((b) => b.brokerId === lease.owner)?.state === 'ready'
            ? lease
            : undefined;
        }, `${threshold} deliveries on a broker holding the lease`);
        fleet.kill(victim.owner, signal);
        mark(`${signal} at ${delivered()}`);
        kills.push({ signal, brokerId: victim.owner, token: victim.token });
        if (threshold === 7_500) for (const i of GONE_DURING) await unfollow(i);
      }
      await waitFor(async () => {
        const { json } = await stack.operator('GET', `/clients/${CLIENT}/jobs/${jobId}`);
        const body = json<{ status: string }>();
        return body.status === 'completed' ? body : undefined;
      }, 'the job to complete');
      mark('completed');
      console.log(`campaign of ${RECIPIENTS}: ${marks.join(', ')}`);
    } finally {
      stack.line.faults.clear();
    }

    // Exactly once, by the sandbox's own log.
    expect(stack.line.duplicates()).toEqual([]);
    const perRecipient = new Map<string, number>();
    for (const d of stack.line.deliveries())
      for (const to of d.to) perRecipient.set(to, (perRecipient.get(to) ?? 0) + 1);
    const sentTo = (i: number) => perRecipient.get(userId(i)) ?? 0;
    const optedOutDuring: number[] = [];
    for (let i = 0; i < RECIPIENTS; i++) {
      const n = sentTo(i);
      if (GONE_BEFORE.includes(i)) expect(n, `recipient ${i}`).toBe(0);
      else if (GONE_DURING.includes(i)) {
        expect(n, `recipient ${i}`).toBeLessThanOrEqual(1);
        if (n === 0) optedOutDuring.push(i);
      } else expect(n, `recipient ${i}`).toBe(1);
    }
    const sample = stack.line.deliveriesTo(userId(42))[0]!;
    expect(sample.messages).toEqual([{ type: 'text', text: '顧客42様、ご来店ありがとうございました 🎁' }]);

    // The job's counts and report agree with the sandbox; every task ended. A recipient who
    // opted out during the campaign is `cancelled` if nothing reached them; one whose attempt was
    // in doubt when they opted out (a killed holder's send) is not resent to, and is `cancelled`
    // with a reason that says it may have been delivered.
    const { json } = await stack.operator('GET', `/clients/${CLIENT}/jobs/${jobId}`);
    const job = json<{ counts: Record<string, number> }>();
    const tasks = RECIPIENTS - GONE_BEFORE.length;
    const report = await stack.operator('GET', `/clients/${CLIENT}/jobs/${jobId}/report`);
    const rows = parse(report.body.replace(/^\uFEFF/, ''), { columns: true }) as Record<string, string>[];
    const outcomes = Object.groupBy(
      rows.filter((r) => r.recipient),
      (r) => r.outcome ?? '',
    );
    const cancelled = outcomes.cancelled ?? [];
    for (const r of cancelled) {
      expect(GONE_DURING.map(userId), `cancelled ${r.recipient}`).toContain(r.recipient);
      // Cancelled without doubt: the sandbox never delivered to them.
      if (r.reason !== OPTED_OUT_MAYBE_SENT_REASON) expect(perRecipient.get(r.recipient!) ?? 0).toBe(0);
    }
    expect(optedOutDuring.map(userId).filter((u) => !cancelled.some((r) => r.recipient === u))).toEqual([]);
    expect(job.counts).toMatchObject({
      rows: RECIPIENTS,
      skipped: GONE_BEFORE.length,
      tasks,
      completed: tasks - cancelled.length,
      failed: 0,
      cancelled: cancelled.length,
    });
    expect(outcomes.completed?.length).toBe(tasks - cancelled.length);
    // Every completed task reached its recipient, by the sandbox's log.
    for (const r of outcomes.completed ?? []) expect(perRecipient.get(r.recipient!), r.recipient).toBe(1);

    // The drill happened as planned: two SIGKILLs, one SIGTERM that ended cleanly.
    expect(kills.map((k) => k.signal)).toEqual(['SIGKILL', 'SIGKILL', 'SIGTERM']);
    for (const k of kills) {
      const exit = await waitFor(async () => fleet.exits.find((e) => e.brokerId === k.brokerId), 'the exit');
      if (k.signal === 'SIGKILL') expect(exit.signal).toBe('SIGKILL');
      else expect(exit).toMatchObject({ code: 0, forced: false });
    }
    const last = await holder();
    if (last) expect(last.token).toBeGreaterThan(kills.at(-1)!.token);
  });
});
