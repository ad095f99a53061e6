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
import {
  type ClientSettings,
  DEFAULT_MAX_CALL_SECONDS,
  type Job,
  jobHasEnded,
  type Task,
} from '#shared/jobs/model.ts';
import { earliestStart, mayStartNow, taskZone } from '#shared/jobs/restrictions.ts';
import type { LeaseKeeper } from '#shared/lease/lease.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, TimerHandle, Timers } from '#shared/pacing/clock.ts';
import { type CallSlot, Pacer, PacingGate } from '#shared/pacing/pacer.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import type {
  CallRequest,
  CallStatusEvent,
  InitiateOutcome,
  TelephonyProvider,
  TelephonyProviders,
} from '#shared/telephony/port.ts';
import { isFinal, TelephonyUnavailableError } from '#shared/telephony/port.ts';
import { type ClientMetrics, noClientMetrics } from './broker-metrics.ts';
import { HeldClientSettings } from './client-settings.ts';
import type {
  BrokerTaskStore,
  CallEnded,
  CallLinkStore,
  Settlement,
  StartLimits,
  StartResult,
} from './ports.ts';
import { callbackUrlFor, settleFromSnapshot } from './settle.ts';

export interface ServeSettings {
  /** The public status route; each attempt's callback URL adds the attempt to its query. */
  readonly callbackUrl: string;
  /** A job's maximum call duration when it sets none, seconds. Default 600. */
  readonly defaultMaxCallSeconds: number;
  /** Wait this long past a call's maximum duration before asking the provider, ms. Default 30,000. */
  readonly reconcileMarginMs: number;
  /** Times reconciliation asks again about a call still not final before failing it. Default 3. */
  readonly reconcileTries: number;
  /** Extra spacing between starts against jitter (see TokenBucket), ms. Default 50. */
  readonly rateMarginMs: number;
  /** Outstanding tasks fetched per query. Default 50. */
  readonly batchSize: number;
  /** Keep the lease while the next task is ready within this long, ms. Default 60,000. */
  readonly holdMs: number;
  /** With nothing startable but calls in flight, look again after this long, ms. Default 5,000. */
  readonly recheckMs: number;
  /** First retry delay of an ambiguous `initiate`, ms (doubles, up to 8 s). Default 250. */
  readonly initiateRetryMs: number;
  /** Tries of one `initiate` before leaving the call to reconciliation. Default 6. */
  readonly initiateTries: number;
  /** How long a cached job is trusted (its status is checked again at every start anyway), ms. Default 5,000. */
  readonly jobCacheMs: number;
  /**
   * How long the client's settings are trusted while serving, ms. Default 5,000: new calling
   * hours, limits or a pause of the client take effect within this long.
   */
  readonly clientCheckMs: number;
}

export const DEFAULT_SERVE_SETTINGS: Omit<ServeSettings, 'callbackUrl'> = {
  defaultMaxCallSeconds: DEFAULT_MAX_CALL_SECONDS,
  reconcileMarginMs: 30_000,
  reconcileTries: 3,
  rateMarginMs: 50,
  batchSize: 50,
  holdMs: 60_000,
  recheckMs: 5_000,
  initiateRetryMs: 250,
  initiateTries: 6,
  jobCacheMs: 5_000,
  clientCheckMs: 5_000,
};

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

interface InFlightCall {
  readonly task: Task;
  readonly job: Job;
  readonly attempt: number;
  readonly slot: CallSlot;
  callId: string | undefined;
  timer: TimerHandle | undefined;
  reconcileTries: number;
  ended: boolean;
  /** A request for this attempt may have reached the provider (adopted, or an ambiguous answer). */
  maybePlaced: boolean;
  /** Every line about this call carries its client, job, task and attempt. */
  readonly log: Logger;
}

type NextTask =
  | { readonly kind: 'task'; readonly task: Task; readonly job: Job }
  | { readonly kind: 'wait'; readonly until: number | undefined };

class StopWaiting extends Error {
  override name = 'StopWaiting';
}

/** Serves one client while its lease is held. Make one per lease; {@link serve} runs it once. */
export class ClientServer {
  readonly clientId: string;
  readonly #deps: ServeClientDeps;
  readonly #calls = new Map<string, InFlightCall>();
  readonly #jobs = new Map<string, { job: Job | undefined; at: number }>();
  readonly #abort = new AbortController();
  #gate: PacingGate | undefined;
  #buffer: Task[] = [];
  #stopping = false;
  #lost = false;
  #wake: (() => void) | undefined;
  #allEnded: (() => void) | undefined;
  #client: HeldClientSettings | undefined;
  #sendQueue: Promise<void> = Promise.resolve();
  #lastAnsweredAt = Number.NEGATIVE_INFINITY;
  #sendIntervalMs = 0;
  #provider: TelephonyProvider | undefined;
  readonly #metrics: ClientMetrics;

  constructor(deps: ServeClientDeps) {
    this.#deps = deps;
    this.clientId = deps.keeper.clientId;
    this.#metrics = deps.metrics ?? noClientMetrics;
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
      this.#provider = this.#deps.providers.forClient(this.clientId, client.telephony);
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
    this.#sendIntervalMs = 1000 / client.callsPerSecond;
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
    this.#sendIntervalMs = 1000 / client.callsPerSecond;
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
      this.#buffer.unshift(task);
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
    const { tasks, clock, settings } = this.#deps;
    const client = await this.#currentClient();
    // A paused client starts nothing until resumed; the job manager lists it again then.
    if (client.paused) return { kind: 'wait', until: undefined };
    let refilled = false;
    let closedUntil: number | undefined;
    for (;;) {
      if (this.#buffer.length === 0) {
        if (refilled) break;
        refilled = true;
        const found = await tasks.outstanding(this.clientId, clock.now(), settings.batchSize);
        this.#buffer = found.filter((t) => !this.#calls.has(t.taskId));
        if (this.#buffer.length === 0) break;
      }
      const task = this.#buffer.shift()!;
      const job = await this.#job(task.jobId);
      // An ended job's tasks wait for the expire sweep; its start would be refused anyway.
      if (job?.status !== 'running' || jobHasEnded(job, clock.now())) continue;
      // Outside its hours or inside a restricted period: wait for the earliest start of any job.
      const now = clock.now();
      const opens = earliestStart(client, job, now, taskZone(client, job, task));
      if (opens !== now) {
        if (opens !== undefined) closedUntil = Math.min(closedUntil ?? opens, opens);
        // Read in its recipient's zone: out of the way until that zone opens (see #deferTask).
        if (opens !== undefined && job.timeZoneBy === 'recipient') await this.#deferTask(task, opens);
        continue;
      }
      return { kind: 'task', task, job };
    }
    const nextReady = await tasks.nextReadyAt(this.clientId);
    const now = clock.now();
    // Ready now but closed: wait for the hours; ready later: wait for it.
    const until =
      nextReady === undefined
        ? closedUntil
        : nextReady <= now
          ? (closedUntil ?? now + settings.recheckMs)
          : nextReady;
    return { kind: 'wait', until };
  }

  /**
   * Moves a task whose recipient's zone is closed to when it opens, so the next index read finds
   * recipients that may be called now rather than the same closed ones (issue 14 #4). A failure
   * is only logged: the task stays where it was and is checked again.
   */
  async #deferTask(task: Task, readyAt: number): Promise<void> {
    const { tasks, clock, logger } = this.#deps;
    try {
      await tasks.defer?.(task, readyAt, clock.now());
    } catch (error) {
      logger.warn('could not defer a task to its zone opening', {
        clientId: this.clientId,
        taskId: task.taskId,
        error,
      });
    }
  }

  async #job(jobId: string): Promise<Job | undefined> {
    const { tasks, clock, settings } = this.#deps;
    const cached = this.#jobs.get(jobId);
    if (cached && clock.now() - cached.at < settings.jobCacheMs) return cached.job;
    const job = await tasks.getJob(this.clientId, jobId);
    this.#jobs.set(jobId, { job, at: clock.now() });
    return job;
  }

  /** Takes over the calls a previous holder left in flight: counts them, then settles them. */
  async #adopt(): Promise<void> {
    const { tasks, logger, clock } = this.#deps;
    const refs = await tasks.inFlight(this.clientId);
    for (const ref of refs) {
      const task = await tasks.getTask(ref);
      if (task?.state !== 'in-flight') {
        await tasks.forgetInFlight(this.clientId, ref);
        continue;
      }
      if (this.#calls.has(task.taskId)) continue;
      const job = await this.#job(task.jobId);
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
      this.#armReconcile(call, Math.max(clock.now(), this.#deadline(job, startedAt)));
      if (call.callId === undefined && !this.#deps.adoptOnly) void this.#placeSafely(call);
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

  /** When a call of `job` started at `startedAt` must have ended. */
  #deadline(job: Job, startedAt: number): number {
    const { settings } = this.#deps;
    const maxSeconds = job.maxCallDurationSeconds ?? settings.defaultMaxCallSeconds;
    return startedAt + maxSeconds * 1000 + settings.reconcileMarginMs;
  }

  async #launch(task: Task, job: Job, slot: CallSlot): Promise<void> {
    // Started under a valid fence but the lease is gone since: the next holder adopts the task
    // (recorded in flight) and places its call with the same key.
    if (this.#lost) {
      slot.release();
      return;
    }
    const call = this.#track(task, job, slot);
    this.#armReconcile(call, this.#deadline(job, task.startedAt ?? this.#deps.clock.now()));
    await this.#placeSafely(call);
  }

  /** {@link #place} for fire-and-forget callers: a failure is logged and left to reconciliation. */
  async #placeSafely(call: InFlightCall): Promise<void> {
    try {
      await this.#place(call);
    } catch (error) {
      call.log.warn('placing a call failed; left to reconciliation', {
        taskId: call.task.taskId,
        error,
      });
    }
  }

  #request(call: InFlightCall): CallRequest {
    const { task, job, attempt } = call;
    return {
      to: task.recipient,
      clientId: task.clientId,
      jobId: task.jobId,
      taskId: task.taskId,
      attempt,
      ...(task.startedAt === undefined ? {} : { startedAt: task.startedAt }),
      ...(job.ringTimeoutSeconds === undefined ? {} : { ringTimeoutSeconds: job.ringTimeoutSeconds }),
      callbackUrl: callbackUrlFor(this.#deps.settings.callbackUrl, {
        jobId: task.jobId,
        taskId: task.taskId,
        attempt,
      }),
      maxDurationSeconds: job.maxCallDurationSeconds ?? this.#deps.settings.defaultMaxCallSeconds,
      variables: task.variables,
    };
  }

  /** Places the call (or finds it again under its key), retrying ambiguous answers with the same key. */
  async #place(call: InFlightCall): Promise<void> {
    const { settings, tasks, clock } = this.#deps;
    const provider = this.#provider!;
    const key = attemptKey(call.task.jobId, call.task.taskId, call.attempt);
    const request = this.#request(call);
    let delay = settings.initiateRetryMs;
    let outcome: InitiateOutcome = { kind: 'retryable', reason: 'not tried' };
    for (let tryNo = 1; tryNo <= settings.initiateTries && !call.ended; tryNo++) {
      const context = { maybePlaced: call.maybePlaced };
      const answer = await this.#sendSpaced(() => provider.initiate(request, key, context), call);
      if (answer === undefined) return;
      outcome = answer;
      if (outcome.kind === 'retryable') call.maybePlaced = true;
      if (outcome.kind === 'accepted' || outcome.kind === 'rejected') break;
      const wait = outcome.kind === 'rate-limited' ? outcome.retryAfterMs : delay;
      delay = Math.min(delay * 2, 8_000);
      if (tryNo < settings.initiateTries) await this.#pause(wait);
    }
    if (call.ended) return;
    if (outcome.kind === 'accepted') {
      call.callId = outcome.callId;
      if (outcome.queuedMs !== undefined) {
        // The provider, not Switchboard, is holding calls back: the line's rate is below the contract's.
        call.log.info('the provider queued the call', {
          taskId: call.task.taskId,
          queuedMs: outcome.queuedMs,
        });
      }
      try {
        await tasks.recordCallId(call.task, call.attempt, outcome.callId, clock.now());
      } catch (error) {
        call.log.warn('call id not recorded; reconciliation will find the call by its key', {
          taskId: call.task.taskId,
          error,
        });
      }
      if (provider.linksCalls) await this.#link(call, key);
      return;
    }
    if (outcome.kind === 'rejected') {
      await this.#fail(call, `provider rejected the call: ${outcome.code} (${outcome.status})`);
      return;
    }
    // Still ambiguous: the call may exist. Reconciliation asks again at the deadline.
    call.log.warn('call not confirmed; left to reconciliation', { taskId: call.task.taskId, outcome });
  }

  /**
   * Links a placed call to its attempt so that the provider's events find it, and settles the
   * call at once when its end came before the link (a call that fails as it is dialled). A link
   * that cannot be written leaves the call to reconciliation.
   */
  async #link(call: InFlightCall, key: string): Promise<void> {
    const { callLinks, tasks, clock } = this.#deps;
    if (!callLinks || call.callId === undefined) return;
    const { task, attempt } = call;
    const link = { clientId: task.clientId, jobId: task.jobId, taskId: task.taskId, attempt };
    let held: readonly CallStatusEvent[];
    try {
      held = await callLinks.link(call.callId, link, clock.now());
    } catch (error) {
      call.log.warn('call not linked; reconciliation will ask the provider', { taskId: task.taskId, error });
      return;
    }
    const final = held.find((event) => isFinal(event.status));
    if (!final || call.ended) return;
    const snapshot = { ...final, idempotencyKey: key };
    await settleFromSnapshot(tasks, { task, job: call.job, attempt, snapshot, now: clock.now() });
    this.#end(call, 'reported');
  }

  /**
   * Sends one `initiate` request at least the line's interval after the previous one was
   * *answered*, one request at a time. The far side counts a call when the request reaches it,
   * which is somewhere between our send and its answer: anchoring on the previous answer is
   * the only spacing that holds there whatever the latency (the gate's decision and the start
   * transaction come before the send, so pacing decisions alone let two requests land closer
   * than the interval; the sandbox caught it). It costs the request's round trip per start, only
   * when the line rate is what limits the client. Retries of an ambiguous request are spaced the
   * same way: one of them may be the request that places the call. Undefined when the call ended
   * or the lease was lost before its turn.
   */
  async #sendSpaced(
    send: () => Promise<InitiateOutcome>,
    call: InFlightCall,
  ): Promise<InitiateOutcome | undefined> {
    const previous = this.#sendQueue;
    let done: () => void = () => {};
    this.#sendQueue = new Promise<void>((resolve) => {
      done = resolve;
    });
    try {
      await previous;
      const wait = this.#lastAnsweredAt + this.#sendIntervalMs - this.#deps.clock.now();
      if (wait > 0) await this.#pause(wait);
      if (call.ended || this.#lost) return undefined;
      try {
        return await send();
      } catch (error) {
        return { kind: 'retryable', reason: String(error) };
      } finally {
        this.#lastAnsweredAt = this.#deps.clock.now();
      }
    } finally {
      done();
    }
  }

  #armReconcile(call: InFlightCall, at: number): void {
    const { timers, clock } = this.#deps;
    if (call.timer !== undefined) timers.clearTimeout(call.timer);
    call.timer = timers.setTimeout(
      () => {
        call.timer = undefined;
        void this.#reconcile(call);
      },
      Math.max(0, at - clock.now()),
    );
  }

  /** The slow path: a call with no reported end by its deadline is asked of the provider. */
  async #reconcile(call: InFlightCall): Promise<void> {
    const { clock, settings } = this.#deps;
    if (call.ended || this.#lost) return;
    call.reconcileTries += 1;
    const lastTry = call.reconcileTries >= settings.reconcileTries;
    try {
      const callId = await this.#callToAsk(call, lastTry);
      if (callId !== undefined) await this.#askProvider(call, callId, lastTry);
    } catch (error) {
      if (lastTry && error instanceof TelephonyUnavailableError) {
        await this.#fail(call, 'the provider could not be asked about the call').catch(() => {});
        return;
      }
      call.log.warn('reconciliation failed; will try again', { taskId: call.task.taskId, error });
      if (!call.ended) this.#armReconcile(call, clock.now() + settings.reconcileMarginMs);
    }
  }

  /**
   * The provider's id of a call still in flight on this attempt, placing it first when it never
   * was; undefined when there is nothing to ask: settled elsewhere, failed, or tried again later.
   */
  async #callToAsk(call: InFlightCall, lastTry: boolean): Promise<string | undefined> {
    const { tasks, clock, settings } = this.#deps;
    const stored = await tasks.getTask(call.task);
    if (stored?.state !== 'in-flight' || stored.attempts !== call.attempt) {
      this.#end(call, 'settled elsewhere');
      return undefined;
    }
    call.callId ??= stored.callId;
    if (call.callId === undefined && this.#deps.adoptOnly) {
      // Placing it now could be its first ring, where this broker may start nothing.
      await this.#fail(call, 'the provider never confirmed the call (it may have rung); not placed again');
      return undefined;
    }
    if (call.callId === undefined) {
      await this.#place(call);
      if (call.ended) return undefined;
    }
    if (call.callId === undefined) {
      if (lastTry) await this.#fail(call, 'the provider never confirmed the call');
      else this.#armReconcile(call, clock.now() + settings.reconcileMarginMs);
      return undefined;
    }
    return call.callId;
  }

  /**
   * Asks the provider for the call: settles it from a final status; else, past its maximum
   * duration, has it ended, and fails it on the last try or asks again after the margin.
   */
  async #askProvider(call: InFlightCall, callId: string, lastTry: boolean): Promise<void> {
    const { tasks, clock, settings } = this.#deps;
    const provider = this.#provider!;
    const snapshot = await provider.getCall(callId);
    if (snapshot === undefined) {
      await this.#fail(call, 'the provider does not know the call');
      return;
    }
    if (isFinal(snapshot.status)) {
      const settled = { task: call.task, job: call.job, attempt: call.attempt, snapshot, now: clock.now() };
      await settleFromSnapshot(tasks, settled);
      call.log.info('call settled by reconciliation', { taskId: call.task.taskId, status: snapshot.status });
      this.#end(call, 'reconciled');
      return;
    }
    // Past its maximum duration: a provider that does not end calls itself is told to.
    if (provider.hangUp && !lastTry) {
      const ended = await provider.hangUp(callId);
      call.log.info('call ended at its maximum duration', { taskId: call.task.taskId, ended });
    }
    if (lastTry) await this.#fail(call, `no final status after the maximum duration (${snapshot.status})`);
    else this.#armReconcile(call, clock.now() + settings.reconcileMarginMs);
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

  /** A plain wait that only a lost lease cuts short (for retries that belong to one call). */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const handle = this.#deps.timers.setTimeout(resolve, ms);
      if (this.#lost) {
        this.#deps.timers.clearTimeout(handle);
        resolve();
      }
    });
  }
}

/** The contact limits a call of `job` starting at `now` must pass (none when the job ignores them). */
function startLimits(client: ClientSettings, job: Job, now: number): StartLimits {
  const slots = job.ignoreContactLimits ? [] : capSlots(client.contactLimits, 'call', now, client.timeZone);
  return { slots, ...(job.endAt === undefined ? {} : { jobEndAt: job.endAt }) };
}
