/**
 * The report side of a message session ({@link ReportSink}). Where each outcome takes its task is
 * the lifecycle's rule (`messageOutcomeMove`); this writes it, two ways:
 * - A task's end (delivered, failed, skipped) when the task is on one of the session's claim
 *   pages: a plain conditional update (PartiQL, {@link STATEMENTS_PER_BATCH} to a
 *   `BatchExecuteStatement`, 1 write unit a task instead of a transaction's 2) that names the page
 *   (`endedOn`) and is refused once a broker taking the client over has marked the task left on
 *   that page (`leftOn`); the job's counts move once per page, with the page's deletion
 *   (`closePage`). The argument: `docs/claim-pages.md`, "Outcomes".
 * - Anything else (a release, a task not on a page): transactions of up to
 *   {@link OUTCOMES_PER_TRANSACTION} task updates with the job's counts moved in the same
 *   transaction. A release is written only by the claim's own holder and only while the job is
 *   not cancelled (else the task ends cancelled), nor past its end by the time the task would be
 *   ready again (else it ends expired).
 */

import type { ChannelMove, ReportSink, TaskOutcome } from '#shared/campaign/ports.ts';
import { jobHasEnded, keys } from '#shared/jobs/model.ts';
import {
  type MessageEndMove,
  type MessageOutcomeMove,
  messageOutcomeMove,
  type ReleasedJob,
} from '#shared/jobs/task-lifecycle.ts';
import { endedTaskExpiry } from '#shared/resources.ts';
import { multicastKeyOf } from '#shared/retry-keys.ts';
import {
  addEnds,
  type ClaimPages,
  claimKey,
  countEnd,
  type EndCounts,
  type EndState,
  jobCountsUpdate,
  noEnds,
} from './dynamo-claim-pages.ts';
import { type ChunkOutcome, chunkEnds } from './dynamo-message-chunks.ts';
import type { MessageClaimLease, SessionState } from './dynamo-message-session.ts';
import { failedConditions, MAX_TRIES, type MessageTaskTable } from './dynamo-message-table.ts';
import type { MulticastRecords } from './dynamo-multicast-records.ts';
import { endOnPageStatement, executeStatements } from './dynamo-page-outcomes.ts';
import { AdapterError } from './errors.ts';
import { moveFrom, STATE_NAME } from './task-state-conditions.ts';

/** Outcome updates per transaction (+ the job's counts). */
export const OUTCOMES_PER_TRANSACTION = 99;
/** Statements per `BatchExecuteStatement` (DynamoDB's limit). */
export const STATEMENTS_PER_BATCH = 25;
/**
 * Batches of ends written at once: the reporter's 100 outcomes as four full batches (in groups of
 * a transaction's 99, the 100th went alone, 5 requests where 4 do).
 */
const BATCHES_SIDE_BY_SIDE = 4;

/** What one task's end moves its job's counts by. */
function taskEnds(end: { state: EndState; reason?: string | undefined }): EndCounts {
  const counts = noEnds();
  countEnd(counts, end.state, end.reason);
  return counts;
}

/** When a released task may be claimed again. */
function readyAtOf(outcome: TaskOutcome): number {
  return outcome.at + (outcome.retryAfterMs ?? 0);
}

class ReportRetryError extends AdapterError {}

export interface OutcomeWriterDeps {
  readonly table: MessageTaskTable;
  readonly lease: MessageClaimLease;
  readonly state: SessionState;
  readonly batches: MulticastRecords;
  /** The session's claim pages. */
  readonly pages: ClaimPages;
}

export class OutcomeWriter implements ReportSink {
  readonly #deps: OutcomeWriterDeps;

  constructor(deps: OutcomeWriterDeps) {
    this.#deps = deps;
  }

  async write(all: readonly TaskOutcome[]): Promise<void> {
    const token = this.#deps.lease.token() ?? -1;
    // A chunk's members' outcomes are held until each has one, then written as the chunk's.
    const { tasks: outcomes, chunks } = this.#deps.state.chunks.gather(all);
    for (const chunk of chunks) await this.#writeChunk(chunk, token);
    const byJob = new Map<string, TaskOutcome[]>();
    for (const o of outcomes) byJob.set(o.jobId, [...(byJob.get(o.jobId) ?? []), o]);
    for (const [jobId, list] of byJob) {
      const onPages = list.filter((o) => this.#endsOnPage(o));
      const rest = list.filter((o) => !this.#endsOnPage(o));
      for (let i = 0; i < onPages.length; i += BATCHES_SIDE_BY_SIDE * STATEMENTS_PER_BATCH) {
        const chunk = onPages.slice(i, i + BATCHES_SIDE_BY_SIDE * STATEMENTS_PER_BATCH);
        // The batches of a group side by side: one round trip, as a transaction of them was.
        await Promise.all(
          Array.from({ length: Math.ceil(chunk.length / STATEMENTS_PER_BATCH) }, (_, b) =>
            this.#endOnPages(chunk.slice(b * STATEMENTS_PER_BATCH, (b + 1) * STATEMENTS_PER_BATCH)),
          ),
        );
        await this.#settled(chunk);
      }
      for (let i = 0; i < rest.length; i += OUTCOMES_PER_TRANSACTION) {
        const chunk = rest.slice(i, i + OUTCOMES_PER_TRANSACTION);
        await this.#writeGroup(jobId, chunk, token);
        await this.#settled(chunk);
      }
    }
  }

  /** A chunk's one outcome: an end on its page, else a release (or an end) in a transaction. */
  async #writeChunk(chunk: ChunkOutcome, token: number): Promise<void> {
    const o = chunk.outcome;
    if (this.#endsOnPage(o)) await this.#endOnPages([o], chunk);
    else await this.#writeGroup(o.jobId, [o], token, chunk);
    // Forgotten first (a reclaim of the chunk after `held` lets it go is a new claim), then
    // settled as the chunk and counted as its members.
    this.#deps.state.chunks.done(chunk);
    await this.#settled([o], chunk.members);
  }

  /** Outcomes written: their tasks let go, pages closed; `counted` (default: them) added to the session's counts. */
  async #settled(outcomes: readonly TaskOutcome[], counted = outcomes): Promise<void> {
    for (const o of counted) this.#deps.state.written[o.kind]++;
    for (const o of outcomes) {
      this.#deps.state.held.delete(o.taskId);
      this.#deps.state.startedAt.delete(claimKey(o.jobId, o.taskId));
      await this.#deps.batches.settled(o);
      await this.#deps.pages.settled(o.jobId, o.taskId);
    }
  }

  /** An end (not a release) of a task on one of this session's claim pages. */
  #endsOnPage(o: TaskOutcome): boolean {
    return o.kind !== 'released' && this.#deps.pages.pageOf(o.jobId, o.taskId) !== undefined;
  }

  /**
   * Ends tasks on this session's pages (≤ {@link STATEMENTS_PER_BATCH}), each a conditional update
   * naming its page; those it ended are counted on the page. A task that moved on (another
   * holder's outcome, a sweep, marked left by a broker taking over) is neither written nor counted.
   */
  async #endOnPages(outcomes: readonly TaskOutcome[], chunk?: ChunkOutcome): Promise<void> {
    const pages = this.#deps.pages;
    const ends = outcomes.map((o) => {
      // Not a release: an end, whatever the job.
      const end = messageOutcomeMove(o, { cancelled: false, endedBeforeReady: false }) as MessageEndMove;
      const page = pages.pageOf(o.jobId, o.taskId)!;
      const startedAt = this.#deps.state.startedAt.get(claimKey(o.jobId, o.taskId));
      return {
        o,
        end,
        page,
        statement: endOnPageStatement(this.#deps.table.tasksTable, o, end, page, {
          ...(startedAt === undefined ? {} : { startedAt }),
          multicastKey: multicastKeyOf(o),
          expiresAt: endedTaskExpiry(o.at),
          ...(chunk && Object.keys(chunk.except).length > 0
            ? { set: [['except', chunk.except]] as const }
            : {}),
        }),
      };
    });
    const results = await executeStatements(
      this.#deps.table.doc,
      ends.map((e) => e.statement),
    );
    ends.forEach(({ o, end, page }, j) => {
      const result = results[j]!;
      // Refused, yet ended on this page: this very write, applied, whose answer was lost and retried.
      const ours = result.applied || result.item?.endedOn === page;
      if (ours) pages.ended(o.jobId, o.taskId, chunk ? chunkEnds(end, chunk) : taskEnds(end));
    });
  }

  /** Writes one job's outcomes (≤ OUTCOMES_PER_TRANSACTION) and its counts in one transaction. */
  async #writeGroup(
    jobId: string,
    outcomes: TaskOutcome[],
    token: number,
    chunk?: ChunkOutcome,
  ): Promise<TaskOutcome[]> {
    let left = outcomes;
    let cancelledJob = false;
    // The job's end never changes: a cached copy of the job tells it exactly.
    const job = await this.#deps.table.jobs.cached(this.#deps.lease.clientId, jobId);
    for (let tryNo = 1; left.length > 0; tryNo++) {
      if (tryNo > MAX_TRIES) throw new ReportRetryError(`outcomes of job ${jobId} not written`);
      const updates = left.map((o) =>
        this.#outcomeUpdate(
          o,
          token,
          {
            cancelled: cancelledJob,
            endedBeforeReady: job !== undefined && jobHasEnded(job, readyAtOf(o)),
          },
          chunk,
        ),
      );
      const counts = noEnds();
      for (const u of updates) if (u.ends) addEnds(counts, u.ends);
      const releases = updates.some((u) => u.ends === undefined) && !cancelledJob;
      const codes = await this.#deps.table.transact([
        jobCountsUpdate(this.#deps.table.controlTable, this.#deps.lease.clientId, jobId, counts, releases),
        ...updates.map((u) => u.update),
      ]);
      if (codes === undefined) return left;
      if (codes[0] === 'ConditionalCheckFailed') {
        if (!releases) throw new ReportRetryError(`job ${jobId} has no counts to move`);
        // Cancelled while these were out: they end cancelled, not waiting for a claim that never comes.
        cancelledJob = true;
        continue;
      }
      // Outcomes for tasks that moved on (a newer holder settled them): nothing to write.
      const stale = failedConditions(codes);
      if (stale.size === 0) throw new ReportRetryError(`outcome write cancelled: ${codes.join(', ')}`);
      left = left.filter((_, j) => !stale.has(j));
    }
    return left;
  }

  /** The task update for an outcome, and what it adds to the job's counts. */
  #outcomeUpdate(outcome: TaskOutcome, token: number, job: ReleasedJob, chunk?: ChunkOutcome) {
    const end = messageOutcomeMove(outcome, job);
    const parts = this.#attemptParts(outcome, end, chunk);
    if (end.state === 'retry-wait') addRelease(parts, outcome, token);
    else addEnd(parts, outcome, end);
    // No holder whose claim page a newer holder settled (`leftOn`, as an end on a page checks) writes
    // an outcome here: its late release (or the end a release becomes when the job was cancelled or
    // has ended) would undo the newer holder's — a chunk's `except`, its wait.
    const page = this.#deps.pages.pageOf(outcome.jobId, outcome.taskId);
    if (page !== undefined) {
      parts.conditions.push('NOT contains(leftOn, :claimPage)');
      parts.values[':claimPage'] = page;
      // A move is no task left in flight on the page: a broker taking the client over leaves it be.
      if (outcome.moveTo) parts.set.push('movedOn = :claimPage');
    }
    const final = end.state === 'retry-wait' ? undefined : { state: end.state, reason: end.reason };
    return {
      ends: final && (chunk ? chunkEnds(final, chunk) : taskEnds(final)),
      update: {
        Update: {
          TableName: this.#deps.table.tasksTable,
          Key: keys.task(outcome.jobId, outcome.taskId),
          UpdateExpression: `SET ${parts.set.join(', ')} REMOVE ${parts.remove.join(', ')}`,
          ConditionExpression: parts.conditions.join(' AND '),
          ExpressionAttributeNames: parts.names,
          ExpressionAttributeValues: parts.values,
        },
      },
    };
  }

  /** What every outcome writes: the move, the attempt and its result, when it started, a chunk's `except`. */
  #attemptParts(outcome: TaskOutcome, end: MessageOutcomeMove, chunk?: ChunkOutcome): UpdateParts {
    const from = moveFrom(end.move);
    const parts: UpdateParts = {
      // A task claimed on a claim page shows attempt 0 (a first claim) until this write.
      set: ['#state = :state', 'attempts = :attempt', 'lastResult = :lastResult', 'updatedAt = :now'],
      remove: ['claimToken'],
      conditions: [from.condition, 'attempts <= :attempt'],
      names: { ...STATE_NAME },
      values: {
        // A move to another channel keeps the attempts made so far: nothing went out on this one.
        ':attempt': outcome.moveTo?.attempts ?? outcome.attempt,
        ':lastResult': outcome.lastResult,
        ':now': outcome.at,
        ...from.values,
        ':state': end.state,
      },
    };
    const startedAt = this.#deps.state.startedAt.get(claimKey(outcome.jobId, outcome.taskId));
    // A move starts the next channel's attempt afresh (LINE's retry-key window, an in-doubt wait).
    if (outcome.moveTo) parts.remove.push('startedAt');
    else if (startedAt !== undefined) {
      parts.set.push('startedAt = if_not_exists(startedAt, :startedAt)');
      parts.values[':startedAt'] = startedAt;
    }
    if (chunk && Object.keys(chunk.except).length > 0) {
      parts.set.push('#except = :except');
      parts.names['#except'] = 'except';
      parts.values[':except'] = chunk.except;
    }
    if (outcome.requestId) {
      parts.set.push('requestId = :requestId');
      parts.values[':requestId'] = outcome.requestId;
    }
    return parts;
  }
}

/** One task update, gathered clause by clause. */
interface UpdateParts {
  readonly set: string[];
  readonly remove: string[];
  /** Joined with AND. */
  readonly conditions: string[];
  readonly names: Record<string, string>;
  readonly values: Record<string, unknown>;
}

/** A release: the task waits again until its ready time, under the key it may have been sent with. */
function addRelease(parts: UpdateParts, outcome: TaskOutcome, token: number): void {
  const readyAt = readyAtOf(outcome);
  const multicastKey = multicastKeyOf(outcome);
  parts.set.push('readyAt = :readyAt', 'openSk = :openSk');
  parts.values[':readyAt'] = readyAt;
  parts.values[':openSk'] = keys.openSk(readyAt, outcome.jobId, outcome.taskId);
  if (multicastKey) {
    parts.set.push('batchKey = :batchKey');
    parts.values[':batchKey'] = multicastKey;
  }
  if (outcome.maybeSent) {
    parts.set.push('maybeSent = :maybeSent');
    parts.values[':maybeSent'] = true;
  }
  if (outcome.moveTo) addMove(parts, outcome.moveTo);
  // Only the claim's own holder gives a task in flight back: a newer holder may have reclaimed
  // it. (A claim page leaves its tasks waiting: a newer holder claims them only after it has
  // settled the page, and the session's `held` set keeps its own.)
  // (`<=`: a task claimed before claim pages and adopted on a page keeps its older holder's token.)
  parts.conditions.push('(#state <> :inFlightState OR claimToken <= :token)');
  parts.values[':token'] = token;
  parts.values[':inFlightState'] = 'in-flight';
}

/**
 * A fallback: the task waits on its next channel, as its identifier there, the channels it left
 * appended to `tried`. Nothing was sent on the one it leaves in doubt: its send state goes.
 */
function addMove(parts: UpdateParts, move: ChannelMove): void {
  parts.set.push(
    '#via = :via',
    '#recipient = :recipient',
    '#tried = list_append(if_not_exists(#tried, :none), :tried)',
  );
  Object.assign(parts.names, { '#via': 'via', '#recipient': 'recipient', '#tried': 'tried' });
  for (const name of ['batchKey', 'maybeSent'])
    if (!parts.set.some((clause) => clause.startsWith(`${name} =`))) parts.remove.push(name);
  // Only from the identifier it leaves: a late write of a holder that lost the client (a move off no
  // claim page, which no lease check fences) finds the task moved on already, and writes nothing.
  parts.conditions.push('#recipient = :from');
  parts.values[':from'] = move.from;
  parts.values[':via'] = move.channel;
  parts.values[':recipient'] = move.recipient;
  parts.values[':tried'] = move.tried;
  parts.values[':none'] = [];
}

/** An end: off the outstanding index, expiring, with its reason and the key it was sent with. */
function addEnd(parts: UpdateParts, outcome: TaskOutcome, end: MessageEndMove): void {
  const multicastKey = multicastKeyOf(outcome);
  parts.remove.push('openPk', 'openSk', 'batchKey', 'maybeSent');
  parts.set.push('expiresAt = :expiresAt');
  parts.values[':expiresAt'] = endedTaskExpiry(outcome.at);
  if (end.reason === undefined) parts.remove.push('reason');
  else {
    parts.set.push('reason = :reason');
    parts.values[':reason'] = end.reason;
  }
  if (multicastKey) {
    parts.set.push('sentWith = :sentWith');
    parts.values[':sentWith'] = multicastKey;
  }
}
