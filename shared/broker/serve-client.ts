/**
 * Serving one client under its lease: start the client's outstanding tasks as fast as its
 * contract allows, free a call's slot the moment its end is reported, settle calls whose end was
 * never reported, and stop starting at once when the lease is lost or the broker drains.
 *
 * Main course, per call: wait for a slot from the {@link PacingGate} (limit + line rate) → take
 * the next ready task of a running job, not past its end, inside its calling hours → start it in
 * one fenced transaction (lease token, job running and not past its end, task still startable) →
 * `initiate` with the attempt's
 * idempotency key (a `retryable` answer is retried with the same key; the slot stays taken) →
 * the slot is released by {@link ClientServer.callEnded} (the status route's nudge) or by
 * reconciliation after the job's maximum call duration plus a margin.
 */

import { capSlots } from '#shared/contact-limits/model.ts';
import { type ClientSettings, type Job, jobHasEnded, type Task } from '#shared/jobs/model.ts';
import { mayStartNow, taskZone } from '#shared/jobs/restrictions.ts';
import type { LeaseKeeper } from '#shared/lease/lease.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { type CallSlot, Pacer, PacingGate } from '#shared/pacing/pacer.ts';
import type { TelephonyProviders } from '#shared/telephony/port.ts';
import { type ClientMetrics, noClientMetrics } from './broker-metrics.ts';
import { type CallHost, CallPlacer, type InFlightCall } from './call-placement.ts';
import { CallReconciler } from './call-reconciliation.ts';
import { HeldClientSettings } from './client-settings.ts';
import { BrokerError } from './errors.ts';
import { type NextTask, OutstandingTasks } from './outstanding-tasks.ts';
import type {
  BrokerTaskStore,
  CallEnded,
  CallLinkStore,
  Settlement,
  StartLimits,
  StartResult,
} from './ports.ts';
import type { ServeSettings } from './serve-settings.ts';

export interface ServeClientDeps {
  readonly tasks: BrokerTaskStore;
  /** The client's provider is chosen from its settings when serving begins. */
  readonly providers: TelephonyProviders;
  /** Where calls are linked to their attempts, for providers whose events name only the call. */
  readonly callLinks?: CallLinkStore;
  /** Already holds the client's lease. */
  readonly keeper: LeaseKeeper;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: Logger;
  readonly settings: ServeSettings;
  /** Told every change of the calls in flight (task protection); must not throw. */
  readonly onInFlightChange?: (inFlight: number) => void;
  /** The client's figures for CloudWatch: limits, calls in flight, starts. */
  readonly metrics?: ClientMetrics;
  /**
   * Only adopt and settle the calls a previous holder left in flight, then end: start no task,
   * and place no adopted call that was never confirmed (it might ring a paused client's
   * recipient, or outside the calling hours). For a client the job manager listed only for such
   * calls (`FleetWork.orphaned`).
   */
  readonly adoptOnly?: boolean;
}

/**
 * - `no-work`: nothing startable soon and no call in flight; `nextReadyAt` says when there is.
 * - `lost`: the lease was lost; in-flight calls are left to the next holder, who adopts them.
 * - `stopped`: asked to stop; every call in flight had ended (or the caller stopped waiting).
 */
export type ServeEnd =
  | { readonly kind: 'no-work'; readonly nextReadyAt: number | undefined }
  | { readonly kind: 'lost' }
  | { readonly kind: 'stopped' };

class StopWaiting extends BrokerError {}

/** Serves one client while its lease is held. Make one per lease; {@link serve} runs it once. */
export class ClientServer {
  readonly clientId: string;
  readonly #deps: ServeClientDeps;
  readonly #calls = new Map<string, InFlightCall>();
  readonly #abort = new AbortController();
  #gate: PacingGate | undefined;
  readonly #outstanding: OutstandingTasks;
  #stopping = false;
  #lost = false;
  #wake: (() => void) | undefined;
  #allEnded: (() => void) | undefined;
  #client: HeldClientSettings | undefined;
  #placer: CallPlacer | undefined;
  #reconciler: CallReconciler | undefined;
  readonly #metrics: ClientMetrics;

  constructor(deps: ServeClientDeps) {
    this.#deps = deps;
    this.clientId = deps.keeper.clientId;
    this.#metrics = deps.metrics ?? noClientMetrics;
    this.#outstanding = new OutstandingTasks(this.clientId, deps);
  }

  /** Calls in flight now. */
  get inFlight(): number {
    return this.#calls.size;
  }

  /** Stops starting calls; {@link serve} resolves once the calls in flight have ended. */
  stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#abort.abort(new StopWaiting('stopping'));
    this.#poke();
  }

  /**
   * A call ended, as the status route reports it: frees the call's slot once the store confirms
   * the attempt is no longer in flight (the nudge itself is unauthenticated, so it is not trusted
   * to free a slot on its own).
   */
  async callEnded(ended: CallEnded): Promise<void> {
    const call = this.#calls.get(ended.taskId);
    if (!call || call.task.jobId !== ended.jobId || call.ended) return;
    const task = await this.#deps.tasks.getTask(ended);
    if (task?.state !== 'in-flight' || task.attempts !== call.attempt) this.#end(call, 'reported');
  }

  /** Serves the client until there is no work, the lease is lost, or {@link stop} was called. */
  async serve(): Promise<ServeEnd> {
    const { keeper, tasks, logger } = this.#deps;
    const unsubscribe = keeper.onLost((reason) => this.#loseLease(reason));
    try {
      const client = await tasks.getClient(this.clientId);
      if (!client) {
        logger.warn('leased client has no settings; giving it up', { clientId: this.clientId });
        return { kind: 'no-work', nextReadyAt: undefined };
      }
      this.#client = new HeldClientSettings(
        {
          read: () => tasks.getClient(this.clientId),
          clock: this.#deps.clock,
          logger,
          maxAgeMs: this.#deps.settings.clientCheckMs,
        },
        client,
      );
      this.#gate = this.#makeGate(client);
      // A change of provider applies from the client's next lease: calls in flight stay with theirs.
      const provider = this.#deps.providers.forClient(this.clientId, client.telephony);
      const host: CallHost = {
        lost: () => this.#lost,
        end: (call, why) => this.#end(call, why),
        fail: (call, reason) => this.#fail(call, reason),
      };
      this.#placer = new CallPlacer(this.#deps, provider, host, client.callsPerSecond);
      this.#reconciler = new CallReconciler(this.#deps, provider, host, this.#placer);
      await this.#adopt();
      if (this.#deps.adoptOnly) {
        await this.#callsEnded();
        if (this.#lost) return { kind: 'lost' };
        return this.#stopping ? { kind: 'stopped' } : { kind: 'no-work', nextReadyAt: undefined };
      }
      const end = await this.#startCalls();
      if (end) return end;
      await this.#callsEnded();
      return this.#lost ? { kind: 'lost' } : { kind: 'stopped' };
    } catch (error) {
      // Serving is over for this broker: nothing of it may keep acting (timers, retries).
      this.#loseLease('serving failed');
      throw error;
    } finally {
      unsubscribe();
    }
  }

  #makeGate(client: ClientSettings): PacingGate {
    const { clock, timers, settings, onInFlightChange } = this.#deps;
    this.#metrics.limits(client);
    // Hours are checked per task, because a job's own hours replace the client's.
    const pacer = new Pacer({
      maxConcurrentCalls: client.maxConcurrentCalls,
      callsPerSecond: client.callsPerSecond,
      rateMarginMs: settings.rateMarginMs,
    });
    return new PacingGate({
      pacer,
      clock,
      timers,
      onInFlightChange: (n) => {
        onInFlightChange?.(n);
        this.#metrics.inFlight(n);
        if (n === 0) this.#allEnded?.();
        this.#poke();
      },
    });
  }

  /**
   * The client's settings, read again once they are `clientCheckMs` old: an operator's new
   * limits, hours or pause apply while the client is served, not only from its next lease.
   */
  async #currentClient(): Promise<ClientSettings> {
    const { settings, logger } = this.#deps;
    const held = this.#client!;
    const previous = held.current;
    const { settings: client, changed } = await held.fresh();
    if (!changed) return client;
    try {
      this.#gate!.retune({
        maxConcurrentCalls: client.maxConcurrentCalls,
        callsPerSecond: client.callsPerSecond,
        rateMarginMs: settings.rateMarginMs,
      });
    } catch (error) {
      logger.error('new client limits refused by the pacer; keeping the last ones', {
        clientId: this.clientId,
        error,
      });
      held.keep(previous);
      return previous;
    }
    this.#placer!.spaceFor(client.callsPerSecond);
    this.#metrics.limits(client);
    logger.info('client settings changed while serving; applied', {
      clientId: this.clientId,
      maxConcurrentCalls: client.maxConcurrentCalls,
      callsPerSecond: client.callsPerSecond,
      paused: client.paused === true,
    });
    return client;
  }

  /** The loop that starts calls; returns an end when serving is over without a drain. */
  async #startCalls(): Promise<ServeEnd | undefined> {
    while (!this.#stopping && !this.#lost) {
      const next = await this.#nextTask();
      if (this.#stopping || this.#lost) break;
      if (next.kind === 'wait') {
        const end = await this.#waitForTask(next.until);
        if (end) return end;
        continue;
      }
      if (!(await this.#startTask(next.task, next.job))) break;
    }
    return this.#lost ? { kind: 'lost' } : undefined;
  }

  /**
   * With no task to start now: the end of serving when no call is in flight and no task is ready
   * within `holdMs`; else sleeps until a task is ready, `recheckMs` at most.
   */
  async #waitForTask(readyAt: number | undefined): Promise<ServeEnd | undefined> {
    const { clock, settings } = this.#deps;
    const now = clock.now();
    const soon = readyAt !== undefined && readyAt - now <= settings.holdMs;
    if (this.#calls.size === 0 && !soon) return { kind: 'no-work', nextReadyAt: readyAt };
    const until = readyAt ?? Number.POSITIVE_INFINITY;
    await this.#sleep(Math.max(1, Math.min(until - now, settings.recheckMs)));
    return undefined;
  }

  /** Starts one task once a call slot is free and the lease still held; false when starting must stop. */
  async #startTask(task: Task, job: Job): Promise<boolean> {
    const slot = await this.#acquireSlot();
    if (!slot) return false;
    const token = this.#deps.keeper.currentToken();
    if (token === undefined || this.#stopping || this.#lost) {
      slot.release();
      return false;
    }
    if (!(await this.#mayStillStart(task, job, slot))) return true;
    const result = await this.#startInStore(task, job, token, slot);
    if (result === undefined) return true;
    if (result.kind !== 'started') {
      slot.release();
      return !this.#refused(result, task);
    }
    this.#metrics.callStarted(job.jobId);
    void this.#launch(result.task, job, slot);
    return true;
  }

  /** A call slot from the pacing gate; undefined when serving is aborted while it is awaited. */
  async #acquireSlot(): Promise<CallSlot | undefined> {
    try {
      return await this.#gate!.acquire(this.#abort.signal);
    } catch {
      return undefined;
    }
  }

  /**
   * Whether the task may still start, its slot held: its job may have reached its end (none of its
   * tasks starts now), the hours closed or the client been paused (the task goes back to the
   * buffer) while the slot was awaited. When it may not, the slot is released.
   */
  async #mayStillStart(task: Task, job: Job, slot: CallSlot): Promise<boolean> {
    const { clock } = this.#deps;
    if (jobHasEnded(job, clock.now())) {
      slot.release();
      return false;
    }
    const current = await this.#currentClient();
    if (!mayStartNow(current, job, clock.now(), taskZone(current, job, task))) {
      this.#outstanding.putBack(task);
      slot.release();
      return false;
    }
    return true;
  }

  /**
   * The store's start of the task under the lease's token; undefined when the store did not
   * answer (the slot released, after a pause before the next task).
   */
  async #startInStore(task: Task, job: Job, token: number, slot: CallSlot): Promise<StartResult | undefined> {
    const { tasks, keeper, clock, settings, logger } = this.#deps;
    try {
      const now = clock.now();
      return await tasks.start(
        task,
        { clientId: this.clientId, owner: keeper.owner, token, now },
        startLimits(await this.#currentClient(), job, now),
      );
    } catch (error) {
      slot.release();
      logger.warn('task start did not answer; trying the next', { clientId: this.clientId, error });
      await this.#sleep(settings.initiateRetryMs);
      return undefined;
    }
  }

  /** A start the store refused: says why; true when the broker must stop starting (the fence). */
  #refused(result: Exclude<StartResult, { kind: 'started' }>, task: Task): boolean {
    const { logger } = this.#deps;
    switch (result.kind) {
      case 'fenced':
        logger.warn('start refused by the lease fence; stopping', { clientId: this.clientId });
        this.#loseLease('refused');
        return true;
      case 'gone':
        return false;
      case 'capped':
        logger.info('task not started: contact limit reached', {
          clientId: this.clientId,
          taskId: task.taskId,
          until: new Date(result.until).toISOString(),
          ended: result.ended,
        });
        return false;
      case 'suppressed':
        logger.info('task not started: recipient suppressed', {
          clientId: this.clientId,
          taskId: task.taskId,
          reason: result.reason,
        });
        return false;
    }
  }

  /** The next task to start, or how long to wait for one. */
  async #nextTask(): Promise<NextTask> {
    const client = await this.#currentClient();
    // A paused client starts nothing until resumed; the job manager lists it again then.
    if (client.paused) return { kind: 'wait', until: undefined };
    return this.#outstanding.next(client, (taskId) => this.#calls.has(taskId));
  }

  /** Takes over the calls a previous holder left in flight: counts them, then settles them. */
  async #adopt(): Promise<void> {
    const { tasks, logger } = this.#deps;
    const refs = await tasks.inFlight(this.clientId);
    for (const ref of refs) {
      const task = await tasks.getTask(ref);
      if (task?.state !== 'in-flight') {
        await tasks.forgetInFlight(this.clientId, ref);
        continue;
      }
      if (this.#calls.has(task.taskId)) continue;
      const job = await this.#outstanding.job(task.jobId);
      if (!job) continue;
      const call = this.#track(task, job, this.#gate!.adopt());
      call.callId = task.callId;
      call.maybePlaced = true;
      logger.info('adopted a call in flight', {
        clientId: this.clientId,
        taskId: task.taskId,
        callId: task.callId,
      });
      const startedAt = task.startedAt ?? task.updatedAt;
      // A call never recorded may never have been placed: placing it again with the same key is
      // safe (the provider returns the existing call) and gets its id. Adopting only, it is not
      // placed: its callback or the reconciliation at its deadline settles it.
      this.#reconciler!.armAtDeadline(call, startedAt);
      if (call.callId === undefined && !this.#deps.adoptOnly) void this.#placer!.placeSafely(call);
    }
  }

  #track(task: Task, job: Job, slot: CallSlot): InFlightCall {
    const call: InFlightCall = {
      task,
      job,
      attempt: task.attempts,
      slot,
      callId: undefined,
      timer: undefined,
      reconcileTries: 0,
      ended: false,
      maybePlaced: false,
      log: this.#deps.logger.withKeys({
        clientId: task.clientId,
        jobId: task.jobId,
        taskId: task.taskId,
        attempt: task.attempts,
      }),
    };
    this.#calls.set(task.taskId, call);
    return call;
  }

  async #launch(task: Task, job: Job, slot: CallSlot): Promise<void> {
    // Started under a valid fence but the lease is gone since: the next holder adopts the task
    // (recorded in flight) and places its call with the same key.
    if (this.#lost) {
      slot.release();
      return;
    }
    const call = this.#track(task, job, slot);
    this.#reconciler!.armAtDeadline(call, task.startedAt ?? this.#deps.clock.now());
    await this.#placer!.placeSafely(call);
  }

  async #fail(call: InFlightCall, reason: string): Promise<void> {
    const settlement: Settlement = { state: 'failed', lastResult: 'failed', reason };
    await this.#deps.tasks.settle({
      task: call.task,
      attempt: call.attempt,
      settlement,
      ...(call.callId === undefined ? {} : { callId: call.callId }),
      now: this.#deps.clock.now(),
    });
    call.log.warn('call failed', { taskId: call.task.taskId, reason });
    this.#end(call, 'failed');
  }

  #end(call: InFlightCall, _why: string): void {
    if (call.ended) return;
    call.ended = true;
    if (call.timer !== undefined) this.#deps.timers.clearTimeout(call.timer);
    call.timer = undefined;
    this.#calls.delete(call.task.taskId);
    call.slot.release();
  }

  #loseLease(reason: string): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#deps.logger.warn('lease lost; starting nothing more', { clientId: this.clientId, reason });
    this.#abort.abort(new StopWaiting('lease lost'));
    // The next holder adopts these calls; their ends are reported to it, not to us.
    for (const call of [...this.#calls.values()]) this.#end(call, 'lease lost');
    this.#poke();
  }

  #callsEnded(): Promise<void> {
    if (this.#calls.size === 0 || this.#lost) return Promise.resolve();
    return new Promise((resolve) => {
      this.#allEnded = () => {
        if (this.#calls.size === 0 || this.#lost) resolve();
      };
    });
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Sleeps up to `ms`, waking early on a call's end, a stop or a lost lease. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const handle = this.#deps.timers.setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        this.#deps.timers.clearTimeout(handle);
        resolve();
      };
    });
  }
}

/** The contact limits a call of `job` starting at `now` must pass (none when the job ignores them). */
function startLimits(client: ClientSettings, job: Job, now: number): StartLimits {
  const slots = job.ignoreContactLimits ? [] : capSlots(client.contactLimits, 'call', now, client.timeZone);
  return { slots, ...(job.endAt === undefined ? {} : { jobEndAt: job.endAt }) };
}
