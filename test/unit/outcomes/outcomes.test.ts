import { describe, expect, it } from 'vitest';
import {
  baseDelaySeconds,
  DELIVERY_RETRY_WINDOW_SECONDS,
  MAX_DELIVERY_ATTEMPTS,
  retryDelaySeconds,
} from '#shared/outcomes/backoff.ts';
import { OutcomeDeliverer, outcomeBody } from '#shared/outcomes/deliver.ts';
import { eventOfChange, paddedSequence, type RecordChange } from '#shared/outcomes/events.ts';
import type { OutcomeDelivery, OutcomeTarget, PostResult } from '#shared/outcomes/ports.ts';
import { CachedWebhookDirectory, OutcomeRouter } from '#shared/outcomes/route.ts';
import { parseOutcomeWebhook } from '#shared/outcomes/settings.ts';
import {
  OUTCOME_SIGNATURE_HEADER,
  signOutcomeBody,
  verifyOutcomeSignature,
} from '#shared/outcomes/signature.ts';

const NOW = Date.UTC(2025, 0, 6, 3, 0, 0);
const task = (state: string, extra: Record<string, unknown> = {}) =>
  ({
    clientId: 'c1',
    jobId: 'J1',
    taskId: 't1',
    row: 2,
    channel: 'call',
    state,
    attempts: 1,
    ...extra,
  }) as never;

describe('outcome signature', () => {
  const secret = 'outcome-secret-0123456789';
  const body = '{"events":[{"id":"evt_1","text":"こんにちは 👋"}]}';

  it('signs timestamp + "." + raw body, and a receiver verifies it within 5 minutes', () => {
    const header = signOutcomeBody(secret, body, NOW);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyOutcomeSignature({ header, rawBody: body, secret, nowMs: NOW + 299_000 })).toBe(NOW / 1000);
  });

  it('refuses a replay older than 5 minutes, another body, another secret', () => {
    const header = signOutcomeBody(secret, body, NOW);
    expect(() => verifyOutcomeSignature({ header, rawBody: body, secret, nowMs: NOW + 301_000 })).toThrow(
      /tolerance/,
    );
    expect(() => verifyOutcomeSignature({ header, rawBody: `${body} `, secret, nowMs: NOW })).toThrow(
      /does not match/,
    );
    expect(() => verifyOutcomeSignature({ header, rawBody: body, secret: `${secret}x`, nowMs: NOW })).toThrow(
      /does not match/,
    );
  });
});

describe('outcome events', () => {
  const change = (before: string | undefined, after: string, sequence = '100'): RecordChange => ({
    kind: 'task',
    sequence,
    ...(before ? { before: task(before) } : {}),
    after: task(after, { lastResult: 'busy', reason: 'no answer after 3 attempts', updatedAt: NOW }),
  });

  it('a task entering a final state is a task.ended event with its outcome and reason', () => {
    const event = eventOfChange(change('in-flight', 'failed'), NOW);
    expect(event).toMatchObject({
      type: 'task.ended',
      clientId: 'c1',
      occurredAt: new Date(NOW).toISOString(),
      sequence: paddedSequence('100'),
      data: {
        jobId: 'J1',
        taskId: 't1',
        state: 'failed',
        outcome: 'busy',
        reason: 'no answer after 3 attempts',
      },
    });
    expect(event?.id).toMatch(/^evt_[0-9a-f]{32}$/);
  });

  it('claims, retries and rewrites of an ended task are no events', () => {
    expect(eventOfChange(change('pending', 'in-flight'), NOW)).toBeUndefined();
    expect(eventOfChange(change('in-flight', 'retry-wait'), NOW)).toBeUndefined();
    expect(eventOfChange(change('completed', 'completed'), NOW)).toBeUndefined();
  });

  it('the same change gives the same id; a later change a larger sequence, in string order', () => {
    const a = eventOfChange(change('in-flight', 'completed', '9'), NOW)!;
    const again = eventOfChange(change('in-flight', 'completed', '9'), NOW + 5000)!;
    const later = eventOfChange(change('pending', 'cancelled', '10'), NOW)!;
    expect(again.id).toBe(a.id);
    expect(later.id).not.toBe(a.id);
    expect(later.sequence > a.sequence).toBe(true);
  });

  it('a job status change is an event; a count update is not', () => {
    const job = (status: string) => ({ clientId: 'c1', jobId: 'J1', name: 'list', status }) as never;
    const moved = eventOfChange(
      { kind: 'job', sequence: '7', before: job('running'), after: job('completed') },
      NOW,
    );
    expect(moved).toMatchObject({
      type: 'job.status_changed',
      data: { jobId: 'J1', status: 'completed', previousStatus: 'running' },
    });
    expect(
      eventOfChange({ kind: 'job', sequence: '8', before: job('running'), after: job('running') }, NOW),
    ).toBe(undefined);
    expect(
      eventOfChange({ kind: 'job', sequence: '1', after: job('uploading') }, NOW)?.data,
    ).not.toHaveProperty('previousStatus');
  });
});

describe('delivery backoff', () => {
  it('doubles from 10 s up to an hour', () => {
    expect([1, 2, 3, 4, 9, 10, 30].map(baseDelaySeconds)).toEqual([10, 20, 40, 80, 2560, 3600, 3600]);
  });

  it('jitter only shortens, by at most 20 %', () => {
    expect(retryDelaySeconds(3, 0)).toBe(40);
    expect(retryDelaySeconds(3, 0.999)).toBe(32);
  });

  it('the attempts cover 24 h and no more than one extra delay', () => {
    let total = 0;
    for (let a = 1; a < MAX_DELIVERY_ATTEMPTS - 1; a++) total += baseDelaySeconds(a);
    expect(total).toBeLessThan(DELIVERY_RETRY_WINDOW_SECONDS);
    expect(total + baseDelaySeconds(MAX_DELIVERY_ATTEMPTS - 1)).toBeGreaterThanOrEqual(
      DELIVERY_RETRY_WINDOW_SECONDS,
    );
    expect(MAX_DELIVERY_ATTEMPTS).toBe(33);
  });
});

describe('routing changes to deliveries', () => {
  it('queues the events of clients with a webhook, 50 per delivery, and skips the others', async () => {
    const sent: OutcomeDelivery[] = [];
    const reads: string[] = [];
    const router = new OutcomeRouter({
      directory: new CachedWebhookDirectory({
        read: async (id) => {
          reads.push(id);
          return id === 'c1';
        },
        clock: { now: () => NOW },
      }),
      queue: { send: async (d) => void sent.push(...d) },
      clock: { now: () => NOW },
    });
    const changes: RecordChange[] = [];
    for (let i = 0; i < 120; i++) {
      const clientId = i % 2 === 0 ? 'c1' : 'c2';
      changes.push({
        kind: 'task',
        sequence: String(1000 + i),
        before: task('in-flight', { clientId, taskId: `t${i}` }),
        after: task('completed', { clientId, taskId: `t${i}` }),
      });
    }
    const summary = await router.route(changes);
    expect(summary).toEqual({ changes: 120, events: 120, skipped: 60, deliveries: 2 });
    expect(sent.map((d) => d.events.length)).toEqual([50, 10]);
    expect(reads).toEqual(['c1', 'c2']);
  });
});

describe('delivering', () => {
  const delivery: OutcomeDelivery = {
    clientId: 'c1',
    events: [
      eventOfChange(
        { kind: 'task', sequence: '5', before: task('in-flight'), after: task('completed') },
        NOW,
      )!,
    ],
  };
  const target: OutcomeTarget = { url: 'https://example.com/hook', secret: 'outcome-secret-0123456789' };
  const deliverer = (answer: PostResult, posted: { body: string; headers: Record<string, string> }[] = []) =>
    new OutcomeDeliverer({
      targets: { targetOf: async (id) => (id === 'c1' ? target : undefined) },
      http: {
        post: async (_url, body, headers) => {
          posted.push({ body, headers: { ...headers } });
          return answer;
        },
      },
      clock: { now: () => NOW },
      random: () => 0,
    });

  it('POSTs the signed body; a 2xx is delivered', async () => {
    const posted: { body: string; headers: Record<string, string> }[] = [];
    expect(await deliverer({ status: 204 }, posted).deliver(delivery, 1)).toEqual({
      kind: 'delivered',
      status: 204,
    });
    expect(posted[0]!.body).toBe(outcomeBody(delivery));
    const header = posted[0]!.headers[OUTCOME_SIGNATURE_HEADER];
    expect(
      verifyOutcomeSignature({ header, rawBody: posted[0]!.body, secret: target.secret, nowMs: NOW }),
    ).toBe(NOW / 1000);
  });

  it('a 5xx, a 4xx or a lost answer is retried after the backoff of its attempt', async () => {
    expect(await deliverer({ status: 503 }).deliver(delivery, 1)).toEqual({
      kind: 'retry',
      delaySeconds: 10,
      reason: 'answered 503',
    });
    expect(await deliverer({ error: 'socket hang up' }).deliver(delivery, 4)).toMatchObject({
      kind: 'retry',
      delaySeconds: 80,
    });
    expect(await deliverer({ status: 410 }).deliver(delivery, 1)).toMatchObject({ kind: 'retry' });
  });

  it('drops what is queued for a client whose webhook was removed', async () => {
    expect(await deliverer({ status: 200 }).deliver({ ...delivery, clientId: 'gone' }, 1)).toMatchObject({
      kind: 'dropped',
    });
  });
});

describe('the outcomeWebhook setting', () => {
  const aws = { allowLoopbackHttp: false };
  const local = { allowLoopbackHttp: true };
  const secret = 'outcome-secret-0123456789';

  it('takes an https URL and a secret; keeps only the URL and when the secret was set', () => {
    expect(parseOutcomeWebhook({ url: 'https://hooks.example.com/x', secret }, undefined, aws, NOW)).toEqual({
      ok: true,
      settings: { url: 'https://hooks.example.com/x', secretSetAt: NOW },
      newSecret: secret,
    });
  });

  it('refuses http in AWS, allows http://127.0.0.1 on the local cloud only', () => {
    const input = { url: 'http://127.0.0.1:9999/hook', secret };
    expect(parseOutcomeWebhook(input, undefined, aws, NOW)).toEqual({
      ok: false,
      fieldErrors: { 'outcomeWebhook.url': ['must be https'] },
    });
    expect(parseOutcomeWebhook(input, undefined, local, NOW).ok).toBe(true);
    expect(parseOutcomeWebhook({ url: 'http://example.com/', secret }, undefined, local, NOW).ok).toBe(false);
  });

  it('refuses an address inside the cloud or the host, in any of its spellings (SSRF)', () => {
    for (const url of [
      'https://169.254.169.254/latest/meta-data/',
      'https://2852039166/',
      'https://0xa9fea9fe/',
      'https://[::ffff:169.254.169.254]/',
      'https://localhost/',
      'https://api.localhost/',
      'https://127.0.0.1:9001/',
      'https://10.0.0.5/',
      'https://172.20.1.1/',
      'https://192.168.1.1/',
      'https://100.64.0.1/',
      'https://[::1]/',
      'https://[fd00::1]/',
      'https://[fe80::1]/',
      'https://0.0.0.0/',
      'https://localhost./',
      'https://[::ffff:0:a9fe:a9fe]/',
      'https://[64:ff9b::a9fe:a9fe]/',
      'https://[::7f00:1]/',
      'https://[2002:a9fe:a9fe::]/',
      'https://198.18.0.1/',
      'https://[fec0::1]/',
    ]) {
      const result = parseOutcomeWebhook({ url, secret }, undefined, aws, NOW);
      expect([url, result.ok ? [] : result.fieldErrors['outcomeWebhook.url']]).toEqual([
        url,
        [expect.stringMatching(/^must be a public address/)],
      ]);
    }
    for (const url of ['https://203.0.113.7/hook', 'https://[2001:db8::1]/', 'https://hooks.example.com/']) {
      expect([url, parseOutcomeWebhook({ url, secret }, undefined, aws, NOW).ok]).toEqual([url, true]);
    }
    // The local cloud's receivers listen on loopback.
    expect(parseOutcomeWebhook({ url: 'https://127.0.0.1:9443/', secret }, undefined, local, NOW).ok).toBe(
      true,
    );
  });

  it('reports a bad URL, a missing or short secret and unknown fields at their field', () => {
    const result = parseOutcomeWebhook({ url: 'not a url', secret: 'short', extra: 1 }, undefined, aws, NOW);
    expect(result.ok ? undefined : Object.keys(result.fieldErrors).sort()).toEqual([
      'outcomeWebhook.extra',
      'outcomeWebhook.secret',
      'outcomeWebhook.url',
    ]);
    expect(parseOutcomeWebhook({ url: 'https://x.example' }, undefined, aws, NOW)).toEqual({
      ok: false,
      fieldErrors: { 'outcomeWebhook.secret': ['required: no secret is set for this client yet'] },
    });
  });

  it('a later PUT may leave the secret out to keep the one set', () => {
    const existing = { url: 'https://a.example', secretSetAt: NOW - 1000 };
    expect(parseOutcomeWebhook({ url: 'https://b.example' }, existing, aws, NOW)).toEqual({
      ok: true,
      settings: { url: 'https://b.example', secretSetAt: NOW - 1000 },
    });
  });
});
