import type { ClaimedTask, TaskSource } from '#shared/campaign/ports.ts';
import type { CapSlot } from '#shared/contact-limits/model.ts';
import { membersInState } from '#shared/jobs/chunks.ts';
import { type Job, type JobChannel, jobHasEnded, keys, taskChannelOf } from '#shared/jobs/model.ts';
import { isLeftByOlderHolder, mayClaimMessage } from '#shared/jobs/task-lifecycle.ts';
import { TASK_SHARDS } from '#shared/resources.ts';
import { ownEntrySource } from '#shared/suppressions/model.ts';
import { spillable, spillChunk, spillStarted } from './dynamo-chunk-spill.ts';
import { type ClaimPages, claimKey } from './dynamo-claim-pages.ts';
import {
  type Chosen,
  CLAIM_INDEX_VIEW,
  type Claimed,
  type ClaimRecord,
  claimRecordOf,
  recipientsOf,
  withinMembers,
} from './dynamo-claim-record.ts';
import { movesOn, pipelineTasksOf, type Screened } from './dynamo-claimed-tasks.ts';
import { leaseFenceCheck } from './dynamo-leases.ts';
import { LeftClaimPages } from './dynamo-left-pages.ts';
import { type ClaimCounters, MessageCaps } from './dynamo-message-caps.ts';
import type { MessageClaimLease, SessionState } from './dynamo-message-session.ts';

import { failedConditions, iso, isRunningMessageJob, type MessageTaskTable } from './dynamo-message-table.ts';
import type { MulticastRecords } from './dynamo-multicast-records.ts';

/** Task updates per claim transaction (+ the lease check: 100 items, the service's limit). */
export const CLAIMS_PER_TRANSACTION = 99;

/** Readings of one page while each spills chunks and claims nothing (the spilled tasks are read next). */
const MAX_SPILL_READINGS = 8;

/**
 * Index entries a read from a shard's cursor takes beyond what it wants in its first Query: the
 * cursor's own entry (`BETWEEN` includes it) and a few a reader may pass over (another job's, one
 * re-timed). Twice what it wants, as a read from the start takes, parsed ~2.6 entries a message.
 */
const CURSOR_SLACK = 4;

/** How often a shard's ready read ignores the session's cursor and starts from the shard's start. */
const READS_FROM_START = 16;

export interface ClaimerDeps {
  readonly table: MessageTaskTable;
  readonly lease: MessageClaimLease;
  /** Whether a task of `job` now on `channel` (its job's, or the one it fell back to) is this session's. */
  readonly accept: (job: Job, channel: JobChannel) => boolean;
  readonly state: SessionState;
  readonly batches: MulticastRecords;
  readonly optedOut?: (clientId: string, recipients: readonly string[]) => Promise<ReadonlySet<string>>;
  /**
   * Those of `recipients` on the client's suppression list, or (`persons`: recipient → its linked
   * person) whose person is suppressed person-wide → the reason their task ends with.
   */
  readonly suppressed?: (
    clientId: string,
    recipients: readonly string[],
    persons: ReadonlyMap<string, string>,
  ) => Promise<ReadonlyMap<string, string>>;
  /** Where a claim is recorded: on a claim page (`dynamo-claim-pages.ts`). */
  readonly pages: ClaimPages;
}

/** How a page reads the shards: from their cursors (`fromStart` false) or from their starts, and which it read from their start. */
interface ShardReading {
  readonly fromStart: boolean;
  readonly readFromStart: Set<number>;
}

export class MessageClaimer implements TaskSource {
  /** Five whole claim transactions (a page of 500 took a sixth for its last 5 tasks). */
  readonly pageSize = 5 * CLAIMS_PER_TRANSACTION;
  readonly #deps: ClaimerDeps;
  readonly #clientId: string;
  /** What an older holder left in flight, read once; undefined until the first page. */
  #adoptQueue: ClaimRecord[] | undefined;
  #batchByTask = new Map<string, string>();
  /** Per index partition (`openPk`): the greatest `openSk` this session claimed from it on a page. */
  readonly #cursor = new Map<string, string>();
  readonly #readsFromCursor = new Map<string, number>();
  /** Tasks on a live claim page of an earlier round of this holder (same token, hold not ended). */
  readonly #heldElsewhere = new Set<string>();
  readonly #caps: MessageCaps;
  readonly #leftPages: LeftClaimPages;
  /**
   * With claim pages every task chosen from the index is read again, strongly consistent, before
   * it is claimed: the index read need only carry what choosing reads (about half the client's CPU
   * of a read whole; `ClaimView`, the cursor's keys, a multicast's key).
   */
  readonly #indexView: { readonly attributes?: readonly string[] };
  /**
   * The last ready reading was mostly chunks: read one index entry a shard (a chunk's entry is
   * ~10 KB, and one chunk fills a page), not a page's share of tasks.
   */
  #chunky = false;
  /** Chunks this session spilled into tasks: a page that spilled and claimed nothing is read again. */
  #spills = 0;
  /**
   * Chunks a chunky reading read and did not take (a page takes about one: its members fill it),
   * taken by the next pages before the index is read again. Safe however old: what is chosen is
   * read again, strongly consistent, before it is claimed (`#stillClaimable`).
   */
  #spare: ClaimRecord[] = [];

  constructor(deps: ClaimerDeps) {
    this.#deps = deps;
    this.#clientId = deps.lease.clientId;
    const { doc, controlTable, tasksTable } = deps.table;
    this.#indexView = { attributes: CLAIM_INDEX_VIEW };
    this.#leftPages = new LeftClaimPages({
      table: deps.table,
      pages: deps.pages,
      batches: deps.batches,
      clientId: this.#clientId,
    });
    this.#caps = new MessageCaps(doc, { controlTable, tasksTable }, this.#clientId);
  }

  async nextPage(limit: number): Promise<readonly ClaimedTask[]> {
    const token = this.#deps.lease.token();
    if (token === undefined || this.#deps.state.fenced) return [];
    const now = this.#deps.table.clock.now();
    if (this.#adoptQueue === undefined) {
      await this.#leftPages.settle(token, now, {
        heldElsewhere: this.#heldElsewhere,
        batchByTask: this.#batchByTask,
      });
    }
    // An empty page ends the round: before saying so, every shard is read from its start (tasks
    // below a cursor), whatever the first reading's candidates came to once read again.
    // A reading whose chunks were all spilled into tasks claimed nothing: the tasks are read next.
    for (let reading = 1; ; reading++) {
      const spills = this.#spills;
      const page = await this.#claimReading(token, now, limit);
      if (
        page.length > 0 ||
        spills === this.#spills ||
        this.#deps.state.fenced ||
        reading >= MAX_SPILL_READINGS
      )
        return page;
    }
  }

  /** One page: the shards from their cursors, then, when that claimed nothing, from their starts. */
  async #claimReading(token: number, now: number, limit: number): Promise<ClaimedTask[]> {
    const readFromStart = new Set<number>();
    const page = await this.#claimPage(token, now, limit, { readFromStart, fromStart: false });
    if (page.length > 0) return page;
    return this.#claimPage(token, now, limit, { readFromStart, fromStart: true });
  }

  /** One reading of candidates (adopted first, else ready), claimed; those claimed leave the adopt queue. */
  async #claimPage(token: number, now: number, limit: number, shards: ShardReading): Promise<ClaimedTask[]> {
    let candidates = await this.#adoptable(token, now, limit);
    if (candidates.length === 0 && !shards.fromStart) candidates = this.#takeSpare(limit);
    if (candidates.length === 0) candidates = await this.#ready(token, now, limit, shards);
    if (candidates.length === 0) return [];
    let chosen = await this.#withBatchMembers(candidates, token, now);
    // A page claim writes no task: what was chosen from the (eventually consistent) index is read
    // again, strongly consistent, and only what is still claimable is claimed.
    chosen = await this.#stillClaimable(chosen, token, now);
    const byJob = new Map<string, Chosen[]>();
    for (const c of chosen) byJob.set(c.task.jobId, [...(byJob.get(c.task.jobId) ?? []), c]);
    const page: ClaimedTask[] = [];
    for (const [jobId, group] of byJob) page.push(...(await this.#claimForJob(jobId, group, token)));
    if (this.#adoptQueue && this.#adoptQueue.length > 0 && page.length > 0) {
      // A recorded multicast is claimed whole: members still queued are this page's, not the next's.
      const claimed = new Set(page.map((t) => claimKey(t.jobId, t.taskId)));
      this.#adoptQueue = this.#adoptQueue.filter((task) => !claimed.has(task.key));
    }
    return page;
  }

  /** May this session claim the task as the index shows it? */
  async #claimable(task: ClaimRecord, token: number, now: number): Promise<boolean> {
    if (task.channel !== 'message' || this.#deps.state.held.has(task.taskId)) return false;
    if (this.#heldElsewhere.has(task.key)) return false;
    if (!mayClaimMessage(task, token, now)) return false;
    return this.#jobAccepted(await this.#deps.table.jobs.cached(this.#clientId, task.jobId), task);
  }

  /** The job is running, and this session sends it now on the channel the task is on. */
  #jobAccepted(job: Job | undefined, task: ClaimRecord): job is Job {
    if (!isRunningMessageJob(job, this.#deps.table.clock.now())) return false;
    return this.#deps.accept(job, taskChannelOf(task.item, job));
  }

  /**
   * Tasks an earlier holder left in flight: in the index up to their hold's end. Read once, whole
   * (at most what one holder can have out), then handed out a page at a time.
   */
  async #adoptable(token: number, now: number, limit: number): Promise<ClaimRecord[]> {
    if (this.#adoptQueue === undefined) {
      const range = { lower: iso(now), upper: keys.openSkAfter(now + this.#deps.table.holdMs) };
      const left = await Promise.all(
        Array.from({ length: TASK_SHARDS }, (_, shard) =>
          this.#deps.table.readShard(
            this.#clientId,
            shard,
            range,
            async (task: ClaimRecord) =>
              isLeftByOlderHolder(task, token) && (await this.#claimable(task, token, now)),
            Number.POSITIVE_INFINITY,
            { readAs: claimRecordOf, maxRead: Number.POSITIVE_INFINITY, ...this.#indexView },
          ),
        ),
      );
      this.#adoptQueue = left.flat();
      if (this.#adoptQueue.length > 0) {
        this.#batchByTask = await this.#deps.batches.load(
          new Set(this.#adoptQueue.map((task) => task.jobId)),
        );
      }
    }
    return this.#adoptQueue.splice(0, limit);
  }

  /** The chosen tasks as stored now (strongly consistent; a multicast's members were just read so), those still claimable. */
  async #stillClaimable(chosen: Chosen[], token: number, now: number): Promise<Chosen[]> {
    const fresh = new Map<string, ClaimRecord>();
    const stale = chosen.filter((c) => !c.fresh);
    for (const item of await this.#deps.table.getItems(
      stale.map((c) => keys.task(c.task.jobId, c.task.taskId)),
    )) {
      const task = claimRecordOf(item);
      fresh.set(task.key, task);
    }
    const out: Chosen[] = [];
    for (const c of chosen) {
      const task = c.fresh ? c.task : fresh.get(c.task.key);
      // A waiting task is claimable once ready: a release, deferral or re-time the index has not
      // shown yet may have moved it later.
      const notYet = task !== undefined && task.state !== 'in-flight' && task.readyAt > now;
      if (task && !notYet && (await this.#claimable(task, token, now))) out.push({ ...c, task });
    }
    return out;
  }

  /**
   * Tasks ready now, a share of the page from each shard. A shard read from its cursor that comes
   * up short is not read again from its start at once: near a job's end every shard does, and each
   * such read passes over every task the session holds (2,000 and more). Tasks below a cursor are
   * found on the shard's turn to be read from its start, or when a page comes up empty
   * (`shards.fromStart`: the shards not read from their start in this page's first reading).
   */
  async #ready(token: number, now: number, limit: number, shards: ShardReading): Promise<ClaimRecord[]> {
    const perShard = this.#chunky ? 1 : Math.ceil(limit / TASK_SHARDS);
    const upper = keys.openSkAfter(now);
    const ready = await Promise.all(
      Array.from({ length: TASK_SHARDS }, (_, shard) =>
        shards.fromStart && shards.readFromStart.has(shard)
          ? []
          : this.#readyInShard(shard, upper, token, now, perShard, shards),
      ),
    );
    const candidates = ready.flat();
    this.#chunky = candidates.filter((task) => task.chunk).length * 2 > candidates.length;
    if (!this.#chunky) return withinMembers(candidates, limit);
    this.#spare = candidates;
    return this.#takeSpare(limit);
  }

  /** Spare chunks (`#spare`) for a page, in the order read; none once a reading was not chunky. */
  #takeSpare(limit: number): ClaimRecord[] {
    if (!this.#chunky || this.#spare.length === 0) return [];
    const page = withinMembers(this.#spare, limit);
    const taken = new Set(page);
    this.#spare = this.#spare.filter((task) => !taken.has(task));
    return page;
  }

  /**
   * One shard's ready tasks. With claim pages the tasks this session holds stay at the front of the
   * index, so a read starts where this session's last claim from the shard ended (`#cursor`); the
   * shard is read from its start (tasks that appeared below the cursor: an ingest step's, a late
   * index entry) every {@link READS_FROM_START}-th read, when it has no cursor, and when
   * `fromStart` says so — then the cursor starts over.
   */
  async #readyInShard(
    shard: number,
    upper: string,
    token: number,
    now: number,
    wanted: number,
    shards: ShardReading,
  ): Promise<ClaimRecord[]> {
    const pk = keys.openShardPk(this.#clientId, shard);
    const claimable = (task: ClaimRecord) => this.#claimable(task, token, now);
    const view = {
      readAs: claimRecordOf,
      ...this.#indexView,
      ...(this.#chunky ? { pageLimit: 2 } : {}),
    };
    const reads = (this.#readsFromCursor.get(pk) ?? 0) + 1;
    this.#readsFromCursor.set(pk, reads % READS_FROM_START);
    const cursor = this.#cursor.get(pk);
    const after =
      shards.fromStart || reads % READS_FROM_START === 0 || (cursor ?? '') > upper ? undefined : cursor;
    if (after !== undefined) {
      // Past the cursor are tasks this session has not claimed: a first Query of about what is
      // wanted (not twice it), the rest paged in only if some are not claimable.
      return this.#deps.table.readShard(this.#clientId, shard, { lower: after, upper }, claimable, wanted, {
        ...view,
        firstPageLimit: wanted + CURSOR_SLACK,
      });
    }
    this.#cursor.delete(pk);
    shards.readFromStart.add(shard);
    return this.#deps.table.readShard(this.#clientId, shard, { upper }, claimable, wanted, view);
  }

  /** Adds every still-unsettled member of a recorded multicast that a candidate belongs to. */
  async #withBatchMembers(candidates: ClaimRecord[], token: number, now: number): Promise<Chosen[]> {
    const out: Chosen[] = [];
    const taken = new Set<string>();
    for (const task of candidates) {
      if (taken.has(task.taskId)) continue;
      const retryKey = task.batchKey ?? this.#batchByTask.get(task.taskId);
      const batch = retryKey ? await this.#deps.batches.batchOf(task.jobId, retryKey) : undefined;
      if (!retryKey || !batch) {
        taken.add(task.taskId);
        out.push({ task });
        continue;
      }
      const members = await this.#deps.table.getItems(
        batch.taskIds.filter((id) => !taken.has(id)).map((id) => keys.task(batch.jobId, id)),
      );
      for (const member of members.map(claimRecordOf)) {
        // A member first claimed on a claim page still shows attempt 0 until its outcome.
        if (Math.max(1, member.attempts) !== batch.attempt) continue;
        if (!(await this.#claimable(member, token, now))) continue;
        taken.add(member.taskId);
        out.push({ task: member, batchKey: retryKey, fresh: true });
      }
    }
    return out;
  }

  /** Claims one job's chosen tasks and turns them into the pipeline's claimed tasks. */
  async #claimForJob(jobId: string, chosen: Chosen[], token: number): Promise<ClaimedTask[]> {
    const job = await this.#deps.table.jobs.cached(this.#clientId, jobId);
    if (!this.#jobAccepted(job, chosen[0]!.task)) return [];
    const group = await this.#withoutSpilled(job, chosen, token);
    if (group.length === 0) return [];
    // Under contact limits the screening comes first: a task that will end opted out or suppressed
    // takes no slot of its person's limits. Without limits it is read while the claim is written.
    // A job that falls back screens first too: a task moving on is not claimed on a page at all, so
    // a broker taking over from a dead holder never takes it for one that may have been sent.
    const limited = (await this.#caps.slotsFor(job, this.#deps.table.clock.now())).length > 0;
    const screening = this.#screen(job, group);
    const early = limited || job.fallback !== undefined ? await screening : undefined;
    const skip = early ? new Set([...early.optedOut, ...early.suppressed.keys()]) : new Set<string>();
    const moving = early ? group.filter((c) => movesOn(job, c.task, early)) : [];
    const onPage = moving.length === 0 ? group : group.filter((c) => !moving.includes(c));
    const [claimed, screened] = await Promise.all([
      onPage.length === 0 ? [] : this.#claim(job, onPage, token, skip),
      early ?? screening,
    ]);
    // No move is handed on once the lease is lost; one written late finds its task moved already
    // (`addMove`'s condition on the identifier it leaves).
    const now = this.#deps.table.clock.now();
    const moved = this.#deps.state.fenced
      ? []
      : moving.map((c) => ({ ...c, startedAt: now, attempt: Math.max(1, c.task.attempts) }));
    if (claimed.length === 0 && moved.length === 0) return [];
    this.#deps.state.jobsSeen.add(jobId);
    this.#advanceCursors([...claimed, ...moved]);
    return [...claimed, ...moved].flatMap((c): ClaimedTask[] => {
      this.#deps.state.held.add(c.task.taskId);
      this.#deps.state.startedAt.set(c.task.key, c.startedAt);
      const template = this.#deps.table.templateOf(job, taskChannelOf(c.task.item, job));
      return pipelineTasksOf(job, c, template, screened, this.#deps.state.chunks);
    });
  }

  /**
   * The group without its chunks that must become tasks first (`dynamo-chunk-spill.ts`): one whose
   * spill has begun, and one never claimed while the client has contact limits over LINE (its first
   * claim would take a slot a member). Their members are claimed as tasks from the next reading.
   * A chunk with no member left in its state has nothing to send and is left out.
   */
  async #withoutSpilled(job: Job, group: Chosen[], token: number): Promise<Chosen[]> {
    if (!group.some((c) => c.task.chunk)) return group;
    const now = this.#deps.table.clock.now();
    const slots = await this.#caps.slotsFor(job, now);
    const out: Chosen[] = [];
    for (const c of group) {
      const chunk = c.task.chunk;
      if (!chunk) out.push(c);
      else if (spillStarted(chunk) || (slots.length > 0 && spillable(chunk))) {
        this.#spills++;
        const fence = leaseFenceCheck(this.#deps.table.controlTable, {
          clientId: this.#clientId,
          owner: this.#deps.lease.owner,
          token,
          now,
        });
        if ((await spillChunk(this.#deps.table, chunk, now, fence)) === 'fenced') {
          this.#deps.state.fenced = true;
          return [];
        }
      } else if (membersInState(chunk).length > 0) out.push(c);
    }
    return out;
  }

  /**
   * The group's opt-outs and suppressions (its own entries, and its persons' person-wide ones), and
   * for a job that falls back, which of these reach the recipient's own channel alone.
   */
  async #screen(job: Job, group: readonly Chosen[]): Promise<Screened> {
    const recipients = group.flatMap((c) => recipientsOf(c.task));
    const hints = new Map(
      group.flatMap(({ task }) =>
        typeof task.item.person === 'string' ? [[task.recipient, task.item.person] as const] : [],
      ),
    );
    const [optedOut, suppressed] = await Promise.all([
      this.#deps.optedOut ? this.#deps.optedOut(this.#clientId, recipients) : new Set<string>(),
      this.#deps.suppressed
        ? this.#deps.suppressed(this.#clientId, recipients, hints)
        : new Map<string, string>(),
    ]);
    if (job.fallback === undefined) return { optedOut, suppressed };
    const channelOnly = new Set<string>();
    const now = this.#deps.table.clock.now();
    for (const [recipient, reason] of suppressed) {
      const source = ownEntrySource(reason);
      if (source !== undefined && (await this.#caps.channelOnly(source, now))) channelOnly.add(recipient);
    }
    const stopChannelOnly = await this.#caps.channelOnly('sms-stop', now);
    return { optedOut, suppressed, channelOnly, stopChannelOnly };
  }

  /** Moves each shard's cursor past the waiting tasks just claimed from it (never past one held into the future). */
  #advanceCursors(claimed: readonly Claimed[]): void {
    const now = this.#deps.table.clock.now();
    for (const { task } of claimed) {
      const { openPk, openSk } = task;
      if (openPk === undefined || openSk === undefined) continue;
      if (task.state === 'in-flight' || task.readyAt > now) continue;
      const at = this.#cursor.get(openPk);
      if (at === undefined || openSk > at) this.#cursor.set(openPk, openSk);
    }
  }

  /**
   * Claims `chosen` (one job) in transactions fenced by the lease; returns the claimed ones. None
   * is claimed at or after the job's end: its `endAt` never changes, so the copy read is exact, and
   * the check is made with the very `now` the transaction is written with.
   */
  async #claim(
    job: Job,
    chosen: Chosen[],
    token: number,
    uncounted: ReadonlySet<string>,
  ): Promise<Claimed[]> {
    const claimed: Claimed[] = [];
    const slots = await this.#caps.slotsFor(job, this.#deps.table.clock.now());
    // Under limits each first claim takes its link check and a counter per limit, beside the lease
    // check and the page item: smaller groups keep 100 items at most.
    const size =
      slots.length === 0
        ? CLAIMS_PER_TRANSACTION
        : Math.floor((CLAIMS_PER_TRANSACTION - 1) / (1 + slots.length));
    for (let i = 0; i < chosen.length && !this.#deps.state.fenced; i += size) {
      let group = chosen.slice(i, i + size);
      while (group.length > 0) {
        const now = this.#deps.table.clock.now();
        if (jobHasEnded(job, now)) return claimed;
        const outcome = await this.#claimOnce(job, group, token, { slots, uncounted, now });
        if (outcome.kind === 'rest') group = outcome.group;
        else {
          if (outcome.kind === 'fenced') this.#deps.state.fenced = true;
          else claimed.push(...outcome.claimed);
          break;
        }
      }
    }
    return claimed;
  }

  /** One claim transaction of `group`: all claimed, fenced, or the group left once those over a limit are held. */
  async #claimOnce(
    job: Job,
    group: Chosen[],
    token: number,
    at: { slots: readonly CapSlot[]; uncounted: ReadonlySet<string>; now: number },
  ): Promise<
    { kind: 'claimed'; claimed: Claimed[] } | { kind: 'fenced' } | { kind: 'rest'; group: Chosen[] }
  > {
    const { now } = at;
    const counters = this.#caps.counters(
      group.map((c) => c.task),
      at.slots,
      at.uncounted,
    );
    const page = this.#deps.pages.page(
      job.jobId,
      group.map((c) => c.task.taskId),
      token,
      now,
      this.#deps.table.holdMs,
    );
    // The claim's record: one page item; the tasks' items are written at their outcomes.
    const records = [page.item];
    const fence = { clientId: this.#clientId, owner: this.#deps.lease.owner, token, now };
    const codes = await this.#deps.table.transact([
      leaseFenceCheck(this.#deps.table.controlTable, fence),
      ...records,
      ...counters.items,
    ]);
    if (codes === undefined) {
      page.commit();
      const claimed = group.map((c) => ({
        ...c,
        startedAt: c.task.startedAt ?? now,
        attempt: Math.max(1, c.task.attempts),
      }));
      return { kind: 'claimed', claimed };
    }
    if (codes[0] === 'ConditionalCheckFailed') return { kind: 'fenced' };
    // Tasks over a contact limit: hold them, claim the rest.
    const failed = failedConditions(codes);
    const capped = new Set([...failed].filter((j) => j >= records.length).map((j) => j - records.length));
    if (capped.size === 0) throw new Error(`message task claim cancelled: ${codes.join(', ')}`);
    const over = await this.#holdCapped(job, group, counters, capped, now);
    return { kind: 'rest', group: group.filter((_, j) => !over.has(j)) };
  }

  /**
   * The group's tasks whose contact-limit items refused them (item indexes): held or ended at a
   * counter's refusal, their person read again at their link check's.
   */
  async #holdCapped(
    job: Job,
    group: readonly Chosen[],
    counters: ClaimCounters,
    failed: ReadonlySet<number>,
    now: number,
  ): Promise<Set<number>> {
    const over = new Map<number, ClaimCounters['owners'][number]['slot']>();
    for (const j of failed) {
      const owner = counters.owners[j];
      if (owner && !over.has(owner.task)) over.set(owner.task, owner.slot);
    }
    for (const [task, slot] of over) {
      const { item } = group[task]!.task;
      // No slot: the link check failed, the task's person changed; it is claimed again from the next reading.
      if (slot) await this.#caps.hold(job, item, slot, now);
      else await this.#caps.relink(item);
    }
    return new Set(over.keys());
  }
}
