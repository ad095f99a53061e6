/**
 * Placing a call with the client's telephony provider (`serve-client.ts` decides which task starts):
 * `initiate` under the attempt's idempotency key, one request at a time spaced by the line's rate,
 * ambiguous answers retried with the same key, then the call's id recorded and, for a provider
 * whose events name only the call, the call linked to its attempt.
 */
import type { Job, Task } from '#shared/jobs/model.ts';
import type { Logger } from '#shared/log.ts';
import type { TimerHandle } from '#shared/pacing/clock.ts';
import type { CallSlot } from '#shared/pacing/pacer.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import type {
  CallRequest,
  CallStatusEvent,
  InitiateOutcome,
  TelephonyProvider,
} from '#shared/telephony/port.ts';
import { isFinal } from '#shared/telephony/port.ts';
import type { ServeClientDeps } from './serve-client.ts';
import { callbackUrlFor, settleFromSnapshot } from './settle.ts';

/** A call this broker holds in flight: its attempt, slot, provider id and reconciliation state. */
export interface InFlightCall {
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

/** What placing and reconciling a call need of the server that holds it (`serve-client.ts`). */
export interface CallHost {
  /** True once the lease is lost: nothing of this broker may act on a call any more. */
  readonly lost: () => boolean;
  /** The call is no longer this broker's: its slot is freed. */
  readonly end: (call: InFlightCall, why: string) => void;
  /** Fails the call's attempt in the store, then ends it. */
  readonly fail: (call: InFlightCall, reason: string) => Promise<void>;
}

/** What placing a call reads of the serving deps. */
export type CallPlacementDeps = Pick<
  ServeClientDeps,
  'tasks' | 'callLinks' | 'clock' | 'timers' | 'settings'
>;

/** Places the calls of one served client, spacing the requests by its line's rate. */
export class CallPlacer {
  readonly #deps: CallPlacementDeps;
  readonly #provider: TelephonyProvider;
  readonly #host: CallHost;
  #sendQueue: Promise<void> = Promise.resolve();
  #lastAnsweredAt = Number.NEGATIVE_INFINITY;
  #sendIntervalMs: number;

  constructor(deps: CallPlacementDeps, provider: TelephonyProvider, host: CallHost, callsPerSecond: number) {
    this.#deps = deps;
    this.#provider = provider;
    this.#host = host;
    this.#sendIntervalMs = 1000 / callsPerSecond;
  }

  /** The client's line rate changed: requests are spaced by its new interval. */
  spaceFor(callsPerSecond: number): void {
    this.#sendIntervalMs = 1000 / callsPerSecond;
  }

  /** {@link place} for fire-and-forget callers: a failure is logged and left to reconciliation. */
  async placeSafely(call: InFlightCall): Promise<void> {
    try {
      await this.place(call);
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
  async place(call: InFlightCall): Promise<void> {
    const { settings, tasks, clock } = this.#deps;
    const provider = this.#provider;
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
      await this.#host.fail(call, `provider rejected the call: ${outcome.code} (${outcome.status})`);
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
    this.#host.end(call, 'reported');
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
      if (call.ended || this.#host.lost()) return undefined;
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

  /** A plain wait that only a lost lease cuts short (for retries that belong to one call). */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const handle = this.#deps.timers.setTimeout(resolve, ms);
      if (this.#host.lost()) {
        this.#deps.timers.clearTimeout(handle);
        resolve();
      }
    });
  }
}
