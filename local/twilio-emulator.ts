/**
 * A Twilio Programmable Voice emulator: the 2010-04-01 REST API's call operations as Twilio
 * serves them (form-encoded bodies, HTTP Basic auth with the account SID and auth token, JSON
 * answers and Twilio's error body), in front of the shared far side:
 * - `POST /2010-04-01/Accounts/{Sid}/Calls.json` places a call, every time: like Twilio, it has no
 *   idempotency key, so a repeated create rings again (the far side counts it, and the drills
 *   assert it never happens); it answers the call `queued` (Twilio has not started dialling);
 * - `GET …/Calls.json?To=&From=&PageSize=` lists calls newest first; `GET …/Calls/{Sid}.json`
 *   fetches one; `POST …/Calls/{Sid}.json` with `Status=completed|canceled` ends one;
 * - status callbacks go to each call's `StatusCallback` for the `StatusCallbackEvent`s asked for,
 *   form-encoded and signed with `X-Twilio-Signature` (HMAC-SHA1 of the URL and sorted
 *   parameters), with `SequenceNumber` (the call's callbacks counted from 0: `initiated`, sent at the
 *   create when asked for, is 0) and an RFC 2822 `Timestamp`; with `MachineDetection`, a
 *   call an answering machine took completes with `AnsweredBy=machine_end_beep`.
 * The account's calls per second are modelled: a create above them answers with the `queue_time`
 * Twilio would report. The far side's faults apply: 429 (20429), 5xx before and after the call is
 * created (the ambiguous create), slow answers, lost, late, duplicated and reordered callbacks.
 *
 * Not reproduced: TwiML (an answered call "talks" for the far side's duration), the ring delay a
 * queued call really has (only its `queue_time` is reported), API keys, subaccounts, paging past
 * the first page, Twilio's eventual consistency, and callbacks other than call progress.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { attemptKey } from '#shared/retry-keys.ts';
import { rfc2822, TWILIO_SIGNATURE_HEADER, twilioSignature } from '#shared/telephony/twilio.ts';
import {
  FarSide,
  type FarSideCall,
  type FarSideEvent,
  type FarSideOptions,
  type TelephonyEmulator,
} from './telephony-sandbox/far-side.ts';
import {
  answer,
  canonical,
  FrontError,
  postOnce,
  readBody,
  serveFront,
} from './telephony-sandbox/http-front.ts';

/** The account the local stack's Twilio clients use. */
export const LOCAL_TWILIO = {
  accountSid: 'AC5a1e5b0a2d0c0a1c0a0c0a1c0a0c0a1c',
  authToken: '1c0a0c0a1c0a0c0a5a1e5b0a2d0c0a1c',
  from: '+815000000001',
  voiceUrl: 'https://voicebot.example/twiml',
} as const;

export interface TwilioAccount {
  readonly authToken: string;
  /** Caller ids the account may use (`From`). */
  readonly numbers: readonly string[];
}

export interface TwilioEmulatorOptions extends FarSideOptions {
  /** Accounts by SID (default: {@link LOCAL_TWILIO}'s). */
  readonly accounts?: Readonly<Record<string, TwilioAccount>>;
  /** The account's calls per second; creates above it are queued (default 1,000: no queue). */
  readonly callsPerSecond?: number;
  readonly port?: number;
}

const E164 = /^\+[1-9]\d{1,14}$/;
/** Twilio ends an unanswered call after 60 s unless `Timeout` says otherwise. */
const DEFAULT_TIMEOUT_SECONDS = 60;
/** Twilio's default `TimeLimit`: 4 hours. */
const DEFAULT_TIME_LIMIT_SECONDS = 4 * 3600;

interface CallFacts {
  readonly accountSid: string;
  readonly to: string;
  readonly from: string;
  readonly createdAt: number;
  readonly queueMs: number;
  readonly amd: boolean;
}

function twilioError(status: number, code: number, message: string): FrontError {
  return new FrontError(status, {
    code,
    message,
    more_info: `https://www.twilio.com/docs/errors/${code}`,
    status,
  });
}

export async function startTwilioEmulator(options: TwilioEmulatorOptions = {}): Promise<TelephonyEmulator> {
  const front = new TwilioFront(options);
  const served = await serveFront(
    (req, res) => front.handle(req, res),
    { code: 20500, message: 'Internal Server Error', status: 500 },
    options.port,
  );
  const view = front.far.emulatorView(served.url, async () => {
    front.abortInitiated();
    await served.close();
  });
  // The `initiated` callbacks are the front's own, outside the far side's scripted events.
  return {
    ...view,
    pending: () => {
      const far = view.pending();
      return { ...far, callbacksInFlight: far.callbacksInFlight + front.initiatedInFlight };
    },
  };
}

/** Twilio's call operations and status callbacks, over the far side. */
class TwilioFront {
  readonly far: FarSide;
  readonly #accounts: Readonly<Record<string, TwilioAccount>>;
  readonly #intervalMs: number;
  readonly #facts = new Map<string, CallFacts>();
  /** `initiated` callbacks on the wire (they are not the far side's: see {@link #initiated}). */
  readonly #initiatedPosts = new Set<AbortController>();
  /** Call SIDs in creation order. */
  readonly #order: string[] = [];
  #nextDialAt = 0;
  #unkeyed = 0;

  constructor(options: TwilioEmulatorOptions) {
    this.far = new FarSide(options);
    this.#accounts = options.accounts ?? {
      [LOCAL_TWILIO.accountSid]: { authToken: LOCAL_TWILIO.authToken, numbers: [LOCAL_TWILIO.from] },
    };
    this.#intervalMs = 1000 / (options.callsPerSecond ?? 1000);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://twilio');
    const route = /^\/2010-04-01\/Accounts\/([^/]+)\/Calls(?:\/([^/]+))?\.json$/.exec(url.pathname);
    if (!route) throw twilioError(404, 20404, `The requested resource ${url.pathname} was not found`);
    const accountSid = decodeURIComponent(route[1]!);
    const account = this.#authenticate(req, accountSid);
    const body = await readBody(req, { code: 21000, message: 'request too large', status: 400 });
    const form = new URLSearchParams(body);
    const sid = route[2] === undefined ? undefined : decodeURIComponent(route[2]);
    if (sid === undefined && req.method === 'POST') return this.#create(res, accountSid, account, form);
    if (sid === undefined && req.method === 'GET') return this.#list(res, accountSid, url.searchParams);
    if (sid !== undefined && req.method === 'GET')
      return answer(res, 200, this.#resource(this.#known(accountSid, sid)));
    if (sid !== undefined && req.method === 'POST')
      return this.#update(res, this.#known(accountSid, sid), form);
    throw twilioError(405, 20004, `Method ${req.method} not allowed`);
  }

  #authenticate(req: IncomingMessage, accountSid: string): TwilioAccount {
    const header = req.headers.authorization ?? '';
    const decoded = header.startsWith('Basic ')
      ? Buffer.from(header.slice(6), 'base64').toString('utf8')
      : '';
    const colon = decoded.indexOf(':');
    const user = decoded.slice(0, colon);
    const account = this.#accounts[accountSid];
    if (colon < 0 || !account || user !== accountSid || decoded.slice(colon + 1) !== account.authToken) {
      throw twilioError(401, 20003, 'Authenticate');
    }
    return account;
  }

  #known(accountSid: string, sid: string): FarSideCall {
    const call = this.far.call(sid);
    if (!call || this.#facts.get(sid)?.accountSid !== accountSid) {
      throw twilioError(404, 20404, `The requested resource /Calls/${sid}.json was not found`);
    }
    return call;
  }

  #create(res: ServerResponse, accountSid: string, account: TwilioAccount, form: URLSearchParams): void {
    const { to, from, timeout, timeLimit } = createParameters(account, form);
    const callback = form.get('StatusCallback') ?? undefined;
    const attempt = attemptOf(callback);
    // Test instrumentation, not Twilio: the attempt Switchboard named in the callback URL, so the
    // far side can count a second ring of one attempt. Twilio itself keys nothing.
    const key = attempt?.key ?? `unkeyed-${++this.#unkeyed}`;
    const fault = this.far.startFault(key);
    if (fault === 'throttled') throw twilioError(429, 20429, 'Too Many Requests');
    if (fault === 'unavailable') throw twilioError(503, 20503, 'Service Unavailable (injected)');
    const now = this.far.time.now();
    const queueMs = this.#queueForDial(now);
    const events = new Set(form.getAll('StatusCallbackEvent'));
    if (events.size === 0) events.add('completed');
    // SequenceNumber counts the callbacks a call fires, from 0: `initiated`, when asked for, is 0.
    const callbacks = { next: 0 };
    const initiated = callback && events.has('initiated') ? callbacks.next++ : undefined;
    const facts: CallFacts = {
      accountSid,
      to,
      from,
      createdAt: now,
      queueMs,
      amd: form.get('MachineDetection') === 'Enable' || form.get('MachineDetection') === 'DetectMessageEnd',
    };
    const call = this.far.place({
      key,
      fingerprint: canonical(Object.fromEntries(form)),
      clientId: attempt?.clientId ?? 'unknown',
      to,
      taskId: attempt?.taskId ?? key,
      attempt: attempt?.attempt ?? 1,
      maxDurationSeconds: timeLimit,
      ringTimeoutSeconds: timeout,
      ...(callback ? { tell: this.#tell(callback, events, facts, account.authToken, callbacks) } : {}),
    });
    this.#facts.set(call.callId, facts);
    this.#order.push(call.callId);
    if (fault.failAfterCreate)
      throw twilioError(500, 20500, 'Internal Server Error (injected after the call was created)');
    if (callback && initiated !== undefined)
      this.#initiated(callback, facts, call.callId, account.authToken, initiated);
    // Twilio answers a create with the call queued: it has not started dialling yet.
    const created = { ...this.#resource(call), status: 'queued', start_time: null };
    if (this.far.faults.initiateDelayMs > 0) {
      this.far.holdAnswer(res, this.far.faults.initiateDelayMs, () => answer(res, 201, created));
    } else answer(res, 201, created);
  }

  /** How long a call created now waits in the queue: calls are dialled at `callsPerSecond`, one at a time. */
  #queueForDial(now: number): number {
    const queueMs = Math.max(0, this.#nextDialAt - now);
    this.#nextDialAt = Math.max(now, this.#nextDialAt) + this.#intervalMs;
    return queueMs;
  }

  #list(res: ServerResponse, accountSid: string, query: URLSearchParams): void {
    const to = query.get('To');
    const from = query.get('From');
    const pageSize = Math.min(1000, Math.max(1, Number(query.get('PageSize') ?? 50) || 50));
    const calls = [...this.#order]
      .reverse()
      .filter((sid) => {
        const facts = this.#facts.get(sid)!;
        return facts.accountSid === accountSid && (!to || facts.to === to) && (!from || facts.from === from);
      })
      .slice(0, pageSize)
      .map((sid) => this.#resource(this.far.call(sid)!));
    const uri = `/2010-04-01/Accounts/${accountSid}/Calls.json?${query}`;
    answer(res, 200, {
      calls,
      first_page_uri: uri,
      next_page_uri: null,
      previous_page_uri: null,
      page: 0,
      page_size: pageSize,
      start: 0,
      end: Math.max(0, calls.length - 1),
      uri,
    });
  }

  #update(res: ServerResponse, call: FarSideCall, form: URLSearchParams): void {
    const status = form.get('Status');
    if (status !== 'completed' && status !== 'canceled') throw twilioError(400, 21218, 'Invalid Status');
    if (!this.far.hangUp(call.callId, 'ended by the API')) {
      throw twilioError(400, 21220, 'Call is not in-progress. Cannot redirect.');
    }
    answer(res, 200, this.#resource(call));
  }

  /** The Call resource as Twilio answers it (`Calls/{Sid}.json`). */
  #resource(call: FarSideCall): Record<string, unknown> {
    const facts = this.#facts.get(call.callId)!;
    const now = call.snapshot;
    const final = !['queued', 'ringing', 'answered'].includes(now.status);
    return {
      sid: call.callId,
      account_sid: facts.accountSid,
      to: facts.to,
      to_formatted: facts.to,
      from: facts.from,
      from_formatted: facts.from,
      status: wireStatus(now.status),
      direction: 'outbound-api',
      api_version: '2010-04-01',
      date_created: rfc2822(facts.createdAt),
      date_updated: rfc2822(Date.parse(now.at)),
      start_time: now.status === 'queued' ? null : rfc2822(call.startedAt),
      end_time: final ? rfc2822(Date.parse(now.at)) : null,
      duration: final ? String(now.durationSeconds ?? 0) : null,
      answered_by: facts.amd && final ? (call.machine ? 'machine_end_beep' : 'human') : null,
      queue_time: String(facts.queueMs),
      price: null,
      price_unit: 'USD',
      parent_call_sid: null,
      uri: `/2010-04-01/Accounts/${facts.accountSid}/Calls/${call.callId}.json`,
    };
  }

  /**
   * The `initiated` callback (Twilio has handed the call to its carrier and starts dialling), sent
   * once when the create asked for it, numbered before every later callback of the call.
   */
  #initiated(
    callbackUrl: string,
    facts: CallFacts,
    callId: string,
    authToken: string,
    sequence: number,
  ): void {
    const params = callbackParams(
      facts,
      callId,
      'initiated',
      sequence,
      new Date(this.far.time.now()).toISOString(),
    );
    const controller = new AbortController();
    this.#initiatedPosts.add(controller);
    void postOnce(
      callbackUrl,
      {
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          [TWILIO_SIGNATURE_HEADER]: twilioSignature(authToken, callbackUrl, params),
          'i-twilio-idempotency-token': `${callId}-initiated`,
        },
        body: new URLSearchParams(params).toString(),
      },
      controller.signal,
    )
      .catch(() => false)
      .finally(() => this.#initiatedPosts.delete(controller));
  }

  /** `initiated` callbacks not answered yet. */
  get initiatedInFlight(): number {
    return this.#initiatedPosts.size;
  }

  /** Stops the `initiated` callbacks on the wire (the emulator is stopping). */
  abortInitiated(): void {
    for (const controller of this.#initiatedPosts) controller.abort();
    this.#initiatedPosts.clear();
  }

  /** Each status event the create asked for is POSTed, signed, to its `StatusCallback`. */
  #tell(
    callbackUrl: string,
    events: ReadonlySet<string>,
    facts: CallFacts,
    authToken: string,
    callbacks: { next: number },
  ) {
    return (event: FarSideEvent, call: FarSideCall) => {
      const name =
        event.status === 'ringing' ? 'ringing' : event.status === 'answered' ? 'answered' : 'completed';
      if (!events.has(name)) return async () => true;
      const params = callbackParams(facts, call.callId, wireStatus(event.status), callbacks.next++, event.at);
      if (name === 'completed' && event.durationSeconds !== undefined) {
        params.push(
          ['CallDuration', String(event.durationSeconds)],
          ['Duration', String(Math.ceil(event.durationSeconds / 60))],
        );
      }
      if (name === 'completed' && facts.amd && call.answeredAt !== undefined) {
        params.push(['AnsweredBy', event.machine ? 'machine_end_beep' : 'human']);
      }
      if (event.status === 'no-answer') params.push(['SipResponseCode', '487']);
      if (event.status === 'failed') params.push(['SipResponseCode', '404']);
      const body = new URLSearchParams(params).toString();
      const signature = twilioSignature(authToken, callbackUrl, params);
      return (signal: AbortSignal) =>
        postOnce(
          callbackUrl,
          {
            headers: {
              'content-type': 'application/x-www-form-urlencoded',
              [TWILIO_SIGNATURE_HEADER]: signature,
              'i-twilio-idempotency-token': `${call.callId}-${event.sequence}`,
            },
            body,
          },
          signal,
        );
    };
  }
}

/** The parameters every call-progress callback carries. */
function callbackParams(
  facts: CallFacts,
  callId: string,
  callStatus: string,
  sequence: number,
  at: string,
): [string, string][] {
  return [
    ['AccountSid', facts.accountSid],
    ['ApiVersion', '2010-04-01'],
    ['CallSid', callId],
    ['CallStatus', callStatus],
    ['Called', facts.to],
    ['Caller', facts.from],
    ['CallbackSource', 'call-progress-events'],
    ['Direction', 'outbound-api'],
    ['From', facts.from],
    ['SequenceNumber', String(sequence)],
    ['Timestamp', rfc2822(Date.parse(at))],
    ['To', facts.to],
  ];
}

/** Switchboard's status as Twilio writes it (`voicemail` is a completed call). */
function wireStatus(status: string): string {
  if (status === 'answered') return 'in-progress';
  if (status === 'voicemail') return 'completed';
  return status;
}

/** The attempt a Switchboard callback URL names (client, job, task, attempt), if it names one. */
function attemptOf(callbackUrl: string | undefined) {
  if (!callbackUrl) return undefined;
  try {
    const query = new URL(callbackUrl).searchParams;
    const jobId = query.get('job');
    const taskId = query.get('task');
    const attempt = Number(query.get('attempt'));
    if (!jobId || !taskId || !Number.isInteger(attempt) || attempt < 1) return undefined;
    return {
      clientId: query.get('client') ?? 'unknown',
      taskId,
      attempt,
      key: attemptKey(jobId, taskId, attempt),
    };
  } catch {
    return undefined;
  }
}

/** A create's parameters, checked as Twilio checks them: each refusal with Twilio's error code. */
function createParameters(
  account: TwilioAccount,
  form: URLSearchParams,
): { to: string; from: string; timeout: number; timeLimit: number } {
  const to = form.get('To');
  const from = form.get('From');
  if (!to) throw twilioError(400, 21201, "No 'To' number is specified");
  if (!E164.test(to)) throw twilioError(400, 21211, `The 'To' number ${to} is not a valid phone number.`);
  if (!from) throw twilioError(400, 21213, "No 'From' number is specified");
  if (!account.numbers.includes(from)) {
    throw twilioError(
      400,
      21210,
      `The source phone number provided, ${from}, is not yet verified for your account.`,
    );
  }
  if (!form.get('Url') && !form.get('ApplicationSid') && !form.get('Twiml')) {
    throw twilioError(400, 21205, 'Url parameter is required.');
  }
  const timeout = Number(form.get('Timeout') ?? DEFAULT_TIMEOUT_SECONDS);
  const timeLimit = Number(form.get('TimeLimit') ?? DEFAULT_TIME_LIMIT_SECONDS);
  if (!Number.isInteger(timeout) || timeout < 1 || timeout > 600)
    throw twilioError(400, 21219, 'Timeout must be 1 to 600');
  if (!Number.isInteger(timeLimit) || timeLimit < 1)
    throw twilioError(400, 21219, 'TimeLimit must be a positive integer');
  return { to, from, timeout, timeLimit };
}
