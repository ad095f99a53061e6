/**
 * Chunks in a message session (docs/multicast-chunks.md, step 3): a claimed chunk is handed to the
 * pipeline as one task per member still in the chunk's state, every one under the chunk's retry key
 * for the attempt (`chunkRetryKey`), so they go out as one recorded multicast (`SendQueue.addRecorded`:
 * no ledger entry, the chunk is its own record). Their outcomes come back one by one and over
 * several reporter batches; {@link ClaimedChunks} gathers them and, once every member has one, gives
 * the chunk's single outcome: the multicast's (the members sent), with each member whose outcome
 * differs (skipped: opted out, suppressed) written apart in the chunk's `except`.
 */
import type { ClaimedTask, TaskOutcome } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import {
  type Chunk,
  type ChunkMember,
  type MemberApart,
  type MemberEnd,
  memberCountOf,
  membersEndedApart,
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

/** The members a claim of `chunk` sends: those in the chunk's state, as the pipeline's tasks. */
export function chunkMemberTasks(
  chunk: Chunk,
  members: readonly ChunkMember[],
  claim: ChunkClaim,
): ClaimedTask[] {
  const retryKey = chunkRetryKey(claim.jobId, chunk.taskId, claim.attempt);
  return members.map(({ recipient }) => ({
    jobId: claim.jobId,
    taskId: recipientTaskId(claim.jobId, recipient),
    recipient,
    variables: {},
    template: claim.template,
    attempt: claim.attempt,
    attemptStartedAt: claim.startedAt,
    batch: { retryKey },
    ...(claim.optedOut.has(recipient) ? { optedOut: true } : {}),
    ...(claim.suppressed.has(recipient) ? { suppressed: claim.suppressed.get(recipient)! } : {}),
    ...(claim.maybeSent ? { maybeSent: true } : {}),
    ...(claim.sendBy === undefined ? {} : { sendBy: claim.sendBy }),
  }));
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

  /** A chunk was claimed: its `members` were handed to the pipeline. */
  claimed(jobId: string, chunk: Chunk, attempt: number, members: readonly ChunkMember[]): void {
    const key = claimKey(jobId, chunk.taskId);
    const indexOf = new Map(members.map((m) => [recipientTaskId(jobId, m.recipient), m.index]));
    this.#open.set(key, {
      jobId,
      chunkId: chunk.taskId,
      attempt,
      memberCount: memberCountOf(chunk),
      except: chunk.except ?? {},
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
 * One outcome for a chunk from its members': the multicast's (the first member not skipped; all
 * skipped, the first's), every member whose outcome differs written apart with its own end. The
 * members sent were one request, so they share its outcome; only skipped ones (never sent) differ.
 */
function chunkOutcomeOf(open: OpenChunk): ChunkOutcome {
  const members = [...open.outcomes.values()];
  const main = members.find((o) => o.kind !== 'skipped') ?? members[0]!;
  const except: Record<string, MemberApart> = { ...open.except };
  for (const o of members) {
    if (o.kind === main.kind && o.lastResult === main.lastResult && o.reason === main.reason) continue;
    // Only members never sent differ (skipped: opted out, suppressed, each for its own reason).
    if (o.kind === 'released' || (main.kind !== 'skipped' && o.kind !== 'skipped'))
      throw new Error(`chunk ${open.chunkId}: member outcomes disagree (${o.kind} beside ${main.kind})`);
    except[String(open.indexOf.get(o.taskId)!)] = memberEnd(o);
  }
  return {
    outcome: { ...main, taskId: open.chunkId, attempt: open.attempt },
    except,
    memberCount: open.memberCount,
    members,
  };
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
