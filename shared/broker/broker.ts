/**
 * The broker: one process of the fleet, serving one client at a time. It reads the fleet's work
 * list, takes the lease of a client with work, serves it ({@link ClientServer}), releases it
 * when the client has no work left, and claims the next. A client listed as `orphaned` (a dead
 * broker's calls left in flight, nothing to start now) is taken only to adopt and settle those
 * calls, then released. With nothing to claim it waits idle and unprotected, so a scale-in
 * removes it rather than a busy broker.
 *
 * Shutdown: on {@link Broker.stop} (SIGTERM) or a drain request (the work list names another
 * broker version, checked on every lease heartbeat and every idle turn) it stops starting calls,
 * lets the calls in flight end (bounded by the grace period on SIGTERM: Fargate kills at 120 s),
 * then releases the lease and task protection; {@link Broker.run} then resolves.
 */

import type { TaskProtectionKeeper } from '#shared/broker/task-protection.ts';
import type { JobProgress, SendPort } from '#shared/campaign/ports.ts';
import type { EmailTemplate } from '#shared/email/template.ts';
import type { ClientSettings, UnkeyedChannel } from '#shared/jobs/model.ts';
import { heartbeatInterval, LeaseKeeper, type LeaseStore } from '#shared/lease/lease.ts';
import type { MessageQuota } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import type { SmsTemplate } from '#shared/sms/template.ts';
import type { TelephonyProviders } from '#shared/telephony/port.ts';
import type { BrokerMetrics, ClientMetrics } from './broker-metrics.ts';
import type { BrokerTaskStore, CallEnded, CallLinkStore, FleetWorkReader } from './ports.ts';
import type { SendingRoundsDeps } from './sending-rounds.ts';
import { ClientServer, type ServeEnd } from './serve-client.ts';
import { MessageServer, type MessageServeSettings, type MessageTaskStore } from './serve-messages.ts';
import { DEFAULT_SERVE_SETTINGS, type ServeSettings } from './serve-settings.ts';
import { UnkeyedServer, type UnkeyedSide } from './serve-unkeyed.ts';

export interface BrokerSettings extends ServeSettings {
  readonly brokerId: string;
  readonly version: string;
  readonly leaseMs: number;
  /** Idle turn: how long to wait before reading the work list again, ms. Default 2,000. */
  readonly idleWaitMs: number;
  /** Longest wait for calls in flight to end after SIGTERM, ms. Default 100,000 (< Fargate's 120 s). */
  readonly stopGraceMs: number;
  /** Do not claim a released client again before this long, when it said nothing of its next task, ms. Default 30,000. */
  readonly noWorkBackoffMs: number;
}

/** Every setting a deployment does not name: the broker's own (its id, version and callback route are always given). */
export const DEFAULT_BROKER_SETTINGS: Omit<BrokerSettings, 'callbackUrl' | 'brokerId' | 'version'> = {
  ...DEFAULT_SERVE_SETTINGS,
  leaseMs: 30_000,
  idleWaitMs: 2_000,
  stopGraceMs: 100_000,
  noWorkBackoffMs: 30_000,
};

export interface BrokerDeps {
  readonly leases: LeaseStore;
  readonly tasks: BrokerTaskStore;
  readonly providers: TelephonyProviders;
  readonly callLinks?: CallLinkStore;
  readonly fleet: FleetWorkReader;
  readonly protection: Pick<TaskProtectionKeeper, 'update' | 'release'>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: Logger;
  readonly settings: BrokerSettings;
  /** Message jobs: their tasks and the LINE channel to send through. Without it, only calls are served. */
  readonly messages?: {
    readonly store: MessageTaskStore;
    /** The channel's send, for the client whose jobs it sends: refused when the channel is another client's. */
    readonly sendFor: (channelId: string, clientId: string) => Promise<SendPort>;
    readonly settings: MessageServeSettings;
    /** Reads a channel's monthly quota, for the quota metric (refused as `sendFor` is). */
    readonly readQuota?: (channelId: string, clientId: string) => Promise<MessageQuota>;
  };
  /** Email jobs (with `messages`, whose store holds their tasks): SES per client. Without it, none are sent. */
  readonly email?: EmailSide;
  /** SMS jobs (with `messages`): End User Messaging SMS per client. Without it, none are sent. */
  readonly sms?: SmsSide;
  /** What the broker publishes to CloudWatch; nothing without it. */
  readonly metrics?: BrokerMetrics;
  /** Picks the order to try clients in; shuffled by default so brokers spread over clients. */
  readonly order?: (clients: readonly string[]) => string[];
}

/** The broker's email side: a client's SES transport, and how email is served. */
export type EmailSide = UnkeyedSide<EmailTemplate>;

/** The broker's SMS side: a client's End User Messaging SMS transport, and how texts are served. */
export type SmsSide = UnkeyedSide<SmsTemplate>;

/** The service behind each unkeyed channel, as logs and pauses name it. */
const SERVICE_OF: Readonly<Record<UnkeyedChannel, string>> = {
  email: 'SES',
  sms: 'End User Messaging SMS',
};

/** A message server of a served client (LINE's, email's, SMS's). */
interface SendingServer {
  readonly clientId: string;
  serve(): Promise<ServeEnd>;
  stop(): void;
  jobChanged(jobId: string): Promise<void>;
}

export type StopReason = 'sigterm' | 'drain';

/** The stop grace of one client's serving: over once SIGTERM came and `stopGraceMs` passed. */
interface StopGrace {
  readonly over: Promise<'grace-over'>;
  readonly clear: () => void;
}

/** One end for a client served by both servers: a lost lease wins, then a stop, then the earliest next work. */
function bothEnded(calls: ServeEnd, messages: ServeEnd): ServeEnd {
  if (calls.kind === 'lost' || messages.kind === 'lost') return { kind: 'lost' };
  if (calls.kind === 'stopped' || messages.kind === 'stopped') return { kind: 'stopped' };
  const next = [calls.nextReadyAt, messages.nextReadyAt].filter((t): t is number => t !== undefined);
  return { kind: 'no-work', nextReadyAt: next.length > 0 ? Math.min(...next) : undefined };
}

/** How many clients listed as served an idle broker tries per turn (see {@link Broker}'s turn). */
const SERVED_TRIES_PER_TURN = 4;

function shuffled(clients: readonly string[]): string[] {
  const out = [...clients];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

export class Broker {
  readonly #deps: BrokerDeps;
  /**
   * Clients this broker released with no work: not taken again before `until`, unless a work
   * list written after the release lists them (the job manager read their jobs and settings
   * since, e.g. new calling hours opened the window).
   */
  readonly #notBefore = new Map<string, { readonly until: number; readonly releasedAt: number }>();
  /** Orphaned clients this broker has just adopted: not taken again until then (the list is a minute old). */
  readonly #adoptedNotBefore = new Map<string, number>();
  #server: ClientServer | undefined;
  /** The client's message servers while it is served: LINE's and email's, each when the client has it. */
  #messages: readonly SendingServer[] = [];
  /** Message servers sending now. */
  readonly #sendingNow = new Set<SendingServer>();
  #stopReason: StopReason | undefined;
  #wakeIdle: (() => void) | undefined;
  #stopped: Promise<void> | undefined;
  #onSigterm: (() => void) | undefined;

  constructor(deps: BrokerDeps) {
    this.#deps = deps;
  }

  /** The client being served, if any. */
  get clientId(): string | undefined {
    return this.#server?.clientId;
  }

  /** Why the broker is stopping, once it is. */
  get stopReason(): StopReason | undefined {
    return this.#stopReason;
  }

  /** Calls in flight now. */
  get inFlight(): number {
    return this.#server?.inFlight ?? 0;
  }

  /** Stops starting calls and winds down; {@link run} resolves when done. */
  stop(reason: StopReason): void {
    // A SIGTERM during a drain still bounds the wait.
    if (this.#stopReason && !(reason === 'sigterm' && this.#stopReason === 'drain')) return;
    this.#stopReason = reason;
    this.#deps.logger.info('broker stopping', { reason, inFlight: this.inFlight });
    this.#server?.stop();
    for (const server of this.#messages) server.stop();
    if (reason === 'sigterm') this.#onSigterm?.();
    this.#wakeIdle?.();
  }

  /** A call of the served client ended (the status route's nudge). */
  async callEnded(ended: CallEnded): Promise<void> {
    await this.#server?.callEnded(ended);
  }

  /** A job of the served client changed (pause / cancel): its sends stop at once. */
  async jobChanged(clientId: string, jobId: string): Promise<void> {
    for (const server of this.#messages) if (server.clientId === clientId) await server.jobChanged(jobId);
  }

  /** Runs until stopped or drained, then releases protection. Never rejects. */
  async run(): Promise<void> {
    this.#stopped ??= this.#run();
    return this.#stopped;
  }

  async #run(): Promise<void> {
    const { logger, protection, clock } = this.#deps;
    while (!this.#stopReason) {
      let claimed = false;
      try {
        claimed = await this.#turn();
      } catch (error) {
        logger.error('broker turn failed', { error });
      }
      if (!claimed && !this.#stopReason) await this.#idle();
    }
    await protection.release();
    logger.info('broker stopped', { reason: this.#stopReason, at: clock.now() });
  }

  /** One look at the work list: claims and serves one client; false when there was none to claim. */
  async #turn(): Promise<boolean> {
    const { fleet, clock, settings, logger } = this.#deps;
    const work = await fleet.read();
    if (this.#drainRequested(work?.desiredVersion)) return false;
    const now = clock.now();
    const order = this.#deps.order ?? shuffled;
    const withWork = new Set(work?.clients ?? []);
    // Clients listed only for the calls a dead broker left in flight: adopt and settle, start nothing.
    const orphaned = new Set((work?.orphaned ?? []).filter((c) => !withWork.has(c)));
    const listedAt = work?.updatedAt ?? 0;
    const mayTake = (c: string) => {
      const held = this.#notBefore.get(c);
      return held === undefined || held.until <= now || listedAt > held.releasedAt;
    };
    // Clients a live broker held when the list was made are tried last, and only a few of them:
    // each try reads a lease that is most likely still held. One released since (a drain, a
    // SIGTERM) is found by a few tries in a small fleet, and by the next list in any fleet.
    const served = new Set(work?.served ?? []);
    const eligible = (c: string) =>
      orphaned.has(c) ? (this.#adoptedNotBefore.get(c) ?? 0) <= now : mayTake(c);
    const candidates = [
      ...order([...withWork, ...orphaned].filter((c) => !served.has(c))).filter(eligible),
      ...order([...withWork].filter((c) => served.has(c)))
        .filter(eligible)
        .slice(0, SERVED_TRIES_PER_TURN),
    ];
    for (const clientId of candidates) {
      if (this.#stopReason) return true;
      const keeper = new LeaseKeeper({
        clientId,
        owner: settings.brokerId,
        leaseMs: settings.leaseMs,
        store: this.#deps.leases,
        clock,
        timers: this.#deps.timers,
        logger,
      });
      let held = false;
      try {
        held = await keeper.acquire();
      } catch (error) {
        logger.warn('lease take did not answer', { clientId, error });
      }
      if (!held) continue;
      // A stop that came while the lease was being taken: serve nothing, give the client back.
      if (this.#stopReason) {
        await keeper.release();
        return true;
      }
      await this.#serve(keeper, orphaned.has(clientId));
      return true;
    }
    return false;
  }

  #drainRequested(desiredVersion: string | undefined): boolean {
    if (!desiredVersion || desiredVersion === this.#deps.settings.version) return false;
    this.#deps.logger.info('drain requested', { desiredVersion, version: this.#deps.settings.version });
    this.stop('drain');
    return true;
  }

  /** Serves the leased client (only adopting its orphaned calls when `adoptOnly`), then releases it. */
  async #serve(keeper: LeaseKeeper, adoptOnly: boolean): Promise<void> {
    const metrics = this.#deps.metrics?.forClient(keeper.clientId);
    const stopCountingLosses = keeper.onLost((reason) =>
      this.#deps.metrics?.leaseLost(keeper.clientId, reason),
    );
    const server = this.#clientServer(keeper, adoptOnly, metrics);
    this.#server = server;
    this.#deps.logger.info('serving client', {
      clientId: server.clientId,
      token: keeper.lease?.token,
      adoptOnly,
    });
    const drainCheck = this.#watchForDrain();
    let grace: StopGrace | undefined;
    try {
      const messages = adoptOnly ? [] : await this.#messageServers(keeper, metrics);
      const served = this.#servedWith(server, messages);
      grace = this.#stopGrace();
      this.#noteEnd(server, await Promise.race([served, grace.over]), adoptOnly);
    } catch (error) {
      // E.g. settings the pacer refuses: do not take this client again at every idle turn.
      const until = this.#deps.clock.now() + this.#deps.settings.noWorkBackoffMs;
      if (adoptOnly) this.#adoptedNotBefore.set(server.clientId, until);
      else this.#notBefore.set(server.clientId, { until, releasedAt: Number.POSITIVE_INFINITY });
      throw error;
    } finally {
      this.#onSigterm = undefined;
      grace?.clear();
      drainCheck();
      this.#server = undefined;
      this.#messages = [];
      this.#sendingNow.clear();
      await keeper.release();
      stopCountingLosses();
      this.#deps.metrics?.released(keeper.clientId);
    }
  }

  /** The call side of serving the leased client. */
  #clientServer(keeper: LeaseKeeper, adoptOnly: boolean, metrics: ClientMetrics | undefined): ClientServer {
    const { clock, timers, logger, settings } = this.#deps;
    return new ClientServer({
      tasks: this.#deps.tasks,
      providers: this.#deps.providers,
      ...(this.#deps.callLinks ? { callLinks: this.#deps.callLinks } : {}),
      keeper,
      clock,
      timers,
      logger,
      settings,
      onInFlightChange: (n) => this.#deps.protection.update(n + this.#sendingNow.size),
      adoptOnly,
      ...(metrics ? { metrics } : {}),
    });
  }

  /** Serves calls and messages side by side; ends as both have (see {@link bothEnded}). */
  #servedWith(server: ClientServer, messages: readonly SendingServer[]): Promise<ServeEnd> {
    this.#messages = messages;
    // A stop that came while the client was read.
    if (this.#stopReason) for (const m of messages) m.stop();
    return Promise.all([server.serve(), ...messages.map((m) => m.serve())]).then(([calls, ...sent]) =>
      sent.reduce(bothEnded, calls!),
    );
  }

  /** The stop grace: over `stopGraceMs` after SIGTERM (now, when it already came). */
  #stopGrace(): StopGrace {
    const { timers, settings } = this.#deps;
    let timer: TimerHandle | undefined;
    const over = new Promise<'grace-over'>((resolve) => {
      const armGrace = () => {
        timer = timers.setTimeout(() => resolve('grace-over'), settings.stopGraceMs);
      };
      if (this.#stopReason === 'sigterm') armGrace();
      else this.#onSigterm = armGrace;
    });
    const clear = () => {
      if (timer !== undefined) timers.clearTimeout(timer);
    };
    return { over, clear };
  }

  /** Logs how serving the client ended and, when it had no work, when to take it again. */
  #noteEnd(server: ClientServer, end: ServeEnd | 'grace-over', adoptOnly: boolean): void {
    const { clock, logger, settings } = this.#deps;
    if (end === 'grace-over') {
      logger.warn('stop grace over with calls in flight; the next holder adopts them', {
        clientId: server.clientId,
        inFlight: server.inFlight,
      });
    } else if (end.kind === 'no-work' && adoptOnly) {
      this.#adoptedNotBefore.set(server.clientId, clock.now() + settings.noWorkBackoffMs);
    } else if (end.kind === 'no-work') {
      const next = end.nextReadyAt ?? clock.now() + settings.noWorkBackoffMs;
      this.#notBefore.set(server.clientId, { until: next, releasedAt: clock.now() });
    }
    logger.info('client served', {
      clientId: server.clientId,
      end: end === 'grace-over' ? end : end.kind,
    });
  }

  /**
   * The message side of serving the client, when the broker sends messages: LINE's when the client
   * has a channel, email's when it has email settings and the broker has SES.
   */
  async #messageServers(keeper: LeaseKeeper, metrics?: ClientMetrics): Promise<SendingServer[]> {
    const { messages, tasks } = this.#deps;
    if (!messages) return [];
    const client = await tasks.getClient(keeper.clientId);
    if (!client) return [];
    const servers: SendingServer[] = [];
    if (client.messageChannelId) servers.push(this.#lineServer(keeper, client, messages, metrics));
    const { email, sms } = this.#deps;
    if (client.email && email) servers.push(this.#unkeyedServer(keeper, client, 'email', email));
    if (client.sms && sms) servers.push(this.#unkeyedServer(keeper, client, 'sms', sms));
    return servers;
  }

  /** Counts a message server as sending (task protection) while it says so. */
  #activity(server: () => SendingServer): (active: 0 | 1) => void {
    return (active) => {
      if (active) this.#sendingNow.add(server());
      else this.#sendingNow.delete(server());
      this.#deps.protection.update(this.inFlight + this.#sendingNow.size);
    };
  }

  /**
   * What a channel's server sends under: the store, the lease, the client's settings (read again
   * from the task store), the clock and logs, its activity for task protection, and the progress
   * written per job (at most once a second: the campaign's progress in the logs, as `what`).
   */
  #roundsOf(
    keeper: LeaseKeeper,
    client: ClientSettings,
    store: MessageTaskStore,
    server: () => SendingServer,
    what: string,
  ): Omit<SendingRoundsDeps, 'settings'> & { onProgress: (progress: readonly JobProgress[]) => void } {
    const { tasks, clock, timers, logger } = this.#deps;
    return {
      store,
      keeper,
      client,
      readClient: () => tasks.getClient(keeper.clientId),
      clock,
      timers,
      logger,
      onActiveChange: this.#activity(server),
      onProgress: (progress) => {
        for (const p of progress) logger.info(what, { clientId: keeper.clientId, ...p });
      },
    };
  }

  #unkeyedServer<T extends object>(
    keeper: LeaseKeeper,
    client: ClientSettings,
    channel: UnkeyedChannel,
    side: UnkeyedSide<T>,
  ): UnkeyedServer<T> {
    const server: UnkeyedServer<T> = new UnkeyedServer<T>({
      ...this.#roundsOf(keeper, client, this.#deps.messages!.store, () => server, `${channel} job progress`),
      channel,
      service: SERVICE_OF[channel],
      transportFor: (current) => side.transportFor(current),
      settings: side.settings,
    });
    return server;
  }

  #lineServer(
    keeper: LeaseKeeper,
    client: ClientSettings,
    messages: NonNullable<BrokerDeps['messages']>,
    metrics?: ClientMetrics,
  ): MessageServer {
    const server: MessageServer = new MessageServer({
      ...this.#roundsOf(keeper, client, messages.store, () => server, 'message job progress'),
      sendFor: (channelId) => messages.sendFor(channelId, keeper.clientId),
      settings: messages.settings,
      ...(metrics ? { metrics } : {}),
      ...(messages.readQuota
        ? { readQuota: (channelId: string) => messages.readQuota!(channelId, keeper.clientId) }
        : {}),
    });
    return server;
  }

  /** While serving, reads the work list on every lease heartbeat for a drain request. */
  #watchForDrain(): () => void {
    const { timers, fleet, settings, logger } = this.#deps;
    let handle: TimerHandle | undefined;
    let done = false;
    const every = heartbeatInterval(settings.leaseMs);
    const tick = async () => {
      try {
        const work = await fleet.read({ lists: false });
        if (!done) this.#drainRequested(work?.desiredVersion);
      } catch (error) {
        logger.warn('work list not read', { error });
      }
      if (!done && !this.#stopReason) handle = timers.setTimeout(() => void tick(), every);
    };
    handle = timers.setTimeout(() => void tick(), every);
    return () => {
      done = true;
      if (handle !== undefined) timers.clearTimeout(handle);
    };
  }

  #idle(): Promise<void> {
    return new Promise((resolve) => {
      const handle = this.#deps.timers.setTimeout(() => {
        this.#wakeIdle = undefined;
        resolve();
      }, this.#deps.settings.idleWaitMs);
      this.#wakeIdle = () => {
        this.#wakeIdle = undefined;
        this.#deps.timers.clearTimeout(handle);
        resolve();
      };
    });
  }
}
