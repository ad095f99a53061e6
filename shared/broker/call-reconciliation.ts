/**
 * Reconciliation, the slow path of a call (`serve-client.ts`): a call with no reported end by its
 * deadline (its maximum duration plus a margin) is asked of the provider, placed first when it
 * never was, settled from a final status, ended past its maximum duration, failed on the last try.
 */
import type { TelephonyProvider } from '#shared/telephony/port.ts';
import { isFinal, TelephonyUnavailableError } from '#shared/telephony/port.ts';
import type { CallHost, CallPlacer, InFlightCall } from './call-placement.ts';
import type { ServeClientDeps } from './serve-client.ts';
import { settleFromSnapshot } from './settle.ts';

/** What reconciling a call reads of the serving deps. */
export type CallReconciliationDeps = Pick<
  ServeClientDeps,
  'tasks' | 'clock' | 'timers' | 'settings' | 'adoptOnly'
>;

/** Reconciles the calls of one served client whose end was never reported. */
export class CallReconciler {
  readonly #deps: CallReconciliationDeps;
  readonly #provider: TelephonyProvider;
  readonly #host: CallHost;
  readonly #placer: CallPlacer;

  constructor(deps: CallReconciliationDeps, provider: TelephonyProvider, host: CallHost, placer: CallPlacer) {
    this.#deps = deps;
    this.#provider = provider;
    this.#host = host;
    this.#placer = placer;
  }

  /**
   * Asks about the call once it must have ended (at once when that is past): its job's maximum
   * call duration after `startedAt`, plus the margin.
   */
  armAtDeadline(call: InFlightCall, startedAt: number): void {
    const { settings } = this.#deps;
    const maxSeconds = call.job.maxCallDurationSeconds ?? settings.defaultMaxCallSeconds;
    this.arm(call, startedAt + maxSeconds * 1000 + settings.reconcileMarginMs);
  }

  /** Asks about the call at `at`, unless it ends first. */
  arm(call: InFlightCall, at: number): void {
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
    if (call.ended || this.#host.lost()) return;
    call.reconcileTries += 1;
    const lastTry = call.reconcileTries >= settings.reconcileTries;
    try {
      const callId = await this.#callToAsk(call, lastTry);
      if (callId !== undefined) await this.#askProvider(call, callId, lastTry);
    } catch (error) {
      if (lastTry && error instanceof TelephonyUnavailableError) {
        await this.#host.fail(call, 'the provider could not be asked about the call').catch(() => {});
        return;
      }
      call.log.warn('reconciliation failed; will try again', { taskId: call.task.taskId, error });
      if (!call.ended) this.arm(call, clock.now() + settings.reconcileMarginMs);
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
      this.#host.end(call, 'settled elsewhere');
      return undefined;
    }
    call.callId ??= stored.callId;
    if (call.callId === undefined && this.#deps.adoptOnly) {
      // Placing it now could be its first ring, where this broker may start nothing.
      await this.#host.fail(
        call,
        'the provider never confirmed the call (it may have rung); not placed again',
      );
      return undefined;
    }
    if (call.callId === undefined) {
      await this.#placer.place(call);
      if (call.ended) return undefined;
    }
    if (call.callId === undefined) {
      if (lastTry) await this.#host.fail(call, 'the provider never confirmed the call');
      else this.arm(call, clock.now() + settings.reconcileMarginMs);
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
    const provider = this.#provider;
    const snapshot = await provider.getCall(callId);
    if (snapshot === undefined) {
      await this.#host.fail(call, 'the provider does not know the call');
      return;
    }
    if (isFinal(snapshot.status)) {
      const settled = { task: call.task, job: call.job, attempt: call.attempt, snapshot, now: clock.now() };
      await settleFromSnapshot(tasks, settled);
      call.log.info('call settled by reconciliation', { taskId: call.task.taskId, status: snapshot.status });
      this.#host.end(call, 'reconciled');
      return;
    }
    // Past its maximum duration: a provider that does not end calls itself is told to.
    if (provider.hangUp && !lastTry) {
      const ended = await provider.hangUp(callId);
      call.log.info('call ended at its maximum duration', { taskId: call.task.taskId, ended });
    }
    if (lastTry)
      await this.#host.fail(call, `no final status after the maximum duration (${snapshot.status})`);
    else this.arm(call, clock.now() + settings.reconcileMarginMs);
  }
}
