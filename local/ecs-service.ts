/**
 * The broker service, locally: a stand-in for one ECS service on Fargate that keeps brokers
 * running as child processes (`node worker/main.ts`). It is the job manager's
 * {@link EcsServiceScaler} here, as `UpdateService` is on AWS, and it behaves as ECS does:
 *
 * - `setDesiredCount(n)` starts brokers up to `n`; a broker that exits is replaced while the
 *   service wants it (with a growing delay when brokers keep dying before they are ready);
 * - scale-in stops only brokers that are not protected (asked of the local ECS agent at that
 *   moment): SIGTERM, then SIGKILL after the stop timeout (120 s, Fargate's maximum). When every
 *   surplus broker is protected it waits, and tries again on every pass;
 * - `deploy(version)` rolls the service: new-version brokers start (up to twice the desired
 *   count, like `maximumPercent` 200), the desired version is published so old brokers drain on
 *   their own, and an old broker is stopped only once the new ones are ready and only while it is
 *   unprotected — a protected broker is never sent SIGTERM by a deploy or a scale-in;
 * - `kill(brokerId, signal)` is for drills (a crash, an OOM kill).
 *
 * Every stop is recorded with whether the broker was protected at that moment, so a drill can
 * assert that no broker with calls in flight was stopped by the service.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { brokerV8Flags } from '#shared/broker/runtime.ts';
import type { EcsServiceScaler } from '#shared/fleet/ports.ts';
import type { EcsAgentEndpoint } from './ecs-agent.ts';
import { LocalCloudError } from './errors.ts';
import { brokerRecording } from './iam/recorder.ts';

/** Fargate's longest wait between SIGTERM and SIGKILL. */
export const DEFAULT_STOP_TIMEOUT_MS = 120_000;
const ROOT = path.resolve(import.meta.dirname, '..');

export type BrokerState = 'starting' | 'ready' | 'stopping' | 'exited';
export type StopReason = 'scale-in' | 'deploy' | 'kill' | 'shutdown';

export interface BrokerInfo {
  readonly brokerId: string;
  readonly version: string;
  readonly pid: number | undefined;
  readonly state: BrokerState;
  /** From the broker's ready line. */
  readonly httpUrl: string | undefined;
  readonly agentUri: string;
  readonly startedAt: number;
}

/** A signal the service (or a drill) sent to a broker. */
export interface BrokerStop {
  readonly brokerId: string;
  readonly version: string;
  readonly reason: StopReason;
  readonly signal: NodeJS.Signals;
  /** Whether the broker held task protection when the signal was sent. */
  readonly protected: boolean;
  readonly at: number;
}

export interface BrokerExit {
  readonly brokerId: string;
  readonly version: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** True when the stop timeout ran out and the service sent SIGKILL. */
  readonly forced: boolean;
  readonly at: number;
}

export interface LocalFleetOptions {
  readonly agent: EcsAgentEndpoint;
  /** Environment of every broker (cloud endpoints, tables, telephony, `LEASE_MS`…). */
  readonly env: Readonly<Record<string, string>>;
  /** Version of the brokers started now; `deploy` changes it. */
  readonly version: string;
  /** Extra environment for one broker (drills: a broker that ignores SIGTERM). */
  readonly envFor?: (brokerId: string, version: string) => Readonly<Record<string, string>>;
  /** The broker entry module, relative to `cwd`. Default `worker/main.ts`. */
  readonly script?: string;
  /** Default: the repository root. */
  readonly cwd?: string;
  /** SIGTERM to SIGKILL. Default {@link DEFAULT_STOP_TIMEOUT_MS}. */
  readonly stopTimeoutMs?: number;
  /** How often the service re-checks its brokers (protection may have been released). Default 250 ms. */
  readonly reconcileIntervalMs?: number;
  /** Publishes the desired broker version (the work list's `desiredVersion`) on a deploy. */
  readonly onDeploy?: (version: string) => Promise<void>;
  /** Every line a broker prints (besides its ready line). */
  readonly onOutput?: (brokerId: string, line: string, stream: 'stdout' | 'stderr') => void;
}

interface Broker {
  readonly brokerId: string;
  readonly version: string;
  readonly child: ChildProcess;
  readonly agentUri: string;
  readonly startedAt: number;
  state: BrokerState;
  httpUrl: string | undefined;
  killTimer: NodeJS.Timeout | undefined;
  forced: boolean;
  exited: Promise<void>;
}

export class InvalidDesiredCountError extends LocalCloudError {}

export class FleetWaitTimeoutError extends LocalCloudError {}

/** The local broker service; see the module docs. */
export class LocalFleet implements EcsServiceScaler {
  readonly stops: BrokerStop[] = [];
  readonly exits: BrokerExit[] = [];
  private readonly options: LocalFleetOptions;
  private readonly brokers = new Map<string, Broker>();
  private readonly events = new EventEmitter();
  private readonly stopTimeoutMs: number;
  private readonly timer: NodeJS.Timeout;
  private currentVersion: string;
  private desired = 0;
  private sequence = 0;
  /** Brokers of the current version that died before they were ready, in a row. */
  private earlyDeaths = 0;
  private launchNotBefore = 0;
  private shuttingDown = false;

  constructor(options: LocalFleetOptions) {
    this.options = options;
    this.currentVersion = options.version;
    this.stopTimeoutMs = options.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS;
    this.events.setMaxListeners(0);
    this.timer = setInterval(() => this.reconcile(), options.reconcileIntervalMs ?? 250);
    this.timer.unref();
  }

  /** The version new brokers run. */
  get version(): string {
    return this.currentVersion;
  }

  get desiredCount(): number {
    return this.desired;
  }

  async setDesiredCount(count: number): Promise<void> {
    if (!Number.isInteger(count) || count < 0) {
      throw new InvalidDesiredCountError(`desired count must be a whole number ≥ 0, got ${count}`);
    }
    this.desired = count;
    this.reconcile();
  }

  /** Rolls the service to `version`: new brokers start, old ones drain and are stopped when idle. */
  async deploy(version: string): Promise<void> {
    if (version === this.currentVersion) return;
    this.currentVersion = version;
    await this.options.onDeploy?.(version);
    this.reconcile();
  }

  /** Sends `signal` to one broker, as a crash or an operator would (recorded as a `kill` stop). */
  kill(brokerId: string, signal: NodeJS.Signals = 'SIGKILL'): void {
    const broker = this.brokers.get(brokerId);
    if (!broker || broker.state === 'exited') throw new Error(`no running broker ${brokerId}`);
    this.signal(broker, signal, 'kill');
  }

  /** Every broker started so far, oldest first (exited ones included). */
  list(): BrokerInfo[] {
    return [...this.brokers.values()].map((b) => ({
      brokerId: b.brokerId,
      version: b.version,
      pid: b.child.pid,
      state: b.state,
      httpUrl: b.httpUrl,
      agentUri: b.agentUri,
      startedAt: b.startedAt,
    }));
  }

  /** Brokers not yet exited (stopping ones included). */
  running(): BrokerInfo[] {
    return this.list().filter((b) => b.state !== 'exited');
  }

  /** Resolves once `check` holds (checked on every change and pass); rejects after `timeoutMs`. */
  waitUntil(check: (fleet: LocalFleet) => boolean, timeoutMs = 30_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const test = () => {
        if (!check(this)) return;
        cleanup();
        resolve();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new FleetWaitTimeoutError(`fleet condition not met within ${timeoutMs} ms`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.events.off('change', test);
      };
      this.events.on('change', test);
      test();
    });
  }

  /**
   * One pass of the service scheduler: replaces missing brokers, stops surplus unprotected ones,
   * and retires old-version ones once the new version is ready. Runs on its own every interval.
   */
  reconcile(): void {
    if (this.shuttingDown) return;
    const live = [...this.brokers.values()].filter((b) => b.state === 'starting' || b.state === 'ready');
    const current = live.filter((b) => b.version === this.currentVersion);
    const old = live.filter((b) => b.version !== this.currentVersion);

    if (current.length < this.desired && Date.now() >= this.launchNotBefore) {
      for (let i = current.length; i < this.desired; i++) this.launch();
    }

    if (current.length > this.desired) {
      // Not-yet-ready brokers first, then the newest: the ones least likely to hold a client.
      const idle = current
        .filter((b) => !this.options.agent.isProtected(b.brokerId))
        .sort((a, b) => (a.state === b.state ? b.startedAt - a.startedAt : a.state === 'starting' ? -1 : 1));
      for (const broker of idle.slice(0, current.length - this.desired)) this.stopBroker(broker, 'scale-in');
    }

    // minimumHealthyPercent 100: old brokers go only once the new version is fully ready.
    const readyCurrent = current.filter((b) => b.state === 'ready').length;
    if (old.length > 0 && readyCurrent >= this.desired) {
      for (const broker of old) {
        if (!this.options.agent.isProtected(broker.brokerId)) this.stopBroker(broker, 'deploy');
      }
    }
    this.events.emit('change');
  }

  /** Stops every broker (protected or not: the local stack is going away) and waits for them. */
  async stop(): Promise<void> {
    this.shuttingDown = true;
    clearInterval(this.timer);
    const live = [...this.brokers.values()].filter((b) => b.state !== 'exited');
    for (const broker of live) if (broker.state !== 'stopping') this.signal(broker, 'SIGTERM', 'shutdown');
    await Promise.all(live.map((b) => b.exited));
  }

  private launch(): void {
    const version = this.currentVersion;
    this.sequence += 1;
    const brokerId = `broker-${this.sequence}-${randomBytes(3).toString('hex')}`;
    const agentUri = this.options.agent.register(brokerId);
    const child = this.spawnBroker(brokerId, version, agentUri);
    let markExited: () => void = () => {};
    const broker: Broker = {
      brokerId,
      version,
      child,
      agentUri,
      startedAt: Date.now(),
      state: 'starting',
      httpUrl: undefined,
      killTimer: undefined,
      forced: false,
      exited: new Promise<void>((resolve) => {
        markExited = resolve;
      }),
    };
    this.brokers.set(brokerId, broker);
    this.watchOutput(broker);
    child.on('error', (error) =>
      this.options.onOutput?.(brokerId, `spawn failed: ${error.message}`, 'stderr'),
    );
    child.on('exit', (code, signal) => {
      this.recordExit(broker, code, signal);
      markExited();
      this.events.emit('change');
      this.reconcile();
    });
  }

  /** The broker's process, with the environment the Fargate task gives it. */
  private spawnBroker(brokerId: string, version: string, agentUri: string): ChildProcess {
    // The V8 flags the Fargate task runs the broker with (cdk/constructs/broker-fleet.ts).
    const recording = brokerRecording();
    return spawn(
      process.execPath,
      [...brokerV8Flags(), ...recording.execArgv, this.options.script ?? 'worker/main.ts'],
      {
        cwd: this.options.cwd ?? ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          ...this.options.env,
          ...this.options.envFor?.(brokerId, version),
          BROKER_ID: brokerId,
          BROKER_VERSION: version,
          BROKER_HTTP_PORT: '0',
          ECS_AGENT_URI: agentUri,
          ...recording.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
  }

  /** The broker is ready at its first ready line; every other line goes to `onOutput`. */
  private watchOutput(broker: Broker): void {
    const { brokerId, child, version } = broker;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const ready = readyLine(line);
      if (ready && broker.state === 'starting') {
        broker.state = 'ready';
        broker.httpUrl = ready.httpUrl;
        if (version === this.currentVersion) this.earlyDeaths = 0;
        this.events.emit('change');
        this.reconcile();
        return;
      }
      this.options.onOutput?.(brokerId, line, 'stdout');
    });
    createInterface({ input: child.stderr! }).on('line', (line) =>
      this.options.onOutput?.(brokerId, line, 'stderr'),
    );
  }

  /** Records the broker's exit; one that died while starting delays the next launch, longer each time. */
  private recordExit(broker: Broker, code: number | null, signal: NodeJS.Signals | null): void {
    const { brokerId, version } = broker;
    clearTimeout(broker.killTimer);
    const wasStarting = broker.state === 'starting';
    broker.state = 'exited';
    this.exits.push({ brokerId, version, code, signal, forced: broker.forced, at: Date.now() });
    this.options.agent.forget(brokerId);
    if (wasStarting && version === this.currentVersion && !this.shuttingDown) {
      // A broker that cannot even start would otherwise be respawned in a tight loop.
      this.earlyDeaths += 1;
      this.launchNotBefore = Date.now() + Math.min(30_000, 250 * 2 ** this.earlyDeaths);
    }
  }

  private stopBroker(broker: Broker, reason: StopReason): void {
    if (broker.state === 'stopping' || broker.state === 'exited') return;
    this.signal(broker, 'SIGTERM', reason);
  }

  private signal(broker: Broker, signal: NodeJS.Signals, reason: StopReason): void {
    this.stops.push({
      brokerId: broker.brokerId,
      version: broker.version,
      reason,
      signal,
      protected: this.options.agent.isProtected(broker.brokerId),
      at: Date.now(),
    });
    broker.state = 'stopping';
    broker.child.kill(signal);
    if (signal === 'SIGTERM' && broker.killTimer === undefined) {
      broker.killTimer = setTimeout(() => {
        if (broker.child.exitCode !== null || broker.child.signalCode !== null) return;
        broker.forced = true;
        broker.child.kill('SIGKILL');
      }, this.stopTimeoutMs);
    }
    this.events.emit('change');
  }
}

/** Starts the local broker service (with no brokers until a desired count is set). */
export function startLocalFleet(options: LocalFleetOptions): LocalFleet {
  return new LocalFleet(options);
}

function readyLine(line: string): { httpUrl: string | undefined } | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(line) as { event?: unknown; httpUrl?: unknown };
    if (parsed.event !== 'ready') return undefined;
    return { httpUrl: typeof parsed.httpUrl === 'string' ? parsed.httpUrl : undefined };
  } catch {
    return undefined;
  }
}
