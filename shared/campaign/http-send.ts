/**
 * The pipeline's send port over undici's `Pool`: one pool of keep-alive connections sized to the
 * senders, reused request after request. At thousands of requests a second the transport is a
 * good part of a message's CPU: `fetch` (with an `AbortSignal.timeout` per request, as
 * `makeMessagingClient` uses) costs several times more per request and keeps a timer alive per
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
 */
export function makeHttpSend(options: HttpSendOptions): HttpSend {
  const base = new URL((options.baseUrl ?? DEFAULT_LINE_API_URL).replace(/\/+$/, ''));
  // Made at the first send after each close: a send still made with this port after `close()`
  // (a round that took its sender before a channel change) opens a new pool, as an agent would
  // open new sockets, instead of failing as "maybe delivered".
  let pool: Pool | undefined;
  const poolNow = () => {
    pool ??= new Pool(base.origin, {
      connections: options.maxSockets ?? 128,
      pipelining: 1,
      keepAliveTimeout: 30_000,
    });
    return pool;
  };
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const authorization = `Bearer ${options.channelAccessToken}`;
  const prefix = base.pathname === '/' ? '' : base.pathname;

  async function send(prepared: PreparedSend): Promise<SendOutcome> {
    if (prepared.endpoint === 'reply' || prepared.retryKey === undefined) {
      throw new InvalidSendRequestError('the message pipeline sends push and multicast with a retry key');
    }
    try {
      const answer = await poolNow().request({
        path: `${prefix}${ENDPOINT_PATHS[prepared.endpoint]}`,
        method: 'POST',
        headers: {
          authorization,
          'content-type': 'application/json',
          'x-line-retry-key': prepared.retryKey,
        },
        body: prepared.body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const text = await answer.body.text();
      // undici gives the headers lower-cased, as the classifier asks for them (no `Headers` a send).
      const headers = {
        get: (name: string) => {
          const value = answer.headers[name];
          return typeof value === 'string' ? value : null;
        },
      };
      return classifyResponse(answer.statusCode, headers, text, options.clock.now());
    } catch (error) {
      return failure(error as Error & { code?: string });
    }
  }

  /** LINE's validation endpoint for `endpoint`: its verdict, `unknown` when it gave none. */
  async function validate(
    endpoint: 'push' | 'multicast',
    messages: readonly OutgoingMessage[],
  ): Promise<MessageVerdict> {
    try {
      const answer = await poolNow().request({
        path: `${prefix}${VALIDATION_PATHS[endpoint]}`,
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ messages }),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      return validationVerdict(answer.statusCode, await answer.body.text());
    } catch (error) {
      return { kind: 'unknown', message: (error as Error).message };
    }
  }

  return {
    send: Object.assign(send, { validate: validate satisfies ValidatePort }),
    // Requests in flight and queued finish on the old pool; its connections close after them.
    close: () => {
      const closing = pool;
      pool = undefined;
      void closing?.close().catch(() => {});
    },
  };
}

/** undici's errors carry `code` on the error itself; the client's classifier reads it on `cause`. */
function failure(error: Error & { code?: string }): SendOutcome {
  if (error.code !== undefined && TIMEOUT_CODES.has(error.code))
    return classifyFailure({ name: 'TimeoutError', message: error.message });
  return classifyFailure({ name: error.name, message: error.message, cause: { code: error.code } });
}
