/**
 * The telephony sandbox: the HTTP contract in `docs/telephony-provider.md` (calls with idempotency
 * keys, signed status callbacks) served in front of the shared far side
 * (`telephony-sandbox/far-side.ts`), which rings the calls, injects the faults and counts what the
 * broker must guarantee. The Connect and Twilio emulators are other fronts on the same far side.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CALLBACK_SIGNATURE_HEADER, signCallback } from '#shared/telephony/callback-signature.ts';
import { FarSide, type FarSideOptions, type TelephonyEmulator } from './telephony-sandbox/far-side.ts';
import {
  answer,
  canonical,
  FrontError,
  postOnce,
  readBody,
  serveFront,
} from './telephony-sandbox/http-front.ts';

export {
  type CallbackFate,
  type CallbackRecord,
  type ClientStats,
  NO_FAULTS,
  type OutcomeDistribution,
  type Range,
  type RingRecord,
  realTime,
  type SandboxOutcome,
  type SandboxTime,
  type ScriptedCall,
  type TelephonyEmulator,
  type TelephonyFaults,
} from './telephony-sandbox/far-side.ts';
export { START_WINDOW_MS } from './telephony-sandbox/ledger.ts';

export interface TelephonySandboxOptions extends FarSideOptions {
  /** Secret the callbacks are signed with. */
  readonly callbackSecret: string;
  /** Bearer token the API requires (default `sandbox-token`). */
  readonly apiToken?: string;
  readonly port?: number;
}

export interface TelephonySandbox extends TelephonyEmulator {
  readonly apiToken: string;
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

function error(code: string, message: string) {
  return { error: { code, message } };
}

function badRequest(message: string): FrontError {
  return new FrontError(400, error('invalid_request', message));
}

/** Starts the sandbox on 127.0.0.1 and a free port (unless `port` is given). */
export async function startTelephonySandbox(options: TelephonySandboxOptions): Promise<TelephonySandbox> {
  const front = new SandboxFront(options);
  const served = await serveFront(
    (req, res) => front.handle(req, res),
    error('internal_error', 'the sandbox failed'),
    options.port,
  );
  return { ...front.far.emulatorView(served.url, () => served.close()), apiToken: front.apiToken };
}

/** The HTTP contract's two operations (start a call, read a call) and its callbacks, over the far side. */
class SandboxFront {
  readonly apiToken: string;
  readonly far: FarSide;
  readonly #options: TelephonySandboxOptions;

  constructor(options: TelephonySandboxOptions) {
    this.#options = options;
    this.apiToken = options.apiToken ?? 'sandbox-token';
    this.far = new FarSide(options);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://sandbox').pathname;
    if (req.headers.authorization !== `Bearer ${this.apiToken}`) {
      req.resume();
      return answer(res, 401, error('unauthorized', 'missing or wrong bearer token'));
    }
    if (path === '/calls') {
      if (req.method !== 'POST') return answer(res, 405, error('method_not_allowed', 'POST /calls only'));
      return this.#initiate(req, res);
    }
    const match = /^\/calls\/([^/]+)$/.exec(path);
    if (match) {
      if (req.method !== 'GET') {
        return answer(res, 405, error('method_not_allowed', 'GET /calls/{callId} only'));
      }
      const call = this.far.call(decodeURIComponent(match[1]!));
      if (!call) return answer(res, 404, error('call_not_found', 'no such call'));
      return answer(res, 200, call.snapshot);
    }
    req.resume();
    answer(res, 404, error('not_found', `no route ${req.method} ${path}`));
  }

  /**
   * `POST /calls`: an injected fault strikes first; a known Idempotency-Key answers its call (422
   * when the request differs); else the call is placed.
   */
  async #initiate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { key, parsed, request } = await readInitiate(req);
    const far = this.far;
    const fault = far.startFault(key);
    if (fault === 'throttled') {
      return answer(res, 429, error('rate_limited', 'too many requests'), {
        'retry-after': String(far.faults.retryAfterSeconds),
      });
    }
    if (fault === 'unavailable') return answer(res, 503, error('unavailable', 'injected fault: try again'));
    const fingerprint = canonical(parsed);
    const known = far.byKey(key);
    if (known) {
      if (known.fingerprint !== fingerprint) {
        return answer(
          res,
          422,
          error('idempotency_key_reused', 'this Idempotency-Key was used with a different request'),
        );
      }
      return answer(res, 200, { callId: known.callId, status: known.snapshot.status });
    }
    const call = far.place({ ...request, key, fingerprint, tell: this.#tellTo(request.callbackUrl) });
    if (fault.failAfterCreate) {
      return answer(res, 500, error('internal_error', 'injected fault after the call was placed'));
    }
    const placed = { callId: call.callId, status: 'queued' };
    if (far.faults.initiateDelayMs > 0) {
      far.holdAnswer(res, far.faults.initiateDelayMs, () => answer(res, 201, placed));
    } else {
      answer(res, 201, placed);
    }
  }

  /** Each status event is POSTed to the call's callback URL, signed when it is sent. */
  #tellTo(callbackUrl: string) {
    return (event: object) => {
      const body = JSON.stringify(withoutMachine(event));
      return (signal: AbortSignal) =>
        postOnce(
          callbackUrl,
          {
            headers: {
              'content-type': 'application/json',
              [CALLBACK_SIGNATURE_HEADER]: signCallback(
                this.#options.callbackSecret,
                body,
                Math.floor(this.far.time.now() / 1000),
              ),
            },
            body,
          },
          signal,
        );
    };
  }
}

/** A `POST /calls` request's Idempotency-Key and body, checked (a 400 {@link FrontError} otherwise). */
async function readInitiate(
  req: IncomingMessage,
): Promise<{ key: string; parsed: unknown; request: ValidRequest }> {
  const key = req.headers['idempotency-key'];
  if (typeof key !== 'string' || !UUID.test(key)) throw badRequest('Idempotency-Key must be a UUID');
  const raw = await readBody(req, error('invalid_request', 'body larger than 65536 bytes'));
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw badRequest('body is not JSON');
  }
  return { key, parsed, request: validate(parsed) };
}

/** The contract's callback body: the snapshot's fields, not the far side's own `machine` flag. */
function withoutMachine(event: object): object {
  const { machine: _machine, ...body } = event as { machine?: boolean };
  return body;
}

function validate(body: unknown): ValidRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('body must be a JSON object');
  }
  const b = body as Record<string, unknown>;
  const text = (name: string) => {
    const value = b[name];
    if (typeof value !== 'string' || value === '') throw badRequest(`${name} must be a non-empty string`);
    return value;
  };
  const whole = (name: string) => {
    const value = b[name];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      throw badRequest(`${name} must be an integer ≥ 1`);
    }
    return value;
  };
  const to = text('to');
  if (!E164.test(to)) throw badRequest('to must be an E.164 number');
  if (b['from'] !== undefined && (typeof b['from'] !== 'string' || !E164.test(b['from']))) {
    throw badRequest('from must be an E.164 number');
  }
  const callbackUrl = text('callbackUrl');
  if (!URL.canParse(callbackUrl) || !/^https?:$/.test(new URL(callbackUrl).protocol)) {
    throw badRequest('callbackUrl must be an absolute http(s) URL');
  }
  const variables = b['variables'];
  if (
    typeof variables !== 'object' ||
    variables === null ||
    Array.isArray(variables) ||
    Object.values(variables).some((v) => typeof v !== 'string')
  ) {
    throw badRequest('variables must be an object of strings');
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
