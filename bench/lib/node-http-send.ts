/**
 * The baseline transport of bench/message-throughput: the pipeline's send port as it was before it
 * moved to undici's `Pool` (issue #16 item 2), Node's own HTTP client with a keep-alive agent, same
 * answers classified by the same rules. The bench runs the whole broker on it as "today's path".
 */
import http from 'node:http';
import https from 'node:https';
import type { HttpSend, HttpSendOptions } from '#shared/campaign/http-send.ts';
import {
  classifyFailure,
  classifyResponse,
  DEFAULT_LINE_API_URL,
  DEFAULT_TIMEOUT_MS,
  ENDPOINT_PATHS,
  InvalidSendRequestError,
  type PreparedSend,
  type SendOutcome,
} from '#shared/line/messaging-client.ts';

/** The same send port over `node:http` with a keep-alive agent. */
export function makeNodeHttpSend(options: HttpSendOptions): HttpSend {
  const base = new URL((options.baseUrl ?? DEFAULT_LINE_API_URL).replace(/\/+$/, ''));
  const secure = base.protocol === 'https:';
  const transport = secure ? https : http;
  const agent = new transport.Agent({
    keepAlive: true,
    maxSockets: options.maxSockets ?? 128,
    maxFreeSockets: options.maxSockets ?? 128,
    scheduling: 'lifo',
  });
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const authorization = `Bearer ${options.channelAccessToken}`;
  const prefix = base.pathname === '/' ? '' : base.pathname;

  function send(prepared: PreparedSend): Promise<SendOutcome> {
    if (prepared.endpoint === 'reply' || prepared.retryKey === undefined) {
      return Promise.reject(
        new InvalidSendRequestError('the message pipeline sends push and multicast with a retry key'),
      );
    }
    const body = Buffer.from(prepared.body, 'utf8');
    return new Promise<SendOutcome>((resolve) => {
      let settled = false;
      const done = (outcome: SendOutcome) => {
        if (settled) return;
        settled = true;
        resolve(outcome);
      };
      const req = transport.request(
        {
          agent,
          protocol: base.protocol,
          hostname: base.hostname,
          port: base.port || (secure ? 443 : 80),
          path: `${prefix}${ENDPOINT_PATHS[prepared.endpoint]}`,
          method: 'POST',
          headers: {
            authorization,
            'content-type': 'application/json',
            'content-length': body.length,
            'x-line-retry-key': prepared.retryKey,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const headers = new Headers();
            for (const name of ['x-line-request-id', 'x-line-accepted-request-id', 'retry-after']) {
              const value = res.headers[name];
              if (typeof value === 'string') headers.set(name, value);
            }
            done(
              classifyResponse(
                res.statusCode ?? 0,
                headers,
                Buffer.concat(chunks).toString('utf8'),
                options.clock.now(),
              ),
            );
          });
          res.on('error', (error) => done(failure(error)));
        },
      );
      req.setTimeout(timeoutMs, () => {
        const error = new Error('the request timed out');
        error.name = 'TimeoutError';
        req.destroy(error);
      });
      req.on('error', (error) => done(failure(error)));
      req.end(body);
    });
  }

  return { send, close: () => agent.destroy() };
}

/** Node's errors carry `code` on the error itself; the client's classifier reads it on `cause`. */
function failure(error: Error & { code?: string }): SendOutcome {
  if (error.name === 'TimeoutError') return classifyFailure(error);
  return classifyFailure({ name: error.name, message: error.message, cause: { code: error.code } });
}
