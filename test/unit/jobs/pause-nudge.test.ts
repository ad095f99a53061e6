/**
 * Pause and cancel of a message job are exact: the operator's answer waits until the broker
 * holding the client confirmed that no new send of the job starts. The broker, its lease and the
 * clock are fakes; the stores are the in-memory ports.
 */
import { describe, expect, it } from 'vitest';
import type { LeaseEndpointReader } from '#shared/broker/ports.ts';
import { JobsApi, ZERO_COUNTS } from '#shared/jobs/api.ts';
import type { JobStatus } from '#shared/jobs/job-lifecycle.ts';
import type { Job, JobChannel } from '#shared/jobs/model.ts';
import type { JobChanged, JobChangeNotifier, NudgeAnswer } from '#shared/jobs/ports.ts';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import {
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

const NOW = Date.parse('2026-11-23T01:00:00Z');
const JOB_ID = '01JD0000000000000000000001';
const BROKER = 'http://10.0.1.17:8080';

/** The control table's lease items: who holds a client, where, until when. */
function leases(): LeaseEndpointReader & {
  held: Map<string, { endpoint: string; expiresAt: number }>;
  failWith?: Error;
} {
  const held = new Map<string, { endpoint: string; expiresAt: number }>();
  const reader = {
    held,
    failWith: undefined as Error | undefined,
    async endpointOf(clientId: string, now: number) {
      if (reader.failWith) throw reader.failWith;
      const lease = held.get(clientId);
      return lease && lease.expiresAt > now ? lease.endpoint : undefined;
    },
  };
  return reader;
}

/**
 * A broker that answers each nudge when the test says so (`answer`), reading the job's status
 * from the store when the nudge arrives, as the real one does.
 */
function broker(readStatus: (jobId: string) => Promise<JobStatus | undefined>) {
  const nudges: { endpoint: string; changed: JobChanged; statusSeen: JobStatus | undefined }[] = [];
  const waiting: ((answer: NudgeAnswer) => void)[] = [];
  const notifier: JobChangeNotifier = {
    async jobChanged(endpoint, changed) {
      nudges.push({ endpoint, changed, statusSeen: await readStatus(changed.jobId) });
      return new Promise<NudgeAnswer>((resolve) => waiting.push(resolve));
    },
  };
  return {
    notifier,
    nudges,
    /** Answers the oldest nudge still waiting. */
    answer(answer: NudgeAnswer = { ok: true }) {
      const next = waiting.shift();
      if (!next) throw new Error('no nudge is waiting for an answer');
      next(answer);
    },
  };
}

async function world(options: { channel?: JobChannel; status?: JobStatus } = {}) {
  const clock = { now: () => NOW };
  const clients = memoryClients();
  const jobs = memoryJobs();
  const queue = memoryQueue();
  await clients.put(parseClientSettings('acme', { ...TOKYO_CLIENT, messageChannelId: 'line-main' }, NOW));
  const job: Job = {
    clientId: 'acme',
    jobId: JOB_ID,
    name: 'november offer',
    channel: options.channel ?? 'line',
    scenarioId: 'default',
    startAt: NOW - 60_000,
    maxAttempts: 3,
    retryDelaySeconds: 60,
    status: options.status ?? 'running',
    counts: { ...ZERO_COUNTS, rows: 10, tasks: 10 },
    createdAt: NOW - 120_000,
    updatedAt: NOW - 120_000,
  };
  await jobs.create(job);
  const lease = leases();
  lease.held.set('acme', { endpoint: BROKER, expiresAt: NOW + 20_000 });
  const holder = broker(async (jobId) => (await jobs.get('acme', jobId))?.status);
  const warnings: { message: string; fields: Record<string, unknown> | undefined }[] = [];
  const api = new JobsApi({
    region: 'ap-northeast-1',
    clients,
    jobs,
    tasks: memoryTasks(),
    files: memoryFiles(),
    validationReports: memoryReports(),
    queue,
    bucket: 'uploads',
    clock,
    brokers: {
      leases: lease,
      notifier: holder.notifier,
      log: { warn: (message, fields) => void warnings.push({ message, fields }) },
    },
  });
  return { api, jobs, queue, lease, holder, warnings };
}

/** Whether `promise` has settled once every pending callback has run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('pausing or cancelling a message job', () => {
  it('answers the pause only once the broker holding the client confirmed, after the status was written', async () => {
    const w = await world();
    const pausing = w.api.changeStatus('acme', JOB_ID, 'pause');

    expect(await settled(pausing)).toBe(false);
    expect(w.holder.nudges).toEqual([
      { endpoint: BROKER, changed: { clientId: 'acme', jobId: JOB_ID }, statusSeen: 'paused' },
    ]);

    w.holder.answer({ ok: true });
    expect((await pausing).status).toBe('paused');
    expect(w.warnings).toEqual([]);
  });

  it('answers the cancel once the broker confirmed, and queues the sweep of the waiting tasks', async () => {
    const w = await world();
    const cancelling = w.api.changeStatus('acme', JOB_ID, 'cancel');

    expect(await settled(cancelling)).toBe(false);
    expect(w.holder.nudges.map((n) => n.statusSeen)).toEqual(['cancelled']);

    w.holder.answer();
    expect((await cancelling).status).toBe('cancelled');
    expect(w.queue.sent).toEqual([{ kind: 'cancel-sweep', clientId: 'acme', jobId: JOB_ID, shard: 0 }]);
  });

  it('confirms again when a cancel is repeated (an operator retrying a cancel)', async () => {
    const w = await world({ status: 'cancelled' });
    const cancelling = w.api.changeStatus('acme', JOB_ID, 'cancel');
    expect(await settled(cancelling)).toBe(false);
    w.holder.answer();
    expect((await cancelling).status).toBe('cancelled');
    expect(w.holder.nudges).toHaveLength(1);
  });

  it('answers at once when no broker holds the client: nothing is sending', async () => {
    const w = await world();
    w.lease.held.clear();
    expect((await w.api.changeStatus('acme', JOB_ID, 'pause')).status).toBe('paused');
    expect(w.holder.nudges).toEqual([]);
    expect(w.warnings).toEqual([]);
  });

  it('treats a lease that expired by the injected clock as no holder', async () => {
    const w = await world();
    w.lease.held.set('acme', { endpoint: BROKER, expiresAt: NOW - 1 });
    expect((await w.api.changeStatus('acme', JOB_ID, 'pause')).status).toBe('paused');
    expect(w.holder.nudges).toEqual([]);
  });

  it('still answers the operator when the broker does not confirm, and warns why', async () => {
    const w = await world();
    const pausing = w.api.changeStatus('acme', JOB_ID, 'pause');
    await settled(pausing);
    w.holder.answer({ ok: false, reason: 'no answer within 3000 ms' });

    expect((await pausing).status).toBe('paused');
    expect(w.warnings).toHaveLength(1);
    expect(w.warnings[0]!.fields).toMatchObject({
      clientId: 'acme',
      jobId: JOB_ID,
      status: 'paused',
      endpoint: BROKER,
      reason: 'no answer within 3000 ms',
    });
  });

  it('still answers the operator when the lease cannot be read, and warns', async () => {
    const w = await world();
    w.lease.failWith = new Error('ProvisionedThroughputExceededException');
    const cancelled = await w.api.changeStatus('acme', JOB_ID, 'cancel');

    expect(cancelled.status).toBe('cancelled');
    expect(w.queue.sent).toHaveLength(1);
    expect(w.holder.nudges).toEqual([]);
    expect(w.warnings).toHaveLength(1);
    expect(w.warnings[0]!.fields).toMatchObject({ clientId: 'acme', jobId: JOB_ID });
  });
});

describe('what is not nudged', () => {
  it('a call job: its broker checks the job before every call start', async () => {
    const w = await world({ channel: 'call' });
    expect((await w.api.changeStatus('acme', JOB_ID, 'pause')).status).toBe('paused');
    expect((await w.api.changeStatus('acme', JOB_ID, 'cancel')).status).toBe('cancelled');
    expect(w.holder.nudges).toEqual([]);
  });

  it('a resume: it starts sends rather than stopping them', async () => {
    const w = await world({ status: 'paused' });
    expect((await w.api.changeStatus('acme', JOB_ID, 'resume')).status).toBe('scheduled');
    expect(w.holder.nudges).toEqual([]);
  });

  it('a move that is refused: the job did not change', async () => {
    const w = await world({ status: 'completed' });
    await expect(w.api.changeStatus('acme', JOB_ID, 'pause')).rejects.toMatchObject({
      name: 'IllegalTransitionError',
    });
    expect(w.holder.nudges).toEqual([]);
  });
});
