/**
 * Outcome webhooks end to end on the local stack, with real brokers: a client with a webhook runs a
 * 300-recipient message campaign while its receiver answers 5xx, loses answers after recording,
 * drops connections, answers late, and is stopped mid-stream and started again. Checked at the
 * receiver: every task end and every job status change arrived (verified signatures), duplicates
 * carry the same event id, nothing is lost. Then the DLQ path: deliveries that keep failing reach
 * the dead-letter queue (a queue pair with a low maxReceiveCount, so the test does not wait 24 h)
 * and the redrive moves them back, to be delivered.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueueWithDlq, LOCAL_CREDENTIALS } from '#local/cloud.ts';
import type { Handler } from '#local/lambda.ts';
import { type OutcomeReceiver, startOutcomeReceiver } from '#local/outcome-receiver.ts';
import { startSqsPoller } from '#local/sqs-poller.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { redriveDeadLetters } from '#shared/adapters/sqs-dlq-redrive.ts';
import { outcomeFunctions } from '#shared/functions.ts';
import { queueSpec } from '#shared/resources.ts';
import { eventually } from '../support/wait.ts';

const RECIPIENTS = 300;
const CLIENT = 'outcomes-client';
const SECRET = 'outcome-webhook-secret-e2e-0001';
const CHANNEL = {
  channelId: 'outcomes',
  clientId: CLIENT,
  channelSecret: 'outcomes-channel-secret',
  accessToken: 'outcomes-channel-access-token',
  autoAnswer: 'push',
  rules: [],
};
const ALL_DAY = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
);
const SETTINGS = {
  maxConcurrentCalls: 1,
  callsPerSecond: 1,
  timeZone: 'Asia/Tokyo',
  callingHours: ALL_DAY,
  defaultRegion: 'JP',
  messageChannelId: CHANNEL.channelId,
};

let stack: LocalStack;
let receiver: OutcomeReceiver;
let dir: string;

const userId = (i: number) => `U${(0xfeed0000 + i).toString(16)}${'0'.repeat(24)}`;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  // Backoff at a tenth of its schedule: 1 s, 2 s, 4 s… instead of 10 s, 20 s, 40 s.
  process.env.OUTCOME_RETRY_DELAY_SCALE = '0.1';
  dir = mkdtempSync(path.join(tmpdir(), 'outcome-webhooks-'));
  receiver = await startOutcomeReceiver({ secret: SECRET });
  stack = await startLocalStack({
    stage: 'e2eoutcomes',
    port: 0,
    fleet: true,
    maxBrokers: 1,
    jobManagerIntervalMs: 1_000,
    lineRateLimitPerSecond: 200,
    brokerEnv: { BROKER_IDLE_WAIT_MS: '300' },
  });
  await stack.putChannel(CHANNEL);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the outcomeWebhook setting', () => {
  it('is refused with field errors when the URL or the secret is bad, and never returned', async () => {
    const bad = await stack.operator('PUT', `/clients/${CLIENT}`, {
      json: { ...SETTINGS, outcomeWebhook: { url: 'ftp://example.com/x' } },
    });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.json<{ fieldErrors: object }>().fieldErrors).sort()).toEqual([
      'outcomeWebhook.secret',
      'outcomeWebhook.url',
    ]);
    const put = await stack.operator('PUT', `/clients/${CLIENT}`, {
      json: { ...SETTINGS, outcomeWebhook: { url: receiver.url, secret: SECRET } },
    });
    expect(put.status).toBe(200);
    const got = await stack.operator('GET', `/clients/${CLIENT}`);
    expect(got.json<{ outcomeWebhook: object }>().outcomeWebhook).toMatchObject({ url: receiver.url });
    expect(JSON.stringify(put.json())).not.toContain(SECRET);
    expect(JSON.stringify(got.json())).not.toContain(SECRET);
  });
});

describe('a campaign with a receiver that fails', () => {
  it('delivers every task end and job status change at least once, signed, duplicates by event id', async () => {
    const lines = ['LINEユーザーID,お名前'];
    for (let i = 0; i < RECIPIENTS; i++) lines.push(`${userId(i)},顧客${i}`);
    const csv = path.join(dir, 'list.csv');
    writeFileSync(csv, `${lines.join('\r\n')}\r\n`);
    receiver.inject(
      { kind: 'status', status: 503 },
      { kind: 'lose-response' },
      { kind: 'drop-connection' },
      { kind: 'latency', ms: 300 },
      { kind: 'status', status: 500 },
      { kind: 'lose-response' },
    );
    const created = await stack.operator('POST', `/clients/${CLIENT}/jobs`, {
      json: { name: 'outcomes', channel: 'message', message: '{{name}}様 🎁' },
    });
    expect(created.status).toBe(201);
    const { jobId, upload } = created.json<{ jobId: string; upload: { url: string; method: string } }>();
    expect((await fetch(upload.url, { method: upload.method, body: readFileSync(csv) })).ok).toBe(true);

    const taskEnds = () => receiver.events().filter((e) => e.event.type === 'task.ended').length;
    // Mid-stream, the receiver goes down: deliveries fail (connection refused) until it is back.
    await receiver.waitFor(() => taskEnds() >= 50, 120_000);
    await receiver.stop();
    const failedBefore = stack.outcomes.deliveries.stats().records;
    await eventually(
      () => (stack.outcomes.deliveries.stats().records > failedBefore ? true : undefined),
      'a delivery tried while down',
      { timeoutMs: 120_000 },
    );
    await receiver.start();

    await eventually(
      async () => {
        const { json } = await stack.operator('GET', `/clients/${CLIENT}/jobs/${jobId}`);
        return json<{ status: string }>().status === 'completed' ? true : undefined;
      },
      'the job to complete',
      { timeoutMs: 180_000 },
    );
    const statuses = ['uploading', 'validating', 'scheduled', 'running', 'completed'];
    await receiver.waitFor((events) => {
      const ends = events.filter((e) => e.event.type === 'task.ended').length;
      const jobs = new Set(
        events.flatMap((e) =>
          e.event.type === 'job.status_changed' && e.event.data.jobId === jobId ? [e.event.data.status] : [],
        ),
      );
      return ends === RECIPIENTS && statuses.every((s) => jobs.has(s as never));
    }, 120_000);

    const events = receiver.events();
    const ends = events.filter((e) => e.event.type === 'task.ended');
    expect(new Set(ends.map((e) => e.event.type === 'task.ended' && e.event.data.taskId)).size).toBe(
      RECIPIENTS,
    );
    expect(ends.every((e) => e.event.type === 'task.ended' && e.event.data.state === 'completed')).toBe(true);
    const stats = receiver.stats();
    expect(stats.badSignatures).toBe(0);
    // Lost answers were delivered again: the receiver saw the same event ids twice and kept one.
    expect(stats.duplicates).toBeGreaterThan(0);
    expect(events.some((e) => e.deliveries > 1)).toBe(true);
    const completed = events.find(
      (e) => e.event.type === 'job.status_changed' && e.event.data.status === 'completed',
    )!;
    const running = events.find(
      (e) => e.event.type === 'job.status_changed' && e.event.data.status === 'running',
    )!;
    expect(completed.event.sequence > running.event.sequence).toBe(true);
    expect(receiver.newestSequence(jobId)).toBe(completed.event.sequence);
  });
});

describe('the dead-letter queue and its redrive', () => {
  it('a delivery that keeps failing reaches the DLQ; the redrive moves it back and it is delivered', async () => {
    const sqs = new SQSClient({
      region: stack.cloud.region,
      credentials: LOCAL_CREDENTIALS,
      endpoint: stack.cloud.sqsEndpoint,
    });
    // The deployed pair's shape, with 3 receives instead of 33 (the test does not wait 24 h).
    const pair = await createQueueWithDlq(sqs, 'e2eoutcomes', queueSpec('outcome-webhooks'), {
      name: 'switchboard-e2eoutcomes-outcome-webhooks-drill',
      maxReceiveCount: 3,
      visibilityTimeoutSeconds: 2,
    });
    const worker = outcomeFunctions['outcome-webhooks'];
    const { handler } = (await import('#lambdas/outcome-webhooks/main.ts')) as {
      handler: Handler<SQSEvent, unknown>;
    };
    const poller = startSqsPoller({
      sqs,
      queueUrl: pair.url,
      queueArn: pair.arn,
      functionName: worker.id,
      handler,
      functionTimeoutMs: worker.timeoutSeconds * 1000,
      batchSize: 10,
      region: stack.cloud.region,
    });
    try {
      const before = receiver.events().length;
      const event = { ...receiver.events()[0]!.event, id: 'evt_dlq_drill_0000000000000000000000' };
      // Aimed at the drill's event: the stack's own deliveries to the same receiver pass them by.
      receiver.inject(
        ...Array.from({ length: 3 }, () => ({ kind: 'status', status: 500, forEvent: event.id }) as const),
      );
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: pair.url,
          MessageBody: JSON.stringify({ clientId: CLIENT, events: [event] }),
        }),
      );
      await eventually(
        async () => {
          const out = await sqs.send(
            new GetQueueAttributesCommand({
              QueueUrl: pair.dlqUrl,
              AttributeNames: ['ApproximateNumberOfMessages'],
            }),
          );
          return Number(out.Attributes?.ApproximateNumberOfMessages) === 1 ? true : undefined;
        },
        'the delivery in the DLQ',
        // Three receives 2 s apart, on a machine the rest of the suite keeps busy: room to spare.
        { timeoutMs: 180_000 },
      );
      expect(receiver.events().length).toBe(before);

      const moved = await redriveDeadLetters(
        sqs,
        { queueUrl: pair.url, queueArn: pair.arn, dlqUrl: pair.dlqUrl, dlqArn: pair.dlqArn },
        'receive-send',
      );
      expect(moved).toEqual({ mode: 'receive-send', moved: 1 });
      await receiver.waitFor((events) => events.some((e) => e.event.id === event.id), 30_000);
    } finally {
      await poller.stop();
      sqs.destroy();
    }
  });
});
