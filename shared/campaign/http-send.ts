/**
 * The pipeline's send port over undici's `Pool`: one pool of keep-alive connections sized to the
 * senders, reused request after request. At thousands of requests a second the transport is a
 * good part of a message's CPU: `fetch` (with an `AbortSignal.timeout` per request, as
 * `MessagingApiClient` uses) costs several times more per request and keeps a timer alive per
 * request for the whole timeout; `node:http` with a keep-alive agent about 75 µs of CPU a request,
 * undici's `Pool.request` about 30 (`docs/cost.md`, "Broker CPU").
 * Answers are classified by the Messaging API client's own rules (`classifyResponse` /
 * `classifyFailure`), so both transports mean the same by every {@link SendOutcome}: only a
 * connection that was never made says the message did not reach LINE.
 */
import { Pool } from 'undici';
import {
  classifyFailure,
  classifyResponse,
  DEFAULT_LINE_API_URL,
  DEFAULT_TIMEOUT_MS,
  ENDPOINT_PATHS,
  InvalidSendRequestError,
  type MessageVerdict,
  type OutgoingMessage,
  type PreparedSend,
  type SendOutcome,
  VALIDATION_PATHS,
  validationVerdict,
} from '#shared/line/messaging-client.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { SendPort, ValidatePort } from './ports.ts';

export interface HttpSendOptions {
  readonly channelAccessToken: string;
  /** Default LINE's API; the sandbox's URL locally. */
  readonly baseUrl?: string;
  /** Connections kept open; size it to the pipeline's concurrency. Default 128. */
  readonly maxSockets?: number;
  /** Time allowed for the answer's headers, and between two pieces of its body. Default 10 s. */
  readonly timeoutMs?: number;
  /** Reads an HTTP-date `Retry-After`. */
  readonly clock: Clock;
}

export interface HttpSend {
  readonly send: SendPort;
  /** Closes the pooled connections. */
  close(): void;
}

/** undici's own timeouts: the request went out, no (whole) answer came back in time. */
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * A keep-alive send port for push and multicast (never reply: it has no retry key to resend with),
 * with the channel's validation endpoints as its `validate`.
 *
 * @example
 * const http = new PooledHttpSend({ channelAccessToken, clock });
 * const outcome = await http.send(prepared);
 * http.close();
 */
export class PooledHttpSend implements HttpSend {
  readonly send: SendPort;
  readonly #origin: string;
  readonly #prefix: string;
  readonly #connections: number;
  readonly #timeoutMs: number;
  readonly #authorization: string;
  readonly #clock: Clock;
  // Made at the first send after each close: a send still made with this port after `close()`
  // (a round that took its sender before a channel change) opens a new pool, as an agent would
  // open new sockets, instead of failing as "maybe delivered".
  #pool: Pool | undefined;

  constructor(options: HttpSendOptions) {
    const base = new URL((options.baseUrl ?? DEFAULT_LINE_API_URL).replace(/\/+$/, ''));
    this.#origin = base.origin;
    this.#prefix = base.pathname === '/' ? '' : base.pathname;
    this.#connections = options.maxSockets ?? 128;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#authorization = `Bearer ${options.channelAccessToken}`;
    this.#clock = options.clock;
    const validate: ValidatePort = (endpoint, messages) => this.#validate(endpoint, messages);
    this.send = Object.assign((prepared: PreparedSend) => this.#send(prepared), { validate });
  }

  /** Closes the pooled connections: requests in flight and queued finish on the old pool first. */
  close(): void {
    const closing = this.#pool;
    this.#pool = undefined;
    void closing?.close().catch(() => {});
  }

  #poolNow(): Pool {
    this.#pool ??= new Pool(this.#origin, {
      connections: this.#connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
    });
    return this.#pool;
  }

  /** POSTs `body` to `path` under the base URL, within the timeouts. */
  #post(path: string, headers: Record<string, string>, body: string) {
    return this.#poolNow().request({
      path: `${this.#prefix}${path}`,
      method: 'POST',
      headers: { authorization: this.#authorization, 'content-type': 'application/json', ...headers },
      body,
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
    });
  }

  async #send(prepared: PreparedSend): Promise<SendOutcome> {
    if (prepared.endpoint === 'reply' || prepared.retryKey === undefined) {
      throw new InvalidSendRequestError('the message pipeline sends push and multicast with a retry key');
    }
    try {
      const answer = await this.#post(
        ENDPOINT_PATHS[prepared.endpoint],
        { 'x-line-retry-key': prepared.retryKey },
        prepared.body,
      );
      const text = await answer.body.text();
      // undici gives the headers lower-cased, as the classifier asks for them (no `Headers` a send).
      const headers = {
        get: (name: string) => {
          const value = answer.headers[name];
          return typeof value === 'string' ? value : null;
        },
      };
      return classifyResponse(answer.statusCode, headers, text, this.#clock.now());
    } catch (error) {
      return failure(error as Error & { code?: string });
    }
  }

  /** LINE's validation endpoint for `endpoint`: its verdict, `unknown` when it gave none. */
  async #validate(
    endpoint: 'push' | 'multicast',
    messages: readonly OutgoingMessage[],
  ): Promise<MessageVerdict> {
    try {
      const answer = await this.#post(VALIDATION_PATHS[endpoint], {}, JSON.stringify({ messages }));
      return validationVerdict(answer.statusCode, await answer.body.text());
    } catch (error) {
      return { kind: 'unknown', message: (error as Error).message };
    }
  }
}

/** undici's errors carry `code` on the error itself; the client's classifier reads it on `cause`. */
function failure(error: Error & { code?: string }): SendOutcome {
  if (error.code !== undefined && TIMEOUT_CODES.has(error.code))
    return classifyFailure({ name: 'TimeoutError', message: error.message });
  return classifyFailure({ name: error.name, message: error.message, cause: { code: error.code } });
}
