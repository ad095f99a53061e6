/**
 * Chunks in a message session (docs/multicast-chunks.md, step 3): a claimed chunk is handed to the
 * pipeline as one task per member still in the chunk's state. A shared message's members go under
 * the chunk's retry key for the attempt (`chunkRetryKey`), so they go out as one recorded multicast
 * (`SendQueue.addRecorded`: no ledger entry, the chunk is its own record); a personalised message's
 * members each go as a push of their own, under their own task's retry key (`attemptKey` of the
 * member's `recipientTaskId`: the key the member has as a task, spilled or not). Their outcomes come
 * back one by one and over several reporter batches; {@link ClaimedChunks} gathers them and, once
 * every member has one, gives the chunk's single outcome, with each member whose outcome differs
 * written apart in the chunk's `except`.
 */
import type { ClaimedTask, TaskOutcome } from '#shared/campaign/ports.ts';
import { isSharedMessage, type MessageTemplate } from '#shared/campaign/template.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import {
  type Chunk,
  type ChunkMember,
  type MemberApart,
  type MemberEnd,
  memberCountOf,
  membersEndedApart,
  memberTemplateVariables,
} from '#shared/jobs/chunks.ts';
import { type MessageEndMove, messageOutcomeMove } from '#shared/jobs/task-lifecycle.ts';
import { chunkRetryKey } from '#shared/retry-keys.ts';
import { claimKey, countEnd, type EndCounts, type EndState, noEnds } from './dynamo-claim-pages.ts';

/** How one claim of a chunk is sent: its attempt, when it started, the job's message and end. */
export interface ChunkClaim {
  readonly jobId: string;
  readonly attempt: number;
  readonly startedAt: number;
  readonly template: MessageTemplate;
  readonly maybeSent: boolean;
  readonly sendBy?: number;
  readonly optedOut: ReadonlySet<string>;
  readonly suppressed: ReadonlyMap<string, string>;
}

/**
 * The members a claim of `chunk` sends: those in the chunk's state, as the pipeline's tasks — one
 * recorded multicast for a shared message, a push each (with its own variables) for a personalised one.
 */
export function chunkMemberTasks(
  chunk: Chunk,
  members: readonly ChunkMember[],
  claim: ChunkClaim,
): ClaimedTask[] {
  const batch = sentAsPushes(claim.template)
    ? {}
    : { batch: { retryKey: chunkRetryKey(claim.jobId, chunk.taskId, claim.attempt) } };
  return members.map((member) => ({
    jobId: claim.jobId,
    taskId: recipientTaskId(claim.jobId, member.recipient),
    recipient: member.recipient,
    variables: memberTemplateVariables(member),
    template: claim.template,
    attempt: claim.attempt,
    attemptStartedAt: claim.startedAt,
    ...batch,
    ...(claim.optedOut.has(member.recipient) ? { optedOut: true } : {}),
    ...(claim.suppressed.has(member.recipient)
      ? { suppressed: claim.suppressed.get(member.recipient)! }
      : {}),
    ...(claim.maybeSent ? { maybeSent: true } : {}),
    ...(claim.sendBy === undefined ? {} : { sendBy: claim.sendBy }),
  }));
}

/** True when a chunk's members go a push each (a personalised message), not as one multicast. */
export function sentAsPushes(template: MessageTemplate): boolean {
  return !isSharedMessage(template);
}

/** A chunk all of whose claimed members have an outcome: what to write of it. */
export interface ChunkOutcome {
  /** The chunk's own outcome (its task id, its attempt): the multicast's. */
  readonly outcome: TaskOutcome;
  /** Its `except` once written: what it held before, and the members whose outcome differs. */
  readonly except: Readonly<Record<string, MemberApart>>;
  /** How many members the chunk holds (in its state, apart, moved out). */
  readonly memberCount: number;
  /** The members' own outcomes, as the pipeline gave them. */
  readonly members: readonly TaskOutcome[];
}

/** What a chunk's end moves the job's counts by: its members in its state, and those apart by their own end. */
export function chunkEnds(
  end: { state: EndState; reason?: string | undefined },
  chunk: ChunkOutcome,
): EndCounts {
  const counts = noEnds();
  countEnd(counts, end.state, end.reason, chunk.memberCount - Object.keys(chunk.except).length);
  for (const apart of membersEndedApart(chunk)) countEnd(counts, apart.state as EndState, apart.reason);
  return counts;
}

interface OpenChunk {
  readonly jobId: string;
  readonly chunkId: string;
  readonly attempt: number;
  readonly memberCount: number;
  readonly except: Readonly<Record<string, MemberApart>>;
  /** Its members went as pushes of their own (`sentAsPushes`): no one request speaks for the chunk. */
  readonly pushes: boolean;
  /** Member task id → its index in the chunk, for every member claimed. */
  readonly indexOf: ReadonlyMap<string, number>;
  readonly outcomes: Map<string, TaskOutcome>;
}

/** A session's claimed chunks, until each is written back. */
export class ClaimedChunks {
  /** By the chunk's `claimKey`. */
  readonly #open = new Map<string, OpenChunk>();
  /** A claimed member's `claimKey` → its chunk's. */
  readonly #chunkOf = new Map<string, string>();

  /** A chunk was claimed: its `members` were handed to the pipeline, as pushes or as one multicast. */
  claimed(
    jobId: string,
    chunk: Chunk,
    attempt: number,
    members: readonly ChunkMember[],
    sent: { readonly pushes: boolean },
  ): void {
    const key = claimKey(jobId, chunk.taskId);
    const indexOf = new Map(members.map((m) => [recipientTaskId(jobId, m.recipient), m.index]));
    this.#open.set(key, {
      jobId,
      chunkId: chunk.taskId,
      attempt,
      memberCount: memberCountOf(chunk),
      except: chunk.except ?? {},
      pushes: sent.pushes,
      indexOf,
      outcomes: new Map(),
    });
    for (const memberId of indexOf.keys()) this.#chunkOf.set(claimKey(jobId, memberId), key);
  }

  /** True when the session holds no chunk whose members' outcomes are still coming. */
  get empty(): boolean {
    return this.#open.size === 0;
  }

  /**
   * The outcomes of tasks, and the chunks whose members all have one now (a member's outcome
   * given again, by a retried write, replaces the first).
   */
  gather(outcomes: readonly TaskOutcome[]): { tasks: TaskOutcome[]; chunks: ChunkOutcome[] } {
    const tasks: TaskOutcome[] = [];
    const complete = new Set<string>();
    for (const o of outcomes) {
      const key = this.#chunkOf.get(claimKey(o.jobId, o.taskId));
      const open = key === undefined ? undefined : this.#open.get(key);
      if (!open) {
        tasks.push(o);
        continue;
      }
      open.outcomes.set(o.taskId, o);
      if (open.outcomes.size === open.indexOf.size) complete.add(key!);
    }
    return { tasks, chunks: [...complete].map((key) => chunkOutcomeOf(this.#open.get(key)!)) };
  }

  /** The chunk was written back (or moved on): forgotten. */
  done(chunk: ChunkOutcome): void {
    const { jobId, taskId } = chunk.outcome;
    this.#open.delete(claimKey(jobId, taskId));
    for (const o of chunk.members) this.#chunkOf.delete(claimKey(o.jobId, o.taskId));
  }
}

/**
 * One outcome for a chunk from its members', every member whose outcome differs written apart with
 * its own end. Any member released (not sent: the session stopping, the job ending, LINE busy)
 * makes it a release: the chunk waits again for those, the members that ended are apart (and, a
 * personalised message's pushes being requests of their own, may be many). Else the most common
 * end among those not skipped (a multicast's members share its one request; a push each mostly
 * share `delivered`), all skipped, the first's.
 */
function chunkOutcomeOf(open: OpenChunk): ChunkOutcome {
  const members = [...open.outcomes.values()];
  const released = members.filter((o) => o.kind === 'released');
  const main =
    released.length > 0
      ? { ...released[0]!, ...(released.some((o) => o.maybeSent) ? { maybeSent: true } : {}) }
      : (mostCommonEnd(members.filter((o) => o.kind !== 'skipped')) ?? members[0]!);
  const except: Record<string, MemberApart> = { ...open.except };
  for (const o of members) {
    if (o.kind === 'released' || sameEnd(o, main)) continue;
    except[String(open.indexOf.get(o.taskId)!)] = memberEnd(o);
  }
  // A personalised chunk's pushes were requests of their own: no one request (its id, its key) speaks for it.
  const { requestId: _id, retryKey: _key, ...outcome } = main;
  return {
    outcome: {
      ...(open.pushes ? outcome : main),
      taskId: open.chunkId,
      attempt: open.attempt,
    },
    except,
    memberCount: open.memberCount,
    members,
  };
}

const sameEnd = (a: TaskOutcome, b: TaskOutcome) =>
  a.kind === b.kind && a.lastResult === b.lastResult && a.reason === b.reason;

/** The outcome whose end (kind, result, reason) most of `outcomes` share; the first such. */
function mostCommonEnd(outcomes: readonly TaskOutcome[]): TaskOutcome | undefined {
  const tally = new Map<string, { first: TaskOutcome; count: number }>();
  for (const o of outcomes) {
    const key = JSON.stringify([o.kind, o.lastResult, o.reason ?? null]);
    const seen = tally.get(key);
    if (seen) seen.count++;
    else tally.set(key, { first: o, count: 1 });
  }
  let best: { first: TaskOutcome; count: number } | undefined;
  for (const entry of tally.values()) if (!best || entry.count > best.count) best = entry;
  return best?.first;
}

/** A member's own end, as the chunk records it. */
function memberEnd(o: TaskOutcome): MemberEnd {
  const end = messageOutcomeMove(o, { cancelled: false, endedBeforeReady: false }) as MessageEndMove;
  return {
    state: end.state as MemberEnd['state'],
    lastResult: o.lastResult,
    ...(end.reason === undefined ? {} : { reason: end.reason }),
    attempts: o.attempt,
    updatedAt: o.at,
  };
}
