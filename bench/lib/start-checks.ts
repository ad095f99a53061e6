/**
 * The cost of the contact-policy checks where a contact starts, on DynamoDB Local, side by side
 * with the same starts without them:
 *   - a call's start transaction (`DynamoBrokerTaskStore.start`): off; + the suppression
 *     ConditionCheck; + 1 contact-limit counter (and the person's link check); + 3 counters; + 1
 *     counter for a recipient linked to an address (the person-wide suppression read before it);
 *   - a message page's claim (`MessageClaimer.nextPage`): off; + the suppression read of the page;
 *     + 3 contact-limit counters per first claim (in the claim's transactions); the same for
 *     recipients each linked to an address.
 * The variants run interleaved (one start of each in turn), on tasks of their own, under one lease,
 * so drift on a shared machine hits them alike. Every start passes (no entry, caps far above the
 * count): what is measured is the price of checking, not of refusing.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { claimSuppressions } from '#shared/adapters/dynamo-person-suppressions.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import type { Fence, StartLimits } from '#shared/broker/ports.ts';
import { type ContactLimit, capSlots } from '#shared/contact-limits/model.ts';
import { newUlid } from '#shared/ids.ts';
import { type ClientSettings, type Job, type Task, taskSideOf } from '#shared/jobs/model.ts';
import type { Lease } from '#shared/lease/lease.ts';
import { suppressionKeys } from '#shared/suppressions/model.ts';
import { freshCounts, seedRunningJob } from './seed-job.ts';

export interface CheckFigures {
  readonly name: string;
  /** Wall ms per start (a call) or per claimed task (a message). */
  readonly perStartMs: readonly number[];
  /** Items of each start's transaction (a call), for the write units. */
  readonly items?: number;
}

type Tables = { readonly controlTable: string; readonly tasksTable: string };

const ALWAYS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
  ),
};
const LIMITS: ContactLimit[] = [
  { max: 1000, per: 'day', channels: ['call', 'line'] },
  { max: 1000, per: 'week', channels: ['call', 'line'] },
  { max: 1000, per: { days: 30 }, channels: ['call', 'line'] },
];

/** A client with the three contact limits, or (`limits` false) none: a claim then takes no counter. */
function client(clientId: string, limits = true): ClientSettings {
  return {
    clientId,
    maxConcurrentCalls: 10_000,
    callsPerSecond: 1_000,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS,
    defaultRegion: 'JP',
    ...(limits ? { contactLimits: LIMITS } : {}),
    messageChannelId: 'bench',
    updatedAt: Date.now(),
  };
}

function job(clientId: string, channel: 'call' | 'line', count: number): Job {
  const now = Date.now();
  return {
    clientId,
    jobId: newUlid(),
    name: `checks ${channel}`,
    channel,
    scenarioId: 's1',
    startAt: now - 1000,
    maxAttempts: 1,
    retryDelaySeconds: 1,
    status: 'running',
    counts: freshCounts(count),
    ...(channel === 'line' ? { message: { messages: [{ type: 'text', text: 'hello' }] } } : {}),
    createdAt: now,
    updatedAt: now,
  };
}

function taskOf(j: Job, i: number, prefix: string): Task {
  const recipient =
    j.channel === 'call'
      ? `+8190${prefix}${String(i).padStart(6, '0')}`
      : `U${prefix}${i.toString(16).padStart(31 - prefix.length, '0')}`;
  return {
    clientId: j.clientId,
    jobId: j.jobId,
    taskId: `t${String(i).padStart(6, '0')}`,
    row: i + 2,
    channel: taskSideOf(j.channel),
    recipient,
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: j.startAt + i,
    updatedAt: j.startAt,
  };
}

/** A suppression list of `n` other recipients, so the checks read a partition that is not empty. */
async function someSuppressions(doc: DynamoDBDocumentClient, tables: Tables, clientId: string, n: number) {
  const at = Date.now();
  await new DynamoSuppressionStore(doc, tables.controlTable).add(
    clientId,
    Array.from({ length: n }, (_, i) => ({
      recipient: `+8180${String(i).padStart(8, '0')}`,
      kind: 'phone' as const,
      source: 'api' as const,
      reason: 'bench',
      addedAt: at,
    })),
  );
}

/** The client's lease for an hour, as its broker would hold it (nobody is told at the endpoint). */
async function benchLease(
  doc: DynamoDBDocumentClient,
  controlTable: string,
  clientId: string,
): Promise<Lease> {
  const lease = await new DynamoLeaseStore(doc, controlTable, { endpoint: 'http://127.0.0.1:9' }).tryTake({
    clientId,
    owner: 'bench',
    now: Date.now(),
    leaseMs: 3_600_000,
  });
  if (!lease) throw new Error('the bench could not take its lease');
  return lease;
}

/**
 * The baseline of a call start without its suppression check: the store's own start, over a client
 * that leaves the suppression entry's ConditionCheck out of the transaction it sends (a start
 * writes nothing else under `SUPPRESS#`). The bench's, not a switch of the store.
 */
export function withoutSuppressionChecks(client: DynamoDBClient): DynamoDBDocumentClient {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as {
        TransactItems?: { ConditionCheck?: { Key?: { pk?: { S?: string } } } }[];
      };
      if (context.commandName === 'TransactWriteItemsCommand' && input.TransactItems)
        input.TransactItems = input.TransactItems.filter(
          (item) => !item.ConditionCheck?.Key?.pk?.S?.startsWith(suppressionKeys.pk('')),
        );
      return next(args);
    },
    { step: 'initialize', name: 'benchWithoutSuppressionChecks' },
  );
  return makeDocumentClient(client);
}

/** One way of starting a call in the bench: which checks it makes, and how its reading is done. */
interface CallVariant {
  readonly name: string;
  readonly suppression: boolean;
  readonly limits: number;
  /** In the client with people (its starts read links). */
  readonly people?: boolean;
  /** Each recipient linked to an address of its own. */
  readonly linked?: boolean;
  /** Read ahead, starts this far apart (see {@link aheadTurn}). */
  readonly aheadEveryMs?: number;
}

/** The call-start variants, in the order they are printed. */
const CALL_VARIANTS: readonly CallVariant[] = [
  { name: 'off (no checks)', suppression: false, limits: 0 },
  { name: '+ suppression ConditionCheck', suppression: true, limits: 0 },
  { name: '+ suppression + 1 contact limit', suppression: true, limits: 1 },
  { name: '+ suppression + 3 contact limits', suppression: true, limits: 3 },
  // A client with people: each start reads the recipient's link (and, when linked, the person's
  // members and their entries) before its transaction.
  { name: '+ 1 limit, client with people, unlinked', suppression: true, limits: 1, people: true },
  {
    name: '+ 1 limit, client with people, linked',
    suppression: true,
    limits: 1,
    people: true,
    linked: true,
  },
  // The same as the broker takes its tasks: each task's reading begun when it is taken
  // (`prepare`), so it runs while the broker waits for its call slot (see `aheadTurn`): starts
  // 100 ms apart (a busy line: 10 calls a second), and back to back (no wait at all).
  {
    name: '+ 1 limit, linked, read ahead, 10/s',
    suppression: true,
    limits: 1,
    people: true,
    linked: true,
    aheadEveryMs: 100,
  },
  {
    name: '+ 1 limit, linked, read ahead, back to back',
    suppression: true,
    limits: 1,
    people: true,
    linked: true,
    aheadEveryMs: 0,
  },
];

/** `starts` call starts per variant, interleaved; see the module comment. */
export async function measureCallStartChecks(
  doc: DynamoDBDocumentClient,
  tables: Tables,
  starts: number,
  /** The same DynamoDB, for the baseline ({@link withoutSuppressionChecks}). */
  bare: DynamoDBDocumentClient,
): Promise<CheckFigures[]> {
  // Two clients: one that never linked anything, one with people (its starts read links).
  const stamp = Date.now().toString(36);
  const clientIds = { plain: `checks-call-${stamp}`, people: `checks-people-${stamp}` };
  for (const id of Object.values(clientIds)) await someSuppressions(doc, tables, id, 200);
  const runs = await Promise.all(
    CALL_VARIANTS.map(async (v, k) => {
      const clientId = v.people ? clientIds.people : clientIds.plain;
      const settings = client(clientId);
      // The read-ahead variant starts two a turn (the second timed): twice the tasks.
      const count = v.aheadEveryMs === undefined ? starts : 2 * starts;
      const j = job(clientId, 'call', count);
      const plain = Array.from({ length: count }, (_, i) => taskOf(j, i, String(k)));
      const tasks = v.linked ? await linkedPersons(doc, tables, plain) : plain;
      await seedRunningJob(doc, tables, { client: settings, job: j, tasks: (i) => tasks[i]!, count });
      const store = new DynamoBrokerTaskStore(v.suppression ? doc : bare, tables);
      return { ...v, clientId, tasks, store, times: [] as number[] };
    }),
  );
  const leases = new Map<string, Lease>();
  for (const id of Object.values(clientIds)) leases.set(id, await benchLease(doc, tables.controlTable, id));
  for (let i = 0; i < starts; i++)
    for (const run of runs) {
      const now = Date.now();
      const limits: StartLimits = { slots: capSlots(LIMITS.slice(0, run.limits), 'call', now, 'Asia/Tokyo') };
      const fence = { clientId: run.clientId, owner: 'bench', token: leases.get(run.clientId)!.token, now };
      if (run.aheadEveryMs !== undefined) {
        run.times.push(
          await aheadTurn(run.store, run.tasks, i, { fence, limits, everyMs: run.aheadEveryMs }),
        );
        continue;
      }
      const t0 = performance.now();
      const result = await run.store.start(run.tasks[i]!, fence, limits);
      run.times.push(performance.now() - t0);
      if (result.kind !== 'started') throw new Error(`a bench start was refused: ${result.kind}`);
    }
  return runs.map((r) => ({
    name: r.name,
    perStartMs: r.times,
    // Lease, job, task; the suppression check; under limits the link check and a counter each.
    items: 3 + (r.suppression ? 1 : 0) + (r.limits > 0 ? 1 + r.limits : 0),
  }));
}

/**
 * One turn of a read-ahead variant, as the broker takes and starts tasks (`outstanding-tasks.ts`,
 * `serve-client.ts`): task 2i started (untimed); 2i+1 taken at once, its reading begun, and started
 * once its slot is free — `everyMs` after 2i's start began (the line's rate spacing starts), at
 * once when that has passed — and timed. Its reading had only that wait to run in.
 */
async function aheadTurn(
  store: DynamoBrokerTaskStore,
  tasks: readonly Task[],
  i: number,
  turn: { readonly fence: Fence; readonly limits: StartLimits; readonly everyMs: number },
): Promise<number> {
  const [first, timed] = [tasks[2 * i]!, tasks[2 * i + 1]!];
  void store.prepare(first);
  const began = performance.now();
  const warm = await store.start(first, turn.fence, turn.limits);
  void store.prepare(timed);
  const left = turn.everyMs - (performance.now() - began);
  if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
  const t0 = performance.now();
  const result = await store.start(timed, { ...turn.fence, now: Date.now() }, turn.limits);
  const ms = performance.now() - t0;
  for (const r of [warm, result])
    if (r.kind !== 'started') throw new Error(`a bench start was refused: ${r.kind}`);
  return ms;
}

/** The tasks, each recipient linked with an address of its own (one person each), carrying its person. */
async function linkedPersons(
  doc: DynamoDBDocumentClient,
  tables: Tables,
  tasks: readonly Task[],
): Promise<Task[]> {
  const people = new DynamoPeopleStore(doc, tables.controlTable);
  const address = (task: Task) => `${task.taskId}.${task.jobId.toLowerCase()}@bench.example`;
  const out: Task[] = [];
  for (let i = 0; i < tasks.length; i += 100) {
    const page = tasks.slice(i, i + 100);
    const { persons } = await people.link(
      page[0]!.clientId,
      page.map((task) => [task.recipient, address(task)]),
    );
    for (const task of page) out.push({ ...task, person: persons.get(task.recipient)! });
  }
  return out;
}

/** Pages of 500 claimed per variant, interleaved: per claimed task, with and without the suppression read. */
export async function measureMessageClaimChecks(
  doc: DynamoDBDocumentClient,
  tables: Tables,
  messages: number,
): Promise<CheckFigures[]> {
  const page = 500;
  const variants = [
    { name: 'off (no checks)', suppressed: false, caps: false },
    { name: '+ suppression read of each page', suppressed: true, caps: false },
    { name: '+ suppression + 3 contact limits', suppressed: true, caps: true },
    { name: '+ suppression + 3 limits, linked persons', suppressed: true, caps: true, linked: true },
  ];
  const runs = await Promise.all(
    variants.map(async (v, k) => {
      // A client per variant: a claim takes the client's ready tasks of every running job.
      const clientId = `checks-msg-${k}-${Date.now().toString(36)}`;
      const settings = client(clientId, v.caps);
      await someSuppressions(doc, tables, clientId, 200);
      const j = job(clientId, 'line', messages);
      const plain = Array.from({ length: messages }, (_, i) => taskOf(j, i, String(k)));
      const tasks = v.linked ? await linkedPersons(doc, tables, plain) : plain;
      await seedRunningJob(doc, tables, {
        client: settings,
        job: j,
        tasks: (i) => tasks[i]!,
        count: messages,
      });
      const lease = await benchLease(doc, tables.controlTable, clientId);
      const store = new DynamoMessageTaskStore(doc, {
        ...tables,
        clock: { now: () => Date.now() },
        ...(v.suppressed ? { suppressed: claimSuppressions(doc, tables.controlTable) } : {}),
      });
      const session = store.session({ clientId, owner: 'bench', token: () => lease.token });
      return { ...v, session, times: [] as number[], claimed: 0 };
    }),
  );
  for (let done = false; !done; ) {
    done = true;
    for (const run of runs) {
      if (run.claimed >= messages) continue;
      const t0 = performance.now();
      const claimed = await run.session.source.nextPage(page);
      const ms = performance.now() - t0;
      if (claimed.length === 0) throw new Error('a bench claim found nothing');
      for (let i = 0; i < claimed.length; i++) run.times.push(ms / claimed.length);
      run.claimed += claimed.length;
      done = false;
    }
  }
  return runs.map((r) => ({ name: r.name, perStartMs: r.times }));
}

/** The lines a bench prints for `figures` (the first is the baseline the others are set against). */
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const pct = (xs: readonly number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((q / 100) * sorted.length))] ?? Number.NaN;
};

/**
 * Issue 39 #5's goal for a call start: with per-person limits on (a client with people, the
 * recipient linked), its p99 grows by at most 10 ms over a start with no checks.
 */
export function personP99Line(figures: readonly CheckFigures[]): string {
  const p99 = (prefix: string) => pct(figures.find((f) => f.name.startsWith(prefix))!.perStartMs, 99);
  const off = p99('off');
  const grows = (prefix: string) => `+${(p99(prefix) - off).toFixed(1)} ms`;
  const paced = p99('+ 1 limit, linked, read ahead, 10/s') - off;
  return (
    `call start p99 with per-person limits over no checks (goal ≤ +10 ms): linked, read at the start ${grows('+ 1 limit, client with people, linked')}; ` +
    `read ahead at 10 starts/s ${grows('+ 1 limit, linked, read ahead, 10/s')} — ${paced <= 10 ? 'met' : 'NOT met'}; ` +
    `read ahead back to back ${grows('+ 1 limit, linked, read ahead, back to back')} (no wait to read in)`
  );
}

export function checkLines(title: string, unit: string, figures: readonly CheckFigures[]): string[] {
  const base = mean(figures[0]!.perStartMs);
  const f = (x: number, d = 3) => x.toFixed(d);
  return [
    title,
    ...figures.map((fig) => {
      const m = mean(fig.perStartMs);
      const wcu = fig.items === undefined ? '' : `, ${fig.items} items = ${fig.items * 2} WCU`;
      return (
        `    ${fig.name.padEnd(36)} mean ${f(m)} ms/${unit}, p50 ${f(pct(fig.perStartMs, 50))}, p99 ${f(pct(fig.perStartMs, 99))}` +
        ` (${fig.perStartMs.length} ${unit}s${wcu}); ×${f(m / base, 2)} of off, +${f(m - base)} ms`
      );
    }),
  ];
}
