/**
 * A telephony provider sandbox that keeps the contract in `docs/telephony-provider.md`: calls
 * with idempotency keys, signed status callbacks, and faults injected at run time. It measures
 * from the far side what the broker must guarantee: no recipient rings twice for one attempt,
 * and a client never has more calls in flight, nor starts more per second, than its limits.
 *
 * Randomness is a hash of (seed, idempotency key, purpose), not a shared stream, so the same seed
 * gives every call the same outcome and faults whatever order concurrent requests arrive in.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CALLBACK_SIGNATURE_HEADER, signCallback } from '#shared/telephony/callback-signature.ts';
import type {
  CallSnapshot,
  CallStatus,
  FinalCallStatus,
  ReportedCallStatus,
} from '#shared/telephony/port.ts';
import { isFinal } from '#shared/telephony/port.ts';
import { CallLedger, START_WINDOW_MS } from './telephony-sandbox/ledger.ts';

export { START_WINDOW_MS };

/** Wall time and timers; inject a manual one to drive the sandbox without sleeping. */
export interface SandboxTime {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const realTime: SandboxTime = {
  now: () => Date.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** How a placed call ends up. */
export type SandboxOutcome = 'answered' | 'busy' | 'no-answer' | 'failed';

/** Relative weights of outcomes for numbers without an override (normalised, need not sum to 1). */
export interface OutcomeDistribution {
  readonly answered: number;
  readonly busy: number;
  readonly noAnswer: number;
  readonly failed: number;
}

/** A fixed value, or a uniform draw between `min` and `max` (inclusive, whole units). */
export type Range = number | { readonly min: number; readonly max: number };

/** What a given number does when called (tests force outcomes with these). */
export interface ScriptedCall {
  readonly outcome: SandboxOutcome;
  /** Talk time in call seconds, when answered. */
  readonly durationSeconds?: number;
  /** Ring time in call seconds before answer / busy / no-answer. */
  readonly ringSeconds?: number;
  /** `failed`'s reason (default `unreachable`). */
  readonly reason?: string;
}

/** Faults, changeable at run time with `setFaults`. Rates are probabilities in [0, 1]. */
export interface TelephonyFaults {
  /** Initiate answered 503 before any call is created. */
  readonly initiateErrorRate: number;
  /** A new call is placed (it rings) and then answered 500: the ambiguous failure. */
  readonly initiateErrorAfterCreateRate: number;
  /** Initiate answered 429 with `Retry-After: retryAfterSeconds`; nothing is created. */
  readonly rateLimitRate: number;
  readonly retryAfterSeconds: number;
  /** Wall ms the answer to an initiate is held after the call is placed (client timeouts). */
  readonly initiateDelayMs: number;
  /** A callback is never sent. */
  readonly callbackLossRate: number;
  /** Wall ms each callback waits before it is sent (late callbacks; a range also reorders them). */
  readonly callbackDelayMs: Range;
  /** A callback is sent twice. */
  readonly callbackDuplicateRate: number;
  /** A call's callbacks are held until it ends, then sent in a shuffled order. */
  readonly callbackReorderRate: number;
}

export const NO_FAULTS: TelephonyFaults = {
  initiateErrorRate: 0,
  initiateErrorAfterCreateRate: 0,
  rateLimitRate: 0,
  retryAfterSeconds: 1,
  initiateDelayMs: 0,
  callbackLossRate: 0,
  callbackDelayMs: 0,
  callbackDuplicateRate: 0,
  callbackReorderRate: 0,
};

export interface TelephonySandboxOptions {
  /** Secret the callbacks are signed with. */
  readonly callbackSecret: string;
  /** Bearer token the API requires (default `sandbox-token`). */
  readonly apiToken?: string;
  readonly seed?: number;
  /** Default 0.7 answered, 0.1 busy, 0.15 no answer, 0.05 failed. */
  readonly outcomes?: OutcomeDistribution;
  /** Talk time of answered calls, call seconds (default 20–180). */
  readonly durationSeconds?: Range;
  /** Ring time before answer, busy or no answer, call seconds (default 2–10). */
  readonly ringSeconds?: Range;
  /** Call seconds per wall second (default 1): 60 makes a 60 s call last 1 s. */
  readonly timeScale?: number;
  /** Forced behaviour per E.164 number. */
  readonly overrides?: Readonly<Record<string, ScriptedCall>>;
  readonly faults?: Partial<TelephonyFaults>;
  /** Attempts after the first for a callback that gets no 2xx (default 2). */
  readonly callbackRetries?: number;
  /** Wall ms between callback attempts (default 100). */
  readonly callbackRetryDelayMs?: number;
  readonly time?: SandboxTime;
  readonly port?: number;
}

/** One call actually placed: a phone rang (or at least was dialled). */
export interface RingRecord {
  readonly callId: string;
  readonly idempotencyKey: string;
  readonly clientId: string;
  readonly to: string;
  readonly taskId: string;
  readonly attempt: number;
  /** Wall ms. */
  readonly startedAt: number;
  /** Wall ms of the final event; absent while in flight. */
  readonly endedAt?: number;
  readonly outcome?: FinalCallStatus;
}

export type CallbackFate = 'pending' | 'delivered' | 'lost' | 'undeliverable';

/** One status event and what became of its callback. */
export interface CallbackRecord {
  readonly callId: string;
  readonly clientId: string;
  readonly status: ReportedCallStatus;
  readonly sequence: number;
  readonly fate: CallbackFate;
  /** 2 when the duplicate fault struck. */
  readonly copies: number;
  /** Posts answered 2xx. */
  readonly deliveries: number;
  /** Posts tried, retries included. */
  readonly attempts: number;
  /** Held and sent shuffled with the call's other callbacks. */
  readonly reordered: boolean;
}

export interface ClientStats {
  /** Calls placed. */
  readonly rings: number;
  readonly inFlight: number;
  readonly maxInFlight: number;
  /** Most calls started in any sliding window of 1 s of wall time. */
  readonly maxStartsPerSecond: number;
  readonly outcomes: Readonly<Record<FinalCallStatus, number>>;
  /** Phone number → task id → rings. */
  readonly ringsPerRecipient: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Number, task and attempt that rang more than once: must stay empty (invariant 1). */
  readonly repeatedRings: readonly { to: string; taskId: string; attempt: number; rings: number }[];
  readonly callbacks: {
    readonly events: number;
    readonly delivered: number;
    readonly lost: number;
    readonly duplicated: number;
    readonly undeliverable: number;
  };
}

export interface TelephonySandbox {
  /** Base URL of the API (`http://127.0.0.1:<port>`). */
  readonly url: string;
  readonly apiToken: string;
  stats(clientId: string): ClientStats;
  rings(): readonly RingRecord[];
  callbacks(): readonly CallbackRecord[];
  /** The sandbox's own view of a call (what `GET /calls/{id}` answers). */
  call(callId: string): CallSnapshot | undefined;
  setFaults(faults: Partial<TelephonyFaults>): void;
  setOverride(to: string, call: ScriptedCall | undefined): void;
  /** Work not yet done: scheduled timers (call events, late callbacks, retries, held answers), posts in flight. */
  pending(): { readonly timers: number; readonly callbacksInFlight: number };
  /** Resolves once nothing is pending (with a manual `time`, advance it first). */
  settled(): Promise<void>;
  /** Forgets every call, key and record, cancels pending work, restores the starting faults and overrides. */
  reset(): void;
  /** Cancels pending events and callbacks and closes the server. */
  stop(): Promise<void>;
}

interface CallState {
  readonly callId: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly callbackUrl: string;
  readonly ring: MutableRing;
  readonly reorder: boolean;
  readonly held: Array<{ body: string; record: MutableCallback }>;
  status: CallStatus;
  at: string;
  sequence: number;
  durationSeconds?: number;
  reason?: string;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type MutableRing = Mutable<RingRecord>;
type MutableCallback = Mutable<CallbackRecord>;

interface PlannedEvent {
  readonly status: ReportedCallStatus;
  readonly afterSeconds: number;
  readonly durationSeconds?: number;
  readonly reason?: string;
}

interface ValidRequest {
  readonly to: string;
  readonly clientId: string;
  readonly taskId: string;
  readonly attempt: number;
  readonly callbackUrl: string;
  readonly maxDurationSeconds: number;
}

const E164 = /^\+[1-9]\d{1,14}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_BODY_BYTES = 64 * 1024;
const CALLBACK_TIMEOUT_MS = 5_000;
const DEFAULT_OUTCOMES: OutcomeDistribution = { answered: 0.7, busy: 0.1, noAnswer: 0.15, failed: 0.05 };

class BadRequest extends Error {
  override name = 'BadRequest';
}

/** Starts the sandbox on 127.0.0.1 and a free port (unless `port` is given). */
export async function startTelephonySandbox(options: TelephonySandboxOptions): Promise<TelephonySandbox> {
  const time = options.time ?? realTime;
  const apiToken = options.apiToken ?? 'sandbox-token';
  const seed = options.seed ?? 1;
  const timeScale = options.timeScale ?? 1;
  if (!(timeScale > 0)) throw new RangeError(`timeScale must be > 0, got ${timeScale}`);
  const distribution = options.outcomes ?? DEFAULT_OUTCOMES;
  const durationRange = options.durationSeconds ?? { min: 20, max: 180 };
  const ringRange = options.ringSeconds ?? { min: 2, max: 10 };
  const callbackRetries = options.callbackRetries ?? 2;
  const callbackRetryDelayMs = options.callbackRetryDelayMs ?? 100;
  const startingFaults: TelephonyFaults = { ...NO_FAULTS, ...options.faults };
  const startingOverrides = { ...options.overrides };

  let faults = startingFaults;
  let overrides = new Map<string, ScriptedCall>(Object.entries(startingOverrides));
  let calls = new Map<string, CallState>();
  let byKey = new Map<string, CallState>();
  let requestsPerKey = new Map<string, number>();
  let ringLog: MutableRing[] = [];
  let callbackLog: MutableCallback[] = [];
  const ledger = new CallLedger();
  const timers = new Set<unknown>();
  const deliveries = new Set<AbortController>();
  const heldResponses = new Set<ServerResponse>();
  let waiters: Array<() => void> = [];
  let generation = 0;
  let stopped = false;

  /** A repeatable number in [0, 1) for this seed, key and purpose. */
  function draw(key: string, purpose: string): number {
    const digest = createHash('sha256').update(`${seed}|${key}|${purpose}`).digest();
    return digest.readUIntBE(0, 6) / 2 ** 48;
  }

  function pick(range: Range, key: string, purpose: string): number {
    if (typeof range === 'number') return range;
    return range.min + Math.floor(draw(key, purpose) * (range.max - range.min + 1));
  }

  function schedule(callback: () => void, ms: number): void {
    const mine = generation;
    const handle = time.setTimer(() => {
      timers.delete(handle);
      if (mine === generation && !stopped) callback();
      checkSettled();
    }, ms);
    timers.add(handle);
  }

  function checkSettled(): void {
    if (timers.size > 0 || deliveries.size > 0 || heldResponses.size > 0) return;
    const ready = waiters;
    waiters = [];
    for (const resolve of ready) resolve();
  }

  function cancelPending(): void {
    generation += 1;
    for (const handle of timers) time.clearTimer(handle);
    timers.clear();
    for (const controller of deliveries) controller.abort();
    deliveries.clear();
    for (const res of heldResponses) res.destroy();
    heldResponses.clear();
  }

  // ---- the call's life ------------------------------------------------------------------

  function outcomeFor(to: string, key: string): ScriptedCall {
    const scripted = overrides.get(to);
    if (scripted) return scripted;
    const { answered, busy, noAnswer, failed } = distribution;
    const total = answered + busy + noAnswer + failed;
    const r = draw(key, 'outcome') * total;
    if (r < answered) return { outcome: 'answered' };
    if (r < answered + busy) return { outcome: 'busy' };
    if (r < answered + busy + noAnswer) return { outcome: 'no-answer' };
    return { outcome: 'failed' };
  }

  function plan(request: ValidRequest, key: string): PlannedEvent[] {
    const scripted = outcomeFor(request.to, key);
    const ring = scripted.ringSeconds ?? pick(ringRange, key, 'ring');
    switch (scripted.outcome) {
      case 'failed':
        return [{ status: 'failed', afterSeconds: 0, reason: scripted.reason ?? 'unreachable' }];
      case 'busy':
        return [
          { status: 'ringing', afterSeconds: 0 },
          { status: 'busy', afterSeconds: ring },
        ];
      case 'no-answer':
        return [
          { status: 'ringing', afterSeconds: 0 },
          { status: 'no-answer', afterSeconds: ring },
        ];
      case 'answered': {
        const wanted = scripted.durationSeconds ?? pick(durationRange, key, 'duration');
        const talk = Math.min(wanted, request.maxDurationSeconds);
        return [
          { status: 'ringing', afterSeconds: 0 },
          { status: 'answered', afterSeconds: ring },
          {
            status: 'completed',
            afterSeconds: ring + talk,
            durationSeconds: talk,
            ...(talk < wanted ? { reason: 'max-duration' } : {}),
          },
        ];
      }
    }
  }

  function placeCall(request: ValidRequest, key: string, fingerprint: string): CallState {
    const startedAt = time.now();
    const ring: MutableRing = {
      callId: `CA${randomUUID().replaceAll('-', '')}`,
      idempotencyKey: key,
      clientId: request.clientId,
      to: request.to,
      taskId: request.taskId,
      attempt: request.attempt,
      startedAt,
    };
    const call: CallState = {
      callId: ring.callId,
      key,
      fingerprint,
      callbackUrl: request.callbackUrl,
      ring,
      reorder: draw(key, 'reorder') < faults.callbackReorderRate,
      held: [],
      status: 'queued',
      at: new Date(startedAt).toISOString(),
      sequence: 0,
    };
    calls.set(call.callId, call);
    byKey.set(key, call);
    ringLog.push(ring);
    ledger.start(request.clientId, startedAt);
    for (const event of plan(request, key)) {
      const happen = () => happenTo(call, event);
      if (event.afterSeconds === 0) happen();
      else schedule(happen, (event.afterSeconds * 1000) / timeScale);
    }
    return call;
  }

  function happenTo(call: CallState, event: PlannedEvent): void {
    const now = time.now();
    call.status = event.status;
    call.sequence += 1;
    call.at = new Date(now).toISOString();
    if (event.durationSeconds !== undefined) call.durationSeconds = event.durationSeconds;
    if (event.reason !== undefined) call.reason = event.reason;
    const final = isFinal(event.status);
    if (final) {
      call.ring.endedAt = now;
      call.ring.outcome = event.status as FinalCallStatus;
      ledger.end(call.ring.clientId);
    }
    const body = JSON.stringify(snapshotOf(call));
    const record: MutableCallback = {
      callId: call.callId,
      clientId: call.ring.clientId,
      status: event.status,
      sequence: call.sequence,
      fate: 'pending',
      copies: 1,
      deliveries: 0,
      attempts: 0,
      reordered: call.reorder,
    };
    callbackLog.push(record);
    if (!call.reorder) {
      dispatch(call, body, record);
      return;
    }
    call.held.push({ body, record });
    if (final) {
      const order = call.held
        .map((held) => ({ held, rank: draw(call.key, `order:${held.record.sequence}`) }))
        .sort((a, b) => a.rank - b.rank);
      call.held.length = 0;
      for (const { held } of order) dispatch(call, held.body, held.record);
    }
  }

  function snapshotOf(call: CallState): CallSnapshot {
    return {
      callId: call.callId,
      idempotencyKey: call.key,
      status: call.status,
      at: call.at,
      sequence: call.sequence,
      ...(call.durationSeconds === undefined ? {} : { durationSeconds: call.durationSeconds }),
      ...(call.reason === undefined ? {} : { reason: call.reason }),
    };
  }

  // ---- callbacks ------------------------------------------------------------------------

  function dispatch(call: CallState, body: string, record: MutableCallback): void {
    const purpose = `callback:${record.sequence}`;
    if (draw(call.key, `${purpose}:lose`) < faults.callbackLossRate) {
      record.fate = 'lost';
      return;
    }
    if (draw(call.key, `${purpose}:duplicate`) < faults.callbackDuplicateRate) record.copies = 2;
    let outstanding = record.copies;
    const copyDone = () => {
      outstanding -= 1;
      if (outstanding === 0 && record.deliveries === 0) record.fate = 'undeliverable';
    };
    for (let copy = 0; copy < record.copies; copy++) {
      const delay = pick(faults.callbackDelayMs, call.key, `${purpose}:delay:${copy}`);
      const send = () => post(call.callbackUrl, body, record, callbackRetries, copyDone);
      if (delay <= 0) send();
      else schedule(send, delay);
    }
  }

  function post(url: string, body: string, record: MutableCallback, retriesLeft: number, done: () => void) {
    const controller = new AbortController();
    deliveries.add(controller);
    record.attempts += 1;
    const signature = signCallback(options.callbackSecret, body, Math.floor(time.now() / 1000));
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [CALLBACK_SIGNATURE_HEADER]: signature },
      body,
      signal: AbortSignal.any([controller.signal, AbortSignal.timeout(CALLBACK_TIMEOUT_MS)]),
    })
      .then(async (response) => {
        await response.arrayBuffer();
        return response.ok;
      })
      .catch(() => false)
      .then((ok) => {
        const current = deliveries.delete(controller);
        if (ok) {
          record.deliveries += 1;
          record.fate = 'delivered';
          done();
        } else if (current && retriesLeft > 0 && !stopped) {
          schedule(() => post(url, body, record, retriesLeft - 1, done), callbackRetryDelayMs);
        } else {
          done();
        }
        checkSettled();
      });
  }

  // ---- HTTP -----------------------------------------------------------------------------

  function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    heldResponses.delete(res);
    if (res.destroyed || res.headersSent) return;
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  }

  function fail(
    res: ServerResponse,
    status: number,
    code: string,
    message: string,
    headers: Record<string, string> = {},
  ) {
    reply(res, status, { error: { code, message } }, headers);
  }

  async function readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) throw new BadRequest(`body larger than ${MAX_BODY_BYTES} bytes`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  async function initiate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || !UUID.test(key)) {
      throw new BadRequest('Idempotency-Key must be a UUID');
    }
    const raw = await readBody(req);
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new BadRequest('body is not JSON');
    }
    const request = validate(parsed);
    const n = (requestsPerKey.get(key) ?? 0) + 1;
    requestsPerKey.set(key, n);
    if (draw(key, `request:${n}:429`) < faults.rateLimitRate) {
      fail(res, 429, 'rate_limited', 'too many requests', {
        'retry-after': String(faults.retryAfterSeconds),
      });
      return;
    }
    if (draw(key, `request:${n}:503`) < faults.initiateErrorRate) {
      fail(res, 503, 'unavailable', 'injected fault: try again');
      return;
    }
    const fingerprint = canonical(parsed);
    const known = byKey.get(key);
    if (known) {
      if (known.fingerprint !== fingerprint) {
        fail(res, 422, 'idempotency_key_reused', 'this Idempotency-Key was used with a different request');
      } else {
        reply(res, 200, { callId: known.callId, status: known.status });
      }
      return;
    }
    const call = placeCall(request, key, fingerprint);
    if (draw(key, `request:${n}:500`) < faults.initiateErrorAfterCreateRate) {
      fail(res, 500, 'internal_error', 'injected fault after the call was placed');
      return;
    }
    const answer = { callId: call.callId, status: 'queued' };
    if (faults.initiateDelayMs > 0) {
      heldResponses.add(res);
      schedule(() => reply(res, 201, answer), faults.initiateDelayMs);
    } else {
      reply(res, 201, answer);
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://sandbox').pathname;
    if (req.headers.authorization !== `Bearer ${apiToken}`) {
      req.resume();
      fail(res, 401, 'unauthorized', 'missing or wrong bearer token');
      return;
    }
    if (path === '/calls') {
      if (req.method !== 'POST') return fail(res, 405, 'method_not_allowed', 'POST /calls only');
      return initiate(req, res);
    }
    const match = /^\/calls\/([^/]+)$/.exec(path);
    if (match) {
      if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'GET /calls/{callId} only');
      const call = calls.get(decodeURIComponent(match[1]!));
      if (!call) return fail(res, 404, 'call_not_found', 'no such call');
      return reply(res, 200, snapshotOf(call));
    }
    req.resume();
    fail(res, 404, 'not_found', `no route ${req.method} ${path}`);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (error instanceof BadRequest) fail(res, 400, 'invalid_request', error.message);
      else fail(res, 500, 'internal_error', 'the sandbox failed');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    apiToken,
    stats: (clientId) => statsOf(clientId, ringLog, callbackLog, ledger),
    rings: () => ringLog.map((ring) => ({ ...ring })),
    callbacks: () => callbackLog.map((record) => ({ ...record })),
    call: (callId) => {
      const call = calls.get(callId);
      return call && snapshotOf(call);
    },
    setFaults(change) {
      faults = { ...faults, ...change };
    },
    setOverride(to, call) {
      if (call) overrides.set(to, call);
      else overrides.delete(to);
    },
    pending: () => ({ timers: timers.size, callbacksInFlight: deliveries.size }),
    settled() {
      return new Promise<void>((resolve) => {
        waiters.push(resolve);
        checkSettled();
      });
    },
    reset() {
      cancelPending();
      faults = startingFaults;
      overrides = new Map(Object.entries(startingOverrides));
      calls = new Map();
      byKey = new Map();
      requestsPerKey = new Map();
      ringLog = [];
      callbackLog = [];
      ledger.clear();
      checkSettled();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      cancelPending();
      checkSettled();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function validate(body: unknown): ValidRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequest('body must be a JSON object');
  }
  const b = body as Record<string, unknown>;
  const text = (name: string) => {
    const value = b[name];
    if (typeof value !== 'string' || value === '') throw new BadRequest(`${name} must be a non-empty string`);
    return value;
  };
  const whole = (name: string) => {
    const value = b[name];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      throw new BadRequest(`${name} must be an integer ≥ 1`);
    }
    return value;
  };
  const to = text('to');
  if (!E164.test(to)) throw new BadRequest('to must be an E.164 number');
  if (b['from'] !== undefined && (typeof b['from'] !== 'string' || !E164.test(b['from']))) {
    throw new BadRequest('from must be an E.164 number');
  }
  const callbackUrl = text('callbackUrl');
  if (!URL.canParse(callbackUrl) || !/^https?:$/.test(new URL(callbackUrl).protocol)) {
    throw new BadRequest('callbackUrl must be an absolute http(s) URL');
  }
  const variables = b['variables'];
  if (
    typeof variables !== 'object' ||
    variables === null ||
    Array.isArray(variables) ||
    Object.values(variables).some((v) => typeof v !== 'string')
  ) {
    throw new BadRequest('variables must be an object of strings');
  }
  return {
    to,
    clientId: text('clientId'),
    taskId: text('taskId'),
    attempt: whole('attempt'),
    callbackUrl,
    maxDurationSeconds: whole('maxDurationSeconds'),
  };
}

/** JSON with object keys sorted at every depth: two bodies that mean the same compare equal. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function statsOf(
  clientId: string,
  rings: readonly RingRecord[],
  callbacks: readonly CallbackRecord[],
  ledger: CallLedger,
): ClientStats {
  const outcomes: Record<FinalCallStatus, number> = { completed: 0, busy: 0, 'no-answer': 0, failed: 0 };
  const perRecipient: Record<string, Record<string, number>> = {};
  const perAttempt = new Map<string, { to: string; taskId: string; attempt: number; rings: number }>();
  for (const ring of rings) {
    if (ring.clientId !== clientId) continue;
    if (ring.outcome) outcomes[ring.outcome] += 1;
    const tasks = perRecipient[ring.to] ?? {};
    perRecipient[ring.to] = tasks;
    tasks[ring.taskId] = (tasks[ring.taskId] ?? 0) + 1;
    const id = JSON.stringify([ring.to, ring.taskId, ring.attempt]);
    const entry = perAttempt.get(id) ?? { to: ring.to, taskId: ring.taskId, attempt: ring.attempt, rings: 0 };
    entry.rings += 1;
    perAttempt.set(id, entry);
  }
  const mine = callbacks.filter((record) => record.clientId === clientId);
  const counts = ledger.counts(clientId);
  return {
    rings: counts.starts,
    inFlight: counts.inFlight,
    maxInFlight: counts.maxInFlight,
    maxStartsPerSecond: counts.maxStartsPerWindow,
    outcomes,
    ringsPerRecipient: perRecipient,
    repeatedRings: [...perAttempt.values()].filter((entry) => entry.rings > 1),
    callbacks: {
      events: mine.length,
      delivered: mine.filter((r) => r.fate === 'delivered').length,
      lost: mine.filter((r) => r.fate === 'lost').length,
      duplicated: mine.filter((r) => r.copies > 1).length,
      undeliverable: mine.filter((r) => r.fate === 'undeliverable').length,
    },
  };
}
