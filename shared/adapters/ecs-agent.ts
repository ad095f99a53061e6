/**
 * Task protection through the ECS agent's endpoint inside a Fargate task:
 * `PUT $ECS_AGENT_URI/task-protection/v1/state` with `{"ProtectionEnabled", "ExpiresInMinutes"}`.
 * Each request has its own deadline, so a hung agent cannot hold up a shutdown. Without an agent
 * (a broker run outside ECS) protection is a logged no-op.
 */
import type { TaskProtectionPort } from '#shared/broker/task-protection.ts';
import { AdapterError } from './errors.ts';

export class TaskProtectionError extends AdapterError {}

export interface EcsAgentProtectionOptions {
  /** `ECS_AGENT_URI`; undefined outside ECS. */
  readonly agentUri: string | undefined;
  /** Per-request deadline, ms. Default 2,000. */
  readonly timeoutMs?: number;
  readonly fetch?: typeof fetch;
  /** Told once when there is no agent to ask. */
  readonly onNoAgent?: () => void;
}

/**
 * A {@link TaskProtectionPort} over the ECS agent endpoint; without an agent (outside ECS), one that
 * only says so, once.
 */
export function makeEcsAgentProtection(options: EcsAgentProtectionOptions): TaskProtectionPort {
  return options.agentUri
    ? new EcsAgentProtection(options.agentUri, options)
    : new NoAgentProtection(options.onNoAgent);
}

/** Protection asked of the ECS agent, each request with its own deadline. */
export class EcsAgentProtection implements TaskProtectionPort {
  readonly #url: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;

  constructor(agentUri: string, options: Pick<EcsAgentProtectionOptions, 'fetch' | 'timeoutMs'> = {}) {
    this.#url = `${agentUri.replace(/\/+$/, '')}/task-protection/v1/state`;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#timeoutMs = options.timeoutMs ?? 2_000;
  }

  async set(enabled: boolean, expiresInMinutes?: number): Promise<void> {
    const body = enabled
      ? { ProtectionEnabled: true, ExpiresInMinutes: expiresInMinutes }
      : { ProtectionEnabled: false };
    const response = await this.#fetch(this.#url, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    const text = await response.text();
    if (!response.ok) {
      throw new TaskProtectionError(`task protection answered ${response.status}: ${text.slice(0, 300)}`);
    }
    // The agent answers 200 with a `failure` object when ECS refused (e.g. TASK_NOT_VALID).
    try {
      const parsed = JSON.parse(text) as { failure?: { Reason?: string; reason?: string } };
      if (parsed.failure) {
        throw new TaskProtectionError(
          `task protection refused: ${parsed.failure.Reason ?? parsed.failure.reason ?? 'unknown'}`,
        );
      }
    } catch (error) {
      if (error instanceof TaskProtectionError) throw error;
    }
  }
}

/** No agent to ask (a broker run outside ECS): protection is a no-op, told once. */
class NoAgentProtection implements TaskProtectionPort {
  readonly #onNoAgent: (() => void) | undefined;
  #told = false;

  constructor(onNoAgent?: () => void) {
    this.#onNoAgent = onNoAgent;
  }

  async set(): Promise<void> {
    if (!this.#told) this.#onNoAgent?.();
    this.#told = true;
  }
}
