/**
 * What every emulator's front needs from HTTP: a server on 127.0.0.1 and a free port, bounded
 * body reading, answers that survive a client that went away, and a close that drops idle
 * keep-alive connections. The protocol (paths, shapes, errors) is the front's own.
 */

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { LocalCloudError } from '../errors.ts';
import { listenLocally } from '../listen.ts';

const MAX_BODY_BYTES = 64 * 1024;

/** A request the front refuses as the provider would (its `status` and body are the front's). */
export class FrontError extends LocalCloudError {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Readonly<Record<string, string>>;
  constructor(status: number, body: unknown, headers: Readonly<Record<string, string>> = {}) {
    super(`HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

export interface Front {
  readonly url: string;
  close(): Promise<void>;
}

/** Sends `body` as JSON unless the client went away or an answer was already sent. */
export function answer(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** The whole body as text; a {@link FrontError} (400, `tooLarge`) past 64 KiB. */
export async function readBody(req: IncomingMessage, tooLarge: unknown): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new FrontError(400, tooLarge);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Serves `handle` on 127.0.0.1 (`port`, or a free one). A thrown {@link FrontError} is answered as
 * it says; anything else is `internalError`'s answer (the provider's 500).
 */
export async function serveFront(
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  internalError: unknown,
  port = 0,
): Promise<Front> {
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (error instanceof FrontError) answer(res, error.status, error.body, error.headers);
      else answer(res, 500, internalError);
    });
  });
  server.keepAliveTimeout = 60_000;
  return listenLocally(server, port);
}

/** JSON with object keys sorted at every depth: two bodies that mean the same compare equal. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** POSTs one delivery; true on a 2xx. The body is read to free the connection. */
export async function postOnce(
  url: string,
  init: { headers: Record<string, string>; body: string },
  signal: AbortSignal,
  timeoutMs = 5_000,
): Promise<boolean> {
  const response = await fetch(url, {
    method: 'POST',
    headers: init.headers,
    body: init.body,
    signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
  });
  await response.arrayBuffer();
  return response.ok;
}
