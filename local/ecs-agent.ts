/**
 * The ECS agent's task-protection endpoint, locally: one HTTP server on 127.0.0.1, a base URI
 * per broker (`{url}/brokers/{brokerId}`, handed to the broker as `ECS_AGENT_URI`), and
 * `PUT|GET {ECS_AGENT_URI}/task-protection/v1/state` answered in the agent's own shapes:
 *
 * - success: `200 {"protection":{"ExpirationDate","ProtectionEnabled","TaskArn"}}`
 *   (`ExpirationDate` an RFC 3339 time, `null` when protection is off);
 * - errors: `{"requestID"?, "error":{"Arn"?,"Code","Message"}}` — 400 `InvalidParameterException`
 *   for a body that does not decode (bad JSON, wrong types, unknown fields), lacks
 *   `ProtectionEnabled`, or asks for `ExpiresInMinutes` outside 1–2,880; 404
 *   `ResourceNotFoundException` for a task the agent does not know.
 *
 * Protection without `ExpiresInMinutes` lasts 120 minutes, and lapses on its own at expiry, as
 * ECS's does. The local fleet asks {@link EcsAgentEndpoint.isProtected} before stopping a broker.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '#shared/pacing/clock.ts';

export const DEFAULT_PROTECTION_MINUTES = 120;
export const MAX_PROTECTION_MINUTES = 2880;
const PATH_RE = /^\/brokers\/([^/]+)\/task-protection\/v1\/state$/;

export interface ProtectionState {
  readonly enabled: boolean;
  /** Epoch ms; undefined when off. */
  readonly expiresAt: number | undefined;
}

/** One accepted `PUT`, for tests and drills that check when a broker protected itself. */
export interface ProtectionUpdate {
  readonly brokerId: string;
  readonly at: number;
  readonly enabled: boolean;
  readonly expiresInMinutes: number | undefined;
}

export interface EcsAgentOptions {
  readonly clock?: Clock;
  readonly port?: number;
  /** Cluster name in the local task ARNs. */
  readonly cluster?: string;
}

export interface EcsAgentEndpoint {
  /** Base URL of the server, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Registers a broker (its "task") and returns its `ECS_AGENT_URI`. */
  register(brokerId: string): string;
  /** Forgets a broker whose process ended; its URI then answers 404. */
  forget(brokerId: string): void;
  /** The task ARN the agent reports for a broker. */
  taskArn(brokerId: string): string;
  /** The broker's protection now (expired protection reads as off). */
  protection(brokerId: string): ProtectionState;
  isProtected(brokerId: string): boolean;
  /** Every accepted update, in order. */
  readonly updates: readonly ProtectionUpdate[];
  /** The next `count` requests (any broker) answer `status` with a ServerException, for drills. */
  failNext(count: number, status?: number): void;
  stop(): Promise<void>;
}

interface AgentError {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly arn?: string;
}

/** Starts the endpoint on 127.0.0.1 (a free port unless `port` is given). */
export async function startEcsAgent(options: EcsAgentOptions = {}): Promise<EcsAgentEndpoint> {
  const agent = new TaskProtectionAgent(options);
  const server = createServer((req, res) => {
    agent.handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) fail(res, { status: 500, code: 'ServerException', message: String(error) });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    register: (brokerId) => agent.register(brokerId, url),
    forget: (brokerId) => void agent.forget(brokerId),
    taskArn: (brokerId) => agent.taskArn(brokerId),
    protection: (brokerId) => agent.stateOf(brokerId),
    isProtected: (brokerId) => agent.stateOf(brokerId).enabled,
    updates: agent.updates,
    failNext(count, status = 500) {
      agent.failNext(count, status);
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface TaskState {
  readonly enabled: boolean;
  readonly expiresAt: number | undefined;
}

/** A decoded `PUT` body. */
interface ProtectionRequest {
  readonly enabled: boolean;
  readonly minutes: number | undefined;
}

/** The agent's tasks (one per broker), their protection, and the task-protection API over them. */
class TaskProtectionAgent {
  /** Every accepted update, in order (handed out as is: it grows). */
  readonly updates: ProtectionUpdate[] = [];
  readonly #clock: Clock;
  readonly #cluster: string;
  readonly #tasks = new Map<string, TaskState>();
  #failures: { count: number; status: number } = { count: 0, status: 500 };

  constructor(options: EcsAgentOptions) {
    this.#clock = options.clock ?? { now: () => Date.now() };
    this.#cluster = options.cluster ?? 'switchboard-local';
  }

  /** Registers a broker's task (protection off) unless known; its `ECS_AGENT_URI` under `url`. */
  register(brokerId: string, url: string): string {
    if (!this.#tasks.has(brokerId)) this.#tasks.set(brokerId, { enabled: false, expiresAt: undefined });
    return `${url}/brokers/${encodeURIComponent(brokerId)}`;
  }

  forget(brokerId: string): boolean {
    return this.#tasks.delete(brokerId);
  }

  taskArn(brokerId: string): string {
    return `arn:aws:ecs:us-east-1:000000000000:task/${this.#cluster}/${encodeURIComponent(brokerId)}`;
  }

  /** The broker's protection now: expired protection reads as off. */
  stateOf(brokerId: string): ProtectionState {
    const task = this.#tasks.get(brokerId);
    if (!task?.enabled || task.expiresAt === undefined || this.#clock.now() >= task.expiresAt) {
      return { enabled: false, expiresAt: undefined };
    }
    return { enabled: true, expiresAt: task.expiresAt };
  }

  failNext(count: number, status: number): void {
    this.#failures = { count, status };
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readText(req);
    const match = PATH_RE.exec(new URL(req.url ?? '/', 'http://agent').pathname);
    if (!match || (req.method !== 'GET' && req.method !== 'PUT')) {
      return send(res, 404, { error: { Code: 'NotFound', Message: 'no such route' } });
    }
    const brokerId = decodeURIComponent(match[1]!);
    if (!this.#tasks.has(brokerId)) {
      return fail(res, {
        status: 404,
        code: 'ResourceNotFoundException',
        message: 'Invalid request: no task was found',
      });
    }
    const arn = this.taskArn(brokerId);
    const injected = this.#injectedFailure(arn);
    if (injected) return fail(res, injected);
    if (req.method === 'GET') return send(res, 200, this.#protectionBody(brokerId));

    const update = parseUpdate(raw, arn);
    if ('status' in update) return fail(res, update);
    this.#protect(brokerId, update);
    return send(res, 200, this.#protectionBody(brokerId));
  }

  /** The next failure `failNext` asked for, if any is left. */
  #injectedFailure(arn: string): AgentError | undefined {
    if (this.#failures.count <= 0) return undefined;
    this.#failures = { ...this.#failures, count: this.#failures.count - 1 };
    return { status: this.#failures.status, code: 'ServerException', message: 'injected fault', arn };
  }

  #protect(brokerId: string, update: ProtectionRequest): void {
    const now = this.#clock.now();
    this.#tasks.set(brokerId, {
      enabled: update.enabled,
      expiresAt: update.enabled ? now + (update.minutes ?? DEFAULT_PROTECTION_MINUTES) * 60_000 : undefined,
    });
    this.updates.push({ brokerId, at: now, enabled: update.enabled, expiresInMinutes: update.minutes });
  }

  #protectionBody(brokerId: string) {
    const state = this.stateOf(brokerId);
    return {
      protection: {
        ExpirationDate: state.expiresAt === undefined ? null : new Date(state.expiresAt).toISOString(),
        ProtectionEnabled: state.enabled,
        TaskArn: this.taskArn(brokerId),
      },
    };
  }
}

const decodeFailure: AgentError = {
  status: 400,
  code: 'InvalidParameterException',
  message: 'UpdateTaskProtection: failed to decode request',
};

/** The agent decodes strictly: unknown fields and wrong types are refused before anything else. */
function parseUpdate(raw: string, arn: string): AgentError | ProtectionRequest {
  const fields = decodeFields(raw);
  if (fields === undefined) return decodeFailure;
  if (typeof fields.ProtectionEnabled !== 'boolean') {
    return {
      status: 400,
      code: 'InvalidParameterException',
      message: "Invalid request: does not contain 'ProtectionEnabled' field",
      arn,
    };
  }
  const minutes = typeof fields.ExpiresInMinutes === 'number' ? fields.ExpiresInMinutes : undefined;
  if (minutes !== undefined && (minutes < 1 || minutes > MAX_PROTECTION_MINUTES)) {
    return {
      status: 400,
      code: 'InvalidParameterException',
      message: `The expiresInMinutes value must be between 1 and ${MAX_PROTECTION_MINUTES}.`,
      arn,
    };
  }
  return { enabled: fields.ProtectionEnabled, minutes };
}

/** The body's fields (none for an empty body or `null`); undefined when it does not decode. */
function decodeFields(raw: string): Record<string, unknown> | undefined {
  let body: unknown;
  try {
    body = raw.trim() === '' ? null : JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (body !== null && (typeof body !== 'object' || Array.isArray(body))) return undefined;
  const fields = (body ?? {}) as Record<string, unknown>;
  for (const [key, value] of Object.entries(fields)) {
    if (key === 'ProtectionEnabled' && typeof value !== 'boolean' && value !== null) return undefined;
    if (key === 'ExpiresInMinutes' && !(value === null || Number.isInteger(value))) return undefined;
    if (key !== 'ProtectionEnabled' && key !== 'ExpiresInMinutes') return undefined;
  }
  return fields;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function fail(res: ServerResponse, error: AgentError): void {
  send(res, error.status, {
    requestID: randomUUID(),
    error: { ...(error.arn ? { Arn: error.arn } : {}), Code: error.code, Message: error.message },
  });
}

async function readText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
