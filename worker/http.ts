/**
 * The broker's small HTTP server: where the call-status route nudges it when a call ends
 * (`POST /calls/ended {jobId, taskId, callId}`), where the operator API tells it a job was paused
 * or cancelled (`POST /jobs/changed {clientId, jobId}`: answered once no new send of the job will
 * start), and a health answer for operators. Nudges are only hints: the broker acts on what the
 * store says.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Broker } from '#shared/broker/broker.ts';
import type { CallEnded } from '#shared/broker/ports.ts';
import type { Logger } from '#shared/log.ts';
import type { BrokerConfig } from './config.ts';

const MAX_BODY_BYTES = 4096;

export interface BrokerHttpServer {
  /** `http://host:port` as bound. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

export interface JobChanged {
  readonly clientId: string;
  readonly jobId: string;
}

export interface BrokerHttpHandlers {
  callEnded(ended: CallEnded): Promise<void>;
  /** Resolves once the job's status is read and, if it is not running, its sends are stopped. */
  jobChanged?(changed: JobChanged): Promise<void>;
  health(): Record<string, unknown>;
  onError?(error: unknown): void;
}

function parseCallEnded(text: string): CallEnded | undefined {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    if (typeof body.jobId !== 'string' || typeof body.taskId !== 'string') return undefined;
    return {
      jobId: body.jobId,
      taskId: body.taskId,
      ...(typeof body.callId === 'string' ? { callId: body.callId } : {}),
    };
  } catch {
    return undefined;
  }
}

function parseJobChanged(text: string): JobChanged | undefined {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    if (typeof body.clientId !== 'string' || typeof body.jobId !== 'string') return undefined;
    return { clientId: body.clientId, jobId: body.jobId };
  } catch {
    return undefined;
  }
}

/** Starts the server on `host:port` (port 0: a free one). */
export async function startBrokerHttpServer(
  handlers: BrokerHttpHandlers,
  options: { host: string; port: number },
): Promise<BrokerHttpServer> {
  const server = http.createServer((req, res) => {
    const reply = (status: number, body?: unknown) => {
      if (res.headersSent) return;
      res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    if (req.method === 'GET' && req.url === '/health') return reply(200, handlers.health());
    const route = req.method === 'POST' ? req.url : undefined;
    if (route !== '/calls/ended' && route !== '/jobs/changed') return reply(404, { message: 'not found' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reply(413, { message: 'body too large' });
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (route === '/jobs/changed') {
        const changed = parseJobChanged(text);
        if (!changed) return reply(400, { message: 'expected {clientId, jobId}' });
        // Answered after the broker acted: the operator's pause returns once no new send starts.
        return void (handlers.jobChanged?.(changed) ?? Promise.resolve()).then(
          () => reply(204),
          (error: unknown) => {
            handlers.onError?.(error);
            reply(500, { message: 'not handled' });
          },
        );
      }
      const ended = parseCallEnded(text);
      if (!ended) return reply(400, { message: 'expected {jobId, taskId, callId}' });
      // Answer at once: the route must not wait for our store read.
      reply(202);
      handlers.callEnded(ended).catch((error: unknown) => handlers.onError?.(error));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host === '0.0.0.0' ? '127.0.0.1' : options.host;
  return {
    url: `http://${host}:${port}`,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The broker's server on `httpHost:httpPort`, its routes answered by the broker once there is one
 * (`current`): the server starts first, as the lease must advertise where it listens.
 */
export function startNudgeServer(
  config: Pick<BrokerConfig, 'broker' | 'httpHost' | 'httpPort'>,
  logger: Logger,
  current: () => Broker | undefined,
): Promise<BrokerHttpServer> {
  const { brokerId, version } = config.broker;
  const handlers: BrokerHttpHandlers = {
    callEnded: (ended) => current()?.callEnded(ended) ?? Promise.resolve(),
    jobChanged: (changed) => current()?.jobChanged(changed.clientId, changed.jobId) ?? Promise.resolve(),
    health: () => {
      const broker = current();
      return {
        brokerId,
        version,
        clientId: broker?.clientId ?? null,
        inFlight: broker?.inFlight ?? 0,
        stopping: broker?.stopReason ?? null,
      };
    },
    onError: (error) => logger.warn('call-ended nudge not handled', { error }),
  };
  return startBrokerHttpServer(handlers, { host: config.httpHost, port: config.httpPort });
}
