/**
 * The LINE sandbox's HTTP side: reads a request, lets the contract route it, lets the fault
 * injector strike, answers with `x-line-request-id` (or cuts the connection), and logs each one.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Clock } from '#shared/pacing/clock.ts';
import { listenLocally } from '../listen.ts';
import type { Answer } from './answers.ts';
import type { LineContract } from './contract.ts';
import type { Fault, FaultInjector } from './fault-injector.ts';
import type { SandboxRecords } from './records.ts';

export interface LineFrontDeps {
  readonly contract: LineContract;
  readonly faults: FaultInjector;
  readonly records: SandboxRecords;
  readonly clock: Clock;
}

/** One request, as the log will tell it. */
interface RequestState {
  readonly requestId: string;
  readonly method: string;
  readonly path: string;
  readonly retryKey: string | undefined;
  channelId: string | undefined;
  fault: Fault | undefined;
}

export interface ServedFront {
  readonly url: string;
  /** Drops every connection and stops listening. */
  close(): Promise<void>;
}

/** Handles the sandbox's HTTP requests over its contract and fault injector. */
export class LineFront {
  readonly #deps: LineFrontDeps;

  constructor(deps: LineFrontDeps) {
    this.#deps = deps;
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { contract, faults } = this.#deps;
    const request = describeRequest(req);
    const text = await readText(req);
    const admission = contract.admit(request.method, request.path, req.headers.authorization);
    request.channelId = admission.channelId;
    if (admission.kind === 'answered') return this.#answer(request, res, admission.answer);
    if (admission.kind === 'validate') return this.#validate(request, res, text);

    request.fault = faults.pick(admission.endpoint);
    const injected = await faults.before(request.fault);
    if (injected) return this.#answer(request, res, injected);
    const { channelId, endpoint } = admission;
    const { retryKey, requestId } = request;
    const result = contract.send({ channelId, endpoint, retryKey, text, requestId });
    if (request.fault?.kind === 'dropAfterDeliver') return this.#drop(request, req);
    this.#answer(request, res, result);
  }

  /** A validation request: only a fault queued for `validate` strikes it, never a random one. */
  async #validate(request: RequestState, res: http.ServerResponse, text: string): Promise<void> {
    const { contract, faults } = this.#deps;
    request.fault = faults.pickQueued('validate');
    const injected = await faults.before(request.fault);
    this.#answer(request, res, injected ?? contract.validate(text));
  }

  #answer(request: RequestState, res: http.ServerResponse, answer: Answer): void {
    this.#log(request, answer.status);
    if (res.destroyed) return;
    res.writeHead(answer.status, {
      'content-type': 'application/json',
      'x-line-request-id': request.requestId,
      ...answer.headers,
    });
    res.end(JSON.stringify(answer.body));
  }

  /** The request was handled (any delivery recorded), but the caller never learns it. */
  #drop(request: RequestState, req: http.IncomingMessage): void {
    this.#log(request, 'dropped');
    req.socket.destroy();
  }

  #log(request: RequestState, status: number | 'dropped'): void {
    const { method, path, channelId, requestId, retryKey, fault } = request;
    this.#deps.records.addRequest({
      at: this.#deps.clock.now(),
      method,
      path,
      channelId,
      status,
      requestId,
      retryKey,
      fault: fault?.kind,
    });
  }
}

/** Serves `front` on 127.0.0.1 (`port`, or a free one). */
export async function serveLineFront(front: LineFront, port: number): Promise<ServedFront> {
  const server = http.createServer((req, res) => {
    front.handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: `sandbox error: ${(error as Error).message}` }));
      }
    });
  });
  return listenLocally(server, port);
}

function describeRequest(req: http.IncomingMessage): RequestState {
  const retryKeyHeader = req.headers['x-line-retry-key'];
  return {
    requestId: randomUUID(),
    path: (req.url ?? '/').split('?')[0]!,
    method: req.method ?? 'GET',
    retryKey: Array.isArray(retryKeyHeader) ? retryKeyHeader.join(',') : retryKeyHeader,
    channelId: undefined,
    fault: undefined,
  };
}

async function readText(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
