/**
 * The telephony port over HTTP, speaking the contract in `docs/telephony-provider.md`. One
 * `initiate` is one HTTP request: retries, backoff and pacing are the broker's, because only the
 * broker knows the client's limits. Node's global fetch pools keep-alive connections per origin,
 * so a busy broker does not pay a TCP/TLS handshake per call.
 */
import type { CallRequest, CallSnapshot, InitiateOutcome, TelephonyProvider } from './port.ts';
import { TelephonyRequestError, TelephonyUnavailableError } from './port.ts';
import { parseCallSnapshot } from './status-event.ts';

export interface HttpTelephonyProviderOptions {
  /** The provider's API base, e.g. `https://api.provider.example/v1` (no trailing `/calls`). */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer <apiToken>` (read per request when a function: a stored, rotatable token). */
  readonly apiToken: string | (() => Promise<string>);
  /** For `Retry-After` given as an HTTP date. */
  readonly clock: { now(): number };
  /** Per-request deadline, body included (default 5,000 ms); past it the outcome is `retryable`. */
  readonly timeoutMs?: number;
  /** Defaults to the global fetch. */
  readonly fetch?: typeof fetch;
}

const DEFAULT_TIMEOUT_MS = 5_000;
const DEFAULT_RETRY_AFTER_MS = 1_000;

/**
 * The request body in a fixed field order, variables sorted by name: the same request always
 * gives the same bytes, so a retry after a crash or a timeout is byte-identical to the first try
 * and the provider recognises it under the same idempotency key. (`jobId` and the ring timeout
 * are not part of the contract's body: the job is in the callback URL.)
 */
export function serialiseCallRequest(request: CallRequest): string {
  const variables: Record<string, string> = {};
  for (const name of Object.keys(request.variables).sort()) variables[name] = request.variables[name]!;
  return JSON.stringify({
    to: request.to,
    ...(request.from === undefined ? {} : { from: request.from }),
    clientId: request.clientId,
    taskId: request.taskId,
    attempt: request.attempt,
    callbackUrl: request.callbackUrl,
    maxDurationSeconds: request.maxDurationSeconds,
    variables,
  });
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
}

/**
 * A {@link TelephonyProvider} that talks to `baseUrl` over HTTP.
 *
 * @example
 * const provider = new HttpTelephonyProvider({ baseUrl, apiToken, clock });
 * const outcome = await provider.initiate(request, idempotencyKey);
 */
export class HttpTelephonyProvider implements TelephonyProvider {
  readonly #base: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #token: HttpTelephonyProviderOptions['apiToken'];
  readonly #clock: { now(): number };

  constructor(options: HttpTelephonyProviderOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#token = options.apiToken;
    this.#clock = options.clock;
  }

  async initiate(request: CallRequest, idempotencyKey: string): Promise<InitiateOutcome> {
    const answer = await this.#send(`${this.#base}/calls`, {
      method: 'POST',
      headers: {
        authorization: await this.#authorization(),
        'content-type': 'application/json',
        'idempotency-key': idempotencyKey,
      },
      body: serialiseCallRequest(request),
    });
    if (typeof answer === 'string') return { kind: 'retryable', reason: answer };
    return initiateOutcome(answer, this.#clock);
  }

  async getCall(callId: string): Promise<CallSnapshot | undefined> {
    const answer = await this.#send(`${this.#base}/calls/${encodeURIComponent(callId)}`, {
      method: 'GET',
      headers: { authorization: await this.#authorization() },
    });
    if (typeof answer === 'string') throw new TelephonyUnavailableError(answer);
    const { status } = answer;
    if (status === 200) return parseCallSnapshot(answer.body);
    if (status === 404) return undefined;
    const { code, message } = errorOf(answer);
    if (status === 429 || isRetryableStatus(status)) {
      throw new TelephonyUnavailableError(`HTTP ${status} ${code}: ${message}`);
    }
    throw new TelephonyRequestError(status, code, message);
  }

  async #authorization(): Promise<string> {
    const token = this.#token;
    return `Bearer ${typeof token === 'string' ? token : await token()}`;
  }

  /** One request; a transport failure comes back as a string saying why. */
  async #send(url: string, init: RequestInit): Promise<Answer | string> {
    try {
      const response = await this.#fetch(url, { ...init, signal: AbortSignal.timeout(this.#timeoutMs) });
      // Reading the whole body frees the connection for reuse, even when we ignore it.
      const text = await response.text();
      let body: unknown;
      try {
        body = text === '' ? undefined : JSON.parse(text);
      } catch {
        body = undefined;
      }
      return { status: response.status, headers: response.headers, body };
    } catch (error) {
      return transportFailure(error, this.#timeoutMs);
    }
  }
}

/** What the provider's answer to a call request means. */
function initiateOutcome(answer: Answer, clock: { now(): number }): InitiateOutcome {
  const { status, body } = answer;
  if (status === 200 || status === 201) {
    const callId = (body as { callId?: unknown } | undefined)?.callId;
    // A success we cannot read is as ambiguous as a timeout: the retry (same key) returns the call.
    if (typeof callId !== 'string' || callId === '') {
      return { kind: 'retryable', reason: `HTTP ${status} without a callId` };
    }
    return { kind: 'accepted', callId, duplicate: status === 200 };
  }
  if (status === 429) {
    return { kind: 'rate-limited', retryAfterMs: retryAfterMs(answer.headers, clock) };
  }
  if (isRetryableStatus(status)) {
    const { code } = errorOf(answer);
    return { kind: 'retryable', reason: `HTTP ${status} ${code}` };
  }
  const { code, message } = errorOf(answer);
  return { kind: 'rejected', status, code, message };
}

/** 5xx, and the 4xx that mean "not now" rather than "never": request timeout, key in use. */
function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 409;
}

function errorOf(answer: Answer): { code: string; message: string } {
  const error = (answer.body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return {
    code: typeof error?.code === 'string' ? error.code : `http_${answer.status}`,
    message: typeof error?.message === 'string' ? error.message : `HTTP ${answer.status}`,
  };
}

function retryAfterMs(headers: Headers, clock: { now(): number }): number {
  const value = headers.get('retry-after')?.trim();
  if (!value) return DEFAULT_RETRY_AFTER_MS;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return DEFAULT_RETRY_AFTER_MS;
  return Math.max(0, date - clock.now());
}

/** Why a request got no answer (a timeout, a reset, a refused connection), for an outcome's reason. */
export function transportFailure(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  const code = typeof cause?.code === 'string' ? cause.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return code ? `${message} (${code})` : message;
}
