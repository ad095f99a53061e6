/**
 * The channel's answers to a unit's request that settle it for this run without a resend
 * (`unit-sender.ts` sends and resends): per recipient, the account held, a quota used up.
 */
import type { ClaimedTask } from './ports.ts';
import { MONTHLY_LIMIT_FAILURE_REASON } from './quota.ts';
import type { SendUnit } from './send-queue.ts';
import type { EntryOutcome, PreparedRequest, TransportOutcome } from './transport.ts';
import type { SendingRun, UnitOutcome, UnitSenderOptions } from './unit-sender.ts';

/** One unit's state while it is being sent. */
export interface Sending<T extends object> {
  readonly unit: SendUnit<T>;
  readonly prepared: PreparedRequest;
  /** Recipients of the request (the pacing cost of a lane counted in recipients). */
  readonly cost: number;
  /** A request of this attempt (this run's, or an earlier holder's) may have reached LINE. */
  maybeSent: boolean;
  retries: number;
  sends: number;
}

/** Settles a unit's tasks by an answer that ends its sending in this run. */
export class UnitAnswers<T extends object> {
  readonly #run: SendingRun<T>;
  readonly #options: UnitSenderOptions<T>;

  constructor(run: SendingRun<T>, options: UnitSenderOptions<T>) {
    this.#run = run;
    this.#options = options;
  }

  /**
   * A request answered per recipient (SES's SendBulkEmail: HTTP 200 with a status per destination):
   * each task gets its own outcome. Throttled ones back the lane off and go back for a new claim
   * soon; nothing of theirs was sent.
   */
  perRecipient(sending: Sending<T>, entries: readonly EntryOutcome[], requestId: string | undefined): void {
    sending.unit.tasks.forEach((task, i) => {
      this.#entrySettled(sending, task, entries[i], requestId);
    });
    if (entries.some((e) => e.kind === 'delivered')) this.#options.pacer.succeeded(sending.prepared.lane);
  }

  /** One recipient's own outcome (none: the answer left it out, so it goes back for later). */
  #entrySettled(
    sending: Sending<T>,
    task: ClaimedTask<T>,
    entry: EntryOutcome | undefined,
    requestId: string | undefined,
  ): void {
    const { unit, prepared } = sending;
    const { pacer, transport, random } = this.#options;
    const settle = (outcome: UnitOutcome) => this.#run.settleUnit(unit, outcome, [task]);
    switch (entry?.kind) {
      case 'delivered':
        settle({
          kind: 'delivered',
          lastResult: transport.acceptedAs,
          requestId: entry.messageId ?? requestId,
        });
        return;
      case 'rejected':
        settle({
          kind: 'failed',
          lastResult: entry.lastResult,
          reason: entry.reason,
          ...(entry.unreachable ? { unreachable: entry.unreachable } : {}),
        });
        return;
      case 'throttled':
        this.#run.totals.rateLimited++;
        pacer.backOff(prepared.lane, undefined, random);
        settle({ kind: 'released', lastResult: entry.lastResult, maybeSent: false, retryAfterMs: 1_000 });
        return;
      case 'quota-used-up':
        this.#run.stop('daily-quota', entry.reason);
        settle({ kind: 'released', lastResult: 'daily-quota', reason: entry.reason, maybeSent: false });
        return;
      case 'held':
        this.#run.stop('held', entry.reason);
        settle({ kind: 'released', lastResult: 'held', reason: entry.reason, maybeSent: false });
        return;
      default:
        settle({
          kind: 'released',
          lastResult: entry?.lastResult ?? 'no-entry',
          reason: entry?.reason ?? 'the answer had no entry for this recipient',
          maybeSent: false,
          retryAfterMs: 60_000,
        });
    }
  }

  /** The sending account is paused or suspended: the run stops, the unit goes back unsent. */
  held(sending: Sending<T>, reason: string): void {
    if (!this.#run.stopping)
      this.#options.log?.error('the channel holds every send; the run stops', { reason });
    this.#run.stop('held', reason);
    this.#run.settleUnit(sending.unit, {
      kind: 'released',
      lastResult: 'held',
      reason,
      maybeSent: sending.maybeSent,
    });
  }

  /** A quota used up: the run stops (the unit goes back), or with `fail-tasks` the unit fails. */
  quotaUsedUp(sending: Sending<T>, outcome: Extract<TransportOutcome, { kind: 'quota-used-up' }>): boolean {
    this.#run.totals.rateLimited++;
    if (outcome.quota === 'daily') {
      if (!this.#run.stopping)
        this.#options.log?.error('the channel’s daily quota is used up; the run stops');
      this.#run.stop('daily-quota', outcome.message);
      this.#run.settleUnit(sending.unit, {
        kind: 'released',
        lastResult: 'daily-quota',
        reason: outcome.message,
        maybeSent: sending.maybeSent,
      });
      return true;
    }
    if (this.#options.monthlyLimit === 'fail-tasks') {
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
}

/** A refused request's reason, as its tasks' report says it. */
export function rejectionReason(outcome: Extract<TransportOutcome, { kind: 'rejected' }>): string {
  const details = outcome.details
    .map((d) => [d.property, d.message].filter(Boolean).join(': '))
    .filter(Boolean)
    .join('; ');
  return `HTTP ${outcome.status}: ${outcome.message}${details ? ` (${details})` : ''}`;
}
