/**
 * A `message` job's tasks in DynamoDB, for the message pipeline running in the broker that holds
 * the client's lease: the {@link TaskSource} that claims pages of tasks, the {@link ReportSink}
 * that writes their outcomes, and the {@link BatchLedger} of multicasts.
 *
 * Claim = `TransactWriteItems` of a `ConditionCheck` that the lease passes the fence and one claim
 * page listing up to `CLAIMS_PER_TRANSACTION` tasks (`dynamo-claim-pages.ts`, the default; the
 * argument: `docs/claim-pages.md`): the tasks' items are not written until their outcome, and a
 * broker taking the client over first settles the pages it did not write (their tasks marked
 * `maybeSent`), then claims them again with the same attempt. The job's status is read
 * (≤ `jobCacheMs` old) rather than checked in the transaction: the reporter moves the job's counts
 * in its own transactions, and the two would conflict on the job item at every page. Claiming is
 * not sending: a pause stops sends in the broker (job watch, nudge), whatever was claimed goes back.
 * A task a broker before claim pages left `in-flight` under its own token is claimed again too,
 * with the same attempt (`isLeftByOlderHolder`).
 *
 * Outcomes are written in transactions too, with the job's counts moved in the same transaction
 * (exact counts, one count write per hundred messages): delivered → `completed`, failed → `failed`
 * with its reason, an opted-out recipient → `cancelled` (`opted-out`), released → `retry-wait` with
 * the same attempt (a job cancelled meanwhile → `cancelled`: the sweep may have passed already).
 * A task released after a request that may have reached LINE keeps `maybeSent`; if its recipient
 * has opted out by the next claim, nothing more is sent and its reason says it may have been
 * delivered (an opt-out is never overridden to find out).
 *
 * A multicast is recorded (`{jobId}#batch` / retry key, with its members) before its first
 * request. A member reclaimed later comes back with every still-unsettled member, under the
 * recorded key, so the resend is the same request and not a new one to the same people.
 *
 * The parts: `dynamo-message-claims.ts` (the claim side), `dynamo-message-outcomes.ts` (the
 * report side), `dynamo-multicast-records.ts` (the batch ledger), `dynamo-message-table.ts` (the
 * reads and writes they share). Which task may be claimed and where an outcome takes it are the
 * lifecycle's rules, in `shared/jobs/task-lifecycle.ts`.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BatchLedger, ReportSink, TaskSource } from '#shared/campaign/ports.ts';
import { type Job, type JobChannel, keys } from '#shared/jobs/model.ts';
import type { JobStore } from '#shared/jobs/ports.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { ClaimPages } from './dynamo-claim-pages.ts';
import { DynamoJobStore } from './dynamo-jobs.ts';
import { type ClaimerDeps, MessageClaimer } from './dynamo-message-claims.ts';
import { OutcomeWriter } from './dynamo-message-outcomes.ts';
import { type MessageClaimLease, SessionState } from './dynamo-message-session.ts';
import { isRunningMessageJob, MessageTaskTable } from './dynamo-message-table.ts';
import { MulticastRecords } from './dynamo-multicast-records.ts';

export type { MessageClaimLease } from './dynamo-message-session.ts';

/** How long a claim holds a task before the same lease holder may claim it again. Default 15 min. */
export const DEFAULT_HOLD_MS = 15 * 60_000;

export interface DynamoMessageTasksOptions {
  readonly controlTable: string;
  readonly tasksTable: string;
  readonly clock: Clock;
  /** The recipients of `recipients` who opted out (unfollowed); none when absent. */
  readonly optedOut?: (clientId: string, recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  /** The recipients of `recipients` on the client's suppression list, with the reason their task ends with. */
  readonly suppressed?: ClaimerDeps['suppressed'];
  readonly holdMs?: number;
  /** How long a job's status is trusted when choosing tasks (the claim re-checks it), ms. Default 1,000. */
  readonly jobCacheMs?: number;
}

/** A lease holder's view of its client's message tasks. */
export interface MessageSession {
  readonly source: TaskSource;
  readonly report: ReportSink;
  readonly batches: BatchLedger;
  /** True once a claim was refused by the lease fence: the lease is gone. */
  fenced(): boolean;
  /** The jobs this session has claimed from (for the status watch). */
  jobs(): readonly string[];
  /** Outcomes written so far in this session, by kind. */
  written(): { delivered: number; failed: number; skipped: number; released: number };
}

export interface DynamoMessageTasks {
  /**
   * A session for the lease holder. `accept` narrows the running message jobs it claims from
   * (e.g. those inside their calling hours now), and the channel their tasks are on (a job's own,
   * or the one a task fell back to).
   */
  session(lease: MessageClaimLease, accept?: (job: Job, channel: JobChannel) => boolean): MessageSession;
  /** The job as stored now (strongly consistent). */
  getJob(clientId: string, jobId: string): Promise<Job | undefined>;
  /** Pauses a running job with the reason (`Job.pausedReason`); false when it was not running. */
  pauseJob(clientId: string, jobId: string, reason: string): Promise<boolean>;
  /** Records LINE's refusal on a running job (`failureReason`), once; false when not running or already recorded. */
  refuseJob(clientId: string, jobId: string, reason: string): Promise<boolean>;
  /** Whether the client has a `message` task ready to claim now (any running message job). */
  hasClaimable(clientId: string): Promise<boolean>;
}

/** The message side of the tasks table. */
export class DynamoMessageTaskStore implements DynamoMessageTasks {
  readonly #table: MessageTaskTable;
  readonly #optedOut: DynamoMessageTasksOptions['optedOut'];
  readonly #suppressed: DynamoMessageTasksOptions['suppressed'];
  readonly #jobs: JobStore;
  readonly #clock: Clock;

  constructor(doc: DynamoDBDocumentClient, options: DynamoMessageTasksOptions) {
    this.#jobs = new DynamoJobStore(doc, options.controlTable);
    this.#clock = options.clock;
    this.#table = new MessageTaskTable(doc, {
      controlTable: options.controlTable,
      tasksTable: options.tasksTable,
      clock: options.clock,
      holdMs: options.holdMs ?? DEFAULT_HOLD_MS,
      jobCacheMs: options.jobCacheMs ?? 1_000,
    });
    this.#optedOut = options.optedOut;
    this.#suppressed = options.suppressed;
  }

  session(
    lease: MessageClaimLease,
    accept: (job: Job, channel: JobChannel) => boolean = () => true,
  ): MessageSession {
    const table = this.#table;
    const state = new SessionState();
    const batches = new MulticastRecords(table);
    const pages = new ClaimPages(table, lease.clientId);
    return {
      source: new MessageClaimer({
        table,
        lease,
        accept,
        state,
        batches,
        ...(this.#optedOut ? { optedOut: this.#optedOut } : {}),
        ...(this.#suppressed ? { suppressed: this.#suppressed } : {}),
        pages,
      }),
      report: new OutcomeWriter({ table, lease, state, batches, pages }),
      batches,
      fenced: () => state.fenced,
      jobs: () => [...state.jobsSeen],
      written: () => ({ ...state.written }),
    };
  }

  getJob(clientId: string, jobId: string): Promise<Job | undefined> {
    return this.#table.jobs.get(clientId, jobId);
  }

  async pauseJob(clientId: string, jobId: string, reason: string): Promise<boolean> {
    const job = await this.#table.jobs.get(clientId, jobId);
    if (job?.status !== 'running') return false;
    const moved = await this.#jobs.transition(job, 'paused', this.#clock.now(), reason);
    // Read again, so that the claims' job cache (which the read above filled with `running`) stops
    // handing out its tasks at once rather than a cache age later.
    await this.#table.jobs.get(clientId, jobId);
    return moved.ok;
  }

  async refuseJob(clientId: string, jobId: string, reason: string): Promise<boolean> {
    try {
      await this.#table.doc.send(
        new UpdateCommand({
          TableName: this.#table.controlTable,
          Key: keys.job(clientId, jobId),
          UpdateExpression: 'SET failureReason = :reason, updatedAt = :now',
          ConditionExpression: '#status = :running AND attribute_not_exists(failureReason)',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':reason': reason, ':now': this.#clock.now(), ':running': 'running' },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  async hasClaimable(clientId: string): Promise<boolean> {
    const now = this.#table.clock.now();
    const upper = keys.openSkAfter(now);
    for (let shard = 0; shard < TASK_SHARDS; shard++) {
      const found = await this.#table.readShard(
        clientId,
        shard,
        { upper },
        async (item) =>
          item.channel === 'message' &&
          isRunningMessageJob(await this.#table.jobs.cached(clientId, String(item.jobId)), now),
        1,
        // A chunk's entry is ~10 KB: a few at a time.
        { pageLimit: 4 },
      );
      if (found.length > 0) return true;
    }
    return false;
  }
}
