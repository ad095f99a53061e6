/**
 * Stand-ins for the broker's ports: an in-memory task store fenced by the in-memory lease store
 * (the same rules as the DynamoDB transaction), a telephony provider that records what the far
 * side would see (rings per key, calls in flight, starts per second), and the call-status path
 * wired to the real use case with signed callbacks.
 */

import type {
  BrokerTaskStore,
  Fence,
  FleetWorkReader,
  SettleRequest,
  StartResult,
  TaskRef,
} from '#shared/broker/ports.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { type FleetWork, fleetWorkItem } from '#shared/fleet/work-list.ts';
import { type ClientSettings, type Job, jobHasEnded, type Task } from '#shared/jobs/model.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { signCallback } from '#shared/telephony/callback-signature.ts';
import type {
  CallRequest,
  CallSnapshot,
  FinalCallStatus,
  InitiateOutcome,
  ReportedCallStatus,
  TelephonyProvider,
} from '#shared/telephony/port.ts';
import type { MemoryLeaseStore } from '../../support/memory-lease-store.ts';

export const T0 = Date.parse('2026-03-02T01:00:00Z'); // Monday 10:00 in Tokyo
export const SECRET = 'callback-secret';

const key = (ref: TaskRef) => `${ref.jobId}/${ref.taskId}`;

export function clientSettings(over: Partial<ClientSettings> = {}): ClientSettings {
  return {
    clientId: 'c1',
    maxConcurrentCalls: 3,
    callsPerSecond: 2,
    timeZone: 'Asia/Tokyo',
    callingHours: {
      timeZone: 'Asia/Tokyo',
      weekly: Object.fromEntries(
        ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
      ),
    },
    defaultRegion: 'JP',
    updatedAt: T0,
    ...over,
  };
}

export function job(over: Partial<Job> = {}): Job {
  return {
    clientId: 'c1',
    jobId: '01JOB0000000000000000000AA',
    name: 'test job',
    channel: 'call',
    scenarioId: 's1',
    startAt: T0,
    maxAttempts: 2,
    retryDelaySeconds: 60,
    maxCallDurationSeconds: 120,
    status: 'running',
    counts: { rows: 0, rejected: 0, skipped: 0, tasks: 0, completed: 0, failed: 0, cancelled: 0 },
    createdAt: T0,
    updatedAt: T0,
    ...over,
  };
}

export function tasksFor(j: Job, n: number, readyAt = T0): Task[] {
  return Array.from({ length: n }, (_, i) => ({
    clientId: j.clientId,
    jobId: j.jobId,
    taskId: `task-${String(i).padStart(4, '0')}`,
    row: i + 2,
    channel: 'call' as const,
    recipient: `+8190${String(10_000_000 + i)}`,
    variables: { name: `n${i}` },
    state: 'pending' as const,
    attempts: 0,
    readyAt,
    updatedAt: T0,
  }));
}

export class MemoryTaskStore implements BrokerTaskStore {
  readonly leases: MemoryLeaseStore;
  readonly clients = new Map<string, ClientSettings>();
  readonly jobs = new Map<string, Job>();
  readonly tasks = new Map<string, Task>();
  readonly flying = new Map<string, Set<string>>();
  /** Task ids asked to be read ahead (`prepare`), and those that had been when their start came. */
  readonly prepared: string[] = [];
  readonly startedPrepared: boolean[] = [];
  readonly clock: Clock;

  constructor(leases: MemoryLeaseStore, clock: Clock) {
    this.leases = leases;
    this.clock = clock;
  }

  add(client: ClientSettings, j: Job, tasks: readonly Task[]): void {
    this.clients.set(client.clientId, client);
    this.jobs.set(`${j.clientId}/${j.jobId}`, j);
    for (const t of tasks) this.tasks.set(key(t), t);
  }

  all(): Task[] {
    return [...this.tasks.values()];
  }

  async getClient(clientId: string) {
    return this.clients.get(clientId);
  }
  async getJob(clientId: string, jobId: string) {
    return this.jobs.get(`${clientId}/${jobId}`);
  }
  async getTask(ref: TaskRef) {
    return this.tasks.get(key(ref));
  }
  #open(clientId: string): Task[] {
    return this.all()
      .filter(
        (t) =>
          t.clientId === clientId &&
          (t.state === 'pending' || t.state === 'retry-wait') &&
          this.jobs.get(`${t.clientId}/${t.jobId}`)?.status === 'running',
      )
      .sort((a, b) => a.readyAt - b.readyAt || (a.taskId < b.taskId ? -1 : 1));
  }
  async outstanding(clientId: string, now: number, limit: number) {
    return this.#open(clientId)
      .filter((t) => t.readyAt <= now)
      .slice(0, limit);
  }
  async nextReadyAt(clientId: string) {
    return this.#open(clientId)[0]?.readyAt;
  }
  prepare(task: Task): void {
    this.prepared.push(task.taskId);
  }

  async start(task: Task, fence: Fence): Promise<StartResult> {
    this.startedPrepared.push(this.prepared.includes(task.taskId));
    if (!this.leases.fence(fence.clientId, fence.owner, fence.token, fence.now)) return { kind: 'fenced' };
    const current = this.tasks.get(key(task));
    const job = this.jobs.get(`${task.clientId}/${task.jobId}`);
    // As the DynamoDB start's condition: running, and not past its end at the fence's time.
    const running = job?.status === 'running' && !jobHasEnded(job, fence.now);
    if (
      !current ||
      !running ||
      (current.state !== 'pending' && current.state !== 'retry-wait') ||
      current.attempts !== task.attempts
    ) {
      return { kind: 'gone' };
    }
    const { callId: _c, ...rest } = current;
    const next: Task = {
      ...rest,
      state: 'in-flight',
      attempts: current.attempts + 1,
      startedAt: fence.now,
      updatedAt: fence.now,
    };
    this.tasks.set(key(task), next);
    const set = this.flying.get(task.clientId) ?? new Set();
    set.add(key(task));
    this.flying.set(task.clientId, set);
    return { kind: 'started', task: next };
  }
  async recordCallId(ref: TaskRef, attempt: number, callId: string, now: number) {
    const t = this.tasks.get(key(ref));
    if (t?.state === 'in-flight' && t.attempts === attempt)
      this.tasks.set(key(ref), { ...t, callId, updatedAt: now });
  }
  async settle({ task, attempt, settlement, callId, now }: SettleRequest) {
    const t = this.tasks.get(key(task));
    if (t?.state !== 'in-flight' || t.attempts !== attempt) return false;
    const { reason: _r, ...rest } = t;
    this.tasks.set(key(task), {
      ...rest,
      state: settlement.state,
      lastResult: settlement.lastResult,
      ...(settlement.state === 'failed' || settlement.state === 'cancelled' || settlement.state === 'expired'
        ? { reason: settlement.reason }
        : {}),
      ...(settlement.state === 'retry-wait' ? { readyAt: settlement.readyAt } : {}),
      ...(callId === undefined ? {} : { callId }),
      updatedAt: now,
    });
    this.flying.get(task.clientId)?.delete(key(task));
    return true;
  }
  async inFlight(clientId: string) {
    return [...(this.flying.get(clientId) ?? [])].map((k) => {
      const [jobId, taskId] = k.split('/') as [string, string];
      return { jobId, taskId };
    });
  }
  async forgetInFlight(clientId: string, ref: TaskRef) {
    this.flying.get(clientId)?.delete(key(ref));
  }
}

interface FakeCall {
  readonly callId: string;
  readonly key: string;
  readonly request: CallRequest;
  readonly startedAt: number;
  status: CallSnapshot['status'];
  sequence: number;
  reason?: string;
}

/** A provider that records what the far side sees; the test ends calls with {@link end}. */
export class FakeProvider implements TelephonyProvider {
  readonly calls = new Map<string, FakeCall>();
  readonly byKey = new Map<string, FakeCall>();
  readonly starts: number[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Answers to give to the next initiates, in order (then `accepted`). */
  readonly script: InitiateOutcome['kind'][] = [];
  /** Told of each call placed (not of duplicates). */
  onPlaced: ((call: FakeCall) => void) | undefined;
  readonly #clock: Clock;
  #next = 1;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Network delays of each initiate in fake time: until the far side sees it, then until we see the answer. */
  latency: (() => { arriveMs: number; answerMs: number }) | undefined;
  /** Timers for {@link latency}. */
  timers: { setTimeout(callback: () => void, ms: number): unknown } | undefined;

  async #delay(ms: number): Promise<void> {
    if (ms > 0 && this.timers) await new Promise<void>((resolve) => this.timers!.setTimeout(resolve, ms));
  }

  async initiate(request: CallRequest, idempotencyKey: string): Promise<InitiateOutcome> {
    const latency = this.latency?.();
    await this.#delay(latency?.arriveMs ?? 0);
    const outcome = this.#arrive(request, idempotencyKey);
    await this.#delay(latency?.answerMs ?? 0);
    return outcome;
  }

  #arrive(request: CallRequest, idempotencyKey: string): InitiateOutcome {
    const scripted = this.script.shift();
    if (scripted === 'retryable') return { kind: 'retryable', reason: 'HTTP 503' };
    if (scripted === 'rejected')
      return { kind: 'rejected', status: 400, code: 'invalid_request', message: 'no' };
    const existing = this.byKey.get(idempotencyKey);
    if (existing) return { kind: 'accepted', callId: existing.callId, duplicate: true };
    const call: FakeCall = {
      callId: `call-${this.#next++}`,
      key: idempotencyKey,
      request,
      startedAt: this.#clock.now(),
      status: 'queued',
      sequence: 0,
    };
    this.calls.set(call.callId, call);
    this.byKey.set(idempotencyKey, call);
    this.starts.push(call.startedAt);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    this.onPlaced?.(call);
    return { kind: 'accepted', callId: call.callId, duplicate: false };
  }

  async getCall(callId: string): Promise<CallSnapshot | undefined> {
    const call = this.calls.get(callId);
    if (!call) return undefined;
    return this.snapshot(call);
  }

  snapshot(call: FakeCall): CallSnapshot {
    return {
      callId: call.callId,
      idempotencyKey: call.key,
      status: call.status,
      at: new Date(this.#clock.now()).toISOString(),
      sequence: call.sequence,
      ...(call.reason === undefined ? {} : { reason: call.reason }),
    };
  }

  /** Ends a call on the far side; returns the final event a callback would carry. */
  end(callId: string, status: FinalCallStatus, reason?: string): CallSnapshot {
    const call = this.calls.get(callId)!;
    if (call.status === 'queued' || call.status === 'ringing' || call.status === 'answered')
      this.inFlight -= 1;
    call.status = status;
    call.sequence += 1;
    if (reason !== undefined) call.reason = reason;
    return this.snapshot(call);
  }

  /** Most starts in any half-open 1-second window. */
  maxStartsPerSecond(): number {
    let best = 0;
    let from = 0;
    for (let to = 0; to < this.starts.length; to++) {
      while (this.starts[to]! - this.starts[from]! >= 1000) from++;
      best = Math.max(best, to - from + 1);
    }
    return best;
  }

  /** Idempotency keys that rang more than once: must stay empty. */
  repeatedRings(): string[] {
    const seen = new Map<string, number>();
    for (const c of this.calls.values()) seen.set(c.key, (seen.get(c.key) ?? 0) + 1);
    return [...seen].filter(([, n]) => n > 1).map(([k]) => k);
  }
}

/** The call-status route without HTTP: signed callbacks through the real use case. */
export function statusRoute(input: {
  store: MemoryTaskStore;
  clock: Clock;
  /** Receives the nudge (the broker's `callEnded`). */
  nudge: (ended: { jobId: string; taskId: string; callId?: string }) => Promise<void>;
}) {
  const record = makeRecordCallStatus({
    tasks: input.store,
    leases: { endpointOf: async () => 'memory://broker' },
    notifier: { callEnded: async (_endpoint, ended) => input.nudge(ended) },
    clock: input.clock,
    secrets: SECRET,
  });
  return (
    call: { request: CallRequest; key: string },
    event: CallSnapshot & { status: ReportedCallStatus },
  ) => {
    const body = JSON.stringify(event);
    const url = new URL(call.request.callbackUrl);
    return record({
      signature: signCallback(SECRET, body, Math.floor(input.clock.now() / 1000)),
      rawBody: body,
      ref: {
        jobId: url.searchParams.get('job')!,
        taskId: url.searchParams.get('task')!,
        attempt: Number(url.searchParams.get('attempt')),
      },
    });
  };
}

export class MemoryFleet implements FleetWorkReader {
  work: FleetWork | undefined;
  constructor(clients: string[], desiredVersion = 'v1') {
    this.work = fleetWorkItem({ clients, desiredVersion, updatedAt: T0 });
  }
  async read() {
    return this.work;
  }
}

export { silentLogger as silentLog } from '#shared/log.ts';
