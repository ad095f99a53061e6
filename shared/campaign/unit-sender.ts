/**
 * Sending one unit (a push or a multicast) until it settles: the message rendered and the request
 * prepared once (a resend is the same bytes under the same retry key), a multicast recorded in the
 * ledger before its first request, each request paced, then by LINE's answer: 2xx and 409
 * delivered, other 4xx failed, a 429 backs the whole pool off (the monthly quota stops the
 * pipeline), a 5xx / timeout / dropped response retried with backoff while the key is inside
 * LINE's 24-hour window, else released with `maybeSent` for a later claim with the same attempt.
 *
 * A stop (pause, cancel, lease lost, SIGTERM) gives back a unit none of whose requests may have
 * reached LINE. One whose answer was lost is *finished* first: its request is sent again (the same
 * bytes, the same key) until LINE answers or `finishWithinMs` passes, so its tasks are reported as
 * LINE has them — a 409 says delivered, and a key LINE still holds cannot deliver twice — instead of
 * being given back to a job that may be cancelled and never claim them again. What still has no
 * answer then is released with `maybeSent`, and the report says it may have been delivered.
 */

import {
  backoffDelay,
  type OutgoingMessage,
  type PreparedSend,
  prepareMulticast,
  preparePush,
  type SendOutcome,
} from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { retryKeyStillSafe } from '#shared/retry-keys.ts';
import type { MessageCheck } from './message-check.ts';
import type { BatchLedger, SendObservation, SendPort, TaskOutcome } from './ports.ts';
import { MONTHLY_LIMIT_FAILURE_REASON } from './quota.ts';
import type { SendPacer } from './send-pacer.ts';
import type { SendUnit } from './send-queue.ts';
import { compileTemplate, MissingVariableError } from './template.ts';

/** An outcome for every task of a unit (the unit's identity is added). */
export type UnitOutcome = Omit<TaskOutcome, 'at' | 'jobId' | 'taskId' | 'attempt' | 'retryKey'>;

/** What a sender needs of the run it belongs to. */
export interface SendingRun {
  readonly stopping: boolean;
  stop(reason: 'monthly-quota'): void;
  /** Sleeps `ms`; false when the pipeline stopped meanwhile (stopping wakes it at once). */
  sleep(ms: number): Promise<boolean>;
  settleUnit(unit: SendUnit, outcome: UnitOutcome): void;
  readonly totals: { requests: number; multicastRequests: number; resends: number; rateLimited: number };
}

export interface UnitSenderOptions {
  readonly send: SendPort;
  readonly clock: Clock;
  /** Waits between the resends that finish a unit after a stop (the run's sleep ends at a stop). */
  readonly timers: Timers;
  readonly pacer: SendPacer;
  readonly batches: BatchLedger | undefined;
  readonly log: Logger | undefined;
  readonly observe: ((observation: SendObservation) => void) | undefined;
  readonly maxRetries: number;
  readonly retryBaseMs: number;
  readonly random: () => number;
  /** LINE's monthly-limit 429: stop the run, or fail the unit's tasks and go on. */
  readonly monthlyLimit: 'stop' | 'fail-tasks';
  /** After a stop, how long a unit whose answer was lost is resent under its key before it is released. */
  readonly finishWithinMs: number;
  /** LINE's check of each job's message before its first send; none: sent unchecked. */
  readonly check?: MessageCheck | undefined;
}

/** The reason of a unit released after a stop while LINE had answered none of its resends. */
export const UNFINISHED_REASON =
  'stopped while LINE had not answered a resend of a request whose answer was lost: it may have been delivered';

/** One unit's state while it is being sent. */
interface Sending {
  readonly unit: SendUnit;
  readonly prepared: PreparedSend;
  /** A request of this attempt (this run's, or an earlier holder's) may have reached LINE. */
  maybeSent: boolean;
  retries: number;
  sends: number;
}

export class UnitSender {
  readonly #run: SendingRun;
  readonly #options: UnitSenderOptions;

  constructor(run: SendingRun, options: UnitSenderOptions) {
    this.#run = run;
    this.#options = options;
  }

  async send(unit: SendUnit): Promise<void> {
    const ready = this.#prepare(unit);
    if (ready === undefined || (await this.#refused(unit, ready.messages))) return;
    const { prepared } = ready;
    if (!(await this.#record(unit))) return;
    const maybeSent = unit.tasks.some((t) => t.maybeSent === true);
    const sending: Sending = { unit, prepared, maybeSent, retries: 0, sends: 0 };
    for (;;) {
      const outcome = await this.#request(sending);
      if (outcome === undefined || (await this.#settled(sending, outcome))) return;
    }
  }

  /** The request, rendered once; a message that cannot be rendered fails its tasks. */
  #prepare(unit: SendUnit): { prepared: PreparedSend; messages: readonly OutgoingMessage[] } | undefined {
    const first = unit.tasks[0]!;
    try {
      const messages = compileTemplate(first.template).render(first.variables);
      const opts =
        first.template.notificationDisabled === undefined
          ? {}
          : { notificationDisabled: first.template.notificationDisabled };
      const prepared =
        unit.endpoint === 'push'
          ? preparePush(first.recipient, messages, unit.retryKey, opts)
          : prepareMulticast(
              unit.tasks.map((t) => t.recipient),
              messages,
              unit.retryKey,
              opts,
            );
      return { prepared, messages };
    } catch (error) {
      const reason =
        error instanceof MissingVariableError
          ? `missing-variable: ${error.variable}`
          : `bad-message: ${(error as Error).message}`;
      this.#run.settleUnit(unit, { kind: 'failed', lastResult: 'not-sent', reason });
      return undefined;
    }
  }

  /**
   * LINE refused the job's message when its validation endpoint was asked (once per job, before its
   * first send: `message-check.ts`): the unit's tasks fail unsent with LINE's reason.
   */
  async #refused(unit: SendUnit, messages: readonly OutgoingMessage[]): Promise<boolean> {
    const check = this.#options.check;
    if (check === undefined) return false;
    const reason = await check.refusal(unit.tasks[0]!.jobId, unit.endpoint, messages);
    if (reason === undefined) return false;
    this.#run.settleUnit(unit, { kind: 'failed', lastResult: 'line-refused', reason });
    return true;
  }

  /** A new multicast is recorded before its first request; false when its tasks were released instead. */
  async #record(unit: SendUnit): Promise<boolean> {
    const { batches, log } = this.#options;
    if (unit.endpoint !== 'multicast' || unit.recorded || !batches) return true;
    if (this.#run.stopping) {
      this.#run.settleUnit(unit, { kind: 'released', lastResult: 'stopped', maybeSent: false });
      return false;
    }
    try {
      await batches.record({
        jobId: unit.tasks[0]!.jobId,
        attempt: unit.tasks[0]!.attempt,
        retryKey: unit.retryKey,
        taskIds: unit.tasks.map((t) => t.taskId),
      });
      return true;
    } catch (error) {
      log?.warn('recording a multicast batch failed; its tasks are released unsent', { error });
      this.#run.settleUnit(unit, {
        kind: 'released',
        lastResult: 'batch-not-recorded',
        reason: (error as Error)?.message,
        maybeSent: false,
      });
      return false;
    }
  }

  /** One paced request; undefined when the unit settled without one (stopped, key too old). */
  async #request(sending: Sending): Promise<SendOutcome | undefined> {
    const { clock, pacer } = this.#options;
    const { unit, prepared } = sending;
    if (!retryKeyStillSafe(unit.startedAt, clock.now())) {
      // An earlier request may have been accepted; past LINE's memory of the key, a resend (or a
      // new attempt) could deliver twice. Settling as failed keeps "at most once".
      this.#run.settleUnit(unit, {
        kind: 'failed',
        lastResult: 'retry-window-passed',
        reason: 'the retry key is too old to resend safely; the message may or may not have been delivered',
      });
      return undefined;
    }
    if (!(await pacer.acquire(prepared.endpoint)) || this.#run.stopping) {
      await this.#stopped(sending);
      return undefined;
    }
    if (sending.sends === 0 && unit.tasks.some((t) => t.sendBy !== undefined && clock.now() >= t.sendBy)) {
      // Its job has ended: nothing of it may start now (a resend of a request made may: it was in flight).
      this.#run.settleUnit(unit, { kind: 'released', lastResult: 'job-ended', maybeSent: sending.maybeSent });
      return undefined;
    }
    return this.#send(sending);
  }

  /** The unit's request, once, counted and observed. */
  async #send(sending: Sending): Promise<SendOutcome> {
    const { clock, send, observe } = this.#options;
    const { unit, prepared } = sending;
    const startedAt = clock.now();
    const totals = this.#run.totals;
    if (sending.sends > 0) totals.resends++;
    sending.sends++;
    totals.requests++;
    if (prepared.endpoint === 'multicast') totals.multicastRequests++;
    const outcome = await send(prepared);
    observe?.({
      ...(unit.tasks[0] ? { jobId: unit.tasks[0].jobId } : {}),
      endpoint: prepared.endpoint,
      recipients: unit.tasks.length,
      outcome: outcome.kind,
      latencyMs: clock.now() - startedAt,
    });
    return outcome;
  }

  /**
   * The run stopped while this unit waited for its next request. Nothing of it sent in this run
   * that may have reached LINE: given back as it is. Else finished first (see the module comment).
   */
  async #stopped(sending: Sending): Promise<void> {
    if (sending.sends > 0 && sending.maybeSent) return this.#finish(sending);
    this.#run.settleUnit(sending.unit, {
      kind: 'released',
      lastResult: 'stopped',
      maybeSent: sending.maybeSent,
    });
  }

  /**
   * Resends a stopped unit's request (same bytes, same key) until LINE answers it, within
   * `finishWithinMs` and the key's window. No pacer token is taken (the pacer stopped with the run):
   * at most one request is in the air per unit in this state, and there are at most as many such
   * units as senders; a 429 is waited out like a 5xx.
   */
  async #finish(sending: Sending): Promise<void> {
    const { clock, finishWithinMs, retryBaseMs, random } = this.#options;
    const deadline = clock.now() + finishWithinMs;
    let wait = 0;
    for (let tries = 0; await this.#finishWait(sending, wait, deadline); tries++) {
      const outcome = await this.#send(sending);
      wait = backoffDelay(Math.min(tries, 10), { baseMs: retryBaseMs, random });
      if (outcome.kind === 'retryable') sending.maybeSent ||= outcome.maybeDelivered;
      else if (outcome.kind === 'rate-limited' && outcome.reason !== 'monthly-quota') {
        this.#run.totals.rateLimited++;
        wait = Math.max(wait, outcome.retryAfterMs ?? 0);
      } else {
        await this.#settled(sending, outcome);
        return;
      }
    }
    this.#options.log?.warn('a stopped unit whose answer was lost is released unanswered', {
      retryKey: sending.unit.retryKey,
    });
    this.#run.settleUnit(sending.unit, {
      kind: 'released',
      lastResult: 'stopped',
      reason: UNFINISHED_REASON,
      maybeSent: true,
    });
  }

  /** Waits `ms` before a finishing resend; false when that would pass the deadline or the key's window. */
  async #finishWait(sending: Sending, ms: number, deadline: number): Promise<boolean> {
    const { clock, timers } = this.#options;
    if (clock.now() + ms >= deadline) return false;
    if (ms > 0) await new Promise<void>((resolve) => timers.setTimeout(resolve, ms));
    return retryKeyStillSafe(sending.unit.startedAt, clock.now());
  }

  /** Acts on LINE's answer: true when the unit settled, false to send it again. */
  async #settled(sending: Sending, outcome: SendOutcome): Promise<boolean> {
    const { unit } = sending;
    switch (outcome.kind) {
      case 'delivered':
        this.#options.pacer.succeeded(sending.prepared.endpoint);
        this.#run.settleUnit(unit, {
          kind: 'delivered',
          lastResult: 'delivered',
          requestId: outcome.requestId,
        });
        return true;
      case 'already-delivered':
        this.#options.pacer.succeeded(sending.prepared.endpoint);
        this.#run.settleUnit(unit, {
          kind: 'delivered',
          lastResult: 'already-delivered',
          requestId: outcome.acceptedRequestId,
        });
        return true;
      case 'rejected':
        this.#run.settleUnit(unit, {
          kind: 'failed',
          lastResult: `http-${outcome.status}`,
          reason: rejectionReason(outcome),
          requestId: outcome.requestId,
        });
        return true;
      case 'rate-limited':
        return this.#rateLimited(sending, outcome);
      case 'retryable':
        return this.#retryable(sending, outcome);
    }
  }

  #rateLimited(sending: Sending, outcome: Extract<SendOutcome, { kind: 'rate-limited' }>): boolean {
    this.#run.totals.rateLimited++;
    if (outcome.reason === 'monthly-quota' && this.#options.monthlyLimit === 'fail-tasks') {
      this.#run.settleUnit(sending.unit, {
        kind: 'failed',
        lastResult: 'monthly-quota',
        reason: sending.maybeSent
          ? `${MONTHLY_LIMIT_FAILURE_REASON}; an earlier request of this attempt may have been delivered`
          : MONTHLY_LIMIT_FAILURE_REASON,
        requestId: outcome.requestId,
      });
      return true;
    }
    if (outcome.reason === 'monthly-quota') {
      if (!this.#run.stopping)
        this.#options.log?.error('LINE monthly message quota used up: message pipeline stopped');
      this.#run.stop('monthly-quota');
      this.#run.settleUnit(sending.unit, {
        kind: 'released',
        lastResult: 'monthly-quota',
        maybeSent: sending.maybeSent,
      });
      return true;
    }
    this.#options.pacer.backOff(sending.prepared.endpoint, outcome.retryAfterMs, this.#options.random);
    return false;
  }

  async #retryable(sending: Sending, outcome: Extract<SendOutcome, { kind: 'retryable' }>): Promise<boolean> {
    const { unit } = sending;
    sending.maybeSent ||= outcome.maybeDelivered;
    if (this.#run.stopping) {
      await this.#stopped(sending);
      return true;
    }
    if (sending.retries >= this.#options.maxRetries) {
      this.#options.log?.warn('message send still failing, task released', { reason: outcome.message });
      this.#run.settleUnit(unit, {
        kind: 'released',
        lastResult: outcome.reason,
        reason: outcome.message,
        maybeSent: sending.maybeSent,
        retryAfterMs: 60_000,
      });
      return true;
    }
    const wait = backoffDelay(sending.retries, {
      baseMs: this.#options.retryBaseMs,
      random: this.#options.random,
    });
    sending.retries++;
    if (!(await this.#run.sleep(wait))) {
      await this.#stopped(sending);
      return true;
    }
    return false;
  }
}

function rejectionReason(outcome: Extract<SendOutcome, { kind: 'rejected' }>): string {
  const details = outcome.details
    .map((d) => [d.property, d.message].filter(Boolean).join(': '))
    .filter(Boolean)
    .join('; ');
  return `HTTP ${outcome.status}: ${outcome.message}${details ? ` (${details})` : ''}`;
}
