/**
 * Issue 14 #2 on Amazon Connect, on a local stack with a real broker process: the contact flow of an
 * answered call sets `switchboard_opt_out = "true"` (the Connect emulator's scripted flow); the
 * contact's DISCONNECTED event reaches connect-opt-outs, which reads the attributes with
 * `GetContactAttributes` (the real @aws-sdk/client-connect against the emulator) and puts the
 * recipient on the client's suppression list, source `call-outcome`. A job already uploaded for
 * them then ends their task `cancelled` (`suppressed: call-outcome`) without ringing again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobWithList, demoClientSettings } from '#local/demo-job.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { CONNECT_OPT_OUT_ATTRIBUTE } from '#shared/telephony/connect-contact.ts';
import { eventually, until } from '../support/wait.ts';

let stack: LocalStack;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  stack = await startLocalStack({
    stage: 'e2econnectoptout',
    port: 0,
    fleet: true,
    telephonyTimeScale: 10,
    connectTalkSeconds: { min: 2, max: 4 },
    maxBrokers: 1,
    jobManagerIntervalMs: 1_000,
    brokerEnv: {
      LEASE_MS: '3000',
      BROKER_IDLE_WAIT_MS: '300',
      BROKER_RECHECK_MS: '500',
      DEFAULT_MAX_CALL_SECONDS: '30',
      RECONCILE_MARGIN_MS: '1000',
    },
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

interface JobView {
  readonly status: string;
  readonly counts: Readonly<Record<string, number>>;
}

const clientId = 'connect-opt-out';

async function jobView(jobId: string): Promise<JobView> {
  return (await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}`)).json<JobView>();
}

async function createJob(numbers: readonly string[], options: Readonly<Record<string, unknown>> = {}) {
  const csv = `電話番号,氏名\n${numbers.map((n, i) => `${n},顧客 ${i + 1}`).join('\n')}\n`;
  return createJobWithList(
    stack,
    clientId,
    { name: `${clientId}.csv`, channel: 'call', ...options },
    new TextEncoder().encode(csv),
  );
}

async function jobReaches(jobId: string, statuses: readonly string[]): Promise<JobView> {
  return eventually(
    async () => {
      const view = await jobView(jobId);
      return statuses.includes(view.status) ? view : undefined;
    },
    `job ${jobId} to be ${statuses.join(' or ')}`,
    { timeoutMs: 120_000, everyMs: 300 },
  );
}

async function suppression(recipient: string) {
  const answer = await stack.operator(
    'GET',
    `/clients/${clientId}/suppressions?recipient=${encodeURIComponent(recipient)}`,
  );
  expect(answer.status, answer.body).toBe(200);
  return answer.json<{ suppressions: { suppressed: boolean; source?: string }[] }>().suppressions[0]!;
}

describe('a Connect call whose contact flow asks to opt out', () => {
  it('suppresses the recipient (call-outcome), and a later job does not ring them', async () => {
    const put = await stack.operator('PUT', `/clients/${clientId}`, {
      json: demoClientSettings({ clientId, maxConcurrentCalls: 2, callsPerSecond: 2, provider: 'connect' }),
    });
    expect(put.status, put.body).toBe(200);
    const [asks, stays] = ['+819054001001', '+819054001002'] as const;
    stack.connect.setOverride(asks, {
      outcome: 'answered',
      durationSeconds: 20,
      contactAttributes: { [CONNECT_OPT_OUT_ATTRIBUTE]: 'true' },
    });
    stack.connect.setOverride(stays, { outcome: 'answered', durationSeconds: 20 });

    // The later job is uploaded before anyone is suppressed (an upload skips suppressed rows), and
    // held paused until the first job's calls have ended.
    const later = await createJob(['090-5400-1001', '090-5400-1002'], {
      startAt: Date.now() + 15_000,
    });
    await jobReaches(later, ['scheduled']);
    expect((await stack.operator('POST', `/clients/${clientId}/jobs/${later}/pause`)).status).toBe(200);

    const first = await createJob(['090-5400-1001', '090-5400-1002']);
    expect((await jobReaches(first, ['completed', 'failed', 'cancelled'])).counts).toMatchObject({
      completed: 2,
    });
    await until(async () => (await suppression(asks)).suppressed, 'the opt-out to be on the list', {
      timeoutMs: 30_000,
      everyMs: 200,
    });
    expect(await suppression(asks)).toMatchObject({ suppressed: true, source: 'call-outcome' });
    expect((await suppression(stays)).suppressed).toBe(false);

    expect((await stack.operator('POST', `/clients/${clientId}/jobs/${later}/resume`)).status).toBe(200);
    const ended = await jobReaches(later, ['completed', 'failed', 'cancelled']);
    expect(ended.counts).toMatchObject({ completed: 1, cancelled: 1, suppressed: 1 });
    const report = await stack.operator('GET', `/clients/${clientId}/jobs/${later}/report`);
    expect(report.body).toMatch(/suppressed: call-outcome/);
    // Rung once by the first job, never by the later one.
    const rings = stack.connect.rings().filter((r) => r.clientId === clientId);
    expect(rings.filter((r) => r.to === asks)).toHaveLength(1);
    expect(rings.filter((r) => r.to === stays)).toHaveLength(2);
  });
});
