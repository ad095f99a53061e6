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

import { backoffDelay } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { retryKeyStillSafe } from '#shared/retry-keys.ts';
import type { BatchLedger, ClaimedTask, SendObservation, TaskOutcome } from './ports.ts';
import type { SendPacer } from './send-pacer.ts';
import { multicastUnit, pushUnit, type SendUnit } from './send-queue.ts';
import {
  type MessageTransport,
  type PreparedRequest,
  type TransportOutcome,
  UnpreparableError,
} from './transport.ts';
import { rejectionReason, type Sending, UnitAnswers } from './unit-answers.ts';

/** An outcome for every task of a unit (the unit's identity is added). */
export type UnitOutcome = Omit<TaskOutcome, 'at' | 'jobId' | 'taskId' | 'attempt' | 'retryKey'>;

/** Why a run stopped before its source ran dry, other than its signal. */
export type ChannelStop = 'monthly-quota' | 'daily-quota' | 'held';

/** What a sender needs of the run it belongs to. */
export interface SendingRun<T extends object> {
  readonly stopping: boolean;
  stop(reason: ChannelStop, detail?: string): void;
  /** Sleeps `ms`; false when the pipeline stopped meanwhile (stopping wakes it at once). */
  sleep(ms: number): Promise<boolean>;
  /** Settles every task of the unit, or only `tasks` of it, with one outcome. */
  settleUnit(unit: SendUnit<T>, outcome: UnitOutcome, tasks?: readonly ClaimedTask<T>[]): void;
  readonly totals: { requests: number; multicastRequests: number; resends: number; rateLimited: number };
}

/** A channel's check of a job's content before its first send: the reason it refuses, if it does. */
export type ContentCheck = (jobId: string, checkable: unknown) => Promise<string | undefined>;

export interface UnitSenderOptions<T extends object> {
  readonly transport: MessageTransport<T>;
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
  /** The channel's check of each job's content before its first send; none: sent unchecked. */
  readonly check?: ContentCheck | undefined;
  /**
   * For a channel that is not idempotent: how long an attempt that may have been sent waits for the
   * channel's own word (SES's SEND event) before it ends `in-doubt`.
   */
  readonly inDoubtWaitMs: number;
}

/** The reason of a task ended in doubt: its send may or may not have gone out, and was not repeated. */
export const IN_DOUBT_REASON =
  'the send was not answered and no event said it went out: it may or may not have been sent, and was not sent again';

/** What a task in doubt is released as, waiting for the channel's event: its first send's, or its resend's. */
export const AWAITING_SEND_EVENT = 'awaiting-send-event';
export const AWAITING_RESEND_EVENT = 'awaiting-resend-event';

/** The reason of a unit released after a stop while LINE had answered none of its resends. */
export const UNFINISHED_REASON =
  'stopped while LINE had not answered a resend of a request whose answer was lost: it may have been delivered';

export class UnitSender<T extends object> {
  readonly #run: SendingRun<T>;
  readonly #options: UnitSenderOptions<T>;
  readonly #answers: UnitAnswers<T>;

  constructor(run: SendingRun<T>, options: UnitSenderOptions<T>) {
    this.#run = run;
    this.#options = options;
    this.#answers = new UnitAnswers(run, options);
  }

  async send(whole: SendUnit<T>): Promise<void> {
    const unit = this.#options.transport.idempotent ? whole : this.#withoutDoubtful(whole);
    if (unit === undefined) return;
    const prepared = this.#prepare(unit);
    if (prepared === undefined || (await this.#refused(unit, prepared))) return;
    // A channel without idempotency keys records its request just before it is made (`#request`):
    // a task left by a dead holder may have gone out only if its request was recorded.
    if (this.#options.transport.idempotent && !(await this.#record(unit))) return;
    const maybeSent = unit.tasks.some((t) => t.maybeSent === true);
    const { transport } = this.#options;
    const cost = transport.limits.countsRecipients ? unit.tasks.length : 1;
    const sending: Sending<T> = { unit, prepared, cost, maybeSent, retries: 0, sends: 0 };
    for (;;) {
      const outcome = await this.#request(sending);
      if (outcome === undefined || (await this.#settled(sending, outcome))) return;
    }
  }

  /**
   * A channel without idempotency keys never resends an attempt that may have gone out (an earlier
   * holder had it in flight, or its answer was lost): it waits for the channel's event (which
   * settles the task in the store) for `inDoubtWaitMs` from the attempt's start, then ends it
   * `in-doubt`. What is left of the unit to send (undefined: nothing).
   */
  #withoutDoubtful(unit: SendUnit<T>): SendUnit<T> | undefined {
    const confirmed = unit.tasks.filter((t) => t.maybeSent === true && t.sentConfirmed === true);
    if (confirmed.length > 0)
      this.#run.settleUnit(
        unit,
        { kind: 'delivered', lastResult: this.#options.transport.acceptedAs },
        confirmed,
      );
    const doubtful = unit.tasks.filter((t) => t.maybeSent === true && t.sentConfirmed !== true);
    if (confirmed.length === 0 && doubtful.length === 0) return unit;
    const now = this.#options.clock.now();
    const waiting = doubtful.filter((t) => now < t.attemptStartedAt + this.#options.inDoubtWaitMs);
    const over = doubtful.filter((t) => !waiting.includes(t));
    for (const task of waiting)
      this.#run.settleUnit(
        unit,
        {
          kind: 'released',
          lastResult: task.resentInDoubt ? AWAITING_RESEND_EVENT : AWAITING_SEND_EVENT,
          maybeSent: true,
          retryAfterMs: task.attemptStartedAt + this.#options.inDoubtWaitMs - now,
        },
        [task],
      );
    // At-least-once: what no event confirmed is sent once more, marked so that it never is again.
    const resend = this.#options.transport.resendsInDoubt ? over.filter((t) => !t.resentInDoubt) : [];
    const inDoubt = over.filter((t) => !resend.includes(t));
    if (inDoubt.length > 0)
      this.#run.settleUnit(
        unit,
        { kind: 'failed', lastResult: 'in-doubt', reason: IN_DOUBT_REASON },
        inDoubt,
      );
    // The others of a batch go on their own: no request of the doubtful ones is repeated.
    const rest = [
      ...unit.tasks.filter((t) => t.maybeSent !== true),
      ...resend.map(({ maybeSent: _, ...task }): ClaimedTask<T> => ({ ...task, resentInDoubt: true })),
    ];
    if (rest.length === 0) return undefined;
    return rest.length === 1 ? pushUnit(rest[0]!) : multicastUnit(rest);
  }

  /**
   * Gives a unit sent to a channel that is not idempotent back to wait for the channel's event: its
   * resent tasks apart (`AWAITING_RESEND_EVENT`: never sent a third time).
   */
  #awaitEvent(unit: SendUnit<T>, outcome: Omit<UnitOutcome, 'kind' | 'lastResult'>): void {
    for (const resent of [false, true]) {
      const tasks = unit.tasks.filter((t) => (t.resentInDoubt === true) === resent);
      if (tasks.length === 0) continue;
      const lastResult = resent ? AWAITING_RESEND_EVENT : AWAITING_SEND_EVENT;
      this.#run.settleUnit(unit, { ...outcome, kind: 'released', lastResult }, tasks);
    }
  }

  /** The request, prepared once; a unit that cannot be prepared fails its tasks. */
  #prepare(unit: SendUnit<T>): PreparedRequest | undefined {
    try {
      return this.#options.transport.prepare(unit);
    } catch (error) {
      const reason =
        error instanceof UnpreparableError ? error.reason : `bad-message: ${(error as Error).message}`;
      this.#run.settleUnit(unit, { kind: 'failed', lastResult: 'not-sent', reason });
      return undefined;
    }
  }

  /**
   * The channel refused the job's content when its check was asked (LINE: once per job, before its
   * first send, `message-check.ts`): the unit's tasks fail unsent with the channel's reason.
   */
  async #refused(unit: SendUnit<T>, prepared: PreparedRequest): Promise<boolean> {
    const check = this.#options.check;
    if (check === undefined || prepared.checkable === undefined) return false;
    const reason = await check(unit.tasks[0]!.jobId, prepared.checkable);
    if (reason === undefined) return false;
    this.#run.settleUnit(unit, {
      kind: 'failed',
      lastResult: `${this.#options.transport.channel}-refused`,
      reason,
    });
    return true;
  }

  /** A new multicast is recorded before its first request; false when its tasks were released instead. */
  async #record(unit: SendUnit<T>): Promise<boolean> {
    const { batches, log } = this.#options;
    if (unit.recorded || !batches) return true;
    // A single send is recorded only for a channel without idempotency keys (see `send`).
    if (unit.endpoint !== 'multicast' && this.#options.transport.idempotent) return true;
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
  async #request(sending: Sending<T>): Promise<TransportOutcome | undefined> {
    const { clock, pacer, transport } = this.#options;
    const { unit, prepared } = sending;
    if (transport.idempotent && !retryKeyStillSafe(unit.startedAt, clock.now())) {
      // An earlier request may have been accepted; past the channel's memory of the key, a resend
      // (or a new attempt) could deliver twice. Settling as failed keeps "at most once".
      this.#run.settleUnit(unit, {
        kind: 'failed',
        lastResult: 'retry-window-passed',
        reason: 'the retry key is too old to resend safely; the message may or may not have been delivered',
      });
      return undefined;
    }
    if (!(await pacer.acquire(prepared.lane, sending.cost)) || this.#run.stopping) {
      await this.#stopped(sending);
      return undefined;
    }
    if (sending.sends === 0 && unit.tasks.some((t) => t.sendBy !== undefined && clock.now() >= t.sendBy)) {
      // Its job has ended: nothing of it may start now (a resend of a request made may: it was in flight).
      this.#run.settleUnit(unit, { kind: 'released', lastResult: 'job-ended', maybeSent: sending.maybeSent });
      return undefined;
    }
    if (!transport.idempotent && sending.sends === 0) {
      await transport.ready?.(prepared);
      if (this.#run.stopping) {
        await this.#stopped(sending);
        return undefined;
      }
      if (!(await this.#record(unit))) return undefined;
    }
    return this.#send(sending);
  }

  /** The unit's request, once, counted and observed. */
  async #send(sending: Sending<T>): Promise<TransportOutcome> {
    const { clock, transport, observe } = this.#options;
    const { unit, prepared } = sending;
    const startedAt = clock.now();
    const totals = this.#run.totals;
    if (sending.sends > 0) totals.resends++;
    sending.sends++;
    totals.requests++;
    if (unit.endpoint === 'multicast') totals.multicastRequests++;
    const outcome = await transport.send(prepared);
    if (observe) {
      const accepted =
        outcome.kind === 'per-recipient'
          ? outcome.entries.filter((e) => e.kind === 'delivered').length
          : undefined;
      observe({
        ...(unit.tasks[0] ? { jobId: unit.tasks[0].jobId } : {}),
        endpoint: prepared.lane,
        recipients: accepted ?? unit.tasks.length,
        outcome: outcome.kind === 'per-recipient' ? 'delivered' : outcome.kind,
        latencyMs: clock.now() - startedAt,
      });
    }
    return outcome;
  }

  /**
   * The run stopped while this unit waited for its next request. Nothing of it sent in this run
   * that may have reached the channel: given back as it is. Else finished first (see the module
   * comment) when the channel is idempotent; given back in doubt when it is not.
   */
  async #stopped(sending: Sending<T>): Promise<void> {
    if (sending.sends > 0 && sending.maybeSent && this.#options.transport.idempotent)
      return this.#finish(sending);
    if (sending.sends > 0 && sending.maybeSent) return this.#awaitEvent(sending.unit, { maybeSent: true });
    this.#run.settleUnit(sending.unit, {
      kind: 'released',
      lastResult: 'stopped',
      maybeSent: sending.maybeSent,
    });
  }

  /**
   * Resends a stopped unit's request (same bytes, same key) until the channel answers it, within
   * `finishWithinMs` and the key's window. No pacer token is taken (the pacer stopped with the run):
   * at most one request is in the air per unit in this state, and there are at most as many such
   * units as senders; a 429 is waited out like a 5xx.
   */
  async #finish(sending: Sending<T>): Promise<void> {
    const { clock, finishWithinMs, retryBaseMs, random } = this.#options;
    const deadline = clock.now() + finishWithinMs;
    let wait = 0;
    for (let tries = 0; await this.#finishWait(sending, wait, deadline); tries++) {
      const outcome = await this.#send(sending);
      wait = backoffDelay(Math.min(tries, 10), { baseMs: retryBaseMs, random });
      if (outcome.kind === 'retryable') sending.maybeSent ||= outcome.maybeDelivered;
      else if (outcome.kind === 'rate-limited') {
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
  async #finishWait(sending: Sending<T>, ms: number, deadline: number): Promise<boolean> {
    const { clock, timers } = this.#options;
    if (clock.now() + ms >= deadline) return false;
    if (ms > 0) await new Promise<void>((resolve) => timers.setTimeout(resolve, ms));
    return retryKeyStillSafe(sending.unit.startedAt, clock.now());
  }

  /** Acts on the channel's answer: true when the unit settled, false to send it again. */
  async #settled(sending: Sending<T>, outcome: TransportOutcome): Promise<boolean> {
    const { unit } = sending;
    const { pacer, transport } = this.#options;
    switch (outcome.kind) {
      case 'delivered':
        pacer.succeeded(sending.prepared.lane);
        this.#run.settleUnit(unit, {
          kind: 'delivered',
          lastResult: transport.acceptedAs,
          requestId: outcome.requestId,
        });
        return true;
      case 'already-delivered':
        pacer.succeeded(sending.prepared.lane);
        this.#run.settleUnit(unit, {
          kind: 'delivered',
          lastResult: 'already-delivered',
          requestId: outcome.acceptedRequestId,
        });
        return true;
      case 'per-recipient':
        this.#answers.perRecipient(sending, outcome.entries, outcome.requestId);
        return true;
      case 'rejected':
        this.#run.settleUnit(unit, {
          kind: 'failed',
          lastResult: `http-${outcome.status}`,
          reason: rejectionReason(outcome),
          requestId: outcome.requestId,
          ...(outcome.recipientRefused && unit.tasks.length === 1 ? { unreachable: true } : {}),
        });
        return true;
      case 'quota-used-up':
        return this.#answers.quotaUsedUp(sending, outcome);
      case 'held':
        this.#answers.held(sending, outcome.reason);
        return true;
      case 'rate-limited':
        this.#run.totals.rateLimited++;
        pacer.backOff(sending.prepared.lane, outcome.retryAfterMs, this.#options.random);
        return false;
      case 'retryable':
        return this.#retryable(sending, outcome);
    }
  }

  async #retryable(
    sending: Sending<T>,
    outcome: Extract<TransportOutcome, { kind: 'retryable' }>,
  ): Promise<boolean> {
    const { unit } = sending;
    sending.maybeSent ||= outcome.maybeDelivered;
    if (this.#run.stopping) {
      await this.#stopped(sending);
      return true;
    }
    if (outcome.maybeDelivered && !this.#options.transport.idempotent) {
      // No key makes a resend safe: the task waits for the channel's event (see #withoutDoubtful).
      this.#options.log?.warn('a send was not answered; its tasks wait for the channel’s event', {
        reason: outcome.message,
      });
      this.#awaitEvent(unit, {
        reason: outcome.message,
        maybeSent: true,
        retryAfterMs: this.#options.inDoubtWaitMs,
      });
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
