/**
 * What the broker and the call-status route need from the outside world, as ports: the task
 * store (claiming, starting and settling tasks, DynamoDB in production), the fleet's work list,
 * and the nudge that tells a broker one of its calls has ended.
 */
import type { CapSlot } from '#shared/contact-limits/model.ts';
import type { ClientSettings, Job, Task } from '#shared/jobs/model.ts';
import type { CallStatusEvent } from '#shared/telephony/port.ts';
import type { FleetWork } from '../fleet/work-list.ts';

/** A task by its keys. */
export interface TaskRef {
  readonly jobId: string;
  readonly taskId: string;
}

/** The lease a start is fenced with: the holder and its token. */
export interface Fence {
  readonly clientId: string;
  readonly owner: string;
  readonly token: number;
  /** The holder's clock; the lease must not have expired by then. */
  readonly now: number;
}

/**
 * - `started`: the task is `in-flight` with `attempts` + 1 (the returned task).
 * - `fenced`: the lease check failed: this broker no longer holds the client; start nothing more.
 * - `gone`: the task is no longer startable (already started, settled, or its job is not running).
 */
export type StartResult =
  | { readonly kind: 'started'; readonly task: Task }
  | { readonly kind: 'fenced' }
  | { readonly kind: 'gone' }
  /** The recipient is on the client's suppression list: the task ended `cancelled` with `reason`. */
  | { readonly kind: 'suppressed'; readonly reason: string }
  /**
   * A contact limit of the recipient is reached: the task waits until `until` (its window's end),
   * or, when that is not inside its job's life, ended `cancelled` with `reason` (`ended`).
   */
  | { readonly kind: 'capped'; readonly until: number; readonly ended: boolean; readonly reason?: string };

/** The contact limits a start must pass (none for a job that ignores them), and its job's end. */
export interface StartLimits {
  readonly slots: readonly CapSlot[];
  readonly jobEndAt?: number;
}

/** How a call's end leaves its task. */
export type Settlement =
  | { readonly state: 'completed'; readonly lastResult: string }
  | {
      readonly state: 'retry-wait';
      readonly lastResult: string;
      readonly readyAt: number;
      /** The retry delay's end, when `readyAt` was moved past it (the recipient's opening). */
      readonly notBefore?: number;
    }
  | { readonly state: 'failed'; readonly lastResult: string; readonly reason: string }
  /** A busy / no-answer attempt of a job cancelled meanwhile: not retried. */
  | { readonly state: 'cancelled'; readonly lastResult: string; readonly reason: string }
  /** An attempt whose retry would be due at or after its job's end: not retried. */
  | { readonly state: 'expired'; readonly lastResult: string; readonly reason: string };

/** A task in flight, with the attempt whose call is being settled. */
export interface SettleRequest {
  readonly task: Task;
  /** The attempt the status is about; nothing changes unless the task is still in flight on it. */
  readonly attempt: number;
  readonly settlement: Settlement;
  readonly callId?: string;
  readonly now: number;
}

export interface BrokerTaskStore {
  getClient(clientId: string): Promise<ClientSettings | undefined>;
  getJob(clientId: string, jobId: string): Promise<Job | undefined>;
  /** The task as stored now (a strongly consistent read). */
  getTask(ref: TaskRef): Promise<Task | undefined>;
  /**
   * Up to `limit` outstanding tasks of the client ready at `now`, earliest first (an index read:
   * may be a little stale, which the conditional start absorbs).
   */
  outstanding(clientId: string, now: number, limit: number): Promise<Task[]>;
  /** When the client's earliest outstanding task becomes ready, whatever `now` is; undefined if none. */
  nextReadyAt(clientId: string): Promise<number | undefined>;
  /**
   * Moves a waiting task to a later `readyAt` (its recipient's zone is closed or restricted until
   * then); false when it had moved on. Optional: a store without it leaves the task where it is.
   */
  defer?(task: Task, readyAt: number, now: number): Promise<boolean>;
  /**
   * Begins, in the background, what a start of `task` reads before its transaction (the
   * person-wide suppressions of its person), so its start, once its call slot is free, finds it
   * read. Optional: a store without it reads at the start.
   */
  prepare?(task: Task): void;
  /**
   * Starts `task` in one transaction: the lease passes the fence, the job is `running` and has not
   * reached its end at the fence's `now` (`jobHasEnded`), and the task is still `pending`/`retry-wait` with the attempts seen; it becomes `in-flight` with
   * attempts + 1 and leaves the outstanding index.
   */
  start(task: Task, fence: Fence, limits?: StartLimits): Promise<StartResult>;
  /** Records the provider's call id on an in-flight attempt (no-op if it moved on). */
  recordCallId(ref: TaskRef, attempt: number, callId: string, now: number): Promise<void>;
  /**
   * Settles an in-flight attempt, once: true when this request did it, false when the task had
   * already moved on (settled, or another attempt).
   */
  settle(request: SettleRequest): Promise<boolean>;
  /** The client's tasks recorded in flight (a broker taking a client over adopts them). */
  inFlight(clientId: string): Promise<TaskRef[]>;
  /** Drops a stale in-flight record (its task is no longer in flight). */
  forgetInFlight(clientId: string, ref: TaskRef): Promise<void>;
}

/** Reads the work list the job manager writes (undefined before its first run). */
export interface FleetWorkReader {
  /**
   * The work list; with `{ lists: false }` a reader may leave its client lists out (they can be
   * long) and answer only the version and time.
   */
  read(options?: { readonly lists?: boolean }): Promise<FleetWork | undefined>;
}

/** What a call's end tells the broker holding the client. */
export interface CallEnded {
  readonly jobId: string;
  readonly taskId: string;
  readonly callId?: string;
}

/** Tells the broker at `endpoint` that a call ended; best effort, never throws. */
export interface BrokerNotifier {
  callEnded(endpoint: string, ended: CallEnded): Promise<void>;
}

/** Where a lease's holder can be reached: read by the call-status route to nudge it. */
export interface LeaseEndpointReader {
  /** The live holder's endpoint, or undefined when the lease is free, expired or has none. */
  endpointOf(clientId: string, now: number): Promise<string | undefined>;
}

/** The attempt a provider's call belongs to. */
export interface CallLink extends TaskRef {
  readonly clientId: string;
  readonly attempt: number;
}

/**
 * Where a call's status events find their attempt when the provider's events name only the call
 * (Amazon Connect's contact events carry the contact id, not Switchboard's attributes). Both
 * sides write the same item, so whichever comes second sees the first: the broker links a call
 * once the provider answers the start, and gets back the events that arrived before (a call that
 * fails at once is over before its start is answered); an event that finds no link is held for
 * the broker's link instead of being lost.
 */
export interface CallLinkStore {
  /** Links `callId` to its attempt; returns the events held for it (their `idempotencyKey` empty). */
  link(callId: string, link: CallLink, now: number): Promise<readonly CallStatusEvent[]>;
  /** The attempt `callId` is linked to, if any (a read: nothing is held). */
  find(callId: string): Promise<CallLink | undefined>;
  /** The attempt `callId` belongs to; undefined once `event` is held for the broker's link. */
  resolve(callId: string, event: CallStatusEvent, now: number): Promise<CallLink | undefined>;
}
