/**
 * The drills of the broker fleet, on one local stack with real broker processes: (a) a clean job
 * of 300 calls, (b) a broker SIGKILLed mid-job, (c) a rolling deploy mid-job, (d) lost, duplicated
 * and reordered status events with ambiguous starts, (e) settings changed mid-job, (f) the job's
 * end (`endAt`) reached mid-job, (g) a broker SIGKILLed while two jobs listing the same people
 * under a contact limit (1 call each) start their calls. (b), (c) and (d) run
 * for each emulated provider: the HTTP contract's sandbox, Amazon Connect and Twilio. Each drill is its own
 * client and job, uploaded through the operator API and its presigned URL as `npm start` does, and
 * each checks invariants 1-4 (DESIGN.md) from the records: the provider emulator's rings (the far
 * side's view), the job's report, the lease item.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import {
  createJobWithList,
  type DemoProvider,
  demoClientSettings,
  emulatorOf,
  runDemoJob,
} from '#local/demo-job.ts';
import type { LocalFleet } from '#local/ecs-service.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { isCappedReason } from '#shared/contact-limits/model.ts';
import { FLEET_WORK_KEY, parseFleetWork } from '#shared/fleet/work-list.ts';
import { JOB_ENDED_REASON, RETRY_AFTER_END_REASON } from '#shared/jobs/task-lifecycle.ts';
import { until } from '../support/wait.ts';

/** Rows, calls at once and calls per second of each drill's client. */
interface DrillSize {
  readonly rows: number;
  readonly limit: number;
  readonly rate: number;
}
const DRILL: DrillSize = { rows: 60, limit: 4, rate: 4 };
/** Drill (a): a bigger job at a wider contract (it would take 75 s at 4 calls/s). */
const CLEAN: DrillSize = { rows: 300, limit: 12, rate: 10 };
/** The demo job's `maxAttempts`: a busy or unanswered call is tried once more. */
const MAX_ATTEMPTS = 2;

let stack: LocalStack;
let fleet: LocalFleet;
let doc: DynamoDBDocumentClient;
let dir: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  dir = mkdtempSync(path.join(tmpdir(), 'fleet-drills-'));
  stack = await startLocalStack({
    stage: 'e2edrills',
    port: 0,
    fleet: true,
    // Ring 0.2-1 s and talk at most 0.6 s of wall time.
    telephonyTimeScale: 10,
    // Connect calls talk 0.1-0.8 s of wall time: Connect does not end a call at the job's maximum
    // (the broker stops it, `hangUp`), and its default 20-180 s would outlive the drills' 4 s.
    connectTalkSeconds: { min: 1, max: 8 },
    maxBrokers: 2,
    jobManagerIntervalMs: 1_000,
    brokerEnv: {
      LEASE_MS: '3000',
      BROKER_IDLE_WAIT_MS: '300',
      BROKER_RECHECK_MS: '500',
      // A call with no final callback is asked of the provider 5 s after it started.
      DEFAULT_MAX_CALL_SECONDS: '4',
      RECONCILE_MARGIN_MS: '1000',
      // Twilio: look for the call of an ambiguous create 1 s after it (10 s on AWS), inside these short calls.
      TWILIO_LOOKUP_SETTLE_MS: '1000',
    },
  });
  fleet = stack.fleet!;
  doc = makeDocumentClient(
    new DynamoDBClient({
      region: stack.cloud.region,
      credentials: LOCAL_CREDENTIALS,
      endpoint: stack.cloud.dynamoEndpoint,
    }),
  );
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  doc?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * A list of `rows` valid Japanese mobile numbers, distinct per drill, and — with `messy` — the
 * mistakes of a real export after them: an invalid number, an empty phone cell, a duplicate.
 */
function callList(drill: number, rows: number, messy = false): string {
  const lines = ['電話番号,氏名'];
  const block = 4000 + drill * 10;
  for (let i = 0; i < rows; i++) lines.push(`090-${block}-${1000 + i},顧客 ${i + 1}`);
  if (messy) lines.push('090-12,番号が短い', ',番号なし', `090-${block}-1000,重複`);
  const file = path.join(dir, `drill-${drill}.csv`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

interface Lease {
  readonly owner: string;
  readonly token: number;
}

async function readLease(clientId: string): Promise<Lease | undefined> {
  const { Item } = await doc.send(
    new GetCommand({
      TableName: stack.cloud.tableNames.control!,
      Key: { pk: `LEASE#${clientId}`, sk: 'LEASE' },
    }),
  );
  if (!Item || typeof Item.owner !== 'string') return undefined;
  return { owner: Item.owner, token: Number(Item.token) };
}

/**
 * Whether no broker serves the client, nor will: the job manager's work list, written after
 * `since`, leaves it out, and no broker holds its lease (its holder let it go once its calls
 * ended). A broker that still acts on an older list reads the client's settings as it takes it.
 */
async function noLongerServed(clientId: string, since: number): Promise<boolean> {
  const table = stack.cloud.tableNames.control!;
  const work = parseFleetWork(
    (await doc.send(new GetCommand({ TableName: table, Key: FLEET_WORK_KEY, ConsistentRead: true }))).Item,
  );
  if (!work || work.updatedAt <= since || work.clients.includes(clientId)) return false;
  const { Item: lease } = await doc.send(
    new GetCommand({ TableName: table, Key: { pk: `LEASE#${clientId}`, sk: 'LEASE' }, ConsistentRead: true }),
  );
  return !lease || Number(lease.expiresAt) <= Date.now();
}

/** Samples the client's lease while a drill runs: every (owner, token) seen, in order. */
function watchLease(clientId: string): { readonly seen: Lease[]; stop(): Promise<void> } {
  const seen: Lease[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const lease = await readLease(clientId).catch(() => undefined);
      const last = seen.at(-1);
      if (lease && (last?.owner !== lease.owner || last.token !== lease.token)) seen.push(lease);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    seen,
    async stop() {
      running = false;
      await loop;
    },
  };
}

interface ReportTask {
  readonly recipient: string;
  readonly outcome: string;
  readonly reason: string;
}

async function reportTasks(clientId: string, jobId: string): Promise<ReportTask[]> {
  const report = await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}/report`);
  expect(report.status).toBe(200);
  const rows = parse(report.body.replace(/^\uFEFF/, ''), { columns: true }) as Record<string, string>[];
  return rows
    .filter((r) => r.recipient)
    .map((r) => ({ recipient: r.recipient ?? '', outcome: r.outcome ?? '', reason: r.reason ?? '' }));
}

type JobView = Awaited<ReturnType<typeof runDemoJob>>;
/** A job's view with the counts of tasks cancelled, and of those, capped by a contact limit. */
type CappedJobView = JobView & { readonly counts: { cancelled: number; capped: number } };

function startJob(
  clientId: string,
  drill: number,
  size = DRILL,
  messy = false,
  provider: DemoProvider = 'http',
): Promise<JobView> {
  return runDemoJob(stack, () => {}, {
    csvPath: callList(drill, size.rows, messy),
    clientId,
    maxConcurrentCalls: size.limit,
    callsPerSecond: size.rate,
    provider,
    timeoutMs: 200_000,
  });
}

/** Invariants 1-4 from the records, once the client's job is over. */
async function expectInvariants(
  clientId: string,
  view: JobView,
  leases: readonly Lease[],
  size = DRILL,
  provider: DemoProvider = 'http',
) {
  const ROWS = size.rows;
  expect(view.status).toBe('completed');
  expect(view.counts.tasks).toBe(ROWS);
  expect(view.counts.completed + view.counts.failed).toBe(ROWS);

  // Invariant 2: no task lost: each ends completed, or failed with a reason.
  const tasks = await reportTasks(clientId, view.jobId);
  expect(tasks).toHaveLength(ROWS);
  const unsettled = tasks.filter((t) => !['completed', 'failed'].includes(t.outcome));
  expect(unsettled).toEqual([]);
  expect(tasks.filter((t) => t.outcome === 'failed' && t.reason === '')).toEqual([]);

  const stats = emulatorOf(stack, provider).stats(clientId);
  // Invariant 1: no recipient rang twice for one attempt, and no task rang more than it may.
  expect(stats.repeatedRings).toEqual([]);
  expect(Object.keys(stats.ringsPerRecipient)).toHaveLength(ROWS);
  for (const perTask of Object.values(stats.ringsPerRecipient)) {
    expect(Object.values(perTask).every((rings) => rings <= MAX_ATTEMPTS)).toBe(true);
  }
  // Invariant 3, measured by the provider over the whole job (a dead broker's calls included).
  expect(stats.maxInFlight).toBeLessThanOrEqual(size.limit);
  expect(stats.maxStartsPerSecond).toBeLessThanOrEqual(size.rate);
  expect(stats.inFlight).toBe(0);

  // Invariant 4: every change of holder came with a larger fencing token.
  expect(leases.length).toBeGreaterThan(0);
  for (let i = 1; i < leases.length; i++) {
    const [before, after] = [leases[i - 1]!, leases[i]!];
    if (after.owner !== before.owner) expect(after.token).toBeGreaterThan(before.token);
    else expect(after.token).toBeGreaterThanOrEqual(before.token);
  }
  return stats;
}

const brokerOf = (brokerId: string) => fleet.list().find((b) => b.brokerId === brokerId);

describe('broker fleet drills', () => {
  it('(a) a clean job of 300 calls: each called once, within the limit and the line rate, all settled', async () => {
    const clientId = 'drill-a';
    const leases = watchLease(clientId);
    try {
      const view = await startJob(clientId, 1, CLEAN, true);
      await leases.stop();
      // The export's mistakes are reported, not called: an invalid number, an empty cell, a repeat.
      expect(view.counts).toMatchObject({ rows: CLEAN.rows + 3, rejected: 2, skipped: 1 });
      const stats = await expectInvariants(clientId, view, leases.seen, CLEAN);
      // No fault, no kill: every ring ended naturally.
      expect(stats.callbacks.lost).toBe(0);
      const rings = stack.telephony.rings().filter((r) => r.clientId === clientId);
      expect(rings.filter((r) => r.endedAt === undefined || r.outcome === undefined)).toEqual([]);
      // Calls overlapped: the broker does not call one at a time. (How close it runs to the
      // contract's bound is a timing figure: bench/pacing.ts prints it.)
      expect(stats.maxInFlight).toBeGreaterThan(2);
    } finally {
      await leases.stop();
    }
  });

  it.each([
    ['http', 2],
    ['connect', 6],
    ['twilio', 8],
  ] as const)(
    '(b) %s: brokers SIGKILLed twice mid-job: the client resumes on another broker after each lease expires',
    async (provider, drill) => {
      const clientId = `drill-b-${provider}`;
      const far = emulatorOf(stack, provider);
      const leases = watchLease(clientId);
      try {
        const job = startJob(clientId, drill, DRILL, false, provider);
        // Twice: the holder, then the broker that took the client over (its adopted calls included).
        const killed: Lease[] = [];
        for (let round = 0; round < 2; round++) {
          let victim: Lease | undefined;
          await until(
            async () => {
              if (far.stats(clientId).inFlight < 2) return false;
              victim = await readLease(clientId);
              return (
                victim !== undefined &&
                !killed.some((k) => k.owner === victim!.owner) &&
                brokerOf(victim.owner)?.state === 'ready'
              );
            },
            `calls in flight on a broker holding the lease (kill ${round + 1})`,
          );
          killed.push(victim!);
          fleet.kill(victim!.owner, 'SIGKILL');
        }
        const view = await job;
        await leases.stop();

        await expectInvariants(clientId, view, leases.seen, DRILL, provider);
        const after = await readLease(clientId);
        for (const k of killed) {
          expect(after?.owner).not.toBe(k.owner);
          expect(after!.token).toBeGreaterThan(k.token);
          expect(fleet.exits.find((e) => e.brokerId === k.owner)?.signal).toBe('SIGKILL');
        }
        // Work was started under the last holder: rings after the second kill.
        const killedAt = fleet.stops.find((s) => s.brokerId === killed[1]!.owner)!.at;
        expect(far.rings().some((r) => r.clientId === clientId && r.startedAt > killedAt)).toBe(true);
      } finally {
        await leases.stop();
      }
    },
  );

  it.each([
    ['http', 3, 'local-2'],
    ['connect', 10, 'local-3'],
    ['twilio', 11, 'local-4'],
  ] as const)(
    '(c) %s: a rolling deploy mid-job: no protected broker stopped, no call cut, the client moves to the new version',
    async (provider, drill, version) => {
      const clientId = `drill-c-${provider}`;
      const far = emulatorOf(stack, provider);
      const leases = watchLease(clientId);
      try {
        const job = startJob(clientId, drill, DRILL, false, provider);
        let before: Lease | undefined;
        await until(async () => {
          if (far.stats(clientId).inFlight < 2) return false;
          before = await readLease(clientId);
          return before !== undefined && brokerOf(before.owner)?.state === 'ready';
        }, 'calls in flight on a broker holding the lease');
        const oldVersion = brokerOf(before!.owner)!.version;
        expect(oldVersion).not.toBe(version);
        expect(fleet.running().find((b) => b.brokerId === before!.owner)).toBeDefined();
        const stopsBefore = fleet.stops.length;
        await fleet.deploy(version);
        // The deploy came while the old broker had calls in flight (and so held protection).
        const inFlightAtDeploy = far.stats(clientId).inFlight;
        const view = await job;
        await leases.stop();

        await expectInvariants(clientId, view, leases.seen, DRILL, provider);
        expect(inFlightAtDeploy).toBeGreaterThan(0);
        // The client was served by a new-version broker once the old one had drained.
        const owners = leases.seen.map((l) => brokerOf(l.owner)?.version);
        expect(owners.at(-1)).toBe(version);
        await fleet.waitUntil((f) => f.running().every((b) => b.version === version), 60_000);

        // Zero calls cut: from the deploy on, the service never signalled a broker that held task protection, every
        // old broker exited on its own terms (code 0, no SIGKILL), and every call the provider
        // placed ran to a natural end.
        expect(fleet.stops.slice(stopsBefore).filter((s) => s.protected)).toEqual([]);
        const killed = new Set(fleet.stops.filter((s) => s.reason === 'kill').map((s) => s.brokerId));
        const oldExits = fleet.exits.filter((e) => e.version === oldVersion && !killed.has(e.brokerId));
        expect(oldExits.map((e) => e.brokerId)).toContain(before!.owner);
        for (const exit of oldExits) expect(exit).toMatchObject({ code: 0, signal: null, forced: false });
        const rings = far.rings().filter((r) => r.clientId === clientId);
        expect(rings.filter((r) => r.endedAt === undefined || r.outcome === undefined)).toEqual([]);
        // …and every failed task failed for what the provider reported (busy, no answer, a number
        // that does not exist: the sandbox's `unreachable`, Connect's `telecom_number_invalid`,
        // Twilio's SIP 404), none for a call that was abandoned or never confirmed.
        const tasks = await reportTasks(clientId, view.jobId);
        const natural =
          /^(busy|no-answer|voicemail) on all \d+ attempts$|^unreachable$|^telecom_number_invalid$|^failed \(SIP 404\)$/;
        const unnatural = tasks.filter((t) => t.outcome === 'failed' && !natural.test(t.reason));
        expect(unnatural).toEqual([]);
      } finally {
        await leases.stop();
      }
    },
  );

  it.each([
    ['http', 4],
    ['connect', 7],
    ['twilio', 9],
  ] as const)(
    '(d) %s: lost, duplicated and reordered status events, ambiguous starts: every task still settles, once, within the limits',
    async (provider, drill) => {
      const clientId = `drill-d-${provider}`;
      const far = emulatorOf(stack, provider);
      const leases = watchLease(clientId);
      const faults = {
        callbackLossRate: 0.3,
        callbackDuplicateRate: 0.3,
        callbackReorderRate: 0.2,
        initiateErrorAfterCreateRate: 0.1,
      };
      far.setFaults(faults);
      try {
        const view = await startJob(clientId, drill, DRILL, false, provider);
        await leases.stop();
        const stats = await expectInvariants(clientId, view, leases.seen, DRILL, provider);
        // The faults did strike.
        expect(stats.callbacks.lost).toBeGreaterThan(0);
        expect(stats.callbacks.duplicated).toBeGreaterThan(0);
      } finally {
        far.setFaults({
          callbackLossRate: 0,
          callbackDuplicateRate: 0,
          callbackReorderRate: 0,
          initiateErrorAfterCreateRate: 0,
        });
        await leases.stop();
      }
    },
  );

  it('(f) a job that reaches its endAt mid-job: no call starts after it, calls in flight finish, the rest expire and the job completes', async () => {
    const clientId = 'drill-f';
    const size: DrillSize = { rows: 60, limit: 3, rate: 2 };
    const leases = watchLease(clientId);
    // 60 calls at 2 a second need 30 s: the job ends well before that.
    const endAt = Date.now() + 12_000;
    // A start decided before the end may reach the provider a moment later (its fenced
    // transaction, then the provider's request): at most this much later.
    const startLatencyMs = 1_500;
    try {
      const view = await runDemoJob(stack, () => {}, {
        csvPath: callList(12, size.rows),
        clientId,
        maxConcurrentCalls: size.limit,
        callsPerSecond: size.rate,
        timeoutMs: 200_000,
        jobOptions: { endAt: new Date(endAt).toISOString() },
      });
      await leases.stop();
      expect(view.status).toBe('completed');

      // The far side: calls were placed before the end, none after it, and each one placed ran
      // to its natural end (the end cut no call).
      const stats = stack.telephony.stats(clientId);
      const rings = stack.telephony.rings().filter((r) => r.clientId === clientId);
      expect(rings.length).toBeGreaterThan(0);
      expect(rings.filter((r) => r.startedAt > endAt + startLatencyMs).map((r) => r.taskId)).toEqual([]);
      expect(rings.filter((r) => r.endedAt === undefined || r.outcome === undefined)).toEqual([]);
      expect(stats.repeatedRings).toEqual([]);
      expect(stats.inFlight).toBe(0);
      expect(stats.maxInFlight).toBeLessThanOrEqual(size.limit);

      // Every task ended: those not done by the end expired, saying why; the counts agree.
      const tasks = await reportTasks(clientId, view.jobId);
      expect(tasks).toHaveLength(size.rows);
      expect(tasks.filter((t) => !['completed', 'failed', 'expired'].includes(t.outcome))).toEqual([]);
      const expired = tasks.filter((t) => t.outcome === 'expired');
      expect(expired.length).toBeGreaterThan(0);
      expect(
        expired.filter((t) => t.reason !== JOB_ENDED_REASON && t.reason !== RETRY_AFTER_END_REASON),
      ).toEqual([]);
      // A task that expired for its retry rang before the end: its call was in flight then, and finished.
      const rang = new Set(rings.map((r) => r.to));
      const number = (t: ReportTask) => t.recipient.replace(/^'/, '');
      expect(expired.filter((t) => t.reason === RETRY_AFTER_END_REASON && !rang.has(number(t)))).toEqual([]);
      const got = await stack.operator('GET', `/clients/${clientId}/jobs/${view.jobId}`);
      const job = got.json<{ endAt: string; counts: Record<string, number> }>();
      expect(job.endAt).toBe(new Date(endAt).toISOString());
      expect(job.counts).toMatchObject({ expired: expired.length, outstanding: 0 });
      expect(job.counts.completed! + job.counts.failed! + job.counts.expired!).toBe(size.rows);
    } finally {
      await leases.stop();
    }
  });

  it('(e) settings changed mid-job: closed hours and a pause of the client stop new calls within seconds; reopened, the job completes', async () => {
    const clientId = 'drill-e';
    const size: DrillSize = { rows: 60, limit: 3, rate: 3 };
    const leases = watchLease(clientId);
    const rings = () => stack.telephony.rings().filter((r) => r.clientId === clientId);
    // The broker reads the client again once its copy is 5 s old; a start already past its
    // fenced transaction may still place its call: 1.5 s more.
    const appliesWithinMs = 6_500;
    const settings = demoClientSettings({
      clientId,
      maxConcurrentCalls: size.limit,
      callsPerSecond: size.rate,
      timeZone: 'UTC',
    });
    const put = async (over: Record<string, unknown>) => {
      const answer = await stack.operator('PUT', `/clients/${clientId}`, { json: { ...settings, ...over } });
      expect(answer.status).toBe(200);
    };
    const stopsWithin = async (what: string) => {
      const at = Date.now();
      // Once nobody serves the client and the work list leaves it out, no call of it starts.
      await until(() => noLongerServed(clientId, at), `nobody to serve ${clientId} after ${what}`, {
        timeoutMs: 120_000,
      });
      const late = rings().filter((r) => r.startedAt > at + appliesWithinMs);
      expect(
        late.map((r) => r.taskId),
        `calls started after ${what}`,
      ).toEqual([]);
    };
    const job = startJob(clientId, 5, size);
    try {
      await until(() => rings().length >= 5, 'the first calls');
      // The window now closed: open only in an hour that is 12 hours away.
      const hour = String((new Date().getUTCHours() + 12) % 24).padStart(2, '0');
      const closed = Object.fromEntries(
        ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [
          d,
          [{ start: `${hour}:00`, end: `${hour}:30` }],
        ]),
      );
      await put({ callingHours: closed });
      await stopsWithin('the hours closed');
      const waiting = async () =>
        (await stack.operator('GET', `/clients/${clientId}/jobs`)).json<{
          jobs: { waiting?: { reason: string } }[];
        }>().jobs[0]?.waiting?.reason;
      expect(await waiting()).toBe('calling-hours');
      const beforeReopen = rings().length;
      expect(beforeReopen).toBeLessThan(size.rows);

      await put({});
      await until(() => rings().length >= beforeReopen + 5, 'calls after the hours reopened');
      const paused = await stack.operator('POST', `/clients/${clientId}/pause`);
      expect(paused.status).toBe(200);
      expect(paused.json<{ paused: boolean }>().paused).toBe(true);
      await stopsWithin('the client was paused');
      expect(await waiting()).toBe('client-paused');
      // A PUT of other settings keeps the pause.
      await put({ maxConcurrentCalls: size.limit });
      expect((await stack.operator('GET', `/clients/${clientId}`)).json<{ paused?: boolean }>().paused).toBe(
        true,
      );

      const resumed = await stack.operator('POST', `/clients/${clientId}/resume`);
      expect(resumed.json<{ paused: boolean }>().paused).toBe(false);
      const view = await job;
      await leases.stop();
      await expectInvariants(clientId, view, leases.seen, size);
    } finally {
      await stack.operator('POST', `/clients/${clientId}/resume`);
      await put({});
      await job.catch(() => {});
      await leases.stop();
    }
  });

  it('(g) a broker SIGKILLed twice while two jobs call the same people under a limit of 1: nobody is called twice, every task ends', async () => {
    const clientId = 'drill-g';
    const rows = 40;
    const size: DrillSize = { rows, limit: 4, rate: 4 };
    const leases = watchLease(clientId);
    // One call per person across the client's jobs, over a window far longer than the drill, so
    // that a task over the limit ends capped (its window ends after its job's) instead of waiting.
    const limit = { max: 1, per: { days: 366 }, channels: ['call'] };
    const put = await stack.operator('PUT', `/clients/${clientId}`, {
      json: {
        ...demoClientSettings({ clientId, maxConcurrentCalls: size.limit, callsPerSecond: size.rate }),
        contactLimits: [limit],
      },
    });
    expect(put.status, put.body).toBe(200);
    const list = readFileSync(callList(13, rows));
    // Both jobs list the same people; a busy or unanswered call is tried once more (another
    // contact, which the limit refuses).
    const options = (name: string) => ({
      name,
      channel: 'call',
      scenarioId: 'reminder',
      maxAttempts: 2,
      retryDelaySeconds: 1,
      endAt: new Date(Date.now() + 30 * 60_000).toISOString(),
    });
    const jobIds = await Promise.all(
      ['first', 'second'].map((name) => createJobWithList(stack, clientId, options(name), list)),
    );
    const rings = () => stack.telephony.rings().filter((r) => r.clientId === clientId);
    try {
      const killed: Lease[] = [];
      for (let round = 0; round < 2; round++) {
        let victim: Lease | undefined;
        await until(
          async () => {
            if (stack.telephony.stats(clientId).inFlight < 2) return false;
            victim = await readLease(clientId);
            return (
              victim !== undefined &&
              !killed.some((k) => k.owner === victim!.owner) &&
              brokerOf(victim.owner)?.state === 'ready'
            );
          },
          `calls starting on a broker holding the lease (kill ${round + 1})`,
        );
        killed.push(victim!);
        fleet.kill(victim!.owner, 'SIGKILL');
      }
      const views = await Promise.all(
        jobIds.map(async (jobId) => {
          let view: CappedJobView | undefined;
          await until(
            async () => {
              const got = await stack.operator('GET', `/clients/${clientId}/jobs/${jobId}`);
              view = got.json<CappedJobView>();
              return ['completed', 'failed', 'cancelled'].includes(view.status);
            },
            `job ${jobId} to end`,
            { timeoutMs: 200_000, everyMs: 500 },
          );
          return view!;
        }),
      );
      await leases.stop();

      // The far side: no person rang more than once, whichever job, attempt or broker placed it.
      const stats = stack.telephony.stats(clientId);
      const perPerson = Object.entries(stats.ringsPerRecipient).map(
        ([to, perTask]) => [to, Object.values(perTask).reduce((a, b) => a + b, 0)] as const,
      );
      expect(perPerson.filter(([, n]) => n > limit.max)).toEqual([]);
      // The drill placed calls (a slot taken by a start the kill cut may leave a person uncalled).
      expect(perPerson.length).toBeGreaterThan(rows / 2);
      expect(stats.repeatedRings).toEqual([]);
      expect(stats.inFlight).toBe(0);
      expect(stats.maxInFlight).toBeLessThanOrEqual(size.limit);
      expect(stats.maxStartsPerSecond).toBeLessThanOrEqual(size.rate);

      // Every task of both jobs ended: completed, failed with a reason, or cancelled capped.
      let capped = 0;
      for (const view of views) {
        expect(view.status).toBe('completed');
        expect(view.counts.tasks).toBe(rows);
        expect(view.counts.outstanding).toBe(0);
        expect(view.counts.completed + view.counts.failed + view.counts.cancelled).toBe(rows);
        const tasks = await reportTasks(clientId, view.jobId);
        expect(tasks).toHaveLength(rows);
        expect(tasks.filter((t) => !['completed', 'failed', 'cancelled'].includes(t.outcome))).toEqual([]);
        expect(tasks.filter((t) => t.outcome === 'failed' && t.reason === '')).toEqual([]);
        const cancelled = tasks.filter((t) => t.outcome === 'cancelled');
        expect(cancelled.filter((t) => !isCappedReason(t.reason))).toEqual([]);
        expect(view.counts.capped).toBe(cancelled.length);
        capped += cancelled.length;
      }
      // Each person listed twice and called at most once: at least one of their two tasks was capped.
      expect(capped).toBeGreaterThanOrEqual(rows);

      // The kills struck a broker with calls starting, and another broker took the client over.
      const after = await readLease(clientId);
      for (const k of killed) {
        expect(after?.owner).not.toBe(k.owner);
        expect(after!.token).toBeGreaterThan(k.token);
        expect(fleet.exits.find((e) => e.brokerId === k.owner)?.signal).toBe('SIGKILL');
      }
      const killedAt = fleet.stops.find((s) => s.brokerId === killed[1]!.owner)!.at;
      expect(rings().some((r) => r.startedAt > killedAt)).toBe(true);
      for (let i = 1; i < leases.seen.length; i++) {
        const [before, next] = [leases.seen[i - 1]!, leases.seen[i]!];
        if (next.owner !== before.owner) expect(next.token).toBeGreaterThan(before.token);
      }
    } finally {
      await leases.stop();
    }
  });
});
