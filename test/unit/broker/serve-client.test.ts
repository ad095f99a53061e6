import { describe, expect, it } from 'vitest';
import { ClientServer, type ServeEnd } from '#shared/broker/serve-client.ts';
import { DEFAULT_SERVE_SETTINGS, type ServeSettings } from '#shared/broker/serve-settings.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import { LeaseKeeper, type LeaseStore } from '#shared/lease/lease.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { oneProvider } from '#shared/telephony/port.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { FakeTime } from '../pacing/fake-time.ts';
import {
  clientSettings,
  FakeProvider,
  job,
  MemoryTaskStore,
  silentLog,
  statusRoute,
  T0,
  tasksFor,
} from './fakes.ts';

const CALLBACK = 'https://api.example/providers/acme/calls/status';

interface Harness {
  time: FakeTime;
  leases: MemoryLeaseStore;
  store: MemoryTaskStore;
  provider: FakeProvider;
  keeper: LeaseKeeper;
  server: ClientServer;
  route: ReturnType<typeof statusRoute>;
  inFlightSeen: number[];
  /** Starts serving; `end()` is the result once it is over. */
  serve(): { end: () => ServeEnd | undefined };
}

async function harness(input: {
  client?: Partial<ClientSettings>;
  job?: Partial<Job>;
  tasks?: (j: Job) => Task[];
  settings?: Partial<ServeSettings>;
  leaseStore?: (memory: MemoryLeaseStore) => LeaseStore;
  before?: (store: MemoryTaskStore, provider: FakeProvider) => void;
}): Promise<Harness> {
  const time = new FakeTime(T0);
  const leases = new MemoryLeaseStore();
  const store = new MemoryTaskStore(leases, time);
  const j = job(input.job);
  store.add(clientSettings(input.client), j, input.tasks ? input.tasks(j) : tasksFor(j, 10));
  const provider = new FakeProvider(time);
  input.before?.(store, provider);
  const keeper = new LeaseKeeper({
    clientId: 'c1',
    owner: 'broker-1',
    leaseMs: 30_000,
    store: input.leaseStore ? input.leaseStore(leases) : leases,
    clock: time,
    timers: time,
  });
  expect(await keeper.acquire()).toBe(true);
  const inFlightSeen: number[] = [];
  const server = new ClientServer({
    tasks: store,
    providers: oneProvider(provider),
    keeper,
    clock: time,
    timers: time,
    logger: silentLog,
    settings: { ...DEFAULT_SERVE_SETTINGS, callbackUrl: CALLBACK, ...input.settings },
    onInFlightChange: (n) => inFlightSeen.push(n),
  });
  const route = statusRoute({ store, clock: time, nudge: (ended) => server.callEnded(ended) });
  return {
    time,
    leases,
    store,
    provider,
    keeper,
    server,
    route,
    inFlightSeen,
    serve() {
      let end: ServeEnd | undefined;
      void server.serve().then((e) => {
        end = e;
      });
      return { end: () => end };
    },
  };
}

/** Every placed call ends with `status` after `ms` of fake time, reported through the status route. */
function endCallsAfter(h: Harness, ms: number, status: 'completed' | 'busy' = 'completed') {
  h.provider.onPlaced = (call) => {
    h.time.setTimeout(() => void h.route(call, h.provider.end(call.callId, status) as never), ms);
  };
}

describe('serving a client', () => {
  it('never has more calls in flight than the limit nor starts more per second than the line, and completes every task', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 3, callsPerSecond: 2 },
      tasks: (j) => tasksFor(j, 30),
    });
    endCallsAfter(h, 1000);
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);

    expect(run.end()).toEqual({ kind: 'no-work', nextReadyAt: undefined });
    expect(h.store.all().every((t) => t.state === 'completed' && t.attempts === 1)).toBe(true);
    expect(h.provider.calls.size).toBe(30);
    expect(h.provider.maxInFlight).toBeLessThanOrEqual(3);
    expect(h.provider.maxStartsPerSecond()).toBeLessThanOrEqual(2);
    expect(h.provider.repeatedRings()).toEqual([]);
    // The line is the bottleneck: 30 starts at 2/s take about 15 s, not much more.
    expect(h.time.now() - T0).toBeLessThan(17_000);
  });

  it('asks for a task’s reading as it takes it, so every start finds its reading begun while it waited for its slot', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 3, callsPerSecond: 2 },
      tasks: (j) => tasksFor(j, 12),
    });
    endCallsAfter(h, 1000);
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.provider.calls.size).toBe(12);
    expect(h.store.startedPrepared).toEqual(Array.from({ length: 12 }, () => true));
  });

  it('holds the line rate where the far side counts it, whatever the network latency of each request', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 5, callsPerSecond: 2 },
      tasks: (j) => tasksFor(j, 40),
    });
    let n = 0;
    // Deterministic, uneven latencies: some requests take 300 ms to arrive, others none.
    h.provider.timers = h.time;
    h.provider.latency = () => {
      n += 1;
      return { arriveMs: n % 3 === 1 ? 300 : 0, answerMs: n % 4 === 0 ? 150 : 5 };
    };
    endCallsAfter(h, 1500);
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.store.all().every((t) => t.state === 'completed')).toBe(true);
    expect(h.provider.maxStartsPerSecond()).toBeLessThanOrEqual(2);
    expect(h.provider.maxInFlight).toBeLessThanOrEqual(5);
  });

  it('starts the next call in the same instant a call end is reported, without waiting for a timer', async () => {
    const h = await harness({ client: { maxConcurrentCalls: 1, callsPerSecond: 100 } });
    const run = h.serve();
    await h.time.advance(5_000);
    expect(h.provider.calls.size).toBe(1);

    const first = [...h.provider.calls.values()][0]!;
    const endedAt = h.time.now();
    await h.route(first, h.provider.end(first.callId, 'completed') as never);
    await h.time.settle();

    expect(h.provider.calls.size).toBe(2);
    expect([...h.provider.calls.values()][1]!.startedAt).toBe(endedAt);
    expect(run.end()).toBeUndefined();
  });

  it('ignores an unconfirmed call-ended nudge: the slot stays taken until the store says the call ended', async () => {
    const h = await harness({ client: { maxConcurrentCalls: 1, callsPerSecond: 100 } });
    h.serve();
    await h.time.advance(1_000);
    const first = [...h.provider.calls.values()][0]!;
    await h.server.callEnded({ jobId: job().jobId, taskId: first.request.taskId, callId: first.callId });
    await h.time.advance(1_000);
    expect(h.provider.calls.size).toBe(1);
  });

  it('starts nothing more once the lease is lost, and leaves its calls to the next holder', async () => {
    let refuse = false;
    const h = await harness({
      client: { maxConcurrentCalls: 10, callsPerSecond: 1 },
      tasks: (j) => tasksFor(j, 50),
      leaseStore: (memory) => ({
        tryTake: (r) => memory.tryTake(r),
        tryRenew: async (r) => (refuse ? undefined : memory.tryRenew(r)),
        release: (r) => memory.release(r),
      }),
    });
    const run = h.serve();
    await h.time.advance(15_000);
    const before = h.provider.calls.size;
    expect(before).toBeGreaterThan(10 - 1);
    refuse = true;
    await h.time.runUntil(() => run.end() !== undefined);
    const lostAt = h.time.now();
    expect(run.end()).toEqual({ kind: 'lost' });
    await h.time.advance(60_000);
    expect([...h.provider.calls.values()].every((c) => c.startedAt <= lostAt)).toBe(true);
    // Its calls are still in flight in the store, for the next holder to adopt.
    expect(h.store.all().filter((t) => t.state === 'in-flight').length).toBe(h.provider.inFlight);
  });

  it('retries busy and no-answer after the job delay with a new attempt key, then fails with a reason', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 1, callsPerSecond: 1 },
      job: { maxAttempts: 2, retryDelaySeconds: 60 },
      tasks: (j) => tasksFor(j, 1),
    });
    endCallsAfter(h, 2_000, 'busy');
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);

    const [task] = h.store.all();
    expect(task).toMatchObject({
      state: 'failed',
      attempts: 2,
      lastResult: 'busy',
      reason: 'busy on all 2 attempts',
    });
    const calls = [...h.provider.calls.values()];
    expect(calls.map((c) => c.key)).toEqual([
      attemptKey(task!.jobId, task!.taskId, 1),
      attemptKey(task!.jobId, task!.taskId, 2),
    ]);
    expect(calls[1]!.startedAt - calls[0]!.startedAt).toBeGreaterThanOrEqual(62_000);
  });

  it('retries an ambiguous initiate with the same key, so the phone rings once', async () => {
    const h = await harness({ tasks: (j) => tasksFor(j, 1) });
    h.provider.script.push('retryable', 'retryable');
    endCallsAfter(h, 1_000);
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.provider.calls.size).toBe(1);
    expect(h.store.all()[0]).toMatchObject({ state: 'completed', attempts: 1, callId: 'call-1' });
  });

  it('fails a task whose call the provider rejects, with the reason', async () => {
    const h = await harness({ tasks: (j) => tasksFor(j, 1) });
    h.provider.script.push('rejected');
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.store.all()[0]).toMatchObject({
      state: 'failed',
      reason: 'provider rejected the call: invalid_request (400)',
    });
  });

  it('settles a call whose callback was lost by asking the provider after the maximum duration', async () => {
    const h = await harness({
      job: { maxCallDurationSeconds: 120 },
      tasks: (j) => tasksFor(j, 2),
      settings: { reconcileMarginMs: 30_000 },
    });
    // The far side ends the call after 10 s, but its callback never arrives.
    h.provider.onPlaced = (call) => h.time.setTimeout(() => h.provider.end(call.callId, 'completed'), 10_000);
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.store.all().map((t) => t.state)).toEqual(['completed', 'completed']);
    expect(h.time.now() - T0).toBeGreaterThanOrEqual(150_000);
  });

  it('fails a call that never reports an end, with a reason, so no task stays in flight', async () => {
    const h = await harness({
      job: { maxCallDurationSeconds: 60 },
      tasks: (j) => tasksFor(j, 1),
      settings: { reconcileMarginMs: 10_000, reconcileTries: 3 },
    });
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.store.all()[0]).toMatchObject({
      state: 'failed',
      reason: 'no final status after the maximum duration (queued)',
    });
  });

  it('adopts calls a previous holder left in flight: they count against the limit until settled', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 1, callsPerSecond: 10 },
      job: { maxCallDurationSeconds: 60 },
      tasks: (j) => tasksFor(j, 2),
      settings: { reconcileMarginMs: 5_000 },
      before: (store, provider) => {
        // Task 0 was started by a broker that died; its call is still ringing at the provider.
        const [t0] = store.all();
        const request = {
          to: t0!.recipient,
          clientId: 'c1',
          jobId: t0!.jobId,
          taskId: t0!.taskId,
          attempt: 1,
          callbackUrl: CALLBACK,
          maxDurationSeconds: 60,
          variables: {},
        };
        void provider.initiate(request, attemptKey(t0!.jobId, t0!.taskId, 1));
        store.tasks.set(`${t0!.jobId}/${t0!.taskId}`, {
          ...t0!,
          state: 'in-flight',
          attempts: 1,
          callId: 'call-1',
          startedAt: T0,
        });
        store.flying.set('c1', new Set([`${t0!.jobId}/${t0!.taskId}`]));
      },
    });
    h.provider.onPlaced = (call) =>
      h.time.setTimeout(() => void h.route(call, h.provider.end(call.callId, 'completed') as never), 1000);
    const run = h.serve();
    await h.time.advance(30_000);
    // The adopted call holds the only slot.
    expect(h.provider.calls.size).toBe(1);
    h.provider.end('call-1', 'completed');
    await h.time.runUntil(() => run.end() !== undefined);
    expect(h.store.all().map((t) => t.state)).toEqual(['completed', 'completed']);
    expect(h.provider.maxInFlight).toBe(1);
  });

  it('stops starting when asked and resolves once the calls in flight have ended', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 3, callsPerSecond: 10 },
      tasks: (j) => tasksFor(j, 20),
    });
    endCallsAfter(h, 5_000);
    const run = h.serve();
    await h.time.advance(1_000);
    expect(h.provider.calls.size).toBe(3);
    h.server.stop();
    await h.time.runUntil(() => run.end() !== undefined);
    expect(run.end()).toEqual({ kind: 'stopped' });
    expect(h.provider.calls.size).toBe(3);
    expect(h.provider.inFlight).toBe(0);
    expect(h.inFlightSeen.at(-1)).toBe(0);
  });

  it('does not start calls outside the job’s calling hours, and starts them when the window opens', async () => {
    const hours = { timeZone: 'Asia/Tokyo', weekly: { mon: [{ start: '10:30', end: '11:00' }] } };
    const h = await harness({
      job: { callingHours: hours },
      tasks: (j) => tasksFor(j, 2),
      settings: { holdMs: 3_600_000 },
    });
    endCallsAfter(h, 1_000);
    const run = h.serve();
    await h.time.runUntil(() => run.end() !== undefined);
    const starts = [...h.provider.calls.values()].map((c) => c.startedAt);
    expect(starts).toHaveLength(2);
    // 10:30 Tokyo = 01:30Z.
    expect(Math.min(...starts)).toBeGreaterThanOrEqual(Date.parse('2026-03-02T01:30:00Z'));
  });
});

describe('client settings changed while serving (issue 13 #7)', () => {
  const closedFrom = (hhmm: string) => ({
    timeZone: 'Asia/Tokyo',
    weekly: Object.fromEntries(
      ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: hhmm }]]),
    ),
  });

  it('new calling hours that close the window stop the starts within clientCheckMs', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 2, callsPerSecond: 2 },
      tasks: (j) => tasksFor(j, 100),
    });
    endCallsAfter(h, 1_000);
    const run = h.serve();
    await h.time.advance(5_000);
    const before = h.provider.calls.size;
    expect(before).toBeGreaterThan(0);
    // 10:00 Tokyo now: the operator narrows the hours to end at 10:00.
    const changedAt = h.time.now();
    h.store.clients.set(
      'c1',
      clientSettings({
        maxConcurrentCalls: 2,
        callsPerSecond: 2,
        callingHours: closedFrom('10:00'),
        updatedAt: changedAt,
      }),
    );
    await h.time.runUntil(() => run.end() !== undefined);
    const late = h.provider.starts.filter((t) => t > changedAt + DEFAULT_SERVE_SETTINGS.clientCheckMs);
    expect(late).toEqual([]);
    expect(h.provider.inFlight).toBe(0);
    expect(h.store.all().filter((t) => t.state === 'pending').length).toBeGreaterThan(50);
  });

  it('a pause of the client stops the starts; the calls in flight end normally', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 3, callsPerSecond: 3 },
      tasks: (j) => tasksFor(j, 100),
    });
    endCallsAfter(h, 2_000);
    const run = h.serve();
    await h.time.advance(4_000);
    const pausedAt = h.time.now();
    h.store.clients.set(
      'c1',
      clientSettings({ maxConcurrentCalls: 3, callsPerSecond: 3, paused: true, updatedAt: pausedAt }),
    );
    await h.time.runUntil(() => run.end() !== undefined);
    expect(run.end()).toEqual({ kind: 'no-work', nextReadyAt: undefined });
    expect(h.provider.starts.filter((t) => t > pausedAt + DEFAULT_SERVE_SETTINGS.clientCheckMs)).toEqual([]);
    expect(h.store.all().filter((t) => t.state === 'in-flight')).toEqual([]);
  });

  it('a new contract applies while serving: the limit and the line rate follow it', async () => {
    const h = await harness({
      client: { maxConcurrentCalls: 4, callsPerSecond: 4 },
      tasks: (j) => tasksFor(j, 200),
    });
    endCallsAfter(h, 3_000);
    const run = h.serve();
    await h.time.advance(10_000);
    expect(h.provider.maxInFlight).toBe(4);
    const changedAt = h.time.now();
    h.store.clients.set(
      'c1',
      clientSettings({ maxConcurrentCalls: 1, callsPerSecond: 0.5, updatedAt: changedAt }),
    );
    // Once the change is read and the calls of the old limit ended, one at a time, one per 2 s.
    const settled = changedAt + DEFAULT_SERVE_SETTINGS.clientCheckMs + 3_000;
    let inFlightAfter = 0;
    h.provider.onPlaced = (call) => {
      if (h.time.now() > settled) inFlightAfter = Math.max(inFlightAfter, h.provider.inFlight);
      h.time.setTimeout(() => void h.route(call, h.provider.end(call.callId, 'completed') as never), 3_000);
    };
    await h.time.advance(60_000);
    const late = h.provider.starts.filter((t) => t > settled);
    expect(late.length).toBeGreaterThan(5);
    expect(inFlightAfter).toBe(1);
    for (let i = 1; i < late.length; i++) expect(late[i]! - late[i - 1]!).toBeGreaterThanOrEqual(2_000);
    h.server.stop();
    await h.time.runUntil(() => run.end() !== undefined);
  });
});

describe('the fence', () => {
  it('refuses a start with a stale token after a takeover', async () => {
    const time = new FakeTime(T0);
    const leases = new MemoryLeaseStore();
    const store = new MemoryTaskStore(leases, time);
    const j = job();
    const [task] = tasksFor(j, 1);
    store.add(clientSettings(), j, [task!]);
    const old = await leases.tryTake({ clientId: 'c1', owner: 'old', now: T0, leaseMs: 30_000 });
    const taker = await leases.tryTake({ clientId: 'c1', owner: 'new', now: T0 + 31_000, leaseMs: 30_000 });
    expect(taker!.token).toBe(old!.token + 1);
    const stale = await store.start(task!, {
      clientId: 'c1',
      owner: 'old',
      token: old!.token,
      now: T0 + 31_500,
    });
    expect(stale).toEqual({ kind: 'fenced' });
    expect(store.all()[0]!.state).toBe('pending');
  });
});
