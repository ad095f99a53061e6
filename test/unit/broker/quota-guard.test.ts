/**
 * The broker's quota check on simulated time: a fake LINE quota endpoint, the clock moved by hand.
 * What a user would notice: which jobs may send, which are paused and why, and that a quota that
 * cannot be read neither stops a job silently nor lets one start blind.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_QUOTA_GUARD_SETTINGS, QuotaGuard } from '#shared/broker/quota-guard.ts';
import type { MessageQuota, SendOutcome } from '#shared/line/messaging-client.ts';
import { silentLogger } from '#shared/log.ts';
import { job, T0 } from './fakes.ts';

function setup(options: { quota?: MessageQuota; partial?: boolean } = {}) {
  const state = {
    now: T0,
    quota: options.quota ?? ({ limit: 1000, used: 0 } as MessageQuota),
    failing: false,
    reads: 0,
    partial: options.partial ?? false,
    short: [] as { jobId: string; reason: string }[],
    metrics: [] as (MessageQuota | 'unread')[],
    errors: [] as string[],
  };
  const guard = new QuotaGuard({
    clientId: 'c1',
    channelId: 'ch1',
    read: async () => {
      state.reads++;
      if (state.failing) throw new Error('HTTP 500');
      return state.quota;
    },
    allowsPartial: () => state.partial,
    onShort: (jobId, reason) => state.short.push({ jobId, reason }),
    clock: { now: () => state.now },
    sleep: async () => {},
    logger: { ...silentLogger, error: (message: string) => state.errors.push(message) },
    metrics: {
      limits: () => {},
      inFlight: () => {},
      callStarted: () => {},
      sent: () => {},
      quota: (_channel, quota) => state.metrics.push(quota),
    },
    settings: DEFAULT_QUOTA_GUARD_SETTINGS,
  });
  return { guard, state };
}

const messageJob = (jobId: string, tasks: number, completed = 0) =>
  job({
    jobId,
    channel: 'line',
    status: 'running',
    counts: { rows: tasks, rejected: 0, skipped: 0, tasks, completed, failed: 0, cancelled: 0 },
  });

const delivered = (jobId: string, recipients: number) =>
  ({ jobId, endpoint: 'push', recipients, outcome: 'delivered', latencyMs: 1 }) as const;

describe('QuotaGuard', () => {
  it('admits a job the quota covers and refuses, with the reason, one it cannot', async () => {
    const { guard, state } = setup({ quota: { limit: 1000, used: 200 } });
    expect(await guard.ready()).toBe(true);
    expect(guard.admits(messageJob('A', 800))).toBe(true);
    expect(guard.admits(messageJob('B', 1))).toBe(false);
    expect(state.short).toEqual([
      { jobId: 'B', reason: expect.stringContaining('1 messages left to send, 0 left') },
    ]);
    // Told once per reading, however often its tasks come up.
    expect(guard.admits(messageJob('B', 1))).toBe(false);
    expect(state.short).toHaveLength(1);
    expect(state.metrics).toEqual([{ limit: 1000, used: 200 }]);
  });

  it('never admits a job on an old reading: it reads first', async () => {
    const { guard, state } = setup();
    expect(await guard.ready()).toBe(true);
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.freshMs;
    state.quota = { limit: 1000, used: 900 };
    expect(guard.admits(messageJob('A', 500))).toBe(false);
    await guard.ready();
    expect(state.reads).toBe(2);
    expect(guard.admits(messageJob('A', 500))).toBe(false);
    expect(state.short.map((s) => s.jobId)).toEqual(['A']);
  });

  it('reads only when a job asks: the server waits for that reading after its round', async () => {
    const { guard, state } = setup();
    expect(await guard.asked()).toBe('none');
    expect(state.reads).toBe(0);
    expect(guard.admits(messageJob('A', 10))).toBe(false);
    expect(await guard.asked()).toBe('read');
    expect(guard.admits(messageJob('A', 10))).toBe(true);
    expect(await guard.asked()).toBe('none');
    state.failing = true;
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.freshMs;
    expect(guard.admits(messageJob('B', 10))).toBe(false);
    expect(await guard.asked()).toBe('unread');
  });

  it('counts its own sends between readings, so a second job gets only what the first leaves', async () => {
    const { guard } = setup({ quota: { limit: 1000, used: 0 } });
    await guard.ready();
    expect(guard.admits(messageJob('A', 600))).toBe(true);
    guard.observe(delivered('A', 300));
    // LINE has counted 300 more (not read yet); A still needs 300: 400 are left for B.
    expect(guard.admits(messageJob('B', 401))).toBe(false);
    expect(guard.admits(messageJob('C', 400))).toBe(true);
  });

  it('pauses a running job once a reading shows others used the quota it was admitted with', async () => {
    const { guard, state } = setup({ quota: { limit: 1000, used: 0 } });
    await guard.ready();
    expect(guard.admits(messageJob('A', 800))).toBe(true);
    guard.observe(delivered('A', 100));
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.checkMs;
    // Another sender on the channel (a webhook push, another tool) used 500 meanwhile.
    state.quota = { limit: 1000, used: 600 };
    expect(await guard.check()).toBe(true);
    expect(state.short).toEqual([
      { jobId: 'A', reason: expect.stringContaining('700 messages left to send, 400 left') },
    ]);
  });

  it('a quota that cannot be read: retried, logged, counted, and no job admitted blind', async () => {
    const { guard, state } = setup();
    state.failing = true;
    expect(await guard.ready()).toBe(false);
    expect(state.reads).toBe(DEFAULT_QUOTA_GUARD_SETTINGS.readAttempts);
    expect(state.errors).toEqual(['LINE message quota not read: jobs that need it wait']);
    expect(state.metrics).toEqual(['unread']);
    expect(guard.admits(messageJob('A', 1))).toBe(false);
    expect(state.short).toEqual([]);
  });

  it('while sending, an unreadable quota lets the job go on for two intervals at most', async () => {
    const { guard, state } = setup();
    await guard.ready();
    expect(guard.admits(messageJob('A', 10))).toBe(true);
    state.failing = true;
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.checkMs;
    expect(await guard.check()).toBe(true);
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.checkMs;
    expect(await guard.check()).toBe(false);
  });

  it('a client that allows partial delivery sends whatever the quota says, and reads it for the metric', async () => {
    const { guard, state } = setup({ quota: { limit: 100, used: 100 }, partial: true });
    expect(await guard.ready()).toBe(true);
    expect(guard.admits(messageJob('A', 5000))).toBe(true);
    expect(state.short).toEqual([]);
    state.failing = true;
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.checkMs * 3;
    expect(await guard.check()).toBe(true);
  });

  it('an unlimited plan admits any job', async () => {
    const { guard } = setup({ quota: { used: 123_456 } });
    await guard.ready();
    expect(guard.admits(messageJob('A', 10_000_000))).toBe(true);
  });

  it('counts recipients in flight while reading as slack: LINE may have counted them already', async () => {
    const { guard, state } = setup({ quota: { limit: 1000, used: 0 } });
    await guard.ready();
    expect(guard.admits(messageJob('A', 1000))).toBe(true);
    let release: (o: SendOutcome) => void = () => {};
    const send = guard.counting(
      () =>
        new Promise<SendOutcome>((r) => {
          release = r;
        }),
    );
    const body = JSON.stringify({ to: Array.from({ length: 500 }, (_, i) => `U${i}`), messages: [] });
    const inFlight = send({ endpoint: 'multicast', body, retryKey: crypto.randomUUID() });
    state.now += DEFAULT_QUOTA_GUARD_SETTINGS.checkMs;
    state.quota = { limit: 1000, used: 500 }; // LINE counted the multicast; its answer is still on the way
    expect(await guard.check()).toBe(true);
    expect(state.short).toEqual([]);
    release({ kind: 'delivered', status: 200, requestId: 'r', sentMessages: [] });
    await inFlight;
  });
});
