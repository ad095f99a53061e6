/**
 * TODAY'S DESIGN, KEPT FOR bench/fleet-scale.ts ONLY: shared/fleet/ports.ts as it was at commit 148f9e7 (before
 * issue #16 item 3), so the bench measures it side by side with the design that replaced it. Not
 * used by anything deployed; do not fix or extend it.
 */
/**
 * The job manager's ports: what it reads and writes in the control and tasks tables
 * ({@link FleetStore}) and the broker service it sizes ({@link EcsServiceScaler}). The DynamoDB
 * adapter is `shared/adapters/dynamo-fleet.ts`; the ECS one `shared/adapters/ecs-service.ts`;
 * locally, `local/ecs-service.ts` is the scaler.
 */
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

export type JobRef = Pick<Job, 'clientId' | 'jobId' | 'startAt'>;

export interface FleetStore {
  /** Jobs in `scheduled` whose `startAt` is at or before `now` (byStatus index; may be stale). */
  dueScheduledJobs(now: number): Promise<Job[]>;
  /** Jobs in `running` (byStatus index; may be stale). */
  runningJobs(): Promise<Job[]>;
  /** `scheduled` → `running`, only if still scheduled; false when another run (or a pause) won. */
  startJob(job: JobRef, now: number): Promise<boolean>;
  /** `running` → `completed`, only if still running; false when it no longer is. */
  completeJob(job: JobRef, now: number): Promise<boolean>;
  /** True when the job has a task in `pending`, `in-flight` or `retry-wait`. */
  hasOpenTask(jobId: string): Promise<boolean>;
  /** True when one of `jobIds` (of `clientId`) has an outstanding task ready at or before `readyBy`. */
  hasReadyTask(clientId: string, jobIds: readonly string[], readyBy: number): Promise<boolean>;
  /**
   * True when the client's lease records calls in flight and has expired at `now` (released or
   * run out: no live holder). Their broker died or lost the lease; those calls end only when a
   * broker takes the client, adopts and settles them. False while a holder is alive.
   */
  hasOrphanedCalls(clientId: string, now: number): Promise<boolean>;
  client(clientId: string): Promise<ClientProfile | undefined>;
  /**
   * Writes the work list unless a newer one (greater `updatedAt`) is already stored; false when
   * it was superseded, so a late run never undoes a newer one.
   */
  putFleetWork(work: FleetWork): Promise<boolean>;
}
