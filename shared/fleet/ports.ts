/**
 * The job manager's ports: what it reads and writes in the control and tasks tables
 * ({@link FleetStore}) and the broker service it sizes ({@link EcsServiceScaler}). The DynamoDB
 * adapter is `shared/adapters/dynamo-fleet.ts`; the ECS one `shared/adapters/ecs-service.ts`;
 * locally, `local/ecs-service.ts` is the scaler.
 */
import type { LeaseState, ReadyHint } from '#shared/fleet/ready-hints.ts';
import type { FleetWork } from '#shared/fleet/work-list.ts';
import type { ClientSettings, Job } from '#shared/jobs/model.ts';

/** The broker service: ECS on AWS, a process launcher locally. */
export interface EcsServiceScaler {
  /** Asks for `count` brokers; scale-in removes only unprotected (idle) ones. */
  setDesiredCount(count: number): Promise<void>;
}

/** A client as the job manager sees it: its contract, and whether an operator paused it. */
export interface ClientProfile {
  readonly settings: ClientSettings;
  readonly paused: boolean;
}

/** What a run reads of each client with a running job, in one batch. */
export interface ClientState {
  /** Undefined when the client is unknown. */
  readonly profile: ClientProfile | undefined;
  /** Its lease (read consistently); undefined when it was never taken. */
  readonly lease: LeaseState | undefined;
  /** What the job manager remembered of it (`shared/fleet/ready-hints.ts`). */
  readonly hint: ReadyHint | undefined;
}

export type JobRef = Pick<Job, 'clientId' | 'jobId' | 'startAt' | 'reopened'>;

export interface FleetStore {
  /** Jobs in `scheduled` whose `startAt` is at or before `now` (byStatus index; may be stale). */
  dueScheduledJobs(now: number): Promise<Job[]>;
  /** Jobs in `running` (byStatus index; may be stale). */
  runningJobs(): Promise<Job[]>;
  /** `scheduled` → `running`, only if still scheduled; false when another run (or a pause) won. */
  startJob(job: JobRef, now: number): Promise<boolean>;
  /**
   * `running` → `completed`, only if still running and none of its tasks was opened again since
   * `job` was read (its `reopened`); false otherwise.
   */
  completeJob(job: JobRef, now: number): Promise<boolean>;
  /** True when the job has a task in `pending`, `in-flight` or `retry-wait`. */
  hasOpenTask(jobId: string): Promise<boolean>;
  /**
   * Closes the job's message claim pages whose tasks have all ended, moving the job's counts by
   * what they ended (a broker that stopped between its outcomes and the page's close), so a
   * completed job's counts are whole. Absent where messages are not claimed on pages.
   */
  settleClaimPages?(clientId: string, jobId: string): Promise<void>;
  /**
   * The earliest `readyAt` of an outstanding task of one of `jobIds` (of `clientId`) at or before
   * `until`; undefined when there is none. From the outstanding index, which is eventually
   * consistent: a task written a moment ago may be missing (the job manager reads a changed
   * client again a run later before it trusts the answer).
   */
  nextReadyAt(clientId: string, jobIds: readonly string[], until: number): Promise<number | undefined>;
  /**
   * Profile, lease and ready hint of each client (missing clients read as all undefined); the hints
   * of `hintsOf` only when given (the others read as undefined).
   */
  clientStates(
    clientIds: readonly string[],
    options?: { readonly hintsOf?: readonly string[] },
  ): Promise<Map<string, ClientState>>;
  /** Stores ready hints, each replacing the client's previous one. */
  putReadyHints(hints: readonly ReadyHint[]): Promise<void>;
  /**
   * Writes the work list unless a newer one (greater `updatedAt`) is already stored; false when
   * it was superseded, so a late run never undoes a newer one. However many clients it lists, no
   * item written passes DynamoDB's item limit (`splitFleetWork`).
   */
  putFleetWork(work: FleetWork): Promise<boolean>;
}
